#!/usr/bin/python3
"""The reference scenario end to end (the README's first command runs this via scripts/demo.sh).

Plays NiFi's part: publishes the run request, the manifest, one claim per partition and every
chunk report as Avro to Kafka, waits for loadledger's replies, then prints the run's journey,
its partition table and the one validate-run command read back with read_committed.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from llsim.flow import Flow  # noqa: E402
from llsim.kafkaio import Nifi  # noqa: E402
from llsim.scenario import Run  # noqa: E402
from llsim.stack import Stack  # noqa: E402


def say(msg):
    print(msg, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--business-key", default="2026-09-28")
    ap.add_argument("--keep-running", action="store_true", help="leave the services running")
    args = ap.parse_args()

    stack = Stack()
    say("== migrating the ledger")
    say(stack.migrate().stdout.strip())
    say("== starting registrar, claimer, completion, dispatcher")
    stack.start_all()
    nifi = Nifi(stack.bootstrap, stack.prefix)
    flow = Flow(nifi)
    run = Run(business_key=args.business_key)
    ok = False
    try:
        t0 = time.time()
        say("== run %s: %s / %s, %d rows in %d partitions (%d empty)" % (
            run.run_id, run.job, run.business_key, run.source_count, len(run.parts),
            len(run.parts) - len(run.nonempty())))
        d = flow.create(run)
        say("run request   -> %s %s, run path %s, stage table %s" % (d["outcome"], d["runStatus"], d["hdfsRunPath"], d["stageTable"]))
        if d["outcome"] == "REJECTED":
            say("refused: %s (%s)" % (d["code"], d["message"]))
            return 1
        d = flow.register(run)
        say("manifest      -> %s %s, %d partitions to extract, %d empty" % (
            d["outcome"], d["runStatus"], len(d["dispatchPartitions"]), d["emptyPartitionCount"]))
        claims = flow.claim_all(run)
        say("claims        -> %d granted of %d" % (sum(1 for c in claims if c["claimed"]), len(claims)))
        outcomes = flow.extract_all(run)
        last = [o for o in outcomes if o["validationScheduled"]]
        say("chunk reports -> %d recorded, run %s" % (sum(1 for o in outcomes if o["recorded"]),
                                                       last[0]["runStatus"] if last else outcomes[-1]["runStatus"]))
        cmds = flow.validate_commands(run)
        flow.r["validate-run-commands"].drain(3)
        cmds = [r for r in flow.r["validate-run-commands"].records if r["value"]["runId"] == run.run_id]
        say("== in %.1f s" % (time.time() - t0))
        say("\n== the run's journey (ledger events)")
        cur = stack.db().cursor()
        cur.execute("SELECT to_char(event_time, 'HH24:MI:SS.MS'), event_name, coalesce(partition_id, ''),"
                    " coalesce(row_count::text, '') FROM nifi_ops.load_event WHERE run_id = %s"
                    " ORDER BY event_time", (run.run_id,))
        for t, name, pid, rows in cur.fetchall():
            say("  %s  %-18s %-5s %s" % (t, name, pid, rows))
        say("\n== loadctl show %s" % run.run_id)
        say(stack.loadctl("show", run.run_id).stdout)
        say("== validate-run commands on %s (read_committed): %d" % (nifi.topic("validate-run-commands"), len(cmds)))
        for c in cmds:
            say("  key=%s headers=%s" % (c["key"].decode(), {k: v.decode() for k, v in c["headers"].items()}))
            say("  %s" % c["value"])
        cur.execute("SELECT status FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
        status = cur.fetchone()[0]
        ok = status == "EXTRACTED_VALIDATED" and len(cmds) == 1
        say("\nRESULT: run %s is %s with %d validate-run command(s): %s" % (
            run.run_id, status, len(cmds), "OK" if ok else "NOT OK"))
    finally:
        flow.close()
        if not args.keep_running:
            codes = stack.stop_all()
            say("services stopped: %s" % ", ".join("%s=%s" % kv for kv in sorted(codes.items())))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
