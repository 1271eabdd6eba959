#!/usr/bin/python3
"""The shipped NiFi flow run against the docker-compose stack (scripts/compose-check.sh runs this).

NiFi's part is played from the host through the stack's published ports by llsim.flowrun, the
interpreter of the flow's own graph that tests/integration/test_nifi_flow_run.py uses (NOT NiFi):
the flow file of the stack's profile (--variant registry: nifi/loadledger-flow.json, its schemas
from the stack's registry at --registry-url; embedded: nifi/loadledger-flow-embedded.json), the
broker at --bootstrap, the database at --pg-port. The SITE groups (Oracle, HDFS, Hive) are played
here for the reference load. The services are the stack's own: nothing is started here.

  compose_check.py --bootstrap 127.0.0.1:9092 --pg-port 15432 --variant registry \\
      --registry-url http://127.0.0.1:8081 run --business-key 2026-09-28 --state run.json
      a start-run FlowFile reaches SUCCESS (one run, no alert, nothing left waiting); the ledger
      says SUCCESS; the run's replies, read back from the reply topics from their start (decoded
      with the registry for the Confluent framing), are counted per topic into --state
  compose_check.py ... survived --state run.json
      after `docker compose down` / `up`: the run is still SUCCESS in the ledger and every reply
      counted in --state is still in its topic, readable (the registry still knows its schema id)

Exit 0 when it holds; its RESULT line says what was seen.
"""
import argparse
import json
import math
import os
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psycopg2  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402

from llsim.flowrun import FlowFile, FlowRunner, Registry  # noqa: E402
from llsim.kafkaio import client_conf  # noqa: E402
from llsim.scenario import JOB, SCN, Run  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FLOWS = {"registry": "loadledger-flow.json", "embedded": "loadledger-flow-embedded.json"}
REPLY_TOPICS = ["run-decisions", "manifest-decisions", "claim-decisions", "chunk-outcomes",
                "validation-start-decisions", "validation-metrics-outcomes", "stage-validation-outcomes",
                "publish-claim-decisions", "publish-result-outcomes", "run-success-outcomes",
                "validate-run-commands"]


class Site:
    """The SITE groups for the reference load (every step succeeds), and what reached the operators."""

    def __init__(self):
        self.succeeded, self.alerts = [], []

    def __call__(self, port, ff):
        a = ff.attrs
        if port == "plan manifest":
            run = Run(run_id=a["ll.run.id"], business_key=a["ll.business.key"])
            return [("manifest", ff.child(json.dumps(run.manifest())))]
        if port == "extract partition":
            assert a["ll.reply.claimed"] == "true" and a["ll.reply.snapshotScn"] == SCN, a
            rows = int(a["ll.reply.expectedRowCount"])
            n = max(1, math.ceil(rows / 5000))
            out = []
            for i in range(n):
                c = ff.child("")
                c.attrs.update({
                    "ll.chunk.index": str(i), "ll.chunk.count": str(n), "ll.fragment.id": "frag-%s" % a["uuid"][:8],
                    "ll.hdfs.path": "%s/part-%s/chunk-%05d.parquet" % (a["ll.reply.hdfsRunPath"], a["ll.partition.id"], i),
                    "ll.record.count": str(min(5000, rows - i * 5000)), "ll.byte.count": str(96 * 5000)})
                out.append(("chunk written", c))
            return out
        if port == "validate staging":
            n = a["ll.source.count"]
            return [("staging metrics", ff.child(json.dumps([
                {"metricName": "STAGE_COUNT", "expectedValue": n, "actualValue": a["ll.extracted.count"],
                 "tolerance": None, "result": "PASS", "details": {}}])))]
        if port == "publish":
            return [("published", ff.child())]
        if port == "validate target":
            return [("target metrics", ff.child(json.dumps([
                {"metricName": "TARGET_COUNT", "expectedValue": a["ll.source.count"], "actualValue": a["ll.source.count"],
                 "tolerance": None, "result": "PASS", "details": {}}])))]
        if port == "run succeeded":
            self.succeeded.append(a["ll.run.id"])
            return []
        if port == "alerts":
            self.alerts.append({k: v for k, v in a.items() if k.startswith(("ll.reply.", "ll.error", "kafka.topic"))})
            return []
        raise AssertionError("no SITE behaviour for port %r" % port)


def registry_call(base):
    def call(method, path, body):
        req = urllib.request.Request(base.rstrip("/") + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
    return call


def ledger_status(args, run_id):
    c = psycopg2.connect(host="127.0.0.1", port=args.pg_port, dbname="loadledger", user="postgres", connect_timeout=10)
    try:
        with c.cursor() as cur:
            cur.execute("SELECT status FROM nifi_ops.load_run WHERE run_id = %s", (run_id,))
            row = cur.fetchone()
            return row and row[0]
    finally:
        c.close()


def replies_of(args, runner, run_id):
    """{topic: records of run_id} over the reply topics, read from their start to their end offsets."""
    cons = Consumer(client_conf({"bootstrap.servers": args.bootstrap, "group.id": "compose-check-readback",
                                 "isolation.level": "read_committed", "enable.auto.commit": False}))
    counts = {}
    try:
        for logical in REPLY_TOPICS:
            topic = args.prefix + logical
            md = cons.list_topics(topic, timeout=10).topics[topic]
            if md.error is not None:
                raise AssertionError("topic %s: %s" % (topic, md.error))
            for p in md.partitions:
                lo, hi = cons.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                if hi <= lo:
                    continue
                cons.assign([TopicPartition(topic, p, lo)])
                deadline = time.time() + 30
                # the position, not the last offset seen: a transactional topic ends with a marker
                while cons.position([TopicPartition(topic, p)])[0].offset < hi:
                    if time.time() > deadline:
                        raise AssertionError("%s [%d]: not read to its end offset %d in 30 s" % (topic, p, hi))
                    for msg in cons.consume(500, 0.5):
                        if msg.error():
                            raise AssertionError("%s: %s" % (topic, msg.error()))
                        if msg.key() == run_id.encode():
                            rec = runner._decode(msg.value())  # the framing the flow reads
                            assert rec.get("runId") == run_id, (topic, rec)
                            counts[logical] = counts.get(logical, 0) + 1
    finally:
        cons.close()
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--pg-port", type=int, required=True)
    ap.add_argument("--prefix", default="loadledger.")
    ap.add_argument("--variant", choices=sorted(FLOWS), required=True)
    ap.add_argument("--registry-url")
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("step", choices=["run", "survived"])
    ap.add_argument("--business-key", default="2026-09-28")
    ap.add_argument("--state", required=True)
    args = ap.parse_args()
    if (args.variant == "registry") != bool(args.registry_url):
        ap.error("--registry-url: with --variant registry only, and required there")
    reg = Registry(registry_call(args.registry_url)) if args.registry_url else None
    site = Site()
    runner = FlowRunner(os.path.join(REPO, "nifi", FLOWS[args.variant]), {"topic.prefix": args.prefix},
                        args.bootstrap, site, reg)
    try:
        if args.step == "run":
            runner.consume(from_end=True)  # replies of earlier runs are not this run's
            runner.inject("start run", "SITE Start runs", FlowFile({"ll.job.key": JOB, "ll.business.key": args.business_key}))
            ok = runner.run(lambda: site.succeeded, args.timeout)
            if ok:
                runner.run(lambda: False, 2)  # late replies and command copies: nothing may wait after
            run_id = site.succeeded[0] if site.succeeded else None
            status = run_id and ledger_status(args, run_id)
            counts = replies_of(args, runner, run_id) if run_id else {}
            good = (ok and len(site.succeeded) == 1 and not site.alerts and not runner.waiting and status == "SUCCESS"
                    and counts.get("run-success-outcomes") == 1)
            with open(args.state, "w") as f:
                json.dump({"run_id": run_id, "business_key": args.business_key, "replies": counts}, f)
            print("RESULT %s run %s: flow SUCCESS %s, ledger %s, replies %s, alerts %s, waiting %s: %s"
                  % (args.variant, run_id, bool(ok), status, counts, site.alerts, sorted(runner.waiting),
                     "OK" if good else "NOT OK"), flush=True)
        else:
            with open(args.state) as f:
                st = json.load(f)
            status = ledger_status(args, st["run_id"])
            try:
                counts = replies_of(args, runner, st["run_id"])
            except AssertionError as e:
                counts = {"error": str(e)}
            good = status == "SUCCESS" and counts == st["replies"]
            print("RESULT %s run %s after down/up: ledger %s, replies %s (before: %s): %s"
                  % (args.variant, st["run_id"], status, counts, st["replies"], "OK" if good else "NOT OK"), flush=True)
    finally:
        runner.close()
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
