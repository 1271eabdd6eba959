"""The batch path under rare interleavings (issue 26), on the real broker and database, every
message of a test on ONE Kafka partition of the chunks topic, produced while the completion is
stopped so that they come in one poll:

- §1 a failed set-based retry for one run (its file row locked elsewhere past db.lock_timeout)
  undoes only that retry: another run's chunks, decided before it in the same transaction, are
  not applied and answered a second time;
- §2 a full held queue (loop.max_held) seeks the partition back below messages already held: on
  the refetch those are not held a second time, and each is answered once, in its run's order.

- §4 a prerequisite that never comes: the run's messages share one clock, held or not (those
  that found the held queue full are read again after the pause and wait on it too), so its
  chunks are dead-lettered together after one loop.prerequisite_wait, not one period per message
  or per queue's worth; another run's chunk behind them on the same partition is answered at once.

- §3 a rebalance while a rewind is owed (the database connections cut under load) drops the
  records staged for the next Kafka commit: their messages come again from the committed offsets
  and are answered then; kept, they were committed later without their offsets (a second answer).

- §5 a batch of 1,000 claims of distinct runs on one partition marks its offsets done in run
  order, not offset order; 50 of them wait for their run's manifest. Every offset is marked (a
  fixed tracker of 150 ranges refused some on the way, and the committed offset stopped below
  them for good), the committed offset reaches the end, and a restart answers nothing again.

§1, §2, §3 and §5 assert exactly one reply per input offset (sourcePartition, sourceOffset).
"""
import collections
import threading
import time

import pytest

from conftest import close_clean, new_run
from llsim.drills import Isolated, committed, loadctl_verify, send_to, wait_until, watermarks
from llsim.flow import Flow
from llsim.kafkaio import Nifi

PART = 1
LOOP = {"loop.prerequisite_wait": "PT120S", "loop.retry_backoff_max": "PT1S", "db.lock_timeout": "PT1S"}


@pytest.fixture
def iso():
    i = Isolated("batchreview")
    yield i
    close_clean(i)


@pytest.fixture
def side(iso):
    """(stack, NiFi's side, its flow) of a drill whose registrar, claimer and dispatcher run; the
    completion is each test's to start."""
    st = iso.stack
    for s in ("registrar", "claimer", "dispatcher"):
        st.start(s)
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    yield st, nifi, flow
    flow.close()


def ordered_runs(n, **kw):
    """n runs whose ids sort in the order returned (the batch's work is sorted by run id)."""
    rs = [new_run(**kw) for _ in range(n)]
    return sorted(rs, key=lambda r: r.run_id)


def admit(flow, nifi, run):
    flow.create(run)
    flow.register(run)
    for pid in run.nonempty():
        nifi.send("partition-claims", run.claim(pid))
    nifi.flush()
    flow.reply("claim-decisions", run.run_id, count=len(run.nonempty()))


def replies_by_offset(flow, runs, want, timeout=90):
    """Waits for `want` chunk replies of `runs`, then 3 s more for any extra one; returns
    {sourceOffset: [reply, ...]} of the chunks topic's partition PART."""
    ids = {r.run_id for r in runs}
    reader = flow.r["chunk-outcomes"]

    def mine():
        return [r["value"] for r in reader.records if r["value"]["runId"] in ids]

    wait_until(lambda: reader.drain(0.5) is not None and len(mine()) >= want, timeout,
               "%d chunk replies" % want)
    reader.drain(3)
    out = collections.defaultdict(list)
    for v in mine():
        assert v["sourcePartition"] == PART
        out[v["sourceOffset"]].append(v)
    return out


def lock_file_row(stack, run_id, pid, index, seconds, locked):
    """Holds one load_file row locked (SELECT ... FOR UPDATE, as an operator's psql would)."""
    c = stack.db()
    c.autocommit = False
    cur = c.cursor()
    cur.execute("SELECT 1 FROM nifi_ops.load_file WHERE run_id = %s AND partition_id = %s AND chunk_index = %s"
                " FOR UPDATE", (run_id, pid, index))
    assert cur.rowcount == 1
    locked.set()
    time.sleep(seconds)
    c.rollback()
    c.close()


def test_failed_set_based_retry_keeps_other_runs_decisions(side):
    """§1: R1's chunk 0 twice (the second left to the per-message path), then a changed chunk 1
    whose file row psql holds: the set-based retry for R1 fails with a lock timeout. R2's chunks,
    after R1's in the work, were decided by the first set-based call: one reply each."""
    st, nifi, flow = side
    st.start("completion", "completion-0", settings=LOOP)
    r1, r2 = ordered_runs(2, partitions=1, empty=())
    for r in (r1, r2):
        admit(flow, nifi, r)
    c1 = r1.chunks("0000")
    send_to(nifi, "chunks", c1[1], partition=PART)
    nifi.flush()
    assert flow.reply("chunk-outcomes", r1.run_id)[0]["outcome"] == "ACCEPTED"
    assert st.stop("completion-0") == 0
    locked = threading.Event()
    t = threading.Thread(target=lock_file_row, args=(st, r1.run_id, "0000", 1, 8, locked))
    t.start()
    assert locked.wait(10)
    changed = dict(c1[1], recordCount=c1[1]["recordCount"] - 1, byteCount=1)
    batch = [c1[0], c1[0], changed] + r2.chunks("0000")[:2]
    for m in batch:
        send_to(nifi, "chunks", m, partition=PART)
    nifi.flush()
    st.start("completion", "completion-0", settings=LOOP)
    got = replies_by_offset(flow, (r1, r2), want=1 + len(batch))
    t.join()
    twice = {o: [(v["runId"][:8], v["outcome"]) for v in vs] for o, vs in got.items() if len(vs) != 1}
    assert not twice, "offsets answered more than once: %s" % twice
    assert len(got) == 1 + len(batch)
    r2_outcomes = [vs[0]["outcome"] for vs in got.values() if vs[0]["runId"] == r2.run_id]
    assert r2_outcomes == ["ACCEPTED", "ACCEPTED"]
    r1_outcomes = [vs[0]["outcome"] for o, vs in sorted(got.items()) if vs[0]["runId"] == r1.run_id]
    assert r1_outcomes == ["ACCEPTED", "ACCEPTED", "REPLAY", "ACCEPTED"]


def test_full_held_queue_refetch_holds_nothing_twice(side):
    """§2: loop.max_held=4, five chunks of runs the ledger does not know yet, produced in
    descending run-id order (the work, sorted by run, holds the four highest offsets first, and
    the lowest offset finds the queue full: the partition seeks back below the held ones). Once
    the runs are admitted one by one, every chunk is answered once, each run's in offset order."""
    st, nifi, flow = side
    runs = ordered_runs(5, partitions=1, empty=())
    for r in runs:
        r.claim("0000")  # fixes the tokens
    sent = []
    for r in reversed(runs):
        sent.append(r.chunks("0000")[0])
    sent.append(runs[0].chunks("0000")[1])  # a second chunk of the first run, after all
    for m in sent:
        send_to(nifi, "chunks", m, partition=PART)
    nifi.flush()
    st.start("completion", "completion-0", settings=dict(LOOP, **{"loop.max_held": "4"}))
    time.sleep(3)  # every chunk read, held or refused a place
    for r in runs:
        admit(flow, nifi, r)
    got = replies_by_offset(flow, runs, want=len(sent))
    twice = {o: [(v["runId"][:8], v["outcome"]) for v in vs] for o, vs in got.items() if len(vs) != 1}
    assert not twice, "offsets answered more than once: %s" % twice
    assert len(got) == len(sent)
    assert all(vs[0]["outcome"] == "ACCEPTED" for vs in got.values()), got
    first = [v for v in flow.r["chunk-outcomes"].records if v["value"]["runId"] == runs[0].run_id]
    assert [v["value"]["chunkIndex"] for v in first] == [0, 1]


def test_a_missing_prerequisite_dead_letters_its_run_together(side):
    """§4: loop.prerequisite_wait=PT5S, loop.max_held=8; 20 chunks of a run the ledger never
    gets, then one chunk of an admitted run, on one partition. The admitted run's chunk is answered
    long before the first dead letter; the 20 dead letters (PREREQUISITE_TIMEOUT) come within a
    few seconds of each other after one period: the 12 that found the queue full and were read
    again after the pause wait on the run's clock (partition.c), not a period of their own."""
    st, nifi, flow = side
    ghost, live = ordered_runs(2, partitions=1, empty=())  # the ghost's chunks sort first
    admit(flow, nifi, live)
    ghost.claim("0000")
    for i in range(20):
        send_to(nifi, "chunks", ghost.chunk("0000", i, 20, 100), partition=PART)
    send_to(nifi, "chunks", live.chunks("0000")[0], partition=PART)
    nifi.flush()
    settings = dict(LOOP, **{"loop.prerequisite_wait": "PT5S", "loop.max_held": "8"})
    st.start("completion", "completion-0", settings=settings)
    assert flow.reply("chunk-outcomes", live.run_id)[0]["outcome"] == "ACCEPTED"
    answered = time.time()
    db = st.db()
    db.autocommit = True
    cur = db.cursor()

    def dead():
        cur.execute("SELECT extract(epoch FROM event_time) FROM nifi_ops.load_event WHERE run_id = %s"
                    " AND event_name = 'DEAD_LETTER' AND error_code = 'PREREQUISITE_TIMEOUT'"
                    " ORDER BY event_time", (ghost.run_id,))
        return [float(r[0]) for r in cur.fetchall()]

    wait_until(lambda: len(dead()) >= 20, 120, "20 dead letters of the ghost run")
    times = dead()
    db.close()
    assert len(times) == 20
    assert times[0] - answered >= 2.5, "the admitted run's chunk waited for the ghost run"
    # the run's clock holds for all its messages, held or read again after the full queue's
    # pause: the 20 dead letters come together (b02fa82: one period per held message; ad15e70:
    # one period per held queue's worth, three groups 5 s apart)
    spread = times[-1] - times[0]
    assert spread < 4, "dead letters spread over %.1f s: %s" % (spread, [round(t - times[0], 1) for t in times])


def test_rebalance_while_the_database_is_cut_answers_each_chunk_once(iso, side):
    """§3: two completion instances on the three partitions of the chunks topic, chunk reports of
    12 runs produced throughout, the completion's database connections terminated every 0.3 s
    while a third instance joins and leaves three times. Every chunk is answered once per offset,
    every run completes, and loadctl verify --topics finds nothing."""
    st, nifi, flow = side
    settings = dict(LOOP, **{"loop.retry_backoff_min": "PT0.05S"})
    for n in range(2):
        st.start("completion", "completion-%d" % n, settings=settings)
    runs = [new_run(partitions=2, empty=()) for _ in range(12)]
    for r in runs:
        admit(flow, nifi, r)
    chunks = [c for r in runs for pid in r.nonempty() for c in r.chunks(pid)]
    stop = threading.Event()
    cuts = []

    def cut():
        c = st.db()
        c.autocommit = True
        cur = c.cursor()
        while not stop.is_set():
            cur.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname ="
                        " current_database() AND application_name = 'completion' AND pid <> pg_backend_pid()")
            cuts.append(cur.fetchone()[0])
            time.sleep(0.3)
        c.close()

    t = threading.Thread(target=cut)
    t.start()
    try:
        for k in range(3):
            for c in chunks[k * len(chunks) // 3:(k + 1) * len(chunks) // 3]:
                send_to(nifi, "chunks", c, partition=(hash(c["runId"]) + c["chunkIndex"]) % 3)
            nifi.flush()
            st.start("completion", "completion-2", settings=settings)
            time.sleep(4)
            assert st.stop("completion-2") == 0
    finally:
        stop.set()
        t.join()
    assert sum(cuts) > 0, "no connection was cut"
    reader = flow.r["chunk-outcomes"]
    ids = {r.run_id for r in runs}

    def mine():
        return [r["value"] for r in reader.records if r["value"]["runId"] in ids]

    wait_until(lambda: reader.drain(0.5) is not None and len(mine()) >= len(chunks), 120,
               "%d chunk replies" % len(chunks))
    reader.drain(3)
    per = collections.Counter((v["sourcePartition"], v["sourceOffset"]) for v in mine())
    twice = {k: n for k, n in per.items() if n != 1}
    assert not twice, "offsets answered more than once: %s" % twice
    assert len(per) == len(chunks)
    for r in runs:
        flow.validate_commands(r)
    rc, checks = loadctl_verify(iso)
    assert rc == 0, {k: v for k, v in checks.items() if v.get("violations")}


def replies_of(flow, topic, ids, want, timeout=120):
    """Waits for `want` replies on `topic` of the runs `ids`; returns their values."""
    reader = flow.r[topic]

    def mine():
        return [r["value"] for r in reader.records if r["value"]["runId"] in ids]

    wait_until(lambda: reader.drain(0.5) is not None and len(mine()) >= want, timeout,
               "%d replies on %s" % (want, topic))
    return mine()


def test_a_thousand_claims_in_run_order_commit_to_the_end(iso, side):
    """§5: loop.batch_max=1000; 1,000 claims of distinct runs on one partition of the claims
    topic, produced while the claimer is stopped so that one poll takes them; 50 of the runs get
    their request and manifest only after the claimer has read them all (their claims wait, held).
    One decision per offset; the claimer's committed offset reaches the partition's end; after a
    restart nothing is answered again."""
    st, nifi, flow = side
    runs = [new_run(partitions=1, empty=()) for _ in range(1000)]
    late = set(r.run_id for r in runs[::20])  # 50 runs, spread over the ids' order
    early = [r for r in runs if r.run_id not in late]

    def admit_all(rs):
        for r in rs:
            nifi.send("run-requests", r.run_request())
        nifi.flush()
        replies_of(flow, "run-decisions", {r.run_id for r in rs}, len(rs))
        for r in rs:
            nifi.send("manifests", r.manifest())
        nifi.flush()
        replies_of(flow, "manifest-decisions", {r.run_id for r in rs}, len(rs))

    admit_all(early)
    assert st.stop("claimer-0") == 0
    for r in runs:
        send_to(nifi, "partition-claims", r.claim("0000"), partition=PART)
    nifi.flush()
    settings = dict(LOOP, **{"loop.batch_max": "1000", "loop.max_held": "64"})
    st.start("claimer", settings=settings)
    ids = {r.run_id for r in runs}
    replies_of(flow, "claim-decisions", ids - late, len(early))
    admit_all([r for r in runs if r.run_id in late])
    got = replies_of(flow, "claim-decisions", ids, len(runs))
    topic = iso.topic("partition-claims")
    group = iso.groups["claimer"]
    end = watermarks(st.bootstrap, topic)[PART][1]
    wait_until(lambda: committed(st.bootstrap, group, [topic]).get((topic, PART)) == end, 30,
               "the claimer's committed offset at the end (%d)" % end)
    assert st.stop("claimer-0") == 0
    st.start("claimer", settings=settings)
    time.sleep(6)  # the partition is read again from the committed offset: nothing there
    flow.r["claim-decisions"].drain(1)
    got = [r["value"] for r in flow.r["claim-decisions"].records if r["value"]["runId"] in ids]
    per = collections.Counter(v["sourceOffset"] for v in got if v["sourcePartition"] == PART)
    twice = {o: n for o, n in per.items() if n != 1}
    assert not twice, "offsets answered more than once: %s" % sorted(twice.items())[:20]
    assert len(per) == len(runs)
    assert all(v["outcome"] == "ACCEPTED" for v in got), collections.Counter(v["outcome"] for v in got)
