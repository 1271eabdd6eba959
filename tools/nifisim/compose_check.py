#!/usr/bin/python3
"""The demo's scenarios against the docker-compose stack (scripts/compose-check.sh runs this).

NiFi's part is played from the host through the stack's published ports: the broker at
--bootstrap (127.0.0.1:<LL_COMPOSE_KAFKA_PORT>), the database at --pg-port; `loadctl` runs
inside a service container (--loadctl-container), as an operator would with
`docker exec <container> loadctl ...`. The services are the stack's own: nothing is started here.

  compose_check.py --bootstrap 127.0.0.1:9092 --pg-port 15432 --loadctl-container ID \\
      --scenario reference,publish-unknown --business-key 2026-09-28

Exit 0 when every scenario asked for ends as the demo expects (its RESULT lines say OK).
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psycopg2  # noqa: E402

import demo  # noqa: E402
from llsim.flow import Flow  # noqa: E402
from llsim.kafkaio import Nifi  # noqa: E402
from llsim.lifecycle import Lifecycle  # noqa: E402

SCENARIOS = {"reference": demo.reference, "publish-unknown": demo.publish_unknown}


class ComposeStack:
    """What demo's scenarios need of a stack: the database and loadctl, here the stack's own."""

    def __init__(self, pg_port, container):
        self.pg_port = pg_port
        self.container = container

    def db(self):
        c = psycopg2.connect(host="127.0.0.1", port=self.pg_port, dbname="loadledger", user="postgres",
                             connect_timeout=10)
        c.autocommit = True
        return c

    def loadctl(self, *args, check=True):
        cmd = ["docker", "exec", self.container, "loadctl"] + list(args)
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--pg-port", type=int, required=True)
    ap.add_argument("--loadctl-container", required=True)
    ap.add_argument("--prefix", default="loadledger.")
    ap.add_argument("--scenario", default="reference,publish-unknown",
                    help="comma-separated: " + ", ".join(SCENARIOS))
    ap.add_argument("--business-key", default="2026-09-28")
    args = ap.parse_args()
    names = [s for s in args.scenario.split(",") if s]
    unknown = [s for s in names if s not in SCENARIOS]
    if not names or unknown:
        ap.error("unknown scenario(s): %s" % ", ".join(unknown or ["(none)"]))
    stack = ComposeStack(args.pg_port, args.loadctl_container)
    nifi = Nifi(args.bootstrap, args.prefix)
    flow = Flow(nifi)
    life = Lifecycle(flow)
    results = []
    try:
        for i, name in enumerate(names):
            key = args.business_key + ("" if i == 0 else ".%s" % name)
            results.append(SCENARIOS[name](stack, nifi, flow, life, key))
    finally:
        flow.close()
    print("compose scenarios: %d of %d OK" % (sum(results), len(results)), flush=True)
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
