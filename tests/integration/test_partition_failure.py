"""Partition failure reports (docs/contract.md §5.5) on the real broker and database: the run's failure
status (snapshot errors in any case), replays, token and status checks, a failure after the run
already ended, and no dispatch ever."""
import uuid

from conftest import new_run, one, rows
from llsim.probe import admit_many, ask, ask_many


def run_row(db, run):
    db.execute("SELECT status, error_stage, error_code, error_message, failed_partition_count, completed_at IS NOT NULL,"
               " version_no FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
    return db.fetchone()


def part_row(db, run, pid):
    db.execute("SELECT status, error_code, error_message, completed_at IS NOT NULL, claim_token::text"
               " FROM nifi_ops.load_partition WHERE run_id = %s AND partition_id = %s", (run.run_id, pid))
    return db.fetchone()


def test_failure_reports_fail_the_run_snapshot_errors_expire_it(stack, flow, db):
    cases = [  # (errorCode, errorClass, run status)
        ("ORA-00028", "ORACLE", "FAILED_EXTRACT"),
        ("ORA-01555", "ORACLE", "FAILED_SNAPSHOT_EXPIRED"),
        ("ora-01555", "ORACLE", "FAILED_SNAPSHOT_EXPIRED"),
        ("ORA-08180", "ORACLE", "FAILED_SNAPSHOT_EXPIRED"),
        ("Ora-08180", "ORACLE", "FAILED_SNAPSHOT_EXPIRED"),
        ("ORA-00028", "SNAPSHOT", "FAILED_SNAPSHOT_EXPIRED"),
        ("IO_ERROR", "snapshot", "FAILED_SNAPSHOT_EXPIRED"),
        ("IO_ERROR", "SnapShot", "FAILED_SNAPSHOT_EXPIRED"),
        ("ORA-015550", "SNAPSHOTS", "FAILED_EXTRACT"),   # near misses are plain failures
        ("ORA-1555", "ORACLE", "FAILED_EXTRACT"),
    ]
    runs = [new_run() for _ in cases]
    admit_many(flow, runs, claims={r.run_id: ["0002"] for r in runs})
    reports = [r.partition_failure("0002", code=code, error_class=cls, message="extract of %s failed" % code)
               for r, (code, cls, _) in zip(runs, cases)]
    out = ask_many(flow, "partition-failures", reports)
    for run, (code, cls, status), o in zip(runs, cases, out):
        assert (o["outcome"], o["code"], o["changed"]) == ("ACCEPTED", None, True), (code, cls, o)
        assert (o["partitionStatus"], o["runStatus"], o["partitionId"], o["claimToken"]) == (
            "FAILED", status, "0002", run.tokens["0002"]), (code, cls, o)
        msg = "extract of %s failed" % code
        assert part_row(db, run, "0002") == ("FAILED", code, msg, True, run.tokens["0002"])
        assert run_row(db, run)[:6] == (status, "EXTRACT", code, msg, 1, True), (code, cls)
        assert rows(db, "SELECT event_name, event_level, partition_id, error_class, error_code, message,"
                    " details->>'stage', details->>'attempt' FROM nifi_ops.load_event WHERE run_id = %s"
                    " AND event_name IN ('PARTITION_FAILED', 'RUN_FAILED') ORDER BY event_name", run.run_id) == [
            ("PARTITION_FAILED", "ERROR", "0002", cls, code, msg, "EXTRACT", "1"),
            ("RUN_FAILED", "ERROR", "0002", cls, code, "partition 0002: " + msg, None, None)]
        # the sibling partitions keep their status (docs/contract.md §3.2)
        assert one(db, "SELECT count(*) FROM nifi_ops.load_partition WHERE run_id = %s AND status = 'PENDING'",
                   run.run_id) == 6
        assert one(db, "SELECT count(*) FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id) == 0


def test_second_report_is_a_replay_and_later_failures_change_only_the_partition(stack, flow, db):
    run = new_run()
    admit_many(flow, [run], claims={run.run_id: ["0000", "0001"]})
    first = run.partition_failure("0000")
    a, b, c = ask_many(flow, "partition-failures", [first, first, dict(first, errorCode="ORA-01555")])
    assert (a["outcome"], a["changed"], a["runStatus"]) == ("ACCEPTED", True, "FAILED_EXTRACT")
    for r in (b, c):  # already FAILED: replay, whatever the new report says
        assert (r["outcome"], r["code"], r["changed"], r["partitionStatus"], r["runStatus"]) == (
            "REPLAY", None, False, "FAILED", "FAILED_EXTRACT"), r
    before = run_row(db, run)
    assert before[:6] == ("FAILED_EXTRACT", "EXTRACT", "ORA-00028", "session killed", 1, True)
    # another partition fails after the run ended: only the partition changes (§5.5 step 7)
    late = ask(flow, "partition-failures", run.partition_failure("0001", code="ORA-01555", message="too old"))
    assert (late["outcome"], late["changed"], late["partitionStatus"], late["runStatus"]) == (
        "ACCEPTED", True, "FAILED", "FAILED_EXTRACT")
    assert part_row(db, run, "0001")[:3] == ("FAILED", "ORA-01555", "too old")
    after = run_row(db, run)
    assert after[:4] == before[:4] and after[4] == 2 and after[6] == before[6]
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'RUN_FAILED'",
               run.run_id) == 1
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'PARTITION_FAILED'",
               run.run_id) == 2


def test_wrong_token_and_finished_partition_are_refused(stack, flow, db):
    run = new_run()
    admit_many(flow, [run], claims={run.run_id: ["0000", "0001"]})
    done = ask_many(flow, "chunks", run.chunks("0001"))
    assert done[-1]["partitionStatus"] == "SUCCESS"
    stranger = str(uuid.uuid4())
    out = ask_many(flow, "partition-failures", [
        run.partition_failure("0000", token=stranger),   # RUNNING under another token
        run.partition_failure("0001"),                   # the owner, but the partition succeeded
        run.partition_failure("0005", token=stranger),   # empty partition: SUCCESS, no token at all
        dict(run.partition_failure("0000"), partitionId="0077"),
    ])
    wrong, success, empty, missing = out
    assert (wrong["outcome"], wrong["code"], wrong["changed"], wrong["partitionStatus"], wrong["runStatus"]) == (
        "REJECTED", "CLAIM_MISMATCH", False, "RUNNING", "EXTRACTING"), wrong
    assert (success["outcome"], success["code"], success["changed"], success["partitionStatus"],
            success["runStatus"], success["details"]) == (
        "REJECTED", "PARTITION_STATUS_MISMATCH", False, "SUCCESS", "EXTRACTING", {"partitionStatus": "SUCCESS"}), success
    assert (empty["outcome"], empty["code"], empty["partitionStatus"]) == ("REJECTED", "CLAIM_MISMATCH", "SUCCESS")
    assert (missing["outcome"], missing["code"], missing["partitionStatus"], missing["runStatus"]) == (
        "REJECTED", "PARTITION_NOT_FOUND", None, "EXTRACTING")
    assert part_row(db, run, "0000") == ("RUNNING", None, None, False, run.tokens["0000"])
    assert part_row(db, run, "0001")[:4] == ("SUCCESS", None, None, True)
    assert run_row(db, run)[:6] == ("EXTRACTING", None, None, None, 0, False)
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name LIKE '%%FAILED'",
               run.run_id) == 0


def test_zombie_failure_report_after_a_reissue_is_claim_mismatch(stack, flow, db):
    """A superseded worker's failure report (its token in the history, the partition reissued and
    claimed again) is refused CLAIM_MISMATCH, like its chunk reports: the token is checked before
    the partition status (docs/contract.md §5.5 check 2, §12). The reissue is what the sweeper does
    (docs/contract.md §3.2 RUNNING -> RETRY), written here by hand."""
    run = new_run()
    admit_many(flow, [run], claims={run.run_id: ["0003"]})
    old = run.tokens["0003"]
    db.execute("UPDATE nifi_ops.load_partition SET status = 'RETRY', claim_token = NULL, worker_node = NULL,"
               " error_code = 'HEARTBEAT_STALE', error_message = 'reset by sweeper for reissue'"
               " WHERE run_id = %s AND partition_id = '0003' AND status = 'RUNNING'", (run.run_id,))
    assert db.rowcount == 1
    # while RETRY (nobody owns it) and after the new claim: the zombie is refused the same way
    retry = ask(flow, "partition-failures", run.partition_failure("0003", token=old))
    new = str(uuid.uuid4())
    c = ask(flow, "partition-claims", run.claim("0003", token=new, worker="nifi-node-2"))
    assert (c["outcome"], c["claimed"], c["attempt"]) == ("ACCEPTED", True, 2), c
    running = ask(flow, "partition-failures", run.partition_failure("0003", token=old))
    for z, ps in ((retry, "RETRY"), (running, "RUNNING")):
        assert (z["outcome"], z["code"], z["changed"], z["partitionStatus"], z["runStatus"], z["claimToken"]) == (
            "REJECTED", "CLAIM_MISMATCH", False, ps, "EXTRACTING", old), z
    assert part_row(db, run, "0003") == ("RUNNING", None, None, False, new)
    assert run_row(db, run)[:6] == ("EXTRACTING", None, None, None, 0, False)
