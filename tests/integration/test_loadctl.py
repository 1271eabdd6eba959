"""loadctl, the operator's tool, against the real ledger of scripts/env.sh, connected as the
ll_operator role: every command's success and refusal paths, their exit codes (0 ok, 1 usage,
2 not found / refused, 3 database), the exact ledger effects and the --json outputs.

The ledger states the services would produce are written directly with SQL (llsim.ledgerfix),
each test with job keys or business keys of its own, so the tests can run again on the same
database.
"""
import json
import os
import pwd
import select
import socket
import subprocess
import uuid

import pytest

from llsim import ledgerfix as lf  # tools/nifisim is on sys.path (conftest.py)
from llsim.stack import Stack

DAY = 86400


def os_user():
    return os.environ.get("SUDO_USER") or pwd.getpwuid(os.geteuid()).pw_name


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
    """loadctl as ll_operator; returns (exit code, stdout, stderr)."""
    binary = os.path.join(stack.build_dir, "tools", "loadctl")

    def run(*args, user="ll_operator", env=None, db=None):
        penv = dict(os.environ)
        penv.update(env or {})
        penv.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        p = subprocess.run([binary, "--db", db or stack.conninfo(user)] + list(args), capture_output=True,
                           text=True, env=penv, timeout=60)
        return p.returncode, p.stdout, p.stderr

    return run


def lcj(lc, *args, **kw):
    """loadctl with --json after the command: (exit code, parsed object, stderr)."""
    rc, out, err = lc(*(args + ("--json",)), **kw)
    return rc, json.loads(out), err


def new_job():
    return "LLT3_" + uuid.uuid4().hex[:12].upper()


def publish_unknown_run(cur, **kw):
    return lf.insert_run(cur, "PUBLISH_UNKNOWN", heartbeat_ago=600, publish_started_ago=3 * 3600,
                         publish_token=str(uuid.uuid4()), error_stage="PUBLISH", error_code="PUBLISH_STALE",
                         error_message="no publish result within PT2H", **kw)


# ---- help and usage -----------------------------------------------------------------------------

COMMANDS = ["status", "runs", "show", "monitor", "resolve-publish-unknown", "resend", "cleanup-candidates",
            "cleanup", "migrate", "accept-gap", "end-run"]


@pytest.mark.parametrize("cmd", COMMANDS)
def test_every_command_has_help(lc, cmd):
    rc, out, err = lc(cmd, "--help")
    assert rc == 0, err
    assert out.startswith("usage: loadctl ")
    assert err == ""


def test_help_forms_and_usage_errors(lc):
    rc, out, _ = lc("--help")
    assert rc == 0 and "resolve-publish-unknown" in out and "Exit codes" in out
    rc, out, _ = lc("help", "resend")
    assert rc == 0 and out.startswith("usage: loadctl resend RUN DISPATCH")
    rc, _, err = lc("frobnicate")
    assert rc == 1 and "unknown command" in err
    rc, _, err = lc("runs", "--bogus")
    assert rc == 1 and "unknown option '--bogus'" in err
    rc, _, err = lc("show")
    assert rc == 1 and "usage: loadctl show RUN" in err
    rc, _, err = lc("show", "not-a-uuid")
    assert rc == 1 and "UUID" in err
    rc, doc, _ = lcj(lc, "resend", "x")
    assert rc == 1 and doc["ok"] is False and doc["code"] == "USAGE" and doc["exitCode"] == 1
    rc, doc, err = lcj(lc, "migrate", "--dir", "/nonexistent/ll-migrations")
    assert rc == 1 and doc["code"] == "USAGE" and err.startswith("loadctl: usage: cannot open")


def test_conninfo_sources(stack, lc):
    """--db as key=value or URI, else LOADLEDGER_DB__CONNINFO, else LL_PG_CONNINFO."""
    uri = "postgresql://ll_operator@%s:%d/%s" % (stack.pg["host"], stack.pg["port"], stack.pg["dbname"])
    rc, _, err = lc("runs", "--limit", "1", db=uri)
    assert rc == 0, err
    binary = os.path.join(stack.build_dir, "tools", "loadctl")
    for var in ("LOADLEDGER_DB__CONNINFO", "LL_PG_CONNINFO"):
        env = {k: v for k, v in os.environ.items() if k not in ("LOADLEDGER_DB__CONNINFO", "LL_PG_CONNINFO")}
        env[var] = stack.conninfo("ll_operator")
        p = subprocess.run([binary, "runs", "--limit", "1"], capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 0, (var, p.stderr)
    env = {k: v for k, v in os.environ.items() if k not in ("LOADLEDGER_DB__CONNINFO", "LL_PG_CONNINFO")}
    p = subprocess.run([binary, "runs"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 3 and "no database" in p.stderr


def test_database_unavailable_is_exit_3(lc):
    rc, out, err = lc("runs", db="host=127.0.0.1 port=1 dbname=none user=ll_operator connect_timeout=3")
    assert rc == 3 and "DATABASE_UNAVAILABLE" in err and "\n" not in err.rstrip("\n")
    rc, doc, _ = lcj(lc, "resend", str(uuid.uuid4()), str(uuid.uuid4()),
                     db="host=127.0.0.1 port=1 dbname=none connect_timeout=3")
    assert rc == 3 and doc["code"] == "DATABASE_UNAVAILABLE" and doc["exitCode"] == 3


# ---- runs / status / show -----------------------------------------------------------------------

def test_runs_filters_and_json(lc, cur):
    job = new_job()
    a = lf.insert_run(cur, "EXTRACTING", job=job, expected_partitions=8, started_ago=300)
    b = lf.insert_run(cur, "SUCCESS", job=job, completed_ago=60, started_ago=200)
    c = lf.insert_run(cur, "FAILED_EXTRACT", job=job, completed_ago=30, started_ago=100,
                      error_code="ROW_COUNT_MISMATCH")
    rc, doc, _ = lcj(lc, "runs", "--job", job)
    assert rc == 0
    assert [r["runId"] for r in doc["runs"]] == [c, b, a]  # started_at descending
    rc, doc, _ = lcj(lc, "status", "--job", job, "--status", "FAILED_EXTRACT")
    assert rc == 0 and [r["runId"] for r in doc["runs"]] == [c]
    assert doc["runs"][0]["errorCode"] == "ROW_COUNT_MISMATCH"
    assert doc["runs"][0]["completedAt"].endswith("Z")
    row = lf.run_row(cur, a)
    rc, doc, _ = lcj(lc, "runs", "--job", job, "--business-key", row["business_key"])
    assert [r["runId"] for r in doc["runs"]] == [a]
    assert doc["runs"][0]["expectedPartitionCount"] == 8 and doc["runs"][0]["completedAt"] is None
    rc, doc, _ = lcj(lc, "runs", "--job", job, "--limit", "1")
    assert len(doc["runs"]) == 1
    # the global --json (before the command) still works
    rc, out, _ = lc("--json", "runs", "--job", job)
    assert rc == 0 and len(json.loads(out)["runs"]) == 3
    rc, out, _ = lc("runs", "--job", job)
    assert rc == 0 and a in out and "EXTRACTING" in out
    for bad in (["--status", "DONE"], ["--limit", "0"], ["--limit", "501"], ["--limit", "5x"]):
        rc, _, err = lc("runs", *bad)
        assert rc == 1, bad


def test_show_json_sections(lc, cur):
    run = lf.insert_run(cur, "STAGE_VALIDATING", expected_partitions=2)
    lf.insert_partition(cur, run, "0000", "SUCCESS", actual=15000, attempts=1, worker="w1")
    lf.insert_partition(cur, run, "0001", "SUCCESS", actual=15000, attempts=2, worker="w2")
    lf.insert_metric(cur, run, "TARGET", "TARGET_COUNT", "30000", "30000")
    lf.insert_metric(cur, run, "STAGING", "STAGE_COUNT", "30000", "29999", result="FAIL")
    lf.insert_metric(cur, run, "SOURCE", "AMOUNT_SUM", "12.5", "12.5")
    d = lf.insert_dispatch(cur, run, "ACKED")
    lf.insert_event(cur, run, "STAGE_VALIDATION_STARTED", level="INFO", details={"dispatchId": d})
    rc, doc, _ = lcj(lc, "show", run)
    assert rc == 0
    assert doc["runId"] == run and doc["status"] == "STAGE_VALIDATING"
    assert doc["partitionCounts"] == {"SUCCESS": 2}
    assert [p["partitionId"] for p in doc["partitions"]] == ["0000", "0001"]
    assert doc["partitions"][1]["attemptCount"] == 2
    assert [(m["stage"], m["metricName"]) for m in doc["validations"]] == [
        ("SOURCE", "AMOUNT_SUM"), ("STAGING", "STAGE_COUNT"), ("TARGET", "TARGET_COUNT")]
    assert doc["dispatches"][0]["dispatchId"] == d and doc["dispatches"][0]["status"] == "ACKED"
    assert doc["events"][-1]["name"] == "STAGE_VALIDATION_STARTED"
    assert doc["events"][-1]["details"] == {"dispatchId": d}
    rc, out, _ = lc("show", run)
    assert rc == 0 and "STAGE_COUNT" in out and "0001" in out
    missing = str(uuid.uuid4())
    rc, doc, err = lcj(lc, "show", missing)
    assert rc == 2 and doc["code"] == "RUN_NOT_FOUND" and "not found: RUN_NOT_FOUND" in err


# ---- resolve-publish-unknown (docs/contract.md §5.15) ---------------------------------------------------

def test_resolve_without_valid_reason_changes_nothing(lc, cur):
    """A malformed command line is usage (1); a reason the contract refuses (§5.15: 5..2000
    chars, its 422) is refused (2, INVALID_REASON), as docs/operations.md "loadctl exit codes" says."""
    run = publish_unknown_run(cur)
    before = lf.run_row(cur, run)
    for args in (["--as", "PUBLISHED"],
                 ["--as", "SUCCESS", "--reason", "checked hive"],
                 ["--reason", "checked hive"]):
        rc, _, err = lc("resolve-publish-unknown", run, *args)
        assert rc == 1, (args, err)
        assert err.startswith("loadctl: usage:")
    rc, doc, _ = lcj(lc, "resolve-publish-unknown", run, "--as", "PUBLISHED")
    assert rc == 1 and doc["code"] == "USAGE"
    for reason, chars in (("shrt", 4), ("", 0), ("x" * 2001, 2001), ("\u00e9" * 4, 4)):
        rc, _, err = lc("resolve-publish-unknown", run, "--as", "FAILED_PUBLISH", "--reason", reason)
        assert rc == 2, (reason, err)
        assert err.startswith("loadctl: refused: INVALID_REASON"), err
        rc, doc, _ = lcj(lc, "resolve-publish-unknown", run, "--as", "PUBLISHED", "--reason", reason)
        assert rc == 2 and doc["exitCode"] == 2 and doc["code"] == "INVALID_REASON"
        assert doc["details"] == {"chars": chars, "min": 5, "max": 2000}
    assert lf.run_row(cur, run) == before
    assert lf.events(cur, run) == []
    # the bounds themselves are taken: 5 characters (multi-byte counted as one each)
    rc, doc, err = lcj(lc, "resolve-publish-unknown", run, "--as", "FAILED_PUBLISH", "--reason", "\u00e9" * 5)
    assert rc == 0 and doc["changed"] is True, err


def test_resolve_to_published(lc, cur):
    run = publish_unknown_run(cur)
    before = lf.run_row(cur, run)
    reason = "Hive query hive_20260928_01 committed; TARGET count 105000 = source"
    rc, doc, err = lcj(lc, "resolve-publish-unknown", run, "--as", "PUBLISHED", "--reason", reason)
    assert rc == 0, err
    assert doc == {"ok": True, "runId": run, "runStatus": "PUBLISHED", "changed": True}
    after = lf.run_row(cur, run)
    assert after["status"] == "PUBLISHED"
    assert after["version_no"] == before["version_no"] + 1
    assert after["heartbeat_at"] > before["heartbeat_at"]
    assert after["published_at"] is not None and after["completed_at"] is None
    assert (after["error_stage"], after["error_code"], after["error_message"]) == (None, None, None)
    assert after["publish_token"] == before["publish_token"]
    ev = lf.events(cur, run)
    assert len(ev) == 1
    e = ev[0]
    assert (e["event_name"], e["event_level"], e["message"]) == ("PUBLISH_UNKNOWN_RESOLVED", "WARN", reason)
    assert e["details"]["resolution"] == "PUBLISHED"
    assert e["details"]["operatorRole"] == "operator"
    assert e["details"]["operatorUser"] == os_user()
    assert e["details"]["host"] == socket.gethostname()
    assert e["job_key"] == before["job_key"] and e["business_key"] == before["business_key"]

    # the same resolution again: exit 0, changed=false, nothing written
    rc, doc, _ = lcj(lc, "resolve-publish-unknown", run, "--as", "PUBLISHED", "--reason", "second look")
    assert rc == 0 and doc["changed"] is False and doc["runStatus"] == "PUBLISHED"
    assert lf.run_row(cur, run) == after
    assert len(lf.events(cur, run)) == 1
    # the other resolution now: refused
    rc, doc, err = lcj(lc, "resolve-publish-unknown", run, "--as", "FAILED_PUBLISH", "--reason", "changed my mind")
    assert rc == 2 and doc["code"] == "RUN_STATUS_MISMATCH" and doc["details"] == {"runStatus": "PUBLISHED"}
    assert "refused: RUN_STATUS_MISMATCH (run is PUBLISHED" in err
    assert lf.run_row(cur, run) == after


def test_resolve_to_failed_publish_records_the_sudo_user(lc, cur):
    run = publish_unknown_run(cur)
    before = lf.run_row(cur, run)
    reason = "target partition unchanged (Hive history: query killed before commit)"
    rc, out, err = lc("resolve-publish-unknown", run, "--as", "FAILED_PUBLISH", "--reason", reason,
                      env={"SUDO_USER": "night-operator"})
    assert rc == 0, err
    assert "PUBLISH_UNKNOWN -> FAILED_PUBLISH" in out
    after = lf.run_row(cur, run)
    assert after["status"] == "FAILED_PUBLISH"
    assert after["completed_at"] is not None and after["published_at"] is None
    assert after["error_stage"] == "PUBLISH"
    assert after["error_code"] == "PUBLISH_UNKNOWN_RESOLVED" and after["error_message"] == reason
    assert after["version_no"] == before["version_no"] + 1
    e, = lf.events(cur, run, "PUBLISH_UNKNOWN_RESOLVED")
    assert e["details"]["resolution"] == "FAILED_PUBLISH"
    assert e["details"]["operatorUser"] == "night-operator"


def test_resolve_refuses_other_statuses_and_unknown_runs(lc, cur):
    run = lf.insert_run(cur, "PUBLISHING", publish_token=str(uuid.uuid4()), publish_started_ago=60)
    before = lf.run_row(cur, run)
    rc, out, err = lc("resolve-publish-unknown", run, "--as", "PUBLISHED", "--reason", "looks fine to me")
    assert rc == 2
    assert "loadctl: refused: RUN_STATUS_MISMATCH (run is PUBLISHING" in err
    assert lf.run_row(cur, run) == before and lf.events(cur, run) == []
    missing = str(uuid.uuid4())
    rc, doc, _ = lcj(lc, "resolve-publish-unknown", missing, "--as", "PUBLISHED", "--reason", "looks fine")
    assert rc == 2 and doc["code"] == "RUN_NOT_FOUND"


# ---- resend (docs/contract.md §5.16) --------------------------------------------------------------------

def test_resend_dead_dispatch(stack, lc, cur):
    run = lf.insert_run(cur, "EXTRACTED_VALIDATED", heartbeat_ago=3600)
    d = lf.insert_dispatch(cur, run, "DEAD", attempts=20, last_error="receiver unreachable", next_attempt_ago=600)
    listener = stack.db()
    listener.cursor().execute("LISTEN load_dispatch")
    rc, doc, err = lcj(lc, "resend", run, d)
    assert rc == 0, err
    assert doc["dispatchId"] == d and doc["status"] == "PENDING" and doc["previousStatus"] == "DEAD"
    row = lf.dispatch_row(cur, d)
    assert row["status"] == "PENDING" and row["attempt_count"] == 0 and row["last_error"] is None
    cur.execute("SELECT next_attempt_at > clock_timestamp() - interval '1 minute' FROM nifi_ops.load_dispatch"
                " WHERE dispatch_id = %s", (d,))
    assert cur.fetchone()[0]
    e, = lf.events(cur, run)
    assert (e["event_name"], e["event_level"]) == ("DISPATCH_RESENT", "WARN")
    assert e["details"]["dispatchId"] == d and e["details"]["previousStatus"] == "DEAD"
    assert e["details"]["operatorUser"] == os_user()
    # the dispatcher is woken with the run id
    payloads = []
    for _ in range(20):
        if select.select([listener], [], [], 0.25)[0]:
            listener.poll()
            payloads += [n.payload for n in listener.notifies]
            listener.notifies.clear()
        if run in payloads:
            break
    listener.close()
    assert run in payloads
    # a second resend finds it PENDING: refused, nothing written
    rc, doc, err = lcj(lc, "resend", run, d)
    assert rc == 2 and doc["code"] == "DISPATCH_STATUS_MISMATCH" and doc["details"] == {"status": "PENDING"}
    assert "refused: DISPATCH_STATUS_MISMATCH" in err
    assert len(lf.events(cur, run)) == 1


def test_resend_sent_reissue_dispatch(lc, cur):
    run = lf.insert_run(cur, "EXTRACTING")
    lf.insert_partition(cur, run, "0003", "RETRY", attempts=1)
    d = lf.insert_dispatch(cur, run, "SENT", dispatch_type="REISSUE_PARTITION", partition_id="0003", attempts=3)
    rc, out, err = lc("resend", run, d)
    assert rc == 0, err
    assert "SENT -> PENDING" in out
    assert lf.dispatch_row(cur, d)["status"] == "PENDING"
    e, = lf.events(cur, run, "DISPATCH_RESENT")
    assert e["partition_id"] == "0003" and e["details"]["previousStatus"] == "SENT"


@pytest.mark.parametrize("status", ["PENDING", "ACKED"])
def test_resend_refuses_pending_and_acked(lc, cur, status):
    run = lf.insert_run(cur, "STAGE_VALIDATING")
    d = lf.insert_dispatch(cur, run, status, attempts=2, last_error="x")
    before = lf.dispatch_row(cur, d)
    rc, out, err = lc("resend", run, d)
    assert rc == 2
    assert "loadctl: refused: DISPATCH_STATUS_MISMATCH (dispatch is %s" % status in err
    assert lf.dispatch_row(cur, d) == before and lf.events(cur, run) == []


def test_resend_not_found(lc, cur):
    run = lf.insert_run(cur, "EXTRACTED_VALIDATED")
    other = lf.insert_run(cur, "EXTRACTED_VALIDATED")
    d_other = lf.insert_dispatch(cur, other, "DEAD")
    rc, doc, err = lcj(lc, "resend", run, d_other)
    assert rc == 2 and doc["code"] == "DISPATCH_NOT_FOUND" and "not found: DISPATCH_NOT_FOUND" in err
    assert lf.dispatch_row(cur, d_other)["status"] == "DEAD"
    rc, doc, _ = lcj(lc, "resend", run, str(uuid.uuid4()))
    assert rc == 2 and doc["code"] == "DISPATCH_NOT_FOUND"
    rc, doc, _ = lcj(lc, "resend", str(uuid.uuid4()), d_other)
    assert rc == 2 and doc["code"] == "RUN_NOT_FOUND"
    rc, _, _ = lc("resend", run, "nope")
    assert rc == 1


# ---- cleanup-candidates / cleanup (docs/contract.md §5.17, §5.18) ---------------------------------------

@pytest.fixture
def retention_job(cur):
    """One job with a run of every retention case; returns (job, {name: run id})."""
    job = new_job()
    runs = {
        "success_due": lf.insert_run(cur, "SUCCESS", job=job, completed_ago=4 * DAY),
        "success_young": lf.insert_run(cur, "SUCCESS", job=job, completed_ago=2 * DAY),
        "failed_due": lf.insert_run(cur, "FAILED_EXTRACT", job=job, completed_ago=15 * DAY),
        "failed_young": lf.insert_run(cur, "FAILED_STAGE_VALIDATION", job=job, completed_ago=10 * DAY),
        # no completed_at: the ended time is heartbeat_at
        "timed_out_hb": lf.insert_run(cur, "TIMED_OUT", job=job, heartbeat_ago=20 * DAY),
        "unknown_old": lf.insert_run(cur, "PUBLISH_UNKNOWN", job=job, heartbeat_ago=30 * DAY),
        "active_old": lf.insert_run(cur, "EXTRACTING", job=job, heartbeat_ago=30 * DAY),
        "cleaned": lf.insert_run(cur, "SUCCESS", job=job, completed_ago=9 * DAY, cleaned=True),
    }
    return job, runs


def test_cleanup_candidates_order_and_classes(lc, retention_job):
    job, runs = retention_job
    rc, doc, err = lcj(lc, "cleanup-candidates", "--job", job)
    assert rc == 0, err
    got = [(r["runId"], r["status"], r["retentionClass"]) for r in doc["runs"]]
    assert got == [(runs["timed_out_hb"], "TIMED_OUT", "failed"),
                   (runs["failed_due"], "FAILED_EXTRACT", "failed"),
                   (runs["success_due"], "SUCCESS", "success")]
    first = doc["runs"][0]
    assert first["hdfsRunPath"].endswith("/run_id=" + runs["timed_out_hb"])
    assert first["stageTable"] and first["completedAt"].endswith("Z")
    # shorter retentions (ISO-8601 and seconds) bring the young ones in, never the active ones
    rc, doc, _ = lcj(lc, "cleanup-candidates", "--job", job, "--success-retention", "PT1H",
                     "--failed-retention", str(9 * DAY))
    ids = [r["runId"] for r in doc["runs"]]
    assert ids == [runs["timed_out_hb"], runs["failed_due"], runs["failed_young"], runs["success_due"],
                   runs["success_young"]]
    for name in ("unknown_old", "active_old", "cleaned"):
        assert runs[name] not in ids
    # effective limit = min(--limit, --max-batch)
    rc, doc, _ = lcj(lc, "cleanup-candidates", "--job", job, "--limit", "2")
    assert [r["runId"] for r in doc["runs"]] == [runs["timed_out_hb"], runs["failed_due"]]
    rc, doc, _ = lcj(lc, "cleanup-candidates", "--job", job, "--max-batch", "1")
    assert len(doc["runs"]) == 1 and doc["limit"] == 1
    rc, out, _ = lc("cleanup-candidates", "--job", job)
    assert rc == 0 and runs["success_due"] in out
    for bad in (["--job", "lower_case"], ["--limit", "0"], ["--success-retention", "3 days"],
                ["--failed-retention", "P-1D"], ["--max-batch", "0"], ["--success-retention", "1e999"]):
        rc, _, err = lc("cleanup-candidates", *bad)
        assert rc == 1, (bad, err)


def test_cleanup_records_once(lc, cur, retention_job):
    _, runs = retention_job
    run = runs["success_due"]
    before = lf.run_row(cur, run)
    rc, doc, err = lcj(lc, "cleanup", run, "--dropped-table", "stg_x", "--deleted-path",
                       before["hdfs_run_path"])
    assert rc == 0, err
    assert doc == {"ok": True, "runId": run, "runStatus": "SUCCESS", "changed": True}
    after = lf.run_row(cur, run)
    assert after["cleaned_at"] is not None
    changed = {k for k in after if after[k] != before[k]}
    assert changed == {"cleaned_at"}  # no status, version or heartbeat change
    e, = lf.events(cur, run)
    assert (e["event_name"], e["event_level"]) == ("RUN_CLEANED", "INFO")
    assert e["details"]["droppedTable"] == "stg_x" and e["details"]["deletedPath"] == before["hdfs_run_path"]
    assert e["details"]["operatorUser"] == os_user()
    # twice: changed=false, nothing written
    rc, doc, _ = lcj(lc, "cleanup", run)
    assert rc == 0 and doc["changed"] is False
    assert lf.run_row(cur, run) == after and len(lf.events(cur, run)) == 1
    rc, out, _ = lc("cleanup", run)
    assert rc == 0 and "already cleaned" in out
    # a cleaned run is answered changed=false even when it would not be due (§5.18 step 2)
    rc, doc, _ = lcj(lc, "cleanup", runs["cleaned"], "--success-retention", "P30D")
    assert rc == 0 and doc["changed"] is False
    # the timed-out run without completed_at is due through its heartbeat; no values given
    rc, doc, _ = lcj(lc, "cleanup", runs["timed_out_hb"])
    assert rc == 0 and doc["changed"] is True
    e, = lf.events(cur, runs["timed_out_hb"])
    assert e["details"]["droppedTable"] is None and e["details"]["deletedPath"] is None


def test_cleanup_refusals(lc, cur, retention_job):
    _, runs = retention_job
    for name, status in (("success_young", "SUCCESS"), ("failed_young", "FAILED_STAGE_VALIDATION"),
                         ("unknown_old", "PUBLISH_UNKNOWN"), ("active_old", "EXTRACTING")):
        before = lf.run_row(cur, runs[name])
        rc, doc, err = lcj(lc, "cleanup", runs[name])
        assert rc == 2, name
        assert doc["code"] == "CLEANUP_NOT_DUE" and doc["details"] == {"runStatus": status}
        assert "refused: CLEANUP_NOT_DUE" in err
        assert lf.run_row(cur, runs[name]) == before and lf.events(cur, runs[name]) == []
    run = runs["failed_due"]
    # values the contract refuses (§5.18, its 422) are refusals (2), not usage; nothing recorded
    for args, code in ((["--deleted-path", "/data/stage/../etc"], "INVALID_DELETED_PATH"),
                       (["--deleted-path", "relative/path"], "INVALID_DELETED_PATH"),
                       (["--deleted-path", "/data/st age"], "INVALID_DELETED_PATH"),
                       (["--dropped-table", "t" * 301], "INVALID_DROPPED_TABLE")):
        rc, _, err = lc("cleanup", run, *args)
        assert rc == 2, (args, err)
        assert err.startswith("loadctl: refused: " + code), err
        rc, doc, _ = lcj(lc, "cleanup", run, *args)
        assert rc == 2 and doc["exitCode"] == 2 and doc["code"] == code
    rc, _, err = lc("cleanup", run, "--deleted-path")
    assert rc == 1 and "needs a value" in err
    assert lf.run_row(cur, run)["cleaned_at"] is None
    assert lf.events(cur, run) == []
    rc, doc, _ = lcj(lc, "cleanup", str(uuid.uuid4()))
    assert rc == 2 and doc["code"] == "RUN_NOT_FOUND"


# ---- monitor --once ------------------------------------------------------------------------------

def test_monitor_once_text_and_json(lc, cur):
    job = new_job()
    unknown = publish_unknown_run(cur, job=job)
    extracting = lf.insert_run(cur, "EXTRACTING", job=job, expected_partitions=3, heartbeat_ago=2 * 3600)
    lf.insert_partition(cur, extracting, "0000", "SUCCESS", actual=15000)
    lf.insert_partition(cur, extracting, "0001", "FAILED")
    lf.insert_partition(cur, extracting, "0002", "RUNNING", attempts=1, worker="w9")
    waiting = lf.insert_run(cur, "EXTRACTED_VALIDATED", job=job)
    dead = lf.insert_dispatch(cur, waiting, "DEAD", attempts=20, last_error="HTTP 503")
    lf.insert_dispatch(cur, waiting, "PENDING", dispatch_type="REISSUE_PARTITION", partition_id="0001")
    failed = lf.insert_run(cur, "FAILED_EXTRACT", job=job, completed_ago=3600, error_code="ROW_COUNT_MISMATCH",
                           error_message="files=3 chunkCount=3")
    old_fail = lf.insert_run(cur, "FAILED_EXTRACT", job=job, completed_ago=2 * DAY)
    cleanup_failed = lf.insert_run(cur, "SUCCESS", job=job, completed_ago=5 * DAY)
    lf.insert_event(cur, cleanup_failed, "CLEANUP_FAILED", message="path mismatch", job=job)

    rc, doc, err = lcj(lc, "monitor", "--once", "--job", job)
    assert rc == 0, err
    assert doc["activeRuns"] == {"EXTRACTING": 1, "EXTRACTED_VALIDATED": 1, "PUBLISH_UNKNOWN": 1}
    assert doc["recentRuns"] == {"FAILED_EXTRACT": 1} and doc["recentWindowHours"] == 24
    assert doc["dispatches"] == {"PENDING": 1, "SENT": 0, "DEAD": 1}
    assert doc["cleanupDue"] == 1  # the 5-day-old SUCCESS (P3D); no failure is 14 days old
    kinds = [(a["kind"], a["severity"], a["runId"]) for a in doc["alerts"]]
    assert ("PUBLISH_UNKNOWN", "ERROR", unknown) in kinds
    assert ("DISPATCH_DEAD", "ERROR", waiting) in kinds
    assert ("RUN_FAILED", "ERROR", failed) in kinds
    assert ("RUN_STALE", "WARN", extracting) in kinds
    assert ("CLEANUP_FAILED", "WARN", cleanup_failed) in kinds
    assert all(k[2] != old_fail for k in kinds)  # ended before the 24 h window
    sev = [a["severity"] for a in doc["alerts"]]
    assert sev == sorted(sev)  # ERROR before WARN
    dd = [a for a in doc["alerts"] if a["kind"] == "DISPATCH_DEAD"][0]
    assert dd["dispatchId"] == dead and dd["message"] == "VALIDATE_RUN: HTTP 503"
    rf = [a for a in doc["alerts"] if a["kind"] == "RUN_FAILED"][0]
    assert rf["message"] == "ROW_COUNT_MISMATCH files=3 chunkCount=3"
    by_id = {r["runId"]: r for r in doc["runs"]}
    assert [r["status"] for r in doc["runs"]] == ["EXTRACTING", "EXTRACTED_VALIDATED", "PUBLISH_UNKNOWN"]
    e = by_id[extracting]
    assert (e["expectedPartitionCount"], e["successPartitions"], e["failedPartitions"],
            e["runningPartitions"]) == (3, 1, 1, 1)
    # stale thresholds are options: a long one silences RUN_STALE
    rc, doc, _ = lcj(lc, "monitor", "--once", "--job", job, "--stale", "PT3H")
    assert "RUN_STALE" not in [a["kind"] for a in doc["alerts"]]
    # the selected run's detail
    rc, doc, _ = lcj(lc, "monitor", "--once", "--job", job, "--run", extracting)
    assert [p["partitionId"] for p in doc["run"]["partitions"]] == ["0000", "0001", "0002"]
    rc, out, err = lc("monitor", "--once", "--job", job, "--run", extracting)
    assert rc == 0, err
    assert unknown in out and "PUBLISH_UNKNOWN" in out and "RUN_STALE" in out and "w9" in out
    rc, _, err = lc("monitor", "--json")
    assert rc == 1
    rc, _, err = lc("monitor", "--refresh", "0.5", "--once")
    assert rc == 1
