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
