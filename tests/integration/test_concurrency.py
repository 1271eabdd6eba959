"""The last two partitions of a run completing at the same moment, in two concurrent
transactions on two database connections (docs/contract.md §2.8: "the run-row lock is what serialises
'last two partitions finish at the same time'"; §5.11: exactly one caller wins the completion
CAS). Whatever the interleaving: exactly one EXTRACTED_VALIDATED, one load_dispatch row, one
validate-run command on the topic, and ledger sums that add up.

Two ways two transactions meet on one run:
- two completion instances in DIFFERENT consumer groups (what a rebalance does for a moment: the
  old owner still applies what the new owner applies too): every chunk is applied twice,
  concurrently, on two connections. The second instance answers on a topic of its own
  (topic.chunk-outcomes.name), so each instance's replies can be counted: each answers every
  chunk once, and of the two answers to a chunk exactly one is ACCEPTED and one REPLAY.
- two completion instances in ONE group, and a producer that keys a run's events differently
  (key = run id + partition): the final chunks of the last two partitions land on Kafka
  partitions owned by different instances (read from the instances' partitions_assigned log
  lines), and each instance completes one of the two partitions.

The race is made certain rather than likely: in half of the repetitions the test holds the run
row's lock (SELECT ... FOR UPDATE from its own connection) while the two final chunks are
published, waits until two completion transactions queue on that lock (pg_stat_activity), and
then releases it, so both transactions run with the other one in flight. The other repetitions
leave the timing to the broker.

A held run row sends both transactions to the per-message path (the set-based one, chunk_bulk.c,
skips a locked run). The third test is the set-based path's own race (issue 26 item 8): many runs
per poll batch, the final chunks keyed by run id (so chunk_bulk.c decides them), the last two
partitions of each run gated by two instances of one group. Its repetitions made certain hold one
instance's set-based statement after it took its snapshot but before it locked the runs (RunScanHold:
a row-level security policy that only that instance's sessions evaluate waits on an advisory lock
the test holds), let the other instance gate and commit the other partition of every run, then
release it: a count of the open partitions read with that statement's snapshot still sees the other
partition RUNNING, and no run may stay EXTRACTING with every partition SUCCESS.
"""
import uuid

import psycopg2
import pytest

from conftest import new_run, one, rows
from llsim.drills import Isolated, RawReader, assignment, send_to, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi

REPEATS = 4
LAST_TWO = ("0006", "0007")


@pytest.fixture(scope="module")
def iso():
    i = Isolated("concurrency", extra_topics={"chunk-outcomes-b": 3})
    for s in ("registrar", "claimer", "dispatcher"):
        i.stack.start(s)
    yield i
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


@pytest.fixture
def flow(iso):
    f = Flow(Nifi(iso.bootstrap, iso.prefix))
    yield f
    f.close()


def prepare(flow, run):
    """Run, manifest, claims, and every chunk but the final chunk of the last two partitions."""
    assert flow.create(run)["outcome"] == "ACCEPTED"
    assert flow.register(run)["runStatus"] == "EXTRACTING"
    assert all(c["claimed"] for c in flow.claim_all(run))
    sent = 0
    for pid in run.nonempty():
        chunks = run.chunks(pid)
        for c in chunks[:-1] if pid in LAST_TWO else chunks:
            flow.nifi.send("chunks", c)
            sent += 1
    flow.nifi.flush()
    return sent


class RunLock:
    """Holds a run row's lock from a connection of its own until release()."""

    def __init__(self, iso, run_id):
        self.conn = psycopg2.connect(host=iso.stack.pg["host"], port=iso.stack.pg["port"], dbname=iso.dbname,
                                     user="postgres", application_name="test-run-lock")
        self.cur = self.conn.cursor()
        self.cur.execute("SELECT status FROM nifi_ops.load_run WHERE run_id = %s FOR UPDATE", (run_id,))
        assert self.cur.fetchone()[0] == "EXTRACTING"

    def release(self):
        self.conn.commit()
        self.conn.close()


def queued_on_lock(iso, cur, n):
    """Waits until n completion transactions wait on a lock."""
    def count():
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'completion'"
                    " AND wait_event_type = 'Lock'", (iso.dbname,))
        return cur.fetchone()[0] >= n
    wait_until(count, 30, "%d completion transactions queued on the run lock" % n, interval=0.05)


def assert_completed_once(cur, run):
    """The ledger of a run completed exactly once, with its sums."""
    cur.execute("SELECT status, extracted_count, success_partition_count, version_no FROM nifi_ops.load_run"
                " WHERE run_id = %s", (run.run_id,))
    assert cur.fetchone() == ("EXTRACTED_VALIDATED", run.source_count, 8, 2)
    cur.execute("SELECT partition_id, status, actual_row_count, file_count, byte_count FROM nifi_ops.load_partition"
                " WHERE run_id = %s ORDER BY partition_id", (run.run_id,))
    assert cur.fetchall() == [(p["partitionId"], "SUCCESS", p["expectedRowCount"], 3 if p["expectedRowCount"] else 0,
                               p["expectedRowCount"] * 96) for p in run.parts]
    cur.execute("SELECT count(*), sum(record_count) FROM nifi_ops.load_file WHERE run_id = %s AND status = 'WRITTEN'",
                (run.run_id,))
    assert cur.fetchone() == (21, run.source_count)
    cur.execute("SELECT event_name, count(*) FROM nifi_ops.load_event WHERE run_id = %s GROUP BY 1 ORDER BY 1",
                (run.run_id,))
    assert dict(cur.fetchall()) == {"RUN_STARTED": 1, "MANIFEST_CREATED": 1, "PARTITION_STARTED": 7,
                                    "PARTITION_SUCCESS": 7, "EXTRACT_VALIDATED": 1}
    cur.execute("SELECT dispatch_id::text, dispatch_type FROM nifi_ops.load_dispatch WHERE run_id = %s", (run.run_id,))
    rows = cur.fetchall()
    assert len(rows) == 1 and rows[0][1] == "VALIDATE_RUN"
    return rows[0][0]


def assert_one_command(flow, runs_dispatch):
    """Exactly one validate-run command per run on the topic, with the ledger's dispatch id."""
    for run_id in runs_dispatch:
        flow.reply("validate-run-commands", run_id)
    flow.r["validate-run-commands"].drain(3)
    for run_id, dispatch_id in runs_dispatch.items():
        cmds = [c["value"] for c in flow.r["validate-run-commands"].records if c["value"]["runId"] == run_id]
        assert [c["dispatchId"] for c in cmds] == [dispatch_id], cmds


def two_instances(st, chunks, names, env=None, settings=None):
    """Starts two completion instances of one group, the first with env and settings; returns
    {name: its chunk partitions} once they split the topic's partitions between them."""
    logs = {i: st.log_path(i) for i in names}
    st.start("completion", names[0], env=env, settings=settings)
    wait_until(lambda: assignment(logs[names[0]], chunks) == [0, 1, 2], 60, "%s owning every partition" % names[0])
    st.start("completion", names[1])

    def split():
        a1, a2 = assignment(logs[names[0]], chunks), assignment(logs[names[1]], chunks)
        return a1 and a2 and not set(a1) & set(a2) and sorted(a1 + a2) == [0, 1, 2] and (a1, a2)
    return logs, dict(zip(names, wait_until(split, 60, "the chunk partitions split between the two instances")))


def test_two_groups_apply_every_chunk_concurrently(iso, flow):
    st = iso.stack
    st.start("completion", "completion-a")
    st.start("completion", "completion-b", settings={"kafka.group.id": iso.prefix + "completion-b",
                                                     "topic.chunk-outcomes.name": iso.topic("chunk-outcomes-b")})
    other = RawReader(iso.bootstrap, iso.topic("chunk-outcomes-b"), "chunk-outcomes", from_beginning=False)
    db = st.db()
    cur = db.cursor()
    dispatches = {}
    try:
        for rep in range(REPEATS):
            run = new_run()
            sent = prepare(flow, run)
            flow.reply("chunk-outcomes", run.run_id, count=sent)
            other.wait_for(lambda r: r["value"]["runId"] == run.run_id, count=sent)
            lock = RunLock(iso, run.run_id) if rep % 2 == 0 else None
            # the two final chunks on two different Kafka partitions, keyed by run and partition
            for kpart, pid in enumerate(LAST_TWO):
                send_to(flow.nifi, "chunks", run.chunks(pid)[-1], partition=kpart, key=run.run_id + "/" + pid)
            flow.nifi.flush()
            if lock:
                queued_on_lock(iso, cur, 2)  # one transaction of each instance waits on the run
                lock.release()
            flow.reply("chunk-outcomes", run.run_id, count=21)
            other.wait_for(lambda r: r["value"]["runId"] == run.run_id, count=21)
            flow.r["chunk-outcomes"].drain(1)
            other.drain(1)
            a = [r["value"] for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id]
            b = [r["value"] for r in other.records if r["value"]["runId"] == run.run_id]
            key = lambda v: (v["partitionId"], v["chunkIndex"])  # noqa: E731
            # each instance answered each chunk once
            every = sorted((pid, i) for pid in run.nonempty() for i in range(3))
            assert sorted(map(key, a)) == every and sorted(map(key, b)) == every
            # one of the two applications changed the ledger, the other found it done
            for va in a:
                vb = next(v for v in b if key(v) == key(va))
                assert {va["outcome"], vb["outcome"]} == {"ACCEPTED", "REPLAY"}, (va, vb)
                assert va["code"] is None and vb["code"] is None
            winners = [v for v in a + b if v["validationScheduled"]]
            assert len(winners) == 1 and winners[0]["outcome"] == "ACCEPTED", winners
            assert winners[0]["partitionId"] in LAST_TWO and winners[0]["runStatus"] == "EXTRACTED_VALIDATED"
            dispatches[run.run_id] = assert_completed_once(cur, run)
        assert_one_command(flow, dispatches)
    finally:
        other.close()
        db.close()
    assert st.stop("completion-a") == 0
    assert st.stop("completion-b") == 0


def test_one_group_two_instances_complete_the_last_two_partitions(iso, flow):
    st = iso.stack
    chunks = iso.topic("chunks")
    logs, owned = two_instances(st, chunks, ("completion-1", "completion-2"))
    db = st.db()
    cur = db.cursor()
    dispatches = {}
    try:
        for rep in range(REPEATS):
            run = new_run()
            sent = prepare(flow, run)
            flow.reply("chunk-outcomes", run.run_id, count=sent)
            # the final chunk of 0006 to a partition of one instance, of 0007 to one of the other
            target = {"0006": owned["completion-1"][rep % len(owned["completion-1"])],
                      "0007": owned["completion-2"][rep % len(owned["completion-2"])]}
            lock = RunLock(iso, run.run_id) if rep % 2 == 0 else None
            for pid in LAST_TWO:
                send_to(flow.nifi, "chunks", run.chunks(pid)[-1], partition=target[pid], key=run.run_id + "/" + pid)
            flow.nifi.flush()
            if lock:
                queued_on_lock(iso, cur, 2)  # each instance's transaction waits on the run
                lock.release()
            flow.reply("chunk-outcomes", run.run_id, count=21)
            flow.r["chunk-outcomes"].drain(1)
            replies = [r["value"] for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id]
            assert len(replies) == 21 and all(v["outcome"] == "ACCEPTED" for v in replies), replies
            finals = {v["partitionId"]: v for v in replies if v["chunkIndex"] == 2 and v["partitionId"] in LAST_TWO}
            for pid in LAST_TWO:  # each applied by the instance owning its Kafka partition
                assert finals[pid]["sourcePartition"] == target[pid] and finals[pid]["partitionStatus"] == "SUCCESS"
            winners = [v for v in finals.values() if v["validationScheduled"]]
            assert len(winners) == 1 and winners[0]["runStatus"] == "EXTRACTED_VALIDATED", finals
            loser = next(v for v in finals.values() if not v["validationScheduled"])
            assert loser["runStatus"] == "EXTRACTING"
            dispatches[run.run_id] = assert_completed_once(cur, run)
        assert_one_command(flow, dispatches)
        # the split held for the whole test (no rebalance moved a partition)
        assert (assignment(logs["completion-1"], chunks), assignment(logs["completion-2"], chunks)) == \
            (owned["completion-1"], owned["completion-2"])
    finally:
        db.close()
    assert st.stop("completion-1") == 0
    assert st.stop("completion-2") == 0


# -- the set-based path: many runs per poll batch (issue 26 item 8) ---------------------------------

MANY = 8  # runs per repetition, all in one poll batch of each instance
HOLD_KEY = 2608  # the advisory lock RunScanHold waits on
HOLD_ENV = {"PGOPTIONS": "-c ll.test_hold=on"}  # the sessions of the held instance
# the held instance waits longer than db.lock_timeout's PT2S while the other one applies its chunks
HOLD_SETTINGS = {"db.lock_timeout": "PT60S", "db.statement_timeout": "PT90S", "db.response_timeout": "PT120S"}
LOCK_RUNS_SQL = "FROM nifi_ops.load_run WHERE run_id = k.id"  # chunk_bulk_lock_runs, step 1 of chunk_bulk.c


def prepare_many(flow, runs):
    """prepare() of many runs, each step's messages all sent before its replies are awaited."""
    for run in runs:
        flow.nifi.send("run-requests", run.run_request())
    flow.nifi.flush()
    for run in runs:
        assert flow.reply("run-decisions", run.run_id)[-1]["outcome"] == "ACCEPTED"
    for run in runs:
        flow.nifi.send("manifests", run.manifest())
    flow.nifi.flush()
    for run in runs:
        assert flow.reply("manifest-decisions", run.run_id)[-1]["runStatus"] == "EXTRACTING"
    for run in runs:
        for pid in run.nonempty():
            flow.nifi.send("partition-claims", run.claim(pid))
    flow.nifi.flush()
    for run in runs:
        assert all(c["claimed"] for c in flow.reply("claim-decisions", run.run_id, count=len(run.nonempty())))
    sent = {}
    for run in runs:
        sent[run.run_id] = 0
        for pid in run.nonempty():
            chunks = run.chunks(pid)
            for c in chunks[:-1] if pid in LAST_TWO else chunks:
                flow.nifi.send("chunks", c)
                sent[run.run_id] += 1
    flow.nifi.flush()
    for run in runs:
        flow.reply("chunk-outcomes", run.run_id, count=sent[run.run_id])


class RunScanHold:
    """Makes the sessions started with HOLD_ENV wait, while hold() is in force, wherever they read
    the row of run `run_id` (a completed run whose id sorts before every other run): a permissive
    row-level security policy on load_run (the services' roles are not its owner; the test's
    postgres bypasses it) calls a function that takes advisory lock HOLD_KEY shared. Every other
    session reads every row as before. A poll batch of the held instance that holds a report of
    that run first locks its runs in run-id order (chunk_bulk_lock_runs) and so waits at that row,
    after its statement took its snapshot and before it locked any other run of the batch."""

    def __init__(self, iso, run_id):
        self.db = iso.stack.db()
        self.cur = self.db.cursor()
        self.cur.execute("CREATE FUNCTION public.ll_test_hold() RETURNS boolean LANGUAGE sql VOLATILE"
                         " AS 'SELECT true FROM pg_advisory_xact_lock_shared(%d)'" % HOLD_KEY)
        self.cur.execute("ALTER TABLE nifi_ops.load_run ENABLE ROW LEVEL SECURITY")
        self.cur.execute("CREATE POLICY ll_test_hold ON nifi_ops.load_run USING (CASE WHEN"
                         " current_setting('ll.test_hold', true) = 'on' AND run_id = %s::uuid"
                         " THEN public.ll_test_hold() ELSE true END) WITH CHECK (true)", (run_id,))
        self.holder = None

    def hold(self):
        self.holder = psycopg2.connect(self.db.dsn, application_name="test-scan-hold")
        self.holder.cursor().execute("SELECT pg_advisory_xact_lock(%s)", (HOLD_KEY,))

    def release(self):
        self.holder.commit()
        self.holder.close()
        self.holder = None

    def close(self):
        if self.holder:
            self.release()
        self.cur.execute("DROP POLICY ll_test_hold ON nifi_ops.load_run")
        self.cur.execute("ALTER TABLE nifi_ops.load_run DISABLE ROW LEVEL SECURITY")
        self.cur.execute("DROP FUNCTION public.ll_test_hold()")
        self.db.close()


def held_in_lock_runs(iso, cur):
    """Waits until a completion transaction waits on RunScanHold inside chunk_bulk_lock_runs."""
    def held():
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'completion'"
                    " AND wait_event_type = 'Lock' AND wait_event = 'advisory' AND position(%s IN query) > 0",
                    (iso.dbname, LOCK_RUNS_SQL))
        return cur.fetchone()[0] == 1
    wait_until(held, 30, "the held instance's set-based run lock statement waiting on the hold", interval=0.05)


def succeeded(cur, runs, pid):
    """How many of the runs have partition pid SUCCESS (committed)."""
    return one(cur, "SELECT count(*) FROM nifi_ops.load_partition WHERE run_id = ANY(%s::uuid[])"
               " AND partition_id = %s AND status = 'SUCCESS'", [r.run_id for r in runs], pid)


def stuck_runs(cur, runs):
    """The runs left EXTRACTING with every partition SUCCESS."""
    cur.execute("SELECT r.run_id::text FROM nifi_ops.load_run r WHERE r.run_id = ANY(%s::uuid[])"
                " AND r.status = 'EXTRACTING' AND NOT EXISTS (SELECT 1 FROM nifi_ops.load_partition p"
                " WHERE p.run_id = r.run_id AND p.status <> 'SUCCESS') ORDER BY 1", ([r.run_id for r in runs],))
    return [x[0] for x in cur.fetchall()]


def test_many_runs_per_batch_set_based_last_two_partitions(iso, flow):
    """MANY runs a repetition, their final chunks of 0006 on a Kafka partition of completion-3,
    those of 0007 on one of completion-4, keyed by run id: each instance gates one of the last two
    partitions of every run in one set-based batch. Held repetitions (RunScanHold): completion-4
    commits every 0007 after completion-3's run lock statement took its snapshot and before it
    locked the runs; completion-3 must still see each run's last open partition and complete it."""
    st = iso.stack
    chunks = iso.topic("chunks")
    db = st.db()
    cur = db.cursor()
    names = ("completion-3", "completion-4")  # completion-3's sessions are the ones held
    logs, owned = two_instances(st, chunks, names, env=HOLD_ENV, settings=HOLD_SETTINGS)
    pa, pb = owned[names[0]][0], owned[names[1]][0]
    # the hold's run: completed before the hold exists, its id before every other run's
    first = new_run(run_id="00000000" + str(uuid.uuid4())[8:])
    flow.to_extracted(first)
    dispatches = {first.run_id: assert_completed_once(cur, first)}
    replay = first.chunks(first.nonempty()[0])[0]
    hold = RunScanHold(iso, first.run_id)
    try:
        for rep in range(REPEATS):
            runs = [new_run() for _ in range(MANY)]
            prepare_many(flow, runs)
            held = rep % 2 == 0
            if held:
                # completion-3 takes its snapshot, then waits before locking any of these runs
                hold.hold()
                send_to(flow.nifi, "chunks", replay, partition=pa)
                for run in runs:
                    send_to(flow.nifi, "chunks", run.chunks("0006")[-1], partition=pa)
                flow.nifi.flush()
                held_in_lock_runs(iso, cur)
                # meanwhile completion-4 gates 0007 of every run and commits: the other one still RUNNING
                for run in runs:
                    send_to(flow.nifi, "chunks", run.chunks("0007")[-1], partition=pb)
                flow.nifi.flush()
                wait_until(lambda: succeeded(cur, runs, "0007") == MANY, 30, "completion-4 gating 0007 of every run")
                hold.release()
            else:
                for run in runs:
                    send_to(flow.nifi, "chunks", run.chunks("0006")[-1], partition=pa)
                    send_to(flow.nifi, "chunks", run.chunks("0007")[-1], partition=pb)
                flow.nifi.flush()
            for run in runs:
                flow.reply("chunk-outcomes", run.run_id, count=21)
            if held:
                flow.reply("chunk-outcomes", first.run_id, pred=lambda v: v["outcome"] == "REPLAY", count=rep // 2 + 1)
            stuck = stuck_runs(cur, runs)
            assert not stuck, "repetition %d (%s): %d of %d runs left EXTRACTING with every partition SUCCESS: %s" % (
                rep, "held" if held else "free", len(stuck), MANY, rows(
                    cur, "SELECT run_id::text, status, success_partition_count, version_no FROM nifi_ops.load_run"
                    " WHERE run_id = ANY(%s::uuid[]) ORDER BY 1", stuck))
            for run in runs:
                replies = [r["value"] for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id]
                assert len(replies) == 21 and all(v["outcome"] == "ACCEPTED" for v in replies), replies
                finals = {v["partitionId"]: v for v in replies if v["chunkIndex"] == 2 and v["partitionId"] in LAST_TWO}
                assert finals["0006"]["sourcePartition"] == pa and finals["0007"]["sourcePartition"] == pb, finals
                assert all(v["partitionStatus"] == "SUCCESS" for v in finals.values()), finals
                winners = [v for v in finals.values() if v["validationScheduled"]]
                assert len(winners) == 1 and winners[0]["runStatus"] == "EXTRACTED_VALIDATED", finals
                if held:  # 0007 committed first: completion-3, held, completes the run
                    assert winners[0]["partitionId"] == "0006", finals
                dispatches[run.run_id] = assert_completed_once(cur, run)
        assert_one_command(flow, dispatches)
        assert (assignment(logs[names[0]], chunks), assignment(logs[names[1]], chunks)) == \
            (owned[names[0]], owned[names[1]])
    finally:
        hold.close()
        db.close()
    assert st.stop(names[0]) == 0
    assert st.stop(names[1]) == 0
