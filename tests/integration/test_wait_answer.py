"""The contract's answer after a wait (issue 7 item 10, docs/contract.md K§6).

An event whose run exists but is still earlier on its forward path than the status the event
needs is deferred (its earlier event may not be applied yet). When loop.prerequisite_wait (3 s
here) passes and the run still has not got there, the event gets the contract's business answer
for the run's current status, a reply, not a dead letter:

- RunSuccess on STAGING_VALIDATED: success=false, reasons ["RUN_STATUS STAGING_VALIDATED"] (§5.10 step 3);
- StageValidated on EXTRACTED_VALIDATED: stageValidated=false, reasons ["RUN_STATUS ..."] (§5.9 step 3);
- StageValidated on STAGE_VALIDATING with no STAGING metric stored: GATE_BLOCKED, ["NO_METRICS"];
- RunFailure expecting EXTRACTING on a CREATED run: RUN_STATUS_MISMATCH with runStatus (§5.6 check 4);
- TARGET metrics on STAGING_VALIDATED: RUN_STATUS_MISMATCH, details {runStatus, stage} (§5.8 step 2);
- a publish claim on STAGE_VALIDATING: claimed=false (§5.13 step 3);
- a validation start of an EXTRACTING run whose dispatch is not in the ledger: DISPATCH_MISMATCH
  (§5.7), or started once the chunks complete the run within the wait;
- a publish result while no publish token was ever granted: PUBLISH_TOKEN_MISMATCH (§5.14 step 2);
- a claim, chunk or partition failure for a run still CREATED (no manifest): PARTITION_NOT_FOUND (§5.3-§5.5).

Dead letters stay for what never appeared: an unknown run, a claim token never granted.

The services run on topics, groups and a database of their own (llsim.drills.Isolated) with the
short wait, so the deferrals hold no partition of the other tests.
"""
import time
import uuid

import pytest

from conftest import new_run
from llsim.drills import Isolated, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.lifecycle import Lifecycle, staging_metrics, target_metrics
from llsim.probe import answers, post_many
from llsim.stack import SERVICES

WAIT_S = 3
LOOP = {"loop.prerequisite_wait": "PT%dS" % WAIT_S, "loop.retry_backoff_max": "PT0.5S"}


@pytest.fixture(scope="module")
def iso():
    i = Isolated("wait")
    for s in ("registrar", "claimer", "completion"):
        i.stack.extra[s].update(LOOP)
    for s in SERVICES:
        i.stack.start(s)
    yield i
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


@pytest.fixture(scope="module")
def nifi(iso):
    return Nifi(iso.bootstrap, iso.prefix)


@pytest.fixture
def flow(nifi):
    f = Flow(nifi)
    yield f
    f.close()


@pytest.fixture
def life(flow):
    return Lifecycle(flow)


@pytest.fixture
def db(iso):
    c = iso.stack.db()
    yield c.cursor()
    c.close()


def status(db, run):
    db.execute("SELECT status, version_no FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
    return db.fetchone()


def dead_letters(db, run_id):
    db.execute("SELECT count(*) FROM nifi_ops.load_event WHERE event_name = 'DEAD_LETTER' AND run_id = %s",
               (run_id,))
    return db.fetchone()[0]


def extracted(flow):
    run = new_run(partitions=2, empty=())
    dispatch = flow.to_extracted(run)["commands"][0]["dispatchId"]
    return run, dispatch


def timed(fn, *args):
    t0 = time.time()
    out = fn(*args)
    return out, time.time() - t0


def test_run_level_events_get_the_business_answer_after_the_wait(iso, flow, life, db):
    staged, d1 = extracted(flow)
    assert life.start_validation(staged, d1)["started"] is True
    assert life.metrics(staged, "STAGING", staging_metrics(staged))["outcome"] == "ACCEPTED"
    assert life.stage_validated(staged)["stageValidated"] is True
    validated, _d2 = extracted(flow)  # EXTRACTED_VALIDATED: nobody starts its validation
    validating, d3 = extracted(flow)
    assert life.start_validation(validating, d3)["started"] is True
    before = {r.run_id: status(db, r) for r in (staged, validated, validating)}

    success, waited = timed(life.success, staged)
    assert (success["outcome"], success["code"], success["success"], success["runStatus"], success["reasons"]) == (
        "REJECTED", "RUN_STATUS_MISMATCH", False, "STAGING_VALIDATED", ["RUN_STATUS STAGING_VALIDATED"]), success
    assert waited >= WAIT_S - 0.5, "answered after the wait, not at once (%.1fs)" % waited

    target = life.metrics(staged, "TARGET", target_metrics(staged))
    assert (target["outcome"], target["code"], target["runStatus"], target["recorded"], target["details"]) == (
        "REJECTED", "RUN_STATUS_MISMATCH", "STAGING_VALIDATED", 0,
        {"runStatus": "STAGING_VALIDATED", "stage": "TARGET"}), target

    sv = life.stage_validated(validated)
    assert (sv["outcome"], sv["code"], sv["stageValidated"], sv["runStatus"], sv["reasons"]) == (
        "REJECTED", "RUN_STATUS_MISMATCH", False, "EXTRACTED_VALIDATED", ["RUN_STATUS EXTRACTED_VALIDATED"]), sv

    # STAGE_VALIDATING with no STAGING metric stored: the metrics may still come (another topic);
    # after the wait the gate's answer, NO_METRICS (§5.9 step 4)
    sv, waited = timed(life.stage_validated, validating)
    assert (sv["outcome"], sv["code"], sv["stageValidated"], sv["runStatus"], sv["reasons"]) == (
        "REJECTED", "GATE_BLOCKED", False, "STAGE_VALIDATING", ["NO_METRICS"]), sv
    assert waited >= WAIT_S - 0.5, "answered after the wait, not at once (%.1fs)" % waited

    _token, pc = life.claim_publish(validating)
    assert (pc["outcome"], pc["code"], pc["claimed"], pc["runStatus"]) == (
        "REJECTED", "RUN_STATUS_MISMATCH", False, "STAGE_VALIDATING"), pc
    pr = life.publish_result(staged, str(uuid.uuid4()))
    assert (pr["outcome"], pr["code"], pr["changed"], pr["runStatus"]) == (
        "REJECTED", "PUBLISH_TOKEN_MISMATCH", False, "STAGING_VALIDATED"), pr

    # answers, not dead letters; and nothing changed
    for r in (staged, validated, validating):
        assert dead_letters(db, r.run_id) == 0
        assert status(db, r) == before[r.run_id]
    db.execute("SELECT count(*) FROM nifi_ops.load_validation WHERE run_id = %s AND stage = 'TARGET'",
               (staged.run_id,))
    assert db.fetchone()[0] == 0


def test_events_of_a_run_without_its_manifest_are_answered_after_the_wait(iso, flow, life, db):
    run = new_run()
    assert flow.create(run)["runStatus"] == "CREATED"  # the manifest never comes
    before = status(db, run)

    failure = life.fail(run, "EXTRACTING", "FAILED_EXTRACT", stage="PG-10")
    assert (failure["outcome"], failure["code"], failure["changed"], failure["runStatus"]) == (
        "REJECTED", "RUN_STATUS_MISMATCH", False, "CREATED"), failure
    assert failure["details"]["runStatus"] == "CREATED", failure

    token = str(uuid.uuid4())
    sent = post_many(flow.nifi, [dict(logical="partition-claims", record=run.claim("0000", token=token)),
                                 dict(logical="chunks", record=run.chunk("0000", 0, 3, 5000, token=token)),
                                 dict(logical="partition-failures", record=run.partition_failure("0000", token=token))])
    claim, chunk, pfail = answers(flow, sent)
    assert (claim["outcome"], claim["code"], claim["claimed"], claim["runStatus"]) == (
        "REJECTED", "PARTITION_NOT_FOUND", False, "CREATED"), claim
    assert (chunk["outcome"], chunk["code"], chunk["recorded"], chunk["runStatus"]) == (
        "REJECTED", "PARTITION_NOT_FOUND", False, "CREATED"), chunk
    assert (pfail["outcome"], pfail["code"], pfail["changed"], pfail["runStatus"]) == (
        "REJECTED", "PARTITION_NOT_FOUND", False, "CREATED"), pfail
    assert dead_letters(db, run.run_id) == 0
    assert status(db, run) == before


# loadledger's namespace of derived ids (common/src/rules/uuid5.c) and the validate-run
# command's name in it (common/src/core/ledger.c ll_validate_dispatch_id)
LL_UUID_NAMESPACE = uuid.UUID("7eaec1d8-c2fc-466e-8a95-850016384688")


def test_a_validation_start_before_its_run_completed_waits_for_the_dispatch(iso, flow, life, db):
    """docs/design.md §5: after a database loss the chunks that completed a run can be read again
    after the validation start that answered its validate-run command. The start of a run still
    EXTRACTING whose dispatch is not in the ledger waits: it is applied when the chunks complete
    the run (started=true, the same dispatch id: a name-based UUID of the run), and answered
    DISPATCH_MISMATCH only after the wait when they never do (ad15e70 answered DISPATCH_MISMATCH
    at once)."""
    run = new_run(partitions=2, empty=())
    flow.create(run)
    flow.register(run)
    flow.claim_all(run)
    dispatch = str(uuid.uuid5(LL_UUID_NAMESPACE, "VALIDATE_RUN/%s" % run.run_id.lower()))
    flow.nifi.send("validation-starts", {"runId": run.run_id, "dispatchId": dispatch, "node": "nifi-node-2"})
    flow.nifi.flush()
    time.sleep(1.0)  # the start is read first, and deferred
    flow.r["validation-start-decisions"].drain(0.2)
    early = [r for r in flow.r["validation-start-decisions"].records if r["value"]["runId"] == run.run_id]
    assert not early, "answered before its run completed: %s" % early
    flow.extract_all(run)
    command = flow.validate_commands(run)[0]
    assert command["dispatchId"] == dispatch, command
    start = flow.reply("validation-start-decisions", run.run_id)[0]
    assert (start["outcome"], start["started"], start["runStatus"]) == ("ACCEPTED", True, "STAGE_VALIDATING"), start

    # a dispatch id that is not the run's: after the wait, the contract's answer (§5.7)
    other = new_run(partitions=2, empty=())
    flow.create(other)
    flow.register(other)
    flow.claim_all(other)
    ghost, waited = timed(life.start_validation, other, str(uuid.uuid4()))
    assert (ghost["outcome"], ghost["code"], ghost["started"], ghost["runStatus"]) == (
        "REJECTED", "DISPATCH_MISMATCH", False, "EXTRACTING"), ghost
    assert waited >= WAIT_S - 0.5, "answered after the wait, not at once (%.1fs)" % waited
    assert dead_letters(db, run.run_id) == 0 and dead_letters(db, other.run_id) == 0


def test_what_never_appeared_is_still_a_dead_letter(iso, flow, life, db):
    # an unknown run: its success report waits, then is dead-lettered (no answer)
    ghost = new_run()
    flow.nifi.send("run-successes", {"runId": ghost.run_id, "targetCount": None})
    # a claim token never granted on a claimable partition (run EXTRACTING, partition PENDING)
    run = new_run()
    flow.create(run)
    flow.register(run)
    flow.nifi.send("chunks", run.chunk("0003", 0, 3, 5000, token=str(uuid.uuid4())))
    flow.nifi.flush()
    wait_until(lambda: dead_letters(db, ghost.run_id) == 1 and dead_letters(db, run.run_id) == 1, 60,
               "the two dead letters")
    db.execute("SELECT error_code FROM nifi_ops.load_event WHERE event_name = 'DEAD_LETTER' AND run_id IN (%s, %s)",
               (ghost.run_id, run.run_id))
    assert [r[0] for r in db.fetchall()] == ["PREREQUISITE_TIMEOUT"] * 2
    flow.r["chunk-outcomes"].drain(1.0)
    assert not [r for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id]
    assert not [r for r in flow.r["run-success-outcomes"].records if r["value"]["runId"] == ghost.run_id]
