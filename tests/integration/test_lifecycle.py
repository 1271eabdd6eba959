"""The run's life after extraction through Kafka events: validation start (docs/contract.md §5.7),
metrics (§5.8), stage-validated (§5.9), publish claim and result (§5.13, §5.14), success
(§5.10), run failure pairs (§5.6), PUBLISH_UNKNOWN blocking the job and business key until an
operator resolves it (§5.15), on the real broker and database."""
import time
import uuid

import pytest

from conftest import new_run, one
from llsim.lifecycle import Lifecycle, metric, staging_metrics, target_metrics


def small_run():
    return new_run(partitions=2, empty=())


@pytest.fixture
def life(flow):
    return Lifecycle(flow)


def extracted(flow, db):
    """A small run driven to EXTRACTED_VALIDATED; returns it and its VALIDATE_RUN dispatch id."""
    run = small_run()
    flow.to_extracted(run)
    return run, one(db, "SELECT dispatch_id::text FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id)


def status(db, run):
    return one(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", run.run_id)


def staged(flow, life, db):
    run, dispatch = extracted(flow, db)
    assert life.start_validation(run, dispatch)["started"] is True
    life.metrics(run, "STAGING", staging_metrics(run))
    assert life.stage_validated(run)["stageValidated"] is True
    return run


def publishing(flow, life, db):
    run = staged(flow, life, db)
    token, d = life.claim_publish(run)
    assert d["claimed"] is True
    return run, token


def published(flow, life, db):
    run, token = publishing(flow, life, db)
    assert life.publish_result(run, token)["runStatus"] == "PUBLISHED"
    return run, token


def test_full_lifecycle_reaches_success(stack, flow, life, db):
    run, dispatch = extracted(flow, db)
    steps = life.to_success(run, dispatch)
    s = steps["start"]
    assert s["started"] is True and s["outcome"] == "ACCEPTED" and s["runStatus"] == "STAGE_VALIDATING"
    assert s["snapshotScn"] == "48151623420000000042" and s["hdfsRunPath"] == run.hdfs_run_path
    assert s["sourceCount"] == run.source_count and s["extractedCount"] == run.source_count
    assert s["sourceMetrics"]["SOURCE_COUNT"] == str(run.source_count)
    assert set(s["sourceMetrics"]) == {"SOURCE_COUNT", "AMOUNT_SUM", "MIN_TS", "MAX_TS"}
    assert steps["staging"]["recorded"] == 2 and steps["staging"]["failCount"] == 0
    assert steps["stage_validated"]["stageValidated"] is True
    assert steps["publish_claim"]["claimed"] is True
    assert steps["publish_result"]["changed"] is True
    assert steps["success"]["success"] is True and steps["success"]["runStatus"] == "SUCCESS"
    db.execute("SELECT status, staging_count, target_count, publish_token::text, completed_at IS NOT NULL,"
               " published_at IS NOT NULL FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
    assert db.fetchone() == ("SUCCESS", run.source_count, run.source_count, steps["publish_token"], True, True)
    assert one(db, "SELECT status FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id) == "ACKED"
    db.execute("SELECT event_name FROM nifi_ops.load_event WHERE run_id = %s AND event_name IN"
               " ('EXTRACT_VALIDATED','STAGE_VALIDATION_STARTED','STAGE_VALIDATED','PUBLISH_STARTED',"
               "  'PUBLISH_FINISHED','RUN_SUCCESS') ORDER BY event_time", (run.run_id,))
    assert [r[0] for r in db.fetchall()] == ["EXTRACT_VALIDATED", "STAGE_VALIDATION_STARTED", "STAGE_VALIDATED",
                                             "PUBLISH_STARTED", "PUBLISH_FINISHED", "RUN_SUCCESS"]


def test_validation_start_twice_starts_once(stack, flow, life, db):
    run, dispatch = extracted(flow, db)
    first = life.start_validation(run, dispatch, node="nifi-node-2")
    second = life.start_validation(run, dispatch, node="nifi-node-3")
    assert first["started"] is True
    assert second["started"] is False and second["runStatus"] == "STAGE_VALIDATING"
    assert second["sourceMetrics"] == {} and second["snapshotScn"] is None
    again = life.start_validation(run, dispatch, node="nifi-node-2")  # the winner's request again
    assert again["started"] is True and again["outcome"] == "REPLAY"
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s"
                   " AND event_name = 'STAGE_VALIDATION_STARTED'", run.run_id) == 1


def test_validation_start_with_unknown_dispatch_is_dispatch_mismatch(stack, flow, life, db):
    run, _ = extracted(flow, db)
    d = life.start_validation(run, str(uuid.uuid4()))
    assert d["outcome"] == "REJECTED" and d["code"] == "DISPATCH_MISMATCH" and d["started"] is False
    assert status(db, run) == "EXTRACTED_VALIDATED"


def test_ack_before_sent_stays_acked(stack, flow, life, db):
    stack.stop("dispatcher-0")
    try:
        run = small_run()
        flow.create(run)
        flow.register(run)
        flow.claim_all(run)
        flow.extract_all(run)
        dispatch = one(db, "SELECT dispatch_id::text FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id)
        assert one(db, "SELECT status FROM nifi_ops.load_dispatch WHERE dispatch_id = %s", dispatch) == "PENDING"
        assert life.start_validation(run, dispatch)["started"] is True
    finally:
        stack.start("dispatcher")
    time.sleep(3)  # give the restarted dispatcher a drain; the assertion is that nothing changed
    db.execute("SELECT status, sent_at, acked_at IS NOT NULL FROM nifi_ops.load_dispatch WHERE dispatch_id = %s",
               (dispatch,))
    assert db.fetchone() == ("ACKED", None, True)
    flow.r["validate-run-commands"].drain(1)
    assert not [r for r in flow.r["validate-run-commands"].records if r["value"]["runId"] == run.run_id]


def test_stage_validated_needs_metrics_and_no_fail(stack, flow, life, db):
    run, dispatch = extracted(flow, db)
    life.start_validation(run, dispatch)
    # no STAGING metric stored yet: the metrics come on another topic, and after a replay or a
    # database loss they may be read after the request (docs/design.md §6), so it waits for them
    reader = flow.r["stage-validation-outcomes"]
    life.nifi.send("stage-validations", {"runId": run.run_id})
    life.nifi.flush()
    time.sleep(3)
    reader.drain(0.5)
    assert not [r for r in reader.records if r["value"]["runId"] == run.run_id], "answered without metrics"
    m = life.metrics(run, "STAGING", staging_metrics(run, fail=("AMOUNT_SUM",)))
    assert m["failCount"] == 1
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s"
                   " AND event_name = 'STAGING_METRIC_FAILED'", run.run_id) == 1
    # the waiting request is answered once the metrics are there: blocked by the FAIL
    [d] = flow.reply("stage-validation-outcomes", run.run_id, timeout=30)
    assert d["stageValidated"] is False and d["reasons"] == ["FAIL AMOUNT_SUM"] and d["runStatus"] == "STAGE_VALIDATING"
    d = life.stage_validated(run)
    assert d["stageValidated"] is False and d["reasons"] == ["FAIL AMOUNT_SUM"]
    assert status(db, run) == "STAGE_VALIDATING"
    life.metrics(run, "STAGING", staging_metrics(run) + [metric("NULL_RATIO", "0.02", "WARN")])
    d = life.stage_validated(run)
    assert d["stageValidated"] is True
    assert one(db, "SELECT staging_count FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == run.source_count


def test_metrics_for_a_stage_the_run_has_passed_are_refused(stack, flow, life, db):
    run = staged(flow, life, db)
    d = life.metrics(run, "STAGING", staging_metrics(run, fail=("AMOUNT_SUM",)))
    assert d["outcome"] == "REJECTED" and d["code"] == "RUN_STATUS_MISMATCH" and d["runStatus"] == "STAGING_VALIDATED"
    assert one(db, "SELECT result FROM nifi_ops.load_validation WHERE run_id = %s AND stage = 'STAGING'"
                   " AND metric_name = 'AMOUNT_SUM'", run.run_id) == "PASS"


def test_early_target_metrics_wait_for_the_publish(stack, flow, life, db):
    """TARGET metrics read before the publish events are applied (docs/contract.md K§6) are
    deferred, not refused: they are applied once the run is PUBLISHED."""
    run, token = publishing(flow, life, db)
    life.nifi.send("validation-metrics", {"runId": run.run_id, "stage": "TARGET", "queryVersion": "v1",
                                          "metrics": target_metrics(run)})
    life.nifi.flush()
    time.sleep(1)  # the metrics are read while the run is still PUBLISHING (and deferred)
    assert one(db, "SELECT count(*) FROM nifi_ops.load_validation WHERE run_id = %s AND stage = 'TARGET'",
               run.run_id) == 0
    life.publish_result(run, token)
    d = flow.reply("validation-metrics-outcomes", run.run_id, lambda v: v["stage"] == "TARGET")[-1]
    assert d["outcome"] == "ACCEPTED" and d["runStatus"] == "PUBLISHED" and d["recorded"] == 2
    assert life.success(run)["success"] is True


def test_publish_claim_and_result_only_from_the_owner(stack, flow, life, db):
    run = staged(flow, life, db)
    token, d = life.claim_publish(run)
    assert d["claimed"] is True
    _, other = life.claim_publish(run)
    assert other["claimed"] is False and other["runStatus"] == "PUBLISHING"
    _, again = life.claim_publish(run, token)
    assert again["claimed"] is True and again["outcome"] == "REPLAY"
    r = life.publish_result(run, str(uuid.uuid4()))
    assert r["outcome"] == "REJECTED" and r["code"] == "PUBLISH_TOKEN_MISMATCH"
    assert status(db, run) == "PUBLISHING"
    r = life.publish_result(run, token, "PUBLISHED")
    assert r["changed"] is True and r["runStatus"] == "PUBLISHED"
    r = life.publish_result(run, token, "PUBLISHED")
    assert r["changed"] is False and r["outcome"] == "REPLAY"
    r = life.publish_result(run, token, "FAILED_PUBLISH")
    assert r["code"] == "RUN_STATUS_MISMATCH" and status(db, run) == "PUBLISHED"


def test_publish_result_failed_publish_ends_the_run(stack, flow, life, db):
    run, token = publishing(flow, life, db)
    r = life.publish_result(run, token, "FAILED_PUBLISH", code="HIVE_ERROR", message="insert overwrite failed")
    assert r["runStatus"] == "FAILED_PUBLISH"
    db.execute("SELECT error_stage, error_code, error_message, completed_at IS NOT NULL FROM nifi_ops.load_run"
               " WHERE run_id = %s", (run.run_id,))
    assert db.fetchone() == ("PUBLISH", "HIVE_ERROR", "insert overwrite failed", True)


def test_success_needs_target_metrics(stack, flow, life, db):
    run, _ = published(flow, life, db)
    d = life.success(run)
    assert d["success"] is False and d["reasons"] == ["NO_METRICS"]
    life.metrics(run, "TARGET", target_metrics(run, fail=("TARGET_COUNT",)))
    d = life.success(run)
    assert d["success"] is False and d["reasons"] == ["FAIL TARGET_COUNT"]
    life.metrics(run, "TARGET", target_metrics(run))
    d = life.success(run, target_count=12345)
    assert d["success"] is True
    assert one(db, "SELECT target_count FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == 12345
    assert life.success(run)["outcome"] == "REPLAY"


@pytest.mark.parametrize("at,expected,fail", [
    ("created", "CREATED", "FAILED_MANIFEST"),
    ("extracting", "EXTRACTING", "FAILED_EXTRACT"),
    ("stage_validating", "STAGE_VALIDATING", "FAILED_STAGE_VALIDATION"),
    ("staging_validated", "STAGING_VALIDATED", "FAILED_PUBLISH"),
    ("published", "PUBLISHED", "FAILED_TARGET_VALIDATION"),
])
def test_each_allowed_fail_pair(stack, flow, life, db, at, expected, fail):
    if at == "created":
        run = small_run()
        flow.create(run)
    elif at == "extracting":
        run = small_run()
        flow.create(run)
        flow.register(run)
    elif at == "stage_validating":
        run, dispatch = extracted(flow, db)
        life.start_validation(run, dispatch)
    elif at == "staging_validated":
        run = staged(flow, life, db)
    else:
        run, _ = published(flow, life, db)
    d = life.fail(run, expected, fail, code="E42", message="boom")
    assert d["changed"] is True and d["runStatus"] == fail
    db.execute("SELECT status, error_code, error_message, completed_at IS NOT NULL FROM nifi_ops.load_run"
               " WHERE run_id = %s", (run.run_id,))
    assert db.fetchone() == (fail, "E42", "boom", True)
    again = life.fail(run, expected, fail, code="E42", message="boom")
    assert again["changed"] is False and again["outcome"] == "REPLAY"


@pytest.mark.parametrize("expected,fail", [
    ("CREATED", "FAILED_EXTRACT"), ("EXTRACTING", "FAILED_MANIFEST"), ("PUBLISHING", "FAILED_PUBLISH"),
    ("EXTRACTED_VALIDATED", "FAILED_STAGE_VALIDATION"), ("PUBLISHED", "SUCCESS"), ("CREATED", "TIMED_OUT"),
])
def test_refused_fail_pairs(stack, flow, life, db, expected, fail):
    run = small_run()
    flow.create(run)
    d = life.fail(run, expected, fail)
    assert d["outcome"] == "REJECTED" and d["code"] == "FAIL_TRANSITION_NOT_ALLOWED" and d["changed"] is False
    assert status(db, run) == "CREATED"


def test_fail_pair_for_another_status_is_run_status_mismatch(stack, flow, life, db):
    run, _ = published(flow, life, db)
    d = life.fail(run, "STAGE_VALIDATING", "FAILED_STAGE_VALIDATION")
    assert d["code"] == "RUN_STATUS_MISMATCH" and d["runStatus"] == "PUBLISHED"


def test_publish_unknown_blocks_the_key_until_an_operator_resolves_it(stack, flow, life, db):
    run, token = publishing(flow, life, db)
    r = life.publish_result(run, token, "PUBLISH_UNKNOWN", message="hive session lost")
    assert r["runStatus"] == "PUBLISH_UNKNOWN"
    db.execute("SELECT error_stage, error_code, completed_at FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
    assert db.fetchone() == ("PUBLISH", "PUBLISH_UNKNOWN", None)
    blocked = new_run(partitions=2, empty=(), business_key=run.business_key)
    d = flow.create(blocked)
    assert d["outcome"] == "REJECTED" and d["code"] == "DUPLICATE_ACTIVE_RUN"

    refused = stack.loadctl("resolve-publish-unknown", run.run_id, "--as", "PUBLISHED", check=False)
    assert refused.returncode == 1 and status(db, run) == "PUBLISH_UNKNOWN"
    done = stack.loadctl("resolve-publish-unknown", run.run_id, "--as", "FAILED_PUBLISH",
                         "--reason", "hive history shows the query was never submitted", check=False)
    assert done.returncode == 0, done.stderr
    db.execute("SELECT status, error_code, error_message FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
    assert db.fetchone() == ("FAILED_PUBLISH", "PUBLISH_UNKNOWN_RESOLVED",
                             "hive history shows the query was never submitted")
    admitted = new_run(partitions=2, empty=(), business_key=run.business_key)
    d = flow.create(admitted)
    assert d["outcome"] == "ACCEPTED" and d["runStatus"] == "CREATED"
