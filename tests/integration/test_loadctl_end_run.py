"""`loadctl end-run RUN --reason TEXT [--status EXPECTED]` (issue 41 item 4, docs/contract.md §5.6):
the operator ends a stuck run with the contract's own run failure for its status.

Against the real ledger of scripts/env.sh, as the ll_operator role:
- each of the five §5.6 pairs: the run's status, error triple, completed_at, version and heartbeat,
  one RUN_FAILED event carrying the service's details {stage, from, to} plus who (operator role,
  OS user, host) and why (the reason as message); the partitions and the outbox untouched; the
  same command again is changed=false (§5.6 check 3) and writes nothing;
- the refusals, exit 2 with nothing written: the statuses without a failure exit
  (EXTRACTED_VALIDATED, PUBLISHING, PUBLISH_UNKNOWN) and the ended ones (RUN_STATUS_MISMATCH, with
  the way out the contract gives), --status the run is no longer in (RUN_STATUS_MISMATCH),
  --status without a failure exit (FAIL_TRANSITION_NOT_ALLOWED, before the run is looked up),
  an unknown run (RUN_NOT_FOUND), a reason out of bounds (INVALID_REASON);
- bounded input: a malformed run id, --status or a missing reason is usage (1);
- with the services running on a ledger and topics of their own (llsim.drills.Isolated): what
  the command prints NiFi will see is what NiFi's next inputs are answered: the flow's own run
  failure of the pair is a REPLAY (changed=false), a claim is not granted, a run input of a later
  stage is RUN_STATUS_MISMATCH naming the new status, and a new run of the business key is admitted.
"""
import json
import os
import pwd
import socket
import subprocess
import uuid

import pytest

from conftest import new_run
from llsim import ledgerfix as lf  # tools/nifisim is on sys.path (conftest.py)
from llsim.drills import Isolated
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.lifecycle import Lifecycle
from llsim.stack import SERVICES, Stack

PAIRS = [("CREATED", "FAILED_MANIFEST"), ("EXTRACTING", "FAILED_EXTRACT"),
         ("STAGE_VALIDATING", "FAILED_STAGE_VALIDATION"), ("STAGING_VALIDATED", "FAILED_PUBLISH"),
         ("PUBLISHED", "FAILED_TARGET_VALIDATION")]


def os_user():
    return os.environ.get("SUDO_USER") or pwd.getpwuid(os.geteuid()).pw_name


def loadctl(stack, *args, env=None, user="ll_operator"):
    """loadctl as `user` on stack's database: (exit code, stdout, stderr)."""
    penv = dict(os.environ)
    penv.update(env or {})
    penv.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    p = subprocess.run([os.path.join(stack.build_dir, "tools", "loadctl"), "--db", stack.conninfo(user)]
                       + list(args), capture_output=True, text=True, env=penv, timeout=60)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def stack():
    s = Stack()
    s.migrate()
    return s


@pytest.fixture
def cur(stack):
    c = stack.db()
    yield c.cursor()
    c.close()


@pytest.fixture
def lc(stack):
    return lambda *a, **kw: loadctl(stack, *a, **kw)


def lcj(lc, *args, **kw):
    rc, out, err = lc(*(args + ("--json",)), **kw)
    return rc, json.loads(out), err


def snapshot(cur, run):
    """Everything end-run may not change besides the run row: partitions, dispatches, events."""
    cur.execute("SELECT partition_id, status, claim_token, heartbeat_at FROM nifi_ops.load_partition"
                " WHERE run_id = %s ORDER BY partition_id", (run,))
    parts = cur.fetchall()
    cur.execute("SELECT dispatch_id, status, attempt_count FROM nifi_ops.load_dispatch WHERE run_id = %s"
                " ORDER BY dispatch_id", (run,))
    return parts, cur.fetchall()


# ---- the five pairs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("expected,fail", PAIRS)
def test_ends_the_run_with_its_pair(lc, cur, expected, fail):
    run = lf.insert_run(cur, expected, heartbeat_ago=3 * 3600)
    if expected == "EXTRACTING":
        lf.insert_partition(cur, run, "0000", status="RUNNING", worker="nifi-node-1")
        lf.insert_partition(cur, run, "0001", status="PENDING")
        lf.insert_dispatch(cur, run, "SENT", dispatch_type="REISSUE_PARTITION", partition_id="0001")
    before = lf.run_row(cur, run)
    side = snapshot(cur, run)
    reason = "INC-4711: source system decommissioned, the load is abandoned"
    rc, doc, err = lcj(lc, "end-run", run, "--reason", reason, env={"SUDO_USER": "night-operator"})
    assert rc == 0, err
    assert (doc["ok"], doc["runId"], doc["runStatus"], doc["previousStatus"], doc["changed"]) == (
        True, run, fail, expected, True), doc
    assert (doc["errorStage"], doc["errorCode"]) == ("OPERATOR", "RUN_ENDED_BY_OPERATOR")
    sees = doc["nifiSees"]
    assert sees[0].startswith("a run failure (%s, %s) from the flow: REPLAY, changed=false" % (expected, fail))
    assert any("new run of the same job and business key: admitted" in s for s in sees)
    assert any(s.startswith("a partition claim: not claimed") for s in sees) == (expected == "EXTRACTING")

    after = lf.run_row(cur, run)
    assert after["status"] == fail
    assert (after["error_stage"], after["error_code"], after["error_message"]) == (
        "OPERATOR", "RUN_ENDED_BY_OPERATOR", reason)
    assert after["completed_at"] is not None
    assert after["version_no"] == before["version_no"] + 1
    assert after["heartbeat_at"] > before["heartbeat_at"]
    for k in ("job_key", "business_key", "publish_token", "published_at", "started_at", "cleaned_at"):
        assert after[k] == before[k], k
    # the service path's writes only: no partition, no dispatch changes (§3.2, §5.6)
    assert snapshot(cur, run) == side
    ev = lf.events(cur, run)
    assert len(ev) == 1, ev
    e = ev[0]
    assert (e["event_name"], e["event_level"], e["error_code"], e["message"]) == (
        "RUN_FAILED", "ERROR", "RUN_ENDED_BY_OPERATOR", reason)
    assert e["details"] == {"stage": "OPERATOR", "from": expected, "to": fail, "operatorRole": "operator",
                            "operatorUser": "night-operator", "host": socket.gethostname()}
    assert (e["job_key"], e["business_key"]) == (before["job_key"], before["business_key"])

    # again, with or without --status: the contract's replay (check 3), nothing written
    for extra in ((), ("--status", expected)):
        rc, doc, err = lcj(lc, "end-run", run, "--reason", "second try of the script", *extra)
        assert rc == 0, err
        assert (doc["runStatus"], doc["previousStatus"], doc["changed"]) == (fail, fail, False), doc
    rc, out, err = lc("end-run", run, "--reason", "second try of the script")
    assert rc == 0 and "is already %s: nothing changed" % fail in out and "NiFi will see:" in out, (out, err)
    assert lf.run_row(cur, run) == after
    assert len(lf.events(cur, run)) == 1


def test_text_output_and_the_os_user(lc, cur):
    run = lf.insert_run(cur, "PUBLISHED", heartbeat_ago=5 * 3600)
    rc, out, err = lc("end-run", run, "--status", "PUBLISHED", "--reason", "PG-60 retired; target checked by hand")
    assert rc == 0, err
    assert out.startswith("run %s: PUBLISHED -> FAILED_TARGET_VALIDATION (error OPERATOR/RUN_ENDED_BY_OPERATOR"
                          % run), out
    assert "NiFi will see:\n  - a run failure (PUBLISHED, FAILED_TARGET_VALIDATION) from the flow: REPLAY" in out
    e, = lf.events(cur, run, "RUN_FAILED")
    assert e["details"]["operatorUser"] == os_user()


# ---- refusals ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("status,hint", [
    ("EXTRACTED_VALIDATED", "no failure exit"),
    ("PUBLISHING", "publish_stale"),
    ("PUBLISH_UNKNOWN", "resolve-publish-unknown"),
    ("SUCCESS", "terminal status is never left"),
    ("TIMED_OUT", "terminal status is never left"),
    ("FAILED_SNAPSHOT_EXPIRED", "terminal status is never left"),
])
def test_refuses_where_the_contract_does(lc, cur, status, hint):
    token = str(uuid.uuid4()) if status in ("PUBLISHING", "PUBLISH_UNKNOWN") else None
    run = lf.insert_run(cur, status, heartbeat_ago=3 * 3600, publish_token=token,
                        completed_ago=60 if status in ("SUCCESS", "TIMED_OUT", "FAILED_SNAPSHOT_EXPIRED") else None)
    before = lf.run_row(cur, run)
    rc, out, err = lc("end-run", run, "--reason", "operator gives up on it")
    assert rc == 2 and out == ""
    assert err.startswith("loadctl: refused: RUN_STATUS_MISMATCH (run is %s: nothing changed" % status), err
    assert hint in err, err
    rc, doc, _ = lcj(lc, "end-run", run, "--reason", "operator gives up on it")
    assert (rc, doc["ok"], doc["exitCode"], doc["code"], doc["details"]) == (
        2, False, 2, "RUN_STATUS_MISMATCH", {"runStatus": status})
    assert lf.run_row(cur, run) == before and lf.events(cur, run) == []


def test_status_guard(lc, cur):
    """--status EXPECTED is the pair's expectedStatus (§5.6): refused when the run moved on, and
    refused before the lookup when the status has no failure exit."""
    run = lf.insert_run(cur, "STAGING_VALIDATED", heartbeat_ago=3 * 3600)
    before = lf.run_row(cur, run)
    rc, doc, err = lcj(lc, "end-run", run, "--status", "STAGE_VALIDATING", "--reason", "stuck in validation")
    assert (rc, doc["code"], doc["details"]) == (
        2, "RUN_STATUS_MISMATCH", {"runStatus": "STAGING_VALIDATED", "expectedStatus": "STAGE_VALIDATING"}), err
    for status in ("PUBLISHING", "EXTRACTED_VALIDATED", "SUCCESS", "FAILED_EXTRACT"):
        for target in (run, str(uuid.uuid4())):  # also for an unknown run: check 1 comes first
            rc, doc, err = lcj(lc, "end-run", target, "--status", status, "--reason", "stuck somewhere")
            assert (rc, doc["code"], doc["details"]) == (
                2, "FAIL_TRANSITION_NOT_ALLOWED", {"expectedStatus": status}), err
    assert lf.run_row(cur, run) == before and lf.events(cur, run) == []
    rc, doc, err = lcj(lc, "end-run", run, "--status", "STAGING_VALIDATED", "--reason", "PG-50 will not claim it")
    assert (rc, doc["runStatus"], doc["changed"]) == (0, "FAILED_PUBLISH", True), err


def test_bounded_input_and_unknown_runs(lc, cur):
    run = lf.insert_run(cur, "EXTRACTING", heartbeat_ago=3 * 3600)
    before = lf.run_row(cur, run)
    for args in ([run], ["not-a-uuid", "--reason", "valid reason"], [run + "0", "--reason", "valid reason"],
                 ["x" * 5000, "--reason", "valid reason"], [run, "--reason", "valid reason", "--status", "extracting"],
                 [run, "--reason", "valid reason", "--status", "S" * 100], [run, "--reason", "valid reason", "extra"]):
        rc, doc, err = lcj(lc, "end-run", *args)
        assert (rc, doc["code"]) == (1, "USAGE"), (args, err)
    for reason, chars in (("shrt", 4), ("", 0), ("x" * 2001, 2001)):
        rc, doc, err = lcj(lc, "end-run", run, "--reason", reason)
        assert (rc, doc["code"], doc["details"]) == (2, "INVALID_REASON", {"chars": chars, "min": 5, "max": 2000})
    assert lf.run_row(cur, run) == before and lf.events(cur, run) == []
    missing = str(uuid.uuid4())
    rc, doc, err = lcj(lc, "end-run", missing.upper(), "--reason", "no such run here")
    assert (rc, doc["code"], doc["details"]) == (2, "RUN_NOT_FOUND", {"runId": missing}), err
    rc, out, err = lc("end-run", "--help")
    assert rc == 0 and out.startswith("usage: loadctl end-run RUN --reason TEXT") and err == ""
    rc, out, _ = lc("--help")
    assert rc == 0 and "end-run" in out


# ---- what NiFi sees, with the services running ------------------------------------------------------------

@pytest.fixture(scope="module")
def iso():
    i = Isolated("endrun")
    for s in SERVICES:
        i.stack.start(s)
    yield i
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


@pytest.fixture(scope="module")
def flow(iso):
    f = Flow(Nifi(iso.bootstrap, iso.prefix))
    yield f
    f.close()


def test_nifi_sees_what_end_run_says(iso, flow):
    life = Lifecycle(flow)
    db = iso.stack.db()
    cur = db.cursor()
    try:
        # EXTRACTING, one partition claimed and never finished: the operator ends it
        run = new_run(partitions=2, empty=())
        assert flow.create(run)["runStatus"] == "CREATED"
        assert flow.register(run)["runStatus"] == "EXTRACTING"
        flow.nifi.send("partition-claims", run.claim("0000"))
        flow.nifi.flush()
        assert flow.reply("claim-decisions", run.run_id)[0]["claimed"] is True
        rc, out, err = loadctl(iso.stack, "end-run", run.run_id, "--status", "EXTRACTING", "--reason",
                               "worker host lost; the load is re-run tomorrow", "--json")
        assert rc == 0, err
        doc = json.loads(out)
        assert (doc["runStatus"], doc["changed"]) == ("FAILED_EXTRACT", True), doc

        # the flow's own report of the pair: the replay end-run promised
        rep = life.fail(run, "EXTRACTING", "FAILED_EXTRACT", stage="PG-20")
        assert (rep["outcome"], rep["changed"], rep["runStatus"]) == ("REPLAY", False, "FAILED_EXTRACT"), rep
        # the other partition's claim: not granted
        flow.nifi.send("partition-claims", run.claim("0001"))
        flow.nifi.flush()
        claim = flow.reply("claim-decisions", run.run_id, pred=lambda v: v["partitionId"] == "0001")[0]
        assert (claim["claimed"], claim["runStatus"]) == (False, "FAILED_EXTRACT"), claim
        # a new run of the same business key is admitted
        again = new_run(business_key=run.business_key)
        assert flow.create(again)["runStatus"] == "CREATED"

        # STAGE_VALIDATING, validation never finished: ended; stage-validated is then refused
        staged = new_run(partitions=2, empty=())
        dispatch = flow.to_extracted(staged)["commands"][0]["dispatchId"]
        assert life.start_validation(staged, dispatch)["started"] is True
        rc, out, err = loadctl(iso.stack, "end-run", staged.run_id, "--reason", "Hive checks cannot run this week")
        assert rc == 0 and "STAGE_VALIDATING -> FAILED_STAGE_VALIDATION" in out, err
        sv = life.stage_validated(staged)
        assert (sv["outcome"], sv["code"], sv["runStatus"]) == (
            "REJECTED", "RUN_STATUS_MISMATCH", "FAILED_STAGE_VALIDATION"), sv

        # nothing of it went to the dead letters; the ledger's own check agrees with the events
        cur.execute("SELECT count(*) FROM nifi_ops.load_event WHERE event_name = 'DEAD_LETTER'"
                    " AND run_id IN (%s, %s)", (run.run_id, staged.run_id))
        assert cur.fetchone()[0] == 0
        rc, out, err = loadctl(iso.stack, "verify", "--json")
        assert rc == 0, (out, err)
    finally:
        cur.close()
        db.close()
