#!/usr/bin/python3
"""The README's first command (scripts/demo.sh runs this): loadledger end to end on a real Kafka
broker and a real PostgreSQL, with NiFi's part played by this script.

Scenario `reference` (docs/contract.md K§8): the run request, the manifest, one claim per
partition and every chunk report are published as Avro; the run reaches EXTRACTED_VALIDATED
with exactly one validate-run command, read back with read_committed; then the validation and
publish flows report (validation start, STAGING metrics, stage-validated, publish claim and
result, TARGET metrics, success) and the run ends in SUCCESS.

Scenario `stall` (--stall): one partition's worker dies after its first chunk; the sweeper
(REISSUE mode, thresholds of seconds) resets the partition and publishes a reissue command
carrying the same SCN; a new worker claims it, the dead worker's late report is refused, and
the run still reaches SUCCESS with its original SCN.

Scenario `publish-unknown`: the publish step loses Hive's answer and reports PUBLISH_UNKNOWN; a
new run for the same job and business key is refused (DUPLICATE_ACTIVE_RUN) until an operator
resolves the unknown publish with `loadctl resolve-publish-unknown`; then it is admitted.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from llsim.flow import Flow  # noqa: E402
from llsim.kafkaio import Nifi  # noqa: E402
from llsim.lifecycle import Lifecycle, staging_metrics  # noqa: E402
from llsim.scenario import Run  # noqa: E402
from llsim.stack import Stack  # noqa: E402


def say(msg=""):
    print(msg, flush=True)


def journey(stack, run):
    say("\n== the run's journey (ledger events)")
    cur = stack.db().cursor()
    cur.execute("SELECT to_char(event_time, 'HH24:MI:SS.MS'), event_name, coalesce(partition_id, ''),"
                " coalesce(row_count::text, ''), coalesce(message, '') FROM nifi_ops.load_event"
                " WHERE run_id = %s ORDER BY event_time", (run.run_id,))
    for t, name, pid, rows, msg in cur.fetchall():
        say("  %s  %-26s %-5s %-7s %s" % (t, name, pid, rows, msg[:60]))


def extract(stack, nifi, flow, run):
    """Run request to EXTRACTED_VALIDATED; returns the validate-run commands of the run."""
    say("== run %s: %s / %s, %d rows in %d partitions (%d empty)" % (
        run.run_id, run.job, run.business_key, run.source_count, len(run.parts),
        len(run.parts) - len(run.nonempty())))
    d = flow.create(run)
    say("run request     -> %s %s, run path %s, stage table %s" % (d["outcome"], d["runStatus"], d["hdfsRunPath"],
                                                                 d["stageTable"]))
    if d["outcome"] == "REJECTED":
        raise SystemExit("refused: %s (%s)" % (d["code"], d["message"]))
    d = flow.register(run)
    say("manifest        -> %s %s, %d partitions to extract, %d empty" % (
        d["outcome"], d["runStatus"], len(d["dispatchPartitions"]), d["emptyPartitionCount"]))
    claims = flow.claim_all(run)
    say("claims          -> %d granted of %d" % (sum(1 for c in claims if c["claimed"]), len(claims)))
    outcomes = flow.extract_all(run)
    last = [o for o in outcomes if o["validationScheduled"]]
    say("chunk reports   -> %d recorded, run %s" % (sum(1 for o in outcomes if o["recorded"]),
                                                     last[0]["runStatus"] if last else outcomes[-1]["runStatus"]))
    flow.validate_commands(run)
    flow.r["validate-run-commands"].drain(2)
    return [r for r in flow.r["validate-run-commands"].records if r["value"]["runId"] == run.run_id]


def reference(stack, nifi, flow, life, business_key):
    run = Run(business_key=business_key)
    t0 = time.time()
    cmds = extract(stack, nifi, flow, run)
    say("validate-run commands on %s (read_committed): %d" % (nifi.topic("validate-run-commands"), len(cmds)))
    for c in cmds:
        say("  key=%s headers=%s" % (c["key"].decode(), {k: v.decode() for k, v in c["headers"].items()}))
        say("  %s" % c["value"])
    dispatch = cmds[0]["value"]["dispatchId"]
    steps = life.to_success(run, dispatch)
    say("validation start -> started=%s, %s (stage table %s)" % (steps["start"]["started"], steps["start"]["runStatus"],
                                                              steps["start"]["stageTable"]))
    say("STAGING metrics -> %d recorded, %d FAIL" % (steps["staging"]["recorded"], steps["staging"]["failCount"]))
    say("stage-validated -> %s" % steps["stage_validated"]["runStatus"])
    say("publish claim   -> claimed=%s, %s" % (steps["publish_claim"]["claimed"], steps["publish_claim"]["runStatus"]))
    say("publish result  -> %s" % steps["publish_result"]["runStatus"])
    say("TARGET metrics  -> %d recorded" % steps["target"]["recorded"])
    say("success         -> %s" % steps["success"]["runStatus"])
    say("== in %.1f s" % (time.time() - t0))
    journey(stack, run)
    say("\n== loadctl show %s" % run.run_id)
    say(stack.loadctl("show", run.run_id).stdout)
    cur = stack.db().cursor()
    cur.execute("SELECT status FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
    status = cur.fetchone()[0]
    ok = status == "SUCCESS" and len(cmds) == 1
    say("RESULT reference: run %s reached EXTRACTED_VALIDATED with %d validate-run command(s) and ended %s: %s" % (
        run.run_id, len(cmds), status, "OK" if ok else "NOT OK"))
    return ok


def stall(stack, nifi, flow, life, business_key):
    import uuid
    say("\n\n== scenario stall: a worker dies; the sweeper reissues its partition with the same SCN")
    stack.start("sweeper", settings={"recovery.mode": "REISSUE", "recovery.extract_query_timeout": "PT2S",
                                     "recovery.stale": "PT5S", "recovery.sweeper_interval": "PT1S"})
    reissues = nifi.reader("reissue-partition-commands")
    run = Run(business_key=business_key)
    say("== run %s: %s / %s" % (run.run_id, run.job, run.business_key))
    flow.create(run)
    flow.register(run)
    flow.claim_all(run)
    dead = run.nonempty()[-1]
    sent = 0
    for pid in run.nonempty():
        for c in (run.chunks(pid)[:1] if pid == dead else run.chunks(pid)):
            nifi.send("chunks", c)
            sent += 1
    nifi.flush()
    flow.reply("chunk-outcomes", run.run_id, count=sent)
    say("worker of partition %s stops after chunk 0 (token %s...)" % (dead, run.tokens[dead][:8]))
    cmd = reissues.wait_for(lambda r: r["value"]["runId"] == run.run_id, timeout=60)[0]["value"]
    say("reissue command -> partition %s, SCN %s, bounds [%s, %s), %d rows expected" % (
        cmd["partitionId"], cmd["snapshotScn"], cmd["lowerBound"], cmd["upperBound"], cmd["expectedRowCount"]))
    zombie = run.tokens[dead]
    fresh = str(uuid.uuid4())
    run.tokens[dead] = fresh
    nifi.send("partition-claims", run.claim(dead, token=fresh, worker="nifi-node-7"))
    nifi.flush()
    d = flow.reply("claim-decisions", run.run_id, lambda v: v["claimToken"] == fresh)[-1]
    say("new claim       -> claimed=%s, attempt %d, SCN %s" % (d["claimed"], d["attempt"], d["snapshotScn"]))
    nifi.send("chunks", run.chunks(dead, token=zombie)[1])
    nifi.flush()
    z = flow.reply("chunk-outcomes", run.run_id, lambda v: v["claimToken"] == zombie and v["chunkIndex"] == 1)[-1]
    say("dead worker's late chunk -> %s %s" % (z["outcome"], z["code"]))
    for c in run.chunks(dead, token=fresh):
        nifi.send("chunks", c)
    nifi.flush()
    flow.validate_commands(run)
    dispatch = flow.r["validate-run-commands"].wait_for(lambda r: r["value"]["runId"] == run.run_id)[0]
    steps = life.to_success(run, dispatch["value"]["dispatchId"])
    say("validation and publish -> %s" % steps["success"]["runStatus"])
    reissues.close()
    stack.stop("sweeper-0")
    cur = stack.db().cursor()
    cur.execute("SELECT status, snapshot_scn::text FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
    status, scn = cur.fetchone()
    journey(stack, run)
    ok = status == "SUCCESS" and scn == cmd["snapshotScn"] and z["code"] == "CLAIM_MISMATCH"
    say("RESULT stall: partition %s reissued, run ended %s with SCN %s: %s" % (dead, status, scn,
                                                                           "OK" if ok else "NOT OK"))
    return ok


def publish_unknown(stack, nifi, flow, life, business_key):
    say("\n\n== scenario publish-unknown: the publish answer is lost")
    run = Run(business_key=business_key)
    cmds = extract(stack, nifi, flow, run)
    life.start_validation(run, cmds[0]["value"]["dispatchId"])
    life.metrics(run, "STAGING", staging_metrics(run))
    life.stage_validated(run)
    token, d = life.claim_publish(run)
    say("publish claim   -> claimed=%s" % d["claimed"])
    d = life.publish_result(run, token, "PUBLISH_UNKNOWN", message="Hive session lost during INSERT OVERWRITE")
    say("publish result  -> %s (the publish step cannot tell whether Hive committed)" % d["runStatus"])
    second = Run(business_key=business_key)
    d = flow.create(second)
    say("new run, same job and business key -> %s %s" % (d["outcome"], d["code"]))
    refused = d["code"] == "DUPLICATE_ACTIVE_RUN"
    reason = "hive query history: query never committed; target partition unchanged"
    r = stack.loadctl("resolve-publish-unknown", run.run_id, "--as", "FAILED_PUBLISH", "--reason", reason, check=False)
    say("$ loadctl resolve-publish-unknown %s --as FAILED_PUBLISH --reason '%s'\n  exit %d %s" % (
        run.run_id, reason, r.returncode, (r.stdout + r.stderr).strip()))
    third = Run(business_key=business_key)
    d = flow.create(third)
    say("new run again   -> %s %s" % (d["outcome"], d["runStatus"]))
    journey(stack, run)
    ok = refused and r.returncode == 0 and d["outcome"] == "ACCEPTED"
    # the admitted run is only a demonstration: end it, so that the next demo can run again
    life.fail(third, "CREATED", "FAILED_MANIFEST", code="DEMO_FINISHED", stage="demo",
              message="demonstration run, closed by the demo")
    say("RESULT publish-unknown: refused while PUBLISH_UNKNOWN, admitted after the operator resolved it: %s" % (
        "OK" if ok else "NOT OK"))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", choices=("all", "reference", "stall", "publish-unknown"), default="all")
    ap.add_argument("--stall", action="store_true", help="only the stall scenario (= --scenario stall)")
    ap.add_argument("--business-key", default="2026-09-28")
    ap.add_argument("--keep-running", action="store_true", help="leave the services running")
    args = ap.parse_args()
    if args.stall:
        args.scenario = "stall"

    stack = Stack()
    say("== migrating the ledger")
    say(stack.migrate().stdout.strip())
    say("== starting registrar, claimer, completion, dispatcher")
    results = []
    flow = None
    try:
        stack.start_all()
        nifi = Nifi(stack.bootstrap, stack.prefix)
        flow = Flow(nifi)
        life = Lifecycle(flow)
        if args.scenario in ("all", "reference"):
            results.append(reference(stack, nifi, flow, life, args.business_key))
        if args.scenario in ("all", "stall"):
            results.append(stall(stack, nifi, flow, life, args.business_key + ".st"))
        if args.scenario in ("all", "publish-unknown"):
            results.append(publish_unknown(stack, nifi, flow, life, args.business_key + ".pu"))
    finally:
        if flow:
            flow.close()
        if not args.keep_running:
            codes = stack.stop_all()
            say("services stopped: %s" % ", ".join("%s=%s" % kv for kv in sorted(codes.items())))
    return 0 if results and all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
