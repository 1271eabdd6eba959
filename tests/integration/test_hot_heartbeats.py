"""The heartbeat updates of the chunk path are HOT (issue 42; schemas/sql/0020_hot_heartbeats.sql,
docs/ledger.md "Indexes of the reads").

Every batch of chunk reports updates its partitions' counters and heartbeat_at (chunk_bulk_write.c,
chunk_report.c) and its runs' heartbeat_at (position.c, the completion statements). PostgreSQL makes
such an UPDATE HOT (no new index entry) only when no column that an index of the table names (key,
expression or predicate) changes and the new version fits in the row's page. Before 0020,
ix_load_partition_recovery (status, heartbeat_at), ix_load_run_status_heartbeat (status,
heartbeat_at) and the ended-time indexes on coalesce(completed_at, heartbeat_at) named heartbeat_at:
every one of those updates inserted into every index of both tables.

Three runs of three partitions of 20 chunks each go through ll-completion in rounds (one chunk of
every partition a round, each round answered before the next is sent, so each round is at least
one batch: at least 20 heartbeat updates of each partition and of each run). The only updates of
these rows that change an indexed column are their status transitions: a partition's claim
(PENDING -> RUNNING) and gate (-> SUCCESS), a run's manifest (CREATED -> EXTRACTING) and extract
completion (-> EXTRACTED_VALIDATED), a few per row against 20 or more heartbeats. The test's own
database's pg_stat_user_tables must count at least 80 % of the updates of load_partition and of
load_run HOT (the services are stopped first: a backend's statistics are flushed at its exit), and
no more than those status transitions may be non-HOT (on main: 0 of 198 and 0 of 78 were HOT).
"""
import time

import pytest
import psycopg2

from conftest import close_clean, new_run
from llsim.drills import Isolated
from llsim.flow import Flow
from llsim.kafkaio import Nifi

RUNS, PARTITIONS, CHUNKS = 3, 3, 20
ROWS_PER_CHUNK = 750  # 15,000 rows a partition (llsim.scenario) in 20 chunks
HOT_SHARE = 0.80


@pytest.fixture
def iso():
    i = Isolated("hot")
    yield i
    close_clean(i)


def table_stats(stack, tables):
    """{table: (n_tup_upd, n_tup_hot_upd)} of the stack's database, read in a fresh snapshot."""
    c = psycopg2.connect(stack.conninfo())
    c.autocommit = True
    try:
        with c.cursor() as cur:
            cur.execute("SELECT pg_stat_clear_snapshot()")
            cur.execute("SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables"
                        " WHERE schemaname = 'nifi_ops' AND relname = ANY(%s)", (list(tables),))
            return {r[0]: (r[1], r[2]) for r in cur.fetchall()}
    finally:
        c.close()


def test_chunk_heartbeats_are_hot_updates(iso):
    st = iso.stack
    for s in ("registrar", "claimer", "completion"):
        st.start(s)
    flow = Flow(Nifi(st.bootstrap, st.prefix))
    try:
        runs = [new_run(partitions=PARTITIONS, empty=()) for _ in range(RUNS)]
        for r in runs:
            assert flow.create(r)["outcome"] == "ACCEPTED"
            assert flow.register(r)["runStatus"] == "EXTRACTING"
            assert all(c["claimed"] for c in flow.claim_all(r))
        chunks = {(r.run_id, pid): r.chunks(pid, rows_per_chunk=ROWS_PER_CHUNK) for r in runs for pid in r.nonempty()}
        assert all(len(c) == CHUNKS for c in chunks.values())
        for i in range(CHUNKS):  # one round: chunk i of every partition, answered before the next
            for c in chunks.values():
                flow.nifi.send("chunks", c[i])
            flow.nifi.flush()
            for r in runs:
                flow.reply("chunk-outcomes", r.run_id, count=(i + 1) * PARTITIONS, timeout=30)
    finally:
        flow.close()
    db = st.db()
    db.autocommit = True
    try:
        with db.cursor() as cur:
            # every run extracted: its partitions passed their gates, the run its own (the last
            # round's replies are written with it)
            cur.execute("SELECT count(*) FILTER (WHERE status = 'EXTRACTED_VALIDATED') FROM nifi_ops.load_run")
            assert cur.fetchone()[0] == RUNS
            cur.execute("SELECT count(*) FILTER (WHERE status = 'SUCCESS') FROM nifi_ops.load_partition")
            assert cur.fetchone()[0] == RUNS * PARTITIONS
    finally:
        db.close()
    codes = st.stop_all()  # each backend flushes its statistics as it exits
    assert not {k: v for k, v in codes.items() if v != 0}, codes
    tables = ("load_partition", "load_run")
    # at least one heartbeat update of each row a round; the flush of an exiting backend is
    # asynchronous to our reads: wait for the counts, at most 5 s
    least = {"load_partition": RUNS * PARTITIONS * CHUNKS, "load_run": RUNS * CHUNKS}
    end = time.time() + 5
    while True:
        stats = table_stats(st, tables)
        if all(stats.get(t, (0, 0))[0] >= least[t] for t in tables) or time.time() > end:
            break
        time.sleep(0.2)
    shares = {}
    for t in tables:
        upd, hot = stats.get(t, (0, 0))
        assert upd >= least[t], "%s: %d updates counted, at least %d made (statistics not flushed?)" % (t, upd, least[t])
        shares[t] = (hot, upd, hot / upd)
    assert all(s >= HOT_SHARE for _, _, s in shares.values()), "HOT updates (hot, all, share), want >= %.2f: %s" % (
        HOT_SHARE, shares)
    # and exactly: only the status transitions are not HOT (two a partition: claim, gate; two a run:
    # manifest, extract completion), every heartbeat is
    rows = {"load_partition": RUNS * PARTITIONS, "load_run": RUNS}
    assert all(upd - hot <= 2 * rows[t] for t, (hot, upd, _) in shares.items()), shares
