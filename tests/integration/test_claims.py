"""Partition claims (docs/contract.md §5.3, docs/contract.md K§4 and K§6) on the real broker and database:
the work order of a granted claim, same-token retries, refusals with their codes, the claim-token
history, a new claim of a reissued (RETRY) partition, and a claim read before its manifest."""
import uuid

from conftest import new_run, one, rows
from llsim.probe import admit, admit_many, answer, ask, ask_many, log_size, post, replies_to, wait_log
from llsim.scenario import SCN

WORK_ORDER = ("jobKey", "businessKey", "snapshotScn", "hdfsRunPath", "lowerBound", "upperBound",
              "upperInclusive", "isNullPartition", "expectedRowCount")


def part(db, run, pid):
    db.execute("SELECT status, claim_token::text, worker_node, attempt_count, started_at, heartbeat_at"
               " FROM nifi_ops.load_partition WHERE run_id = %s AND partition_id = %s", (run.run_id, pid))
    return db.fetchone()


def history(db, run, pid):
    return rows(db, "SELECT claim_token::text, attempt_no, worker_node FROM nifi_ops.load_claim_token"
                " WHERE run_id = %s AND partition_id = %s ORDER BY attempt_no", run.run_id, pid)


def refused(c, code, run_status, part_status, attempt):
    assert (c["outcome"], c["code"], c["claimed"]) == ("REJECTED", code, False), c
    assert (c["runStatus"], c["partitionStatus"], c["attempt"]) == (run_status, part_status, attempt), c
    assert all(c[k] in (None, False) for k in WORK_ORDER), "a refused claim carries no work order: %s" % c


def test_granted_claim_carries_the_work_order_and_is_recorded(stack, flow, db):
    run = new_run()
    admit(flow, run)
    first, last = ask_many(flow, "partition-claims", [run.claim("0000", worker="nifi-node-1"),
                                                      run.claim("0007", worker="nifi-node-7")])
    for c, pid, worker, lo, hi, incl in ((first, "0000", "nifi-node-1", "1", "15001", False),
                                         (last, "0007", "nifi-node-7", "105001", "120000", True)):
        assert (c["outcome"], c["code"], c["claimed"], c["attempt"]) == ("ACCEPTED", None, True, 1), c
        assert (c["runStatus"], c["partitionStatus"], c["partitionId"]) == ("EXTRACTING", "RUNNING", pid)
        assert (c["claimToken"], c["workerNode"]) == (run.tokens[pid], worker)
        assert {k: c[k] for k in WORK_ORDER} == {
            "jobKey": "ORACLE_INSP_DTL_DAILY", "businessKey": run.business_key, "snapshotScn": SCN,
            "hdfsRunPath": run.hdfs_run_path, "lowerBound": lo, "upperBound": hi, "upperInclusive": incl,
            "isNullPartition": False, "expectedRowCount": 15000}
        p = part(db, run, pid)
        assert p[:4] == ("RUNNING", run.tokens[pid], worker, 1) and p[4] is not None
        assert history(db, run, pid) == [(run.tokens[pid], 1, worker)]
    assert rows(db, "SELECT partition_id, details->>'workerNode', details->>'attempt' FROM nifi_ops.load_event"
                " WHERE run_id = %s AND event_name = 'PARTITION_STARTED' ORDER BY partition_id", run.run_id) == [
        ("0000", "nifi-node-1", "1"), ("0007", "nifi-node-7", "1")]
    assert part(db, run, "0001")[:4] == ("PENDING", None, None, 0)


def test_same_token_retry_is_granted_again_without_a_new_attempt(stack, flow, db):
    run = new_run()
    admit(flow, run, claim=["0002"])
    before = part(db, run, "0002")
    # tokens are UUIDs: the same token in upper case is the same token
    again = ask_many(flow, "partition-claims", [run.claim("0002"),
                                                run.claim("0002", token=run.tokens["0002"].upper())])
    for c in again:
        assert c["claimToken"] == run.tokens["0002"]
        assert (c["outcome"], c["code"], c["claimed"], c["attempt"]) == ("REPLAY", None, True, 1), c
        assert (c["runStatus"], c["partitionStatus"]) == ("EXTRACTING", "RUNNING")
        assert (c["snapshotScn"], c["lowerBound"], c["expectedRowCount"]) == (SCN, "30001", 15000)
    after = part(db, run, "0002")
    # a replay writes nothing: token, worker, attempt 1, started_at and the heartbeat unchanged (a
    # replayed claim of a worker that died must not keep its partition alive for the sweeper)
    assert after == before
    assert history(db, run, "0002") == [(run.tokens["0002"], 1, "nifi-node-1")]
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'PARTITION_STARTED'",
               run.run_id) == 1


def test_another_token_on_a_running_partition_is_claim_mismatch(stack, flow, db):
    run = new_run()
    admit(flow, run, claim=["0001"])
    other = str(uuid.uuid4())
    c = ask(flow, "partition-claims", run.claim("0001", token=other, worker="nifi-node-9"))
    refused(c, "CLAIM_MISMATCH", "EXTRACTING", "RUNNING", 1)
    assert (c["claimToken"], c["workerNode"]) == (other, "nifi-node-9")
    assert part(db, run, "0001")[:4] == ("RUNNING", run.tokens["0001"], "nifi-node-1", 1)
    assert history(db, run, "0001") == [(run.tokens["0001"], 1, "nifi-node-1")]


def test_claim_on_a_finished_partition_is_partition_status_mismatch(stack, flow, db):
    run = new_run()
    admit(flow, run, claim=["0003"])
    done = ask_many(flow, "chunks", run.chunks("0003"))
    assert done[-1]["partitionStatus"] == "SUCCESS"
    out = ask_many(flow, "partition-claims", [
        run.claim("0005", token=str(uuid.uuid4())),   # empty partition: SUCCESS since the manifest
        run.claim("0003", token=str(uuid.uuid4())),   # extracted partition
        run.claim("0003"),                            # even its own owner: not RUNNING any more
    ])
    refused(out[0], "PARTITION_STATUS_MISMATCH", "EXTRACTING", "SUCCESS", 0)
    refused(out[1], "PARTITION_STATUS_MISMATCH", "EXTRACTING", "SUCCESS", 1)
    refused(out[2], "PARTITION_STATUS_MISMATCH", "EXTRACTING", "SUCCESS", 1)
    assert part(db, run, "0005")[:4] == ("SUCCESS", None, None, 0)
    assert part(db, run, "0003")[:4] == ("SUCCESS", run.tokens["0003"], "nifi-node-1", 1)
    assert history(db, run, "0005") == []


def test_claim_on_an_ended_run_is_refused(stack, flow, db):
    failed, invalid, done = new_run(), new_run(), new_run(empty=tuple("%04d" % i for i in range(1, 8)))
    admit_many(flow, [failed, done], claims={failed.run_id: ["0000"], done.run_id: ["0000"]})
    # failed: FAILED_EXTRACT by a partition failure
    f = ask(flow, "partition-failures", failed.partition_failure("0000"))
    assert f["runStatus"] == "FAILED_EXTRACT"
    # done: its one non-empty partition extracted -> EXTRACTED_VALIDATED
    assert ask_many(flow, "chunks", done.chunks("0000"))[-1]["runStatus"] == "EXTRACTED_VALIDATED"
    # invalid: FAILED_MANIFEST (no partition rows at all)
    assert ask(flow, "run-requests", invalid.run_request())["outcome"] == "ACCEPTED"
    assert ask(flow, "manifests", invalid.manifest(plannedPartitionCount=9))["code"] == "MANIFEST_INVALID"

    out = ask_many(flow, "partition-claims", [
        failed.claim("0001"), failed.claim("0000"), done.claim("0001", token=str(uuid.uuid4())),
        invalid.claim("0000")])
    refused(out[0], "RUN_STATUS_MISMATCH", "FAILED_EXTRACT", "PENDING", 0)
    refused(out[1], "RUN_STATUS_MISMATCH", "FAILED_EXTRACT", "FAILED", 1)
    refused(out[2], "RUN_STATUS_MISMATCH", "EXTRACTED_VALIDATED", "SUCCESS", 0)
    # docs/contract.md §5.3 step 1 locks the partition (404) before step 2 looks at the run: a run that
    # failed its manifest has no partitions
    refused(out[3], "PARTITION_NOT_FOUND", "FAILED_MANIFEST", None, 0)
    assert part(db, failed, "0001")[:4] == ("PENDING", None, None, 0)
    assert history(db, failed, "0001") == []
    assert one(db, "SELECT count(*) FROM nifi_ops.load_claim_token WHERE run_id = %s", invalid.run_id) == 0


def test_unknown_partition_and_refused_run(stack, flow, db):
    run, blocked = new_run(), None
    admit(flow, run)
    blocked = new_run(business_key=run.business_key)  # refused: the first run is active
    d = ask(flow, "run-requests", blocked.run_request())
    assert d["code"] == "DUPLICATE_ACTIVE_RUN"
    c = run.claim("0000")
    out = ask_many(flow, "partition-claims", [dict(c, partitionId="0099"), blocked.claim("0000")])
    refused(out[0], "PARTITION_NOT_FOUND", "EXTRACTING", None, 0)
    refused(out[1], "RUN_NOT_FOUND", None, None, 0)
    assert one(db, "SELECT count(*) FROM nifi_ops.load_claim_token WHERE run_id = %s", run.run_id) == 0


def test_new_claim_of_a_reissued_partition_and_a_replayed_old_claim(stack, flow, db):
    """RETRY is what the sweeper's reissue leaves (docs/contract.md §3.2), written here by hand with a
    REISSUE_PARTITION dispatch already SENT. A new token claims it (attempt 2, ACK of the
    dispatch, started_at kept); the superseded token is refused, also when its claim is replayed
    while the partition is RETRY (docs/contract.md K§1: a replay never changes a correct ledger)."""
    run = new_run()
    admit(flow, run, claim=["0004"])
    old = run.tokens["0004"]
    started = part(db, run, "0004")[4]
    db.execute("UPDATE nifi_ops.load_partition SET status = 'RETRY', claim_token = NULL, worker_node = NULL,"
               " error_code = 'HEARTBEAT_STALE', error_message = 'reset by sweeper for reissue'"
               " WHERE run_id = %s AND partition_id = '0004'", (run.run_id,))
    dispatch = str(uuid.uuid4())
    db.execute("INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, partition_id, status,"
               " attempt_count, sent_at) VALUES (%s, %s, 'REISSUE_PARTITION', '0004', 'SENT', 1, clock_timestamp())",
               (dispatch, run.run_id))

    replayed = ask(flow, "partition-claims", run.claim("0004", token=old))
    refused(replayed, "CLAIM_MISMATCH", "EXTRACTING", "RETRY", 1)
    assert part(db, run, "0004")[:4] == ("RETRY", None, None, 1)

    new = str(uuid.uuid4())
    c = ask(flow, "partition-claims", run.claim("0004", token=new, worker="nifi-node-2"))
    assert (c["outcome"], c["claimed"], c["attempt"], c["partitionStatus"]) == ("ACCEPTED", True, 2, "RUNNING"), c
    p = part(db, run, "0004")
    assert p[:4] == ("RUNNING", new, "nifi-node-2", 2) and p[4] == started
    assert one(db, "SELECT error_code FROM nifi_ops.load_partition WHERE run_id = %s AND partition_id = '0004'",
               run.run_id) is None
    assert history(db, run, "0004") == [(old, 1, "nifi-node-1"), (new, 2, "nifi-node-2")]
    db.execute("SELECT status, acked_at IS NOT NULL FROM nifi_ops.load_dispatch WHERE dispatch_id = %s", (dispatch,))
    assert db.fetchone() == ("ACKED", True)

    zombie = ask(flow, "partition-claims", run.claim("0004", token=old))
    refused(zombie, "CLAIM_MISMATCH", "EXTRACTING", "RUNNING", 2)
    assert part(db, run, "0004")[:4] == ("RUNNING", new, "nifi-node-2", 2)


def test_claim_read_before_its_manifest_is_deferred_then_granted(stack, flow, db):
    run = new_run()
    assert ask(flow, "run-requests", run.run_request())["outcome"] == "ACCEPTED"
    since = log_size(stack, "claimer-0")
    claim = post(flow.nifi, "partition-claims", run.claim("0006"))
    wait_log(stack, "claimer-0", "message_deferred", since=since,
             pred=lambda r: r.get("offset") == claim.offset and r.get("kafkaPartition") == claim.partition)
    flow.r["claim-decisions"].drain(1.0)
    assert replies_to(flow, claim) == []
    assert ask(flow, "manifests", run.manifest())["outcome"] == "ACCEPTED"
    c = answer(flow, claim)
    assert (c["outcome"], c["claimed"], c["attempt"], c["expectedRowCount"]) == ("ACCEPTED", True, 1, 15000), c
    assert part(db, run, "0006")[:4] == ("RUNNING", run.tokens["0006"], "nifi-node-1", 1)
