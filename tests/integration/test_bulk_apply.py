"""The set-based chunk path answers exactly as the per-message path (issue 8 §2), on the real broker
and database.

One mixed sequence of chunk reports (new files, a changed and a restored file, a path another chunk
holds, a foreign claim token, a path outside the run, identical replays before and after a
partition's gate, an undecodable message, the gates that complete partitions and runs, reports after
the run moved on) is produced, while ll-completion is stopped, to ONE Kafka partition of two
isolated stacks with the same run ids. One stack runs the default loop (the set-based path decides
what it can, the rest goes one by one), the other `loop.db_batch_max=1` (every message one by one,
the reference). Every reply (outcome, code, counts, statuses, in order per run), every ledger row
and the dead letters must be the same; the default stack's debug log must show that the set-based
path applied most of the reports, both logs that each message was decoded once in its batch, and
`loadctl verify` must pass on both.
"""
import uuid

import pytest

from conftest import close_clean, new_run
from llsim.drills import Isolated, RawReader, loadctl_verify, log_lines, send_to, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.scenario import Run

PART = 1
LOOP = {"loop.prerequisite_wait": "PT60S", "log.level": "debug"}
REPLY_FIELDS = ("partitionId", "chunkIndex", "outcome", "code", "recorded", "receivedChunks", "runStatus",
                "partitionStatus", "validationScheduled")


def runs():
    """Four runs of two partitions of 3 chunks each (ids fixed, so both stacks see the same)."""
    return [new_run(partitions=2, empty=()) for _ in range(4)]


def sequence(a, b, c, d):
    """The mixed sequence: ("chunk", record) or ("raw", key) for an undecodable value; run d
    is plain (its first partition's gate passes among the others, its second completes it)."""
    for r in (a, b, c, d):
        for pid in r.nonempty():
            r.claim(pid)  # fixes the tokens
    a0, a1, b0, b1, c0, c1 = (r.chunks(p) for r in (a, b, c) for p in ("0000", "0001"))
    changed = dict(b0[0], recordCount=4999, byteCount=1)
    seq = [a0[0], a0[1], b0[0], changed,
           b.chunk("0000", 1, 3, 5000, path=b0[0]["hdfsPath"]),  # another chunk's path
           a.chunk("0001", 0, 3, 5000, token=str(uuid.uuid4())),  # a token never granted
           a0[2], a0[2],  # the gate of A/0000, then an identical replay after SUCCESS
           c.chunk("0000", 0, 3, 5000, path="/elsewhere/c.parquet"),  # outside the run
           ("raw", c.run_id),
           c0[0], c0[1], c0[1],  # an identical replay of a WRITTEN file
           b0[0], b0[1], b0[2],  # the changed file restored, then B/0000 completes
           a1[0], a1[1], a1[2],  # run A completes
           b1[0], b1[1], b1[2], c0[2], c1[0], c1[1], c1[2],
           a1[2]]  # after run A moved on
    seq += d.chunks("0000") + d.chunks("0001")
    return [("chunk", m) if isinstance(m, dict) else m for m in seq]


def play(iso, seq, settings, n_runs):
    """Admits the runs, produces seq with completion stopped, starts it, returns (replies per run,
    ledger rows, dead-letter codes, the completion log)."""
    st = iso.stack
    for s in ("registrar", "claimer"):
        st.start(s)
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    dlq = RawReader(st.bootstrap, iso.topic("dead-letters"), from_beginning=True)
    try:
        for r in n_runs:
            flow.create(r)
            flow.register(r)
            flow.claim_all(r)
        for kind, m in seq:
            if kind == "raw":
                nifi.producer.produce(iso.topic("chunks"), value=b"\xff\xfe", key=m.encode(), partition=PART)
            else:
                send_to(nifi, "chunks", m, partition=PART)
        nifi.flush()
        st.start("completion", "completion-0", settings=settings)
        out = {}
        for r in n_runs:
            want = sum(1 for kind, m in seq if kind == "chunk" and m["runId"] == r.run_id)
            out[r.run_id] = [tuple(v.get(f) for f in REPLY_FIELDS)
                             for v in flow.reply("chunk-outcomes", r.run_id, count=want, timeout=90)]
        dlq.wait_for(lambda r: True, timeout=30)
        db = st.db()
        cur = db.cursor()
        ledger = {}
        for name, sql in (
                ("files", "SELECT run_id::text, partition_id, chunk_index, fragment_identifier, fragment_count,"
                          " hdfs_path, record_count, byte_count, status FROM nifi_ops.load_file ORDER BY 1, 2, 3"),
                ("partitions", "SELECT run_id::text, partition_id, status, claim_token::text, actual_row_count,"
                               " file_count, byte_count, error_code, written_file_count, written_row_count,"
                               " written_byte_count, written_count_sum, written_count_sumsq"
                               " FROM nifi_ops.load_partition ORDER BY 1, 2"),
                ("runs", "SELECT run_id::text, status, success_partition_count, failed_partition_count, error_code,"
                         " version_no FROM nifi_ops.load_run ORDER BY 1"),
                ("outbox", "SELECT dispatch_id::text, run_id::text, dispatch_type, partition_id, status"
                           " FROM nifi_ops.load_dispatch ORDER BY 1")):
            cur.execute(sql)
            ledger[name] = cur.fetchall()
        db.close()
        dead = sorted(r["headers"].get("ll.error.code") for r in dlq.records)
        rc, checks = loadctl_verify(iso)  # every invariant of the ledger and the topics holds
        assert rc == 0, {k: v for k, v in checks.items() if v.get("violations")}
        return out, ledger, dead, log_lines(st.log_path("completion-0"))
    finally:
        flow.close()
        dlq.close()


@pytest.fixture
def isos():
    made = []
    yield lambda name: made.append(Isolated(name)) or made[-1]
    for i in made:
        close_clean(i)


def test_set_based_path_answers_as_the_per_message_path(isos):
    rs = runs()
    seq = sequence(*rs)
    # the set-based stack commits each batch's Kafka transaction beside the next batch's database
    # work (loop.overlap_commit, the default), the one-by-one stack in line before its next poll:
    # the answers and rows must not change
    bulk = play(isos("bulk"), seq, dict(LOOP, **{"loop.overlap_commit": "true"}), rs)  # share only run ids
    one = play(isos("onebyone"), seq, dict(LOOP, **{"loop.db_batch_max": "1", "loop.overlap_commit": "false"}), rs)
    for r in rs:
        assert bulk[0][r.run_id] == one[0][r.run_id], "replies of run %s differ" % r.run_id
    assert bulk[1] == one[1]
    assert bulk[2] == one[2] == [b"DECODE_FAILED"]
    # the sequence exercised what it is about (in both)
    a, b, c, d = (bulk[0][r.run_id] for r in rs)
    codes = {v[3] for v in a + b + c}
    assert {"UNIQUE_VIOLATION", "CLAIM_MISMATCH", "HDFS_PATH_OUTSIDE_RUN"} <= codes
    assert [v[2] for v in a].count("REPLAY") == 2 and [v[2] for v in c].count("REPLAY") == 1
    assert a[-1][6] == "EXTRACTED_VALIDATED"
    runs_status = {row[0]: row[1] for row in bulk[1]["runs"]}
    assert {runs_status[r.run_id] for r in rs} == {"EXTRACTED_VALIDATED"}
    assert [(v[0], v[1], v[2], v[7]) for v in d] == [("0000", 0, "ACCEPTED", "RUNNING"),
                                                     ("0000", 1, "ACCEPTED", "RUNNING"),
                                                     ("0000", 2, "ACCEPTED", "SUCCESS"),
                                                     ("0001", 0, "ACCEPTED", "RUNNING"),
                                                     ("0001", 1, "ACCEPTED", "RUNNING"),
                                                     ("0001", 2, "ACCEPTED", "SUCCESS")]
    assert d[-1][6] == "EXTRACTED_VALIDATED" and d[-1][8] is True
    # and the default loop applied most reports set-based, the reference none
    def set_based(lines):
        n = 0
        for e in lines:
            if e.get("event") == "batch_done":
                n += int(e["msg"].split(" set-based")[0].split(", ")[-1])
        return n
    assert set_based(bulk[3]) >= 5, "the set-based path applied %d reports" % set_based(bulk[3])
    assert set_based(one[3]) == 0
    # every message is decoded once in its batch (issue 26), also where the set-based part looked
    # at it and left it to the per-message path, or ran again for its run's later messages: this
    # sequence holds nothing (its prerequisites are in the ledger, one instance takes the locks),
    # so each batch's decodes are its messages, the undecodable one included
    def decodes(lines):
        return [(int(e["msg"].split(" messages")[0]), int(e["msg"].split(" set-based")[0].split(", ")[-1]),
                 int(e["msg"].split(" decodes)")[0].split(", ")[-1])) for e in lines if e.get("event") == "batch_done"]
    for name, stack_log in (("set-based", bulk[3]), ("one by one", one[3])):
        per_batch = decodes(stack_log)
        assert per_batch and all(d == n for n, _s, d in per_batch), (name, per_batch)
    assert any(0 < s < n for n, s, _d in decodes(bulk[3])), decodes(bulk[3])  # the set-based part left some
    # each batch's database time and, within it, the time spent waiting for PostgreSQL's answers
    # (ll_db.wait_us; the database figure is whole ms, cut down)
    waits = [(float(e["msg"].split("waiting for answers ")[1].split(" ms")[0]),
              int(e["msg"].split("database ")[1].split(" ms")[0])) for e in bulk[3] if e.get("event") == "batch_done"]
    assert waits and all(0 <= w <= d + 1 for w, d in waits), waits
    assert sum(w for w, _d in waits) > 0, waits
