"""The last two partitions of a run completing at the same moment, in two concurrent
transactions on two database connections (contract §2.8: "the run-row lock is what serialises
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
"""
import psycopg2
import pytest

from conftest import new_run
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
    logs = {i: st.log_path(i) for i in ("completion-1", "completion-2")}
    st.start("completion", "completion-1")
    wait_until(lambda: assignment(logs["completion-1"], chunks) == [0, 1, 2], 60, "completion-1 owning every partition")
    st.start("completion", "completion-2")

    def split():
        a1, a2 = assignment(logs["completion-1"], chunks), assignment(logs["completion-2"], chunks)
        return a1 and a2 and not set(a1) & set(a2) and sorted(a1 + a2) == [0, 1, 2] and (a1, a2)
    owned = dict(zip(logs, wait_until(split, 60, "the chunk partitions split between the two instances")))
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
