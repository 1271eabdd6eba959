"""The sweeper (docs/contract.md §7, §9) with thresholds of seconds on the real broker and database:
every rule, REISSUE with the same SCN and the zombie worker, REISSUE up to max_attempts, two
sweepers acting once, the start-up check of the settings, and a failed chunk report followed by
a partition failure ending the run at once (not after recovery.stale)."""
import itertools
import subprocess
import time
import uuid

import pytest

from conftest import new_run, one
from llsim.lifecycle import Lifecycle, staging_metrics

_ids = itertools.count()
FAST = {"recovery.extract_query_timeout": "PT1S", "recovery.stale": "PT3S", "recovery.sweeper_interval": "PT0.5S"}


@pytest.fixture
def sweepers(stack):
    started = []

    def start(**settings):
        name = "sweeper-%d" % next(_ids)
        conf = dict(FAST)
        conf.update({k.replace("__", "."): v for k, v in settings.items()})
        stack.start("sweeper", instance=name, settings=conf)
        started.append(name)
        return name

    yield start
    for name in started:
        if name in stack.procs:
            assert stack.stop(name) == 0, "sweeper %s did not exit cleanly; see %s" % (name, stack.log_path(name))


def wait_for(db, sql, args, expected, timeout=30):
    end = time.time() + timeout
    while True:
        db.execute(sql, args)
        row = db.fetchone()
        value = row[0] if row and len(row) == 1 else row
        if value == expected:
            return value
        if time.time() > end:
            raise AssertionError("%s: %r, expected %r" % (sql, value, expected))
        time.sleep(0.3)


def stalled_run(flow, partitions=2):
    """A run whose last partition is claimed but reports only its first chunk."""
    run = new_run(partitions=partitions, empty=())
    flow.create(run)
    flow.register(run)
    flow.claim_all(run)
    last = run.nonempty()[-1]
    sent = 0
    for pid in run.nonempty():
        chunks = run.chunks(pid)
        for c in (chunks[:1] if pid == last else chunks):
            flow.nifi.send("chunks", c)
            sent += 1
    flow.nifi.flush()
    flow.reply("chunk-outcomes", run.run_id, count=sent)
    return run, last


def run_row(db, run, cols):
    db.execute("SELECT %s FROM nifi_ops.load_run WHERE run_id = %%s" % cols, (run.run_id,))
    return db.fetchone()


def part_row(db, run, pid, cols):
    db.execute("SELECT %s FROM nifi_ops.load_partition WHERE run_id = %%s AND partition_id = %%s" % cols,
               (run.run_id, pid))
    return db.fetchone()


def test_fail_mode_times_out_the_run_and_keeps_the_token(stack, flow, db, sweepers):
    run, stale = stalled_run(flow)
    token = run.tokens[stale]
    sweepers(recovery__mode="FAIL")
    wait_for(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,), "TIMED_OUT")
    assert run_row(db, run, "error_stage, error_code, error_message") == (
        "SWEEPER", "PARTITION_STALE", "stale partitions: %s" % stale)
    assert part_row(db, run, stale, "status, error_code, claim_token::text") == ("TIMED_OUT", "PARTITION_STALE", token)
    assert part_row(db, run, run.nonempty()[0], "status")[0] == "SUCCESS"
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'RUN_TIMED_OUT'",
               run.run_id) == 1
    # the old worker's late chunk is still recorded (FAIL keeps the token); its failure report is refused
    flow.nifi.send("chunks", run.chunks(stale)[1])
    flow.nifi.flush()
    late = flow.reply("chunk-outcomes", run.run_id, lambda v: v["chunkIndex"] == 1 and v["partitionId"] == stale)[-1]
    assert late["recorded"] is True and late["runStatus"] == "TIMED_OUT"
    flow.nifi.send("partition-failures", run.partition_failure(stale))
    flow.nifi.flush()
    f = flow.reply("partition-failure-outcomes", run.run_id)[-1]
    assert f["code"] == "PARTITION_STATUS_MISMATCH" and f["partitionStatus"] == "TIMED_OUT"


def test_reissue_with_the_same_scn_and_the_zombie_is_refused(stack, flow, db, sweepers):
    reissues = flow.nifi.reader("reissue-partition-commands")
    run, stale = stalled_run(flow)
    zombie = run.tokens[stale]
    sweepers(recovery__mode="REISSUE", recovery__max_attempts="3")
    wait_for(db, "SELECT status FROM nifi_ops.load_partition WHERE run_id = %s AND partition_id = %s",
             (run.run_id, stale), "RETRY")
    assert part_row(db, run, stale, "claim_token, error_code") == (None, "HEARTBEAT_STALE")
    assert one(db, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id = %s AND partition_id = %s"
                   " AND status = 'FAILED'", run.run_id, stale) == 1
    assert run_row(db, run, "status")[0] == "EXTRACTING"
    cmd = reissues.wait_for(lambda r: r["value"]["runId"] == run.run_id, timeout=30)[0]
    assert cmd["headers"]["jobKey"] == run.job.encode()
    v = cmd["value"]
    part = next(p for p in run.parts if p["partitionId"] == stale)
    assert (v["partitionId"], v["snapshotScn"], v["lowerBound"], v["upperBound"], v["expectedRowCount"]) == (
        stale, "48151623420000000042", part["lowerBound"], part["upperBound"], part["expectedRowCount"])
    assert v["hdfsRunPath"] == run.hdfs_run_path
    reissues.close()

    # the reissue: a new worker claims with a new token; that claim ACKs the dispatch
    fresh = str(uuid.uuid4())
    run.tokens[stale] = fresh
    flow.nifi.send("partition-claims", run.claim(stale, token=fresh, worker="nifi-node-9"))
    flow.nifi.flush()
    d = flow.reply("claim-decisions", run.run_id, lambda v: v["claimToken"] == fresh)[-1]
    assert d["claimed"] is True and d["attempt"] == 2 and d["snapshotScn"] == "48151623420000000042"
    assert one(db, "SELECT status FROM nifi_ops.load_dispatch WHERE run_id = %s AND partition_id = %s",
               run.run_id, stale) == "ACKED"
    # the zombie's late reports change nothing
    flow.nifi.send("chunks", run.chunks(stale, token=zombie)[1])
    flow.nifi.send("partition-failures", run.partition_failure(stale, token=zombie))
    flow.nifi.flush()
    z = flow.reply("chunk-outcomes", run.run_id, lambda v: v["claimToken"] == zombie and v["chunkIndex"] == 1)[-1]
    assert z["code"] == "CLAIM_MISMATCH" and z["recorded"] is False
    zf = flow.reply("partition-failure-outcomes", run.run_id, lambda v: v["claimToken"] == zombie)[-1]
    assert zf["code"] == "CLAIM_MISMATCH" and zf["changed"] is False  # token first (docs/contract.md §12)
    assert part_row(db, run, stale, "status")[0] == "RUNNING"
    # the new worker finishes; the run completes with the original SCN
    for c in run.chunks(stale, token=fresh):
        flow.nifi.send("chunks", c)
    flow.nifi.flush()
    flow.validate_commands(run)
    assert run_row(db, run, "status, snapshot_scn::text, extracted_count") == (
        "EXTRACTED_VALIDATED", "48151623420000000042", run.source_count)
    assert one(db, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id = %s AND partition_id = %s"
                   " AND status = 'WRITTEN'", run.run_id, stale) == 3


def test_reissue_up_to_max_attempts_then_timed_out(stack, flow, db, sweepers):
    run, stale = stalled_run(flow)
    sweepers(recovery__mode="REISSUE", recovery__max_attempts="2")
    wait_for(db, "SELECT status FROM nifi_ops.load_partition WHERE run_id = %s AND partition_id = %s",
             (run.run_id, stale), "RETRY")
    second = str(uuid.uuid4())
    run.tokens[stale] = second
    flow.nifi.send("partition-claims", run.claim(stale, token=second))
    flow.nifi.flush()
    assert flow.reply("claim-decisions", run.run_id, lambda v: v["claimToken"] == second)[-1]["attempt"] == 2
    # the second worker stalls too: attempts are used up, the run is abandoned
    wait_for(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,), "TIMED_OUT")
    assert run_row(db, run, "error_code")[0] == "REISSUE_ATTEMPTS_EXHAUSTED"
    assert part_row(db, run, stale, "status, attempt_count") == ("TIMED_OUT", 2)
    assert one(db, "SELECT count(*) FROM nifi_ops.load_dispatch WHERE run_id = %s"
                   " AND dispatch_type = 'REISSUE_PARTITION'", run.run_id) == 1


def test_unclaimed_reissue_times_out(stack, flow, db, sweepers):
    run, stale = stalled_run(flow)
    sweepers(recovery__mode="REISSUE", recovery__max_attempts="5")
    wait_for(db, "SELECT status FROM nifi_ops.load_partition WHERE run_id = %s AND partition_id = %s",
             (run.run_id, stale), "RETRY")
    wait_for(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,), "TIMED_OUT")
    assert run_row(db, run, "error_code")[0] == "REISSUE_NOT_CLAIMED"


def test_run_deadline(stack, flow, db, sweepers):
    run = new_run(partitions=2, empty=())
    flow.create(run)
    sweepers(recovery__run_timeout="PT4S")
    wait_for(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,), "TIMED_OUT")
    assert run_row(db, run, "error_stage, error_code, error_message") == (
        "SWEEPER", "RUN_TIMEOUT", "exceeded PT4S in CREATED")


def test_unacknowledged_validate_run_is_resent_then_dead(stack, flow, db, sweepers):
    run = new_run(partitions=2, empty=())
    flow.to_extracted(run)
    sweepers(dispatch__ack_timeout="PT2S", dispatch__max_attempts="3")
    wait_for(db, "SELECT status FROM nifi_ops.load_dispatch WHERE run_id = %s", (run.run_id,), "DEAD", timeout=60)
    db.execute("SELECT attempt_count, last_error FROM nifi_ops.load_dispatch WHERE run_id = %s", (run.run_id,))
    assert db.fetchone() == (3, "no ack after 3 attempts (ack timeout)")
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'DISPATCH_REQUEUED'",
               run.run_id) == 2
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'DISPATCH_DEAD'",
               run.run_id) == 1
    cmds = flow.r["validate-run-commands"].wait_for(lambda r: r["value"]["runId"] == run.run_id, count=3)
    assert [c["value"]["attempt"] for c in cmds] == [1, 2, 3]
    assert run_row(db, run, "status")[0] == "EXTRACTED_VALIDATED"


def test_stale_validation_alert_once_per_period_and_two_sweepers_act_once(stack, flow, db, sweepers):
    life = Lifecycle(flow)
    run = new_run(partitions=2, empty=())
    flow.to_extracted(run)
    dispatch = one(db, "SELECT dispatch_id::text FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id)
    life.start_validation(run, dispatch)
    sweepers(recovery__validation_stale="PT3S")
    sweepers(recovery__validation_stale="PT3S")
    wait_for(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'RUN_STALE_ALERT'",
             (run.run_id,), 1)
    time.sleep(1.5)  # both sweepers tick several times inside the period: still one alert
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'RUN_STALE_ALERT'",
               run.run_id) == 1
    assert run_row(db, run, "status")[0] == "STAGE_VALIDATING"
    db.execute("SELECT message, details->>'status' FROM nifi_ops.load_event WHERE run_id = %s"
               " AND event_name = 'RUN_STALE_ALERT'", (run.run_id,))
    assert db.fetchone() == ("no progress in STAGE_VALIDATING", "STAGE_VALIDATING")


def test_stalled_publish_becomes_publish_unknown_never_republished(stack, flow, db, sweepers):
    life = Lifecycle(flow)
    run = new_run(partitions=2, empty=())
    flow.to_extracted(run)
    dispatch = one(db, "SELECT dispatch_id::text FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id)
    life.start_validation(run, dispatch)
    life.metrics(run, "STAGING", staging_metrics(run))
    life.stage_validated(run)
    token, _ = life.claim_publish(run)
    sweepers(recovery__publish_stale="PT2S")
    wait_for(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,), "PUBLISH_UNKNOWN")
    assert run_row(db, run, "error_stage, error_code, error_message") == (
        "PUBLISH", "PUBLISH_STALE", "no publish result within PT2S")
    late = life.publish_result(run, token, "PUBLISHED")
    assert late["code"] == "RUN_STATUS_MISMATCH" and late["runStatus"] == "PUBLISH_UNKNOWN"
    _, again = life.claim_publish(run, token)
    assert again["claimed"] is False


def test_failed_chunk_report_then_partition_failure_ends_the_run_at_once(stack, flow, db):
    """The reference's chunk-report-failure case: NiFi's chunk report cannot be applied
    (here HDFS_PATH_OUTSIDE_RUN); its error handler reports the partition failure, which ends
    the run as failed within seconds, without waiting for recovery.stale (90 minutes)."""
    run = new_run(partitions=2, empty=())
    flow.create(run)
    flow.register(run)
    flow.claim_all(run)
    pid = run.nonempty()[0]
    t0 = time.time()
    flow.nifi.send("chunks", run.chunk(pid, 0, 3, 5000, path="/elsewhere/chunk-0.parquet"))
    flow.nifi.flush()
    assert flow.reply("chunk-outcomes", run.run_id)[-1]["code"] == "HDFS_PATH_OUTSIDE_RUN"
    flow.nifi.send("partition-failures", run.partition_failure(pid, code="CHUNK_REPORT_FAILED", error_class="API",
                                                              message="chunk report refused"))
    flow.nifi.flush()
    f = flow.reply("partition-failure-outcomes", run.run_id)[-1]
    assert f["runStatus"] == "FAILED_EXTRACT" and f["changed"] is True
    assert time.time() - t0 < 30
    assert run_row(db, run, "status, error_code")[0:2] == ("FAILED_EXTRACT", "CHUNK_REPORT_FAILED")


def test_settings_are_checked_at_start(stack):
    conf = stack.write_config("sweeper", "sweeper-bad", {"recovery.stale": "PT30M",
                                                         "recovery.extract_query_timeout": "PT60M"})
    p = subprocess.run([stack.build_dir + "/services/ll-sweeper", "--config", conf], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 1
    assert "recovery.stale" in p.stderr and "extract_query_timeout" in p.stderr
    conf = stack.write_config("sweeper", "sweeper-bad", {"recovery.mode": "SOMETIMES"})
    p = subprocess.run([stack.build_dir + "/services/ll-sweeper", "--config", conf], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 1 and "recovery.mode" in p.stderr


def rewind(stack, service, offsets):
    """Commits offsets {(topic, partition): offset} for a service's consumer group (the service
    stopped: the broker refuses commits from outside a live generation), as
    kafka-consumer-groups --reset-offsets --to-offset does for those partitions only."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": stack.bootstrap, "group.id": stack.prefix + service,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def test_failed_runs_unfinished_partitions_time_out_after_stale(stack, flow, db, sweepers):
    """Issue 42 item 4 (docs/contract.md §3.2, §7.6): the siblings of a partition that failed its
    run keep their status when the run fails (§3.2, §5.5 step 7), and only the sweeper's timeout
    path rewrites them: once neither the partition (heartbeat) nor the run (completed_at) moved for
    recovery.stale, every PENDING/RUNNING/RETRY partition of a run ended FAILED_* or TIMED_OUT
    becomes TIMED_OUT (RUN_ENDED, completed now, token kept), the run row untouched, one
    PARTITIONS_TIMED_OUT event. NiFi then gets the FAIL-mode timeout's answers (§7.1): a late chunk
    recorded with the partition TIMED_OUT, a failure report PARTITION_STATUS_MISMATCH, a claim not
    claimed; and the inputs read again (the completion group rewound) restate their first answers."""
    from llsim.probe import admit, answer, ask, post
    run = new_run(partitions=4, empty=())
    admit(flow, run, claim=["0000", "0001"])
    first_chunk = post(flow.nifi, "chunks", run.chunks("0001")[0])
    c0 = answer(flow, first_chunk)
    assert (c0["outcome"], c0["partitionStatus"], c0["runStatus"]) == ("ACCEPTED", "RUNNING", "EXTRACTING"), c0
    failure = post(flow.nifi, "partition-failures", run.partition_failure("0000"))
    f0 = answer(flow, failure)
    assert (f0["outcome"], f0["runStatus"]) == ("ACCEPTED", "FAILED_EXTRACT"), f0
    # the siblings keep their status when the run fails (§3.2)
    before = run_row(db, run, "status, error_code, version_no, completed_at, heartbeat_at")
    statuses = "SELECT partition_id, status, error_code FROM nifi_ops.load_partition WHERE run_id = %s" \
               " ORDER BY partition_id"
    db.execute(statuses, (run.run_id,))
    assert db.fetchall() == [("0000", "FAILED", "ORA-00028"), ("0001", "RUNNING", None), ("0002", "PENDING", None),
                             ("0003", "PENDING", None)]
    sweepers(recovery__mode="FAIL")
    wait_for(db, "SELECT count(*) FROM nifi_ops.load_partition WHERE run_id = %s AND status = 'TIMED_OUT'",
             (run.run_id,), 3)
    db.execute("SELECT partition_id, status, error_code, completed_at IS NOT NULL, claim_token::text"
               " FROM nifi_ops.load_partition WHERE run_id = %s ORDER BY partition_id", (run.run_id,))
    assert db.fetchall() == [("0000", "FAILED", "ORA-00028", True, run.tokens["0000"]),
                             ("0001", "TIMED_OUT", "RUN_ENDED", True, run.tokens["0001"]),
                             ("0002", "TIMED_OUT", "RUN_ENDED", True, None),
                             ("0003", "TIMED_OUT", "RUN_ENDED", True, None)]
    assert run_row(db, run, "status, error_code, version_no, completed_at, heartbeat_at") == before
    db.execute("SELECT event_level, error_code, details->'partitions', details->>'runStatus' FROM nifi_ops.load_event"
               " WHERE run_id = %s AND event_name = 'PARTITIONS_TIMED_OUT'", (run.run_id,))
    assert db.fetchall() == [("INFO", "RUN_ENDED", ["0001", "0002", "0003"], "FAILED_EXTRACT")]

    # a run that failed just now: its siblings are left alone until recovery.stale has passed
    fresh = new_run(partitions=2, empty=())
    admit(flow, fresh, claim=["0000", "0001"])
    assert ask(flow, "partition-failures", fresh.partition_failure("0001"))["runStatus"] == "FAILED_EXTRACT"
    time.sleep(1.2)  # two ticks or more of the sweeper (PT0.5S), well inside recovery.stale (PT3S)
    assert part_row(db, fresh, "0000", "status")[0] == "RUNNING"
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'PARTITIONS_TIMED_OUT'",
               run.run_id) == 1  # the swept run is not swept again

    # what NiFi sees afterwards: the answers of a FAIL-mode timeout (§5.3, §5.4, §5.5, §7.1)
    late_chunk = post(flow.nifi, "chunks", run.chunks("0001")[1])
    c1 = answer(flow, late_chunk)
    assert (c1["outcome"], c1["recorded"], c1["partitionStatus"], c1["runStatus"]) == (
        "ACCEPTED", True, "TIMED_OUT", "FAILED_EXTRACT"), c1
    late_failure = post(flow.nifi, "partition-failures", run.partition_failure("0001"))
    f1 = answer(flow, late_failure)
    assert (f1["outcome"], f1["code"], f1["changed"], f1["partitionStatus"], f1["runStatus"], f1["details"]) == (
        "REJECTED", "PARTITION_STATUS_MISMATCH", False, "TIMED_OUT", "FAILED_EXTRACT",
        {"partitionStatus": "TIMED_OUT"}), f1
    cl = ask(flow, "partition-claims", run.claim("0002"))
    assert (cl["claimed"], cl["partitionStatus"], cl["runStatus"]) == (False, "TIMED_OUT", "FAILED_EXTRACT"), cl
    assert part_row(db, run, "0001", "status, error_code")[0:2] == ("TIMED_OUT", "RUN_ENDED")

    # a replay restates: the completion group read again from the first chunk and the first failure
    # (a replay is not progress: no heartbeat moves, nothing is re-decided)
    ledger = "SELECT p.partition_id, p.status, p.error_code, p.completed_at, p.heartbeat_at, r.status, r.version_no," \
             " r.heartbeat_at FROM nifi_ops.load_partition p JOIN nifi_ops.load_run r ON r.run_id = p.run_id" \
             " WHERE p.run_id = %s ORDER BY p.partition_id"
    db.execute(ledger, (run.run_id,))
    before_replay = db.fetchall()
    assert stack.stop("completion-0") == 0
    rewind(stack, "completion", {(first_chunk.topic, first_chunk.partition): first_chunk.offset,
                                 (failure.topic, failure.partition): failure.offset})
    stack.start("completion")
    for s, first in ((first_chunk, c0), (late_chunk, c1), (failure, f0), (late_failure, f1)):
        reader = flow.r["chunk-outcomes" if s.logical == "chunks" else "partition-failure-outcomes"]
        again = reader.wait_for(lambda r: r["value"]["sourceTopic"] == s.topic and r["value"]["sourcePartition"]
                                == s.partition and r["value"]["sourceOffset"] == s.offset, count=2, timeout=60)[-1]
        again = again["value"]
        if first["outcome"] == "REJECTED":
            assert (again["outcome"], again["code"]) == ("REJECTED", first["code"]), (first, again)
        else:
            assert (again["outcome"], again.get("code")) == ("REPLAY", None), (first, again)
        assert again["runStatus"] == "FAILED_EXTRACT"
    db.execute(ledger, (run.run_id,))
    assert db.fetchall() == before_replay
    assert [r[1:3] for r in before_replay] == [("FAILED", "ORA-00028"), ("TIMED_OUT", "RUN_ENDED"),
                                               ("TIMED_OUT", "RUN_ENDED"), ("TIMED_OUT", "RUN_ENDED")]
