"""Chunk reports (docs/contract.md §5.4) on the real broker and database: every check in its order, the
file row upsert and its replays, the partition gate, and the deferral of a chunk read before its
claim (docs/contract.md K§6). Each reply is matched to its request by source topic/partition/offset.
"""
import uuid

from conftest import new_run, one, rows
from llsim.probe import (admit, admit_many, answer, ask, ask_many, log_events, log_size, post, replies_to,
                         wait_log)

FILE_COLS = ("SELECT chunk_index, fragment_count, hdfs_path, record_count, byte_count, status, written_at,"
             " updated_at FROM nifi_ops.load_file WHERE run_id = %s AND partition_id = %s ORDER BY chunk_index")


def files(db, run, pid):
    return rows(db, FILE_COLS, run.run_id, pid)


def run_row(db, run):
    db.execute("SELECT status, error_stage, error_code, error_message, failed_partition_count,"
               " success_partition_count, completed_at IS NOT NULL FROM nifi_ops.load_run WHERE run_id = %s",
               (run.run_id,))
    return db.fetchone()


def part_row(db, run, pid):
    db.execute("SELECT status, claim_token::text, actual_row_count, file_count, fragment_count, byte_count,"
               " error_code, error_message FROM nifi_ops.load_partition WHERE run_id = %s AND partition_id = %s",
               (run.run_id, pid))
    return db.fetchone()


def test_chunk_index_out_of_range_is_refused_before_any_lookup(stack, flow, db):
    run = new_run()
    admit(flow, run, claim=["0000"])
    ghost = str(uuid.uuid4())  # a run the ledger never heard of: check 1 comes before the lookup
    out = ask_many(flow, "chunks", [
        run.chunk("0000", 3, 3, 5000),
        run.chunk("0000", 7, 1, 5000),
        dict(run.chunk("0000", 1, 1, 10), runId=ghost),
    ])
    for o, idx, cnt in zip(out, (3, 7, 1), (3, 1, 1)):
        assert (o["outcome"], o["code"], o["recorded"]) == ("REJECTED", "CHUNK_INDEX_OUT_OF_RANGE", False), o
        assert (o["runStatus"], o["partitionStatus"], o["receivedChunks"], o["validationScheduled"]) == (None, None, 0, False)
        assert (o["chunkIndex"], o["chunkCount"]) == (idx, cnt)
    assert out[2]["runId"] == ghost
    assert files(db, run, "0000") == []
    assert one(db, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", ghost) == 0
    assert part_row(db, run, "0000")[0] == "RUNNING"


def test_unknown_partition_is_partition_not_found(stack, flow, db):
    run = new_run()
    admit(flow, run, claim=["0000"])
    c = run.chunk("0000", 0, 3, 5000)
    c.update(partitionId="0042", hdfsPath=run.hdfs_run_path + "/part-0042/chunk-00000.parquet")
    o = ask(flow, "chunks", c)
    assert (o["outcome"], o["code"], o["recorded"]) == ("REJECTED", "PARTITION_NOT_FOUND", False), o
    assert (o["runStatus"], o["partitionStatus"], o["partitionId"]) == ("EXTRACTING", None, "0042")
    assert one(db, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id = %s", run.run_id) == 0


def test_token_of_another_owner_is_claim_mismatch(stack, flow, db):
    run = new_run()
    admit(flow, run, claim=["0000"])
    stranger = str(uuid.uuid4())
    out = ask_many(flow, "chunks", [
        run.chunk("0000", 0, 3, 5000, token=stranger),
        # the token check (3) comes before the path check (4)
        run.chunk("0000", 1, 3, 5000, token=stranger, path="/elsewhere/chunk.parquet"),
    ])
    for o in out:
        assert (o["outcome"], o["code"], o["recorded"]) == ("REJECTED", "CLAIM_MISMATCH", False), o
        assert (o["runStatus"], o["partitionStatus"], o["claimToken"]) == ("EXTRACTING", "RUNNING", stranger)
    assert files(db, run, "0000") == []
    assert part_row(db, run, "0000")[:2] == ("RUNNING", run.tokens["0000"])


def test_superseded_token_is_claim_mismatch_at_once(stack, flow, db):
    """A token the history knows but the partition no longer holds (a zombie after a reissue)
    is refused at once, not deferred (docs/contract.md K§6). The reissue is what the sweeper
    will do (docs/contract.md §3.2 RUNNING -> RETRY), written here by hand."""
    run = new_run()
    admit(flow, run, claim=["0000"])
    old = run.tokens["0000"]
    db.execute("UPDATE nifi_ops.load_partition SET status = 'RETRY', claim_token = NULL, worker_node = NULL,"
               " error_code = 'HEARTBEAT_STALE', error_message = 'reset by sweeper for reissue'"
               " WHERE run_id = %s AND partition_id = '0000' AND status = 'RUNNING'", (run.run_id,))
    assert db.rowcount == 1
    new = str(uuid.uuid4())
    c = ask(flow, "partition-claims", run.claim("0000", token=new, worker="nifi-node-2"))
    assert (c["outcome"], c["claimed"], c["attempt"]) == ("ACCEPTED", True, 2), c
    zombie, fresh = ask_many(flow, "chunks", [run.chunk("0000", 0, 3, 5000, token=old),
                                              run.chunk("0000", 1, 3, 5000, token=new)])
    assert (zombie["outcome"], zombie["code"], zombie["partitionStatus"]) == ("REJECTED", "CLAIM_MISMATCH", "RUNNING")
    assert (fresh["outcome"], fresh["code"], fresh["receivedChunks"]) == ("ACCEPTED", None, 1)
    assert [f[0] for f in files(db, run, "0000")] == [1]


def test_path_outside_the_run_or_with_dotdot_is_refused(stack, flow, db):
    run = new_run()
    admit(flow, run, claim=["0000"])
    rp = run.hdfs_run_path
    bad = [
        "/data/stage/OTHER_JOB/run_id=%s/part-0000/chunk-00000.parquet" % run.run_id,  # another job's run path
        rp + "-copy/chunk-00000.parquet",         # a sibling sharing the prefix, not below the run path
        rp,                                       # the run path itself
        rp + "/part-0000/../chunk-00000.parquet",  # '..' inside the run path
        rp + "/../../x/chunk-00000.parquet",       # '..' escaping it
        rp + "/..",
    ]
    out = ask_many(flow, "chunks", [run.chunk("0000", 0, 3, 5000, path=p) for p in bad])
    for o in out:
        assert (o["outcome"], o["code"], o["recorded"]) == ("REJECTED", "HDFS_PATH_OUTSIDE_RUN", False), o
        assert (o["runStatus"], o["partitionStatus"]) == ("EXTRACTING", "RUNNING")
    assert files(db, run, "0000") == []
    # any depth below the run path is fine, and '..' inside a name is not a '..' segment
    good = [rp + "/a/b/c/chunk-00000.parquet", rp + "/part..0000/chunk-00001.parquet"]
    out = ask_many(flow, "chunks", [run.chunk("0000", i, 3, 5000, path=p) for i, p in enumerate(good)])
    assert [(o["outcome"], o["receivedChunks"], o["partitionStatus"]) for o in out] == [
        ("ACCEPTED", 1, "RUNNING"), ("ACCEPTED", 2, "RUNNING")]
    assert [(f[0], f[2]) for f in files(db, run, "0000")] == [(0, good[0]), (1, good[1])]


def test_path_of_another_chunk_is_unique_violation(stack, flow, db):
    run = new_run()
    admit(flow, run, claim=["0000", "0001"])
    first = ask(flow, "chunks", run.chunk("0000", 0, 3, 5000))
    assert first["outcome"] == "ACCEPTED"
    taken = run.chunk("0000", 0, 3, 5000)["hdfsPath"]
    out = ask_many(flow, "chunks", [run.chunk("0000", 1, 3, 5000, path=taken),
                                    run.chunk("0001", 0, 3, 5000, path=taken)])
    for o in out:
        assert (o["outcome"], o["code"], o["recorded"]) == ("REJECTED", "UNIQUE_VIOLATION", False), o
        assert o["details"] == {"constraint": "uq_load_file_path"}
        assert (o["runStatus"], o["partitionStatus"]) == ("EXTRACTING", "RUNNING")
    assert [(f[0], f[2]) for f in files(db, run, "0000")] == [(0, taken)]
    assert files(db, run, "0001") == []


def test_same_chunk_twice_is_one_row_and_a_replay(stack, flow, db):
    run = new_run()
    admit(flow, run, claim=["0000"])
    c = run.chunk("0000", 0, 3, 5000)
    a, b, frag = ask_many(flow, "chunks", [c, c, dict(c, fragmentIdentifier="another-fragment-id")])
    assert (a["outcome"], b["outcome"], frag["outcome"]) == ("ACCEPTED", "REPLAY", "REPLAY")
    for o in (a, b, frag):
        assert (o["code"], o["recorded"], o["runStatus"], o["partitionStatus"], o["receivedChunks"],
                o["validationScheduled"]) == (None, True, "EXTRACTING", "RUNNING", 1, False), o
    assert len(files(db, run, "0000")) == 1
    # before the partition succeeded a changed re-report overwrites the row (docs/contract.md §3.3)
    d = ask(flow, "chunks", run.chunk("0000", 0, 3, 4000, byte_count=1234))
    assert (d["outcome"], d["receivedChunks"]) == ("ACCEPTED", 1)
    assert [(f[3], f[4]) for f in files(db, run, "0000")] == [(4000, 1234)]


def test_changed_chunk_after_partition_success_is_chunk_conflict(stack, flow, db):
    run = new_run()
    admit(flow, run, claim=["0000"])
    done = ask_many(flow, "chunks", run.chunks("0000"))
    assert [o["partitionStatus"] for o in done] == ["RUNNING", "RUNNING", "SUCCESS"]
    before_files, before_part = files(db, run, "0000"), part_row(db, run, "0000")
    changed = [
        run.chunk("0000", 0, 3, 4999),                                          # recordCount
        run.chunk("0000", 1, 3, 5000, path=run.hdfs_run_path + "/moved/c1.parquet"),  # path
        run.chunk("0000", 2, 3, 5000, byte_count=1),                             # byteCount
        run.chunk("0000", 0, 4, 5000),                                           # chunkCount
        run.chunk("0000", 3, 4, 5000),                                           # a new chunk
    ]
    out = ask_many(flow, "chunks", changed)
    for o in out:
        assert (o["outcome"], o["code"], o["recorded"]) == ("REJECTED", "CHUNK_CONFLICT", False), o
        assert (o["runStatus"], o["partitionStatus"], o["validationScheduled"]) == ("EXTRACTING", "SUCCESS", False)
    # the whole transaction was rolled back: rows unchanged, even updated_at; no row for index 3
    assert files(db, run, "0000") == before_files
    assert part_row(db, run, "0000") == before_part
    assert before_part[:6] == ("SUCCESS", run.tokens["0000"], 15000, 3, 3, 15000 * 96)
    # an identical re-report is no conflict: REPLAY, and it writes nothing, not even updated_at
    same = ask(flow, "chunks", run.chunk("0000", 1, 3, 5000))
    assert (same["outcome"], same["code"], same["partitionStatus"], same["receivedChunks"]) == ("REPLAY", None, "SUCCESS", 3)
    assert files(db, run, "0000") == before_files


def test_rows_not_matching_expected_fail_partition_and_run(stack, flow, db):
    short, mixed = new_run(), new_run()
    admit_many(flow, [short, mixed], claims={short.run_id: ["0001", "0002"], mixed.run_id: ["0001"]})
    out = ask_many(flow, "chunks", [short.chunk("0001", 0, 3, 5000), short.chunk("0001", 1, 3, 5000),
                                    short.chunk("0001", 2, 3, 4999)])
    assert [(o["outcome"], o["partitionStatus"], o["runStatus"], o["receivedChunks"]) for o in out] == [
        ("ACCEPTED", "RUNNING", "EXTRACTING", 1), ("ACCEPTED", "RUNNING", "EXTRACTING", 2),
        ("ACCEPTED", "FAILED", "FAILED_EXTRACT", 3)]
    assert not any(o["validationScheduled"] for o in out)
    msg = "files=3 chunkCount=3 distinctCounts=1 rows=14999 expected=15000"
    assert part_row(db, short, "0001")[0] == "FAILED"
    assert part_row(db, short, "0001")[6:] == ("ROW_COUNT_MISMATCH", msg)
    assert run_row(db, short) == ("FAILED_EXTRACT", "PARTITION_GATE", "ROW_COUNT_MISMATCH", msg, 1, 1, True)
    assert rows(db, "SELECT event_name, event_level, partition_id, error_code, message FROM nifi_ops.load_event"
                " WHERE run_id = %s AND event_name IN ('PARTITION_FAILED', 'RUN_FAILED') ORDER BY event_name",
                short.run_id) == [("PARTITION_FAILED", "ERROR", "0001", "ROW_COUNT_MISMATCH", msg),
                                  ("RUN_FAILED", "ERROR", "0001", "ROW_COUNT_MISMATCH", msg)]
    assert one(db, "SELECT count(*) FROM nifi_ops.load_dispatch WHERE run_id = %s", short.run_id) == 0
    # a report after the run failed is still recorded while the token matches (for cleanup)
    late = ask(flow, "chunks", short.chunk("0002", 0, 3, 5000))
    assert (late["outcome"], late["recorded"], late["runStatus"], late["partitionStatus"]) == (
        "ACCEPTED", True, "FAILED_EXTRACT", "RUNNING")
    assert len(files(db, short, "0002")) == 1

    # inconsistent chunkCount: every index there and the rows right, but two distinct counts
    out = ask_many(flow, "chunks", [mixed.chunk("0001", 0, 4, 5000), mixed.chunk("0001", 1, 3, 5000),
                                    mixed.chunk("0001", 2, 3, 5000)])
    assert [(o["partitionStatus"], o["runStatus"]) for o in out] == [
        ("RUNNING", "EXTRACTING"), ("RUNNING", "EXTRACTING"), ("FAILED", "FAILED_EXTRACT")]
    msg = "files=3 chunkCount=3 distinctCounts=2 rows=15000 expected=15000"
    assert part_row(db, mixed, "0001")[6:] == ("ROW_COUNT_MISMATCH", msg)
    assert run_row(db, mixed)[:4] == ("FAILED_EXTRACT", "PARTITION_GATE", "ROW_COUNT_MISMATCH", msg)


def test_chunk_read_before_its_claim_is_deferred_then_accepted(stack, flow, db):
    run = new_run()
    admit(flow, run)
    claim = run.claim("0000")  # mints the token NiFi's worker will use; not sent yet
    since = log_size(stack, "completion-0")
    chunk = post(flow.nifi, "chunks", run.chunk("0000", 0, 3, 5000))
    wait_log(stack, "completion-0", "message_deferred", since=since,
             pred=lambda r: r.get("offset") == chunk.offset and r.get("kafkaPartition") == chunk.partition)
    flow.r["chunk-outcomes"].drain(1.0)
    assert replies_to(flow, chunk) == [], "a chunk waiting for its claim must not be answered"
    assert files(db, run, "0000") == []
    c = ask(flow, "partition-claims", claim)
    assert (c["outcome"], c["claimed"]) == ("ACCEPTED", True)
    o = answer(flow, chunk)
    assert (o["outcome"], o["code"], o["recorded"], o["partitionStatus"], o["receivedChunks"]) == (
        "ACCEPTED", None, True, "RUNNING", 1), o
    assert len(replies_to(flow, chunk)) == 1
    assert [f[0] for f in files(db, run, "0000")] == [0]
    assert not [e for e in log_events(stack, "completion-0", "dead_letter", since) if e.get("runId") == run.run_id]


def test_late_identical_rereport_after_completion_is_replay(stack, flow, db):
    run = new_run()
    steps = flow.to_extracted(run)
    assert sum(1 for o in steps["chunks"] if o["validationScheduled"]) == 1
    again = run.chunks("0006") + [run.chunks("0003")[1]]
    out = ask_many(flow, "chunks", again)
    for o in out:
        assert (o["outcome"], o["code"], o["recorded"], o["runStatus"], o["partitionStatus"],
                o["receivedChunks"], o["validationScheduled"]) == (
            "REPLAY", None, True, "EXTRACTED_VALIDATED", "SUCCESS", 3, False), o
    assert one(db, "SELECT count(*) FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id) == 1
    assert one(db, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id = %s", run.run_id) == 21
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'EXTRACT_VALIDATED'",
               run.run_id) == 1
    assert one(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == "EXTRACTED_VALIDATED"


def heartbeats(db, run, pid):
    db.execute("SELECT p.heartbeat_at, r.heartbeat_at, r.version_no FROM nifi_ops.load_partition p"
               " JOIN nifi_ops.load_run r USING (run_id) WHERE p.run_id = %s AND p.partition_id = %s",
               (run.run_id, pid))
    return db.fetchone()


def test_replayed_chunk_and_claim_do_not_keep_a_running_partition_alive(stack, flow, db):
    """Issue 7 item 4: heartbeats move only on real progress by the current owner. A replay of a
    worker's old chunk and claim events (a topic replayed after the worker died) answers REPLAY
    and writes nothing: the RUNNING partition's heartbeat_at stays where the worker left it, so
    the sweeper still sees it stale. The reference refreshes both heartbeats on an identical
    re-report (docs/contract.md §5.4 step 7, §5.3 step 3); docs/design.md §5 records the deviation."""
    run = new_run()
    admit(flow, run, claim=["0004"])
    first = ask(flow, "chunks", run.chunk("0004", 0, 3, 5000))
    assert (first["outcome"], first["partitionStatus"]) == ("ACCEPTED", "RUNNING"), first
    before, rows_before = heartbeats(db, run, "0004"), files(db, run, "0004")
    replays = ask_many(flow, "chunks", [run.chunk("0004", 0, 3, 5000)] * 2)
    claim = ask(flow, "partition-claims", run.claim("0004"))
    assert [o["outcome"] for o in replays] == ["REPLAY", "REPLAY"], replays
    assert (claim["outcome"], claim["claimed"], claim["attempt"]) == ("REPLAY", True, 1), claim
    assert heartbeats(db, run, "0004") == before
    assert files(db, run, "0004") == rows_before
    # real progress by the owner still moves both heartbeats
    nxt = ask(flow, "chunks", run.chunk("0004", 1, 3, 5000))
    assert (nxt["outcome"], nxt["receivedChunks"]) == ("ACCEPTED", 2), nxt
    after = heartbeats(db, run, "0004")
    assert after[0] > before[0] and after[1] > before[1] and after[2] == before[2], (before, after)
