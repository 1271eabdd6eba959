"""The batch is the unit of work, the run the unit of ordering (issue 8 §1, §4), on the real broker
and database, every message of a test on ONE Kafka partition of its topic:

- a run whose chunk waits for its claim holds only its own later events: another run's whole
  extraction on the same Kafka partition is answered meanwhile, and the held run once its claim
  comes; nothing is answered twice;
- a run whose row is locked by someone else (lock timeout) is held the same way;
- completion killed -9 while a run is held with applied messages above it: the committed offset
  stayed below the held message and the done offsets above it travelled as commit metadata, so the
  restarted instance answers the held run once and does not answer the others again;
- a rejection and a dead letter in the middle of a batch roll back alone: the rest commits;
- kill -9 after the database commit of a batch, before its Kafka commit: one reply per input;
- a second instance joining while batches are in flight and a run is held: one reply per input.
"""
import collections
import signal
import threading
import time

import pytest

from conftest import close_clean, new_run
from llsim.drills import hold_run_row, Isolated, RawReader, committed, events, send_to, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi

PART = 1  # the one Kafka partition of the chunks topic every test uses
LOOP = {"loop.prerequisite_wait": "PT120S", "loop.retry_backoff_max": "PT1S", "db.lock_timeout": "PT1S"}


@pytest.fixture
def iso():
    i = Isolated("runholds")
    yield i
    close_clean(i)


def start(st, **completion):
    for s in ("registrar", "claimer", "dispatcher"):
        st.start(s)
    st.start("completion", "completion-0", settings=dict(LOOP, **completion))


def admitted(flow, nifi, *runs, claim=True):
    for run in runs:
        flow.create(run)
        flow.register(run)
        if claim:
            for pid in run.nonempty():
                nifi.send("partition-claims", run.claim(pid))
    nifi.flush()
    if claim:
        for run in runs:
            flow.reply("claim-decisions", run.run_id, count=len(run.nonempty()))


def chunk_replies(flow, run):
    flow.r["chunk-outcomes"].drain(1)
    return [r["value"] for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id]


def once_each(replies):
    c = collections.Counter((v["partitionId"], v["chunkIndex"]) for v in replies)
    return set(c.values()) <= {1}, c


def test_a_held_run_holds_only_its_own_events(iso):
    st = iso.stack
    start(st)
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    try:
        held, other = new_run(), new_run()
        admitted(flow, nifi, other)
        admitted(flow, nifi, held, claim=False)
        # the held run's claim is late: its first chunk comes first, then the other run's flow
        tokens = {pid: held.claim(pid)["claimToken"] for pid in held.nonempty()}
        for c in held.chunks("0000", token=tokens["0000"]):
            send_to(nifi, "chunks", c, partition=PART)
        t0 = time.time()
        for pid in other.nonempty():
            for c in other.chunks(pid):
                send_to(nifi, "chunks", c, partition=PART)
        nifi.flush()
        replies = flow.reply("chunk-outcomes", other.run_id, count=3 * len(other.nonempty()), timeout=60)
        other_s = time.time() - t0
        assert other_s < 20, "the other run waited %.1fs behind the held one" % other_s
        assert {v["outcome"] for v in replies} == {"ACCEPTED"}
        flow.validate_commands(other)
        assert not chunk_replies(flow, held), "the held run was answered before its claim"
        log = st.log_path("completion-0")
        assert [e for e in events(log, "message_deferred") if e.get("runId") == held.run_id]
        # the claim comes: the held run goes on, in its order
        for pid in held.nonempty():
            nifi.send("partition-claims", held.claim(pid, token=tokens[pid]))
        nifi.flush()
        flow.reply("chunk-outcomes", held.run_id, count=3, timeout=60)
        for pid in held.nonempty()[1:]:
            for c in held.chunks(pid, token=tokens[pid]):
                send_to(nifi, "chunks", c, partition=PART)
        nifi.flush()
        flow.validate_commands(held, timeout=90)
        time.sleep(2)
        for run in (held, other):
            ok, c = once_each(chunk_replies(flow, run))
            assert ok and len(c) == 3 * len(run.nonempty()), c
        first = [v["chunkIndex"] for v in chunk_replies(flow, held) if v["partitionId"] == "0000"]
        assert first == [0, 1, 2], "a held run keeps its own order: %s" % first
    finally:
        flow.close()


def test_a_locked_run_does_not_stall_its_partition(iso):
    st = iso.stack
    start(st)
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    try:
        a, b = new_run(), new_run()
        admitted(flow, nifi, a, b)
        locked = threading.Event()
        holder = threading.Thread(target=hold_run_row, args=(st, a.run_id, 20, locked))
        holder.start()
        assert locked.wait(10)
        t0 = time.time()
        send_to(nifi, "chunks", a.chunks("0000")[0], partition=PART)
        for c in b.chunks("0000"):
            send_to(nifi, "chunks", c, partition=PART)
        nifi.flush()
        flow.reply("chunk-outcomes", b.run_id, count=3, timeout=30)
        assert time.time() - t0 < 12, "run B waited for run A's lock on the same Kafka partition"
        assert not chunk_replies(flow, a)
        holder.join()
        [ra] = flow.reply("chunk-outcomes", a.run_id, timeout=60)
        assert ra["outcome"] == "ACCEPTED"
        assert [e for e in events(st.log_path("completion-0"), "db_busy") if e.get("runId") == a.run_id]
    finally:
        flow.close()


def test_crash_while_a_run_is_held_answers_nothing_twice(iso):
    st = iso.stack
    start(st)
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    try:
        held, other = new_run(), new_run()
        admitted(flow, nifi, other)
        admitted(flow, nifi, held, claim=False)
        token = held.claim("0000")["claimToken"]
        send_to(nifi, "chunks", held.chunks("0000", token=token)[0], partition=PART)
        for c in other.chunks("0000") + other.chunks("0001"):
            send_to(nifi, "chunks", c, partition=PART)
        nifi.flush()
        flow.reply("chunk-outcomes", other.run_id, count=6, timeout=60)
        topic = iso.topic("chunks")
        group = iso.groups["completion"]
        # the committed offset stays below the held chunk; the applied ones above it are metadata
        wait_until(lambda: committed(st.bootstrap, group, [topic]).get((topic, PART)) is not None, 30, "commit")
        st.kill("completion-0", signal.SIGKILL)
        # restart (same instance id): the other run's chunks are not answered again
        st.start("completion", "completion-0", settings=LOOP)
        nifi.send("partition-claims", held.claim("0000", token=token))
        nifi.flush()
        flow.reply("chunk-outcomes", held.run_id, timeout=60)
        for c in other.chunks("0002"):
            send_to(nifi, "chunks", c, partition=PART)
        nifi.flush()
        flow.reply("chunk-outcomes", other.run_id, count=9, timeout=60)
        time.sleep(3)
        ok, c = once_each(chunk_replies(flow, other))
        assert ok and len(c) == 9, "answered again after the restart: %s" % c
        hr = chunk_replies(flow, held)
        assert [(v["partitionId"], v["chunkIndex"], v["outcome"]) for v in hr] == [("0000", 0, "ACCEPTED")], hr
    finally:
        flow.close()


def test_a_rejection_and_a_dead_letter_in_a_batch_roll_back_alone(iso):
    st = iso.stack
    for s in ("registrar", "claimer"):
        st.start(s)
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    dlq = RawReader(st.bootstrap, iso.topic("dead-letters"), from_beginning=True)
    try:
        run = new_run()
        admitted(flow, nifi, run)
        good = run.chunks("0000")
        bad_index = run.chunk("0001", 5, 3, 5000)  # chunkIndex >= chunkCount: a business rejection
        send_to(nifi, "chunks", good[0], partition=PART)
        nifi.producer.produce(iso.topic("chunks"), value=b"\xff\xff\xff", key=run.run_id.encode(), partition=PART)
        send_to(nifi, "chunks", bad_index, partition=PART)
        send_to(nifi, "chunks", good[1], partition=PART)
        nifi.flush()
        # completion starts with all four waiting: they come in one batch
        st.start("completion", "completion-0", settings=LOOP)
        replies = flow.reply("chunk-outcomes", run.run_id, count=3, timeout=60)
        by_index = {(v["partitionId"], v["chunkIndex"]): v for v in replies}
        assert by_index[("0000", 0)]["outcome"] == "ACCEPTED"
        assert by_index[("0000", 1)]["outcome"] == "ACCEPTED"
        assert by_index[("0001", 5)]["outcome"] == "REJECTED"
        assert by_index[("0001", 5)]["code"] == "CHUNK_INDEX_OUT_OF_RANGE"
        dlq.wait_for(lambda r: r["headers"].get("ll.error.code") == b"DECODE_FAILED", timeout=30)
        db = st.db()
        cur = db.cursor()
        cur.execute("SELECT partition_id, chunk_index FROM nifi_ops.load_file WHERE run_id = %s ORDER BY 1, 2",
                    (run.run_id,))
        assert cur.fetchall() == [("0000", 0), ("0000", 1)]
        cur.execute("SELECT written_file_count, written_row_count FROM nifi_ops.load_partition"
                    " WHERE run_id = %s AND partition_id = '0000'", (run.run_id,))
        assert cur.fetchone() == (2, 10000)
        db.close()
    finally:
        flow.close()
        dlq.close()


def test_kill_after_the_database_commit_of_a_batch_answers_each_once(iso):
    """kill -9 after the database commit of a whole batch and before its Kafka commit: the
    restarted instance applies the batch again, the ledger already holds it (REPLAY, nothing
    written), and a read_committed reader sees one reply per input."""
    st = iso.stack
    for s in ("registrar", "claimer"):
        st.start(s)
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    db = st.db()
    cur = db.cursor()
    try:
        run = new_run()
        admitted(flow, nifi, run)
        batch = run.chunks("0000") + run.chunks("0001")
        for c in batch:
            send_to(nifi, "chunks", c, partition=PART)
        nifi.flush()
        st.start("completion", "completion-0", settings=dict(LOOP, **{"fault.crash_after_db_commits": 1}))
        assert st.wait_exit("completion-0", timeout=90) == -9
        cur.execute("SELECT partition_id, chunk_index, updated_at FROM nifi_ops.load_file WHERE run_id = %s"
                    " ORDER BY 1, 2", (run.run_id,))
        files = cur.fetchall()
        applied = [(p, i) for p, i, _ in files]
        # the first poll's messages, all in one database transaction (usually the whole batch)
        assert applied and applied == [(c["partitionId"], c["chunkIndex"]) for c in batch][:len(applied)], applied
        assert not chunk_replies(flow, run), "no reply before the Kafka commit"
        st.start("completion", "completion-0", settings=LOOP)
        replies = flow.reply("chunk-outcomes", run.run_id, count=len(batch), timeout=60)
        time.sleep(3)
        ok, c = once_each(chunk_replies(flow, run))
        assert ok and len(c) == len(batch), c
        for v in replies:
            want = "REPLAY" if (v["partitionId"], v["chunkIndex"]) in applied else "ACCEPTED"
            assert v["outcome"] == want, (v, applied)
        cur.execute("SELECT partition_id, chunk_index, updated_at FROM nifi_ops.load_file WHERE run_id = %s"
                    " ORDER BY 1, 2", (run.run_id,))
        again = {(p, i): u for p, i, u in cur.fetchall()}
        assert all(again[(p, i)] == u for p, i, u in files), "the second apply wrote again"
    finally:
        flow.close()
        db.close()


def test_a_rebalance_in_the_middle_of_batches_answers_each_once(iso):
    """A second instance joins the group while the first works through a backlog (its batches
    in flight, a run held): every partition changes hands with its committed offset and done-offset
    metadata, and every input is answered exactly once (read_committed)."""
    st = iso.stack
    for s in ("registrar", "claimer", "dispatcher"):
        st.start(s)
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    try:
        runs = [new_run() for _ in range(6)]
        held = new_run()
        admitted(flow, nifi, *runs)
        admitted(flow, nifi, held, claim=False)
        token = held.claim("0000")["claimToken"]
        send_to(nifi, "chunks", held.chunks("0000", token=token)[0], partition=PART)
        for run in runs:
            for pid in run.nonempty():
                for c in run.chunks(pid):
                    nifi.send("chunks", c)
        nifi.flush()
        st.start("completion", "completion-0", settings=dict(LOOP, **{"loop.batch_max": "20"}))
        wait_until(lambda: len(chunk_replies(flow, runs[0])) + len(chunk_replies(flow, runs[1])) > 0, 60, "work")
        st.start("completion", "completion-1", settings=dict(LOOP, **{"loop.batch_max": "20"}))
        wait_until(lambda: events(st.log_path("completion-1"), "partitions_assigned"), 60, "the second member")
        nifi.send("partition-claims", held.claim("0000", token=token))
        nifi.flush()
        for run in runs:
            flow.validate_commands(run, timeout=120)
        flow.reply("chunk-outcomes", held.run_id, timeout=60)
        time.sleep(3)
        for run in runs:
            ok, c = once_each(chunk_replies(flow, run))
            assert ok and len(c) == 3 * len(run.nonempty()), (run.run_id, c)
        assert [v["outcome"] for v in chunk_replies(flow, held)] == ["ACCEPTED"]
        revoked = events(st.log_path("completion-0"), "partitions_revoked")
        assert revoked, "no rebalance happened"
    finally:
        flow.close()
