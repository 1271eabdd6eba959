"""Deadlocks on the ledger (issue 8 §1: a deadlock retries; rows are locked in one order, run id
first, so two instances cannot deadlock each other), on the real broker and database:

- an operator's session locks run B's row; the completion service starts a batch with chunks of
  runs A and B (A < B: it locks A, then waits on B); the session then asks for A. PostgreSQL
  finds the cycle after deadlock_timeout and aborts one side. Which one is made certain, not
  left to timing, by giving the two sides different deadlock_timeouts (the side whose timeout
  runs out first while the cycle exists is the one aborted): once the service, once the session.
  Either way every chunk is answered exactly once (read_committed), every file row is there, both
  runs complete, and when the service was the victim its log says it retried;
- two completion instances in different consumer groups (their own transactional ids and reply
  topics) apply one backlog of several runs at the same time, their batches holding many runs
  each: both answer every chunk once without an error, one application of each chunk is ACCEPTED
  and the other REPLAY, and the ledger is the one a single instance makes of the same inputs.
"""
import collections
import threading

import psycopg2
import pytest

from conftest import close_clean, new_run
from llsim.drills import Isolated, RawReader, events, send_to, snapshot, snapshot_diff, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi

PART = 1  # the one Kafka partition of the chunks topic the first test uses
# the deadlock_timeout of (the service, the session): the shorter one detects the cycle
TIMEOUTS = {"service": ("2s", "60s"), "session": ("60s", "200ms")}
# columns a second application may set to other values without changing the ledger's meaning:
# times, and ids the services draw at random
VOLATILE = {"load_run": {"started_at", "heartbeat_at", "extract_completed_at", "updated_at"},
            "load_partition": {"started_at", "heartbeat_at", "completed_at", "updated_at"},
            "load_file": {"written_at", "updated_at"},
            "load_claim_token": {"granted_at"},
            "load_validation": {"validation_id", "measured_at"},
            "load_event": {"event_id", "event_time"},
            "load_dispatch": {"dispatch_id", "next_attempt_at", "created_at"}}


def admitted(flow, *runs):
    for run in runs:
        assert flow.create(run)["outcome"] == "ACCEPTED"
        assert flow.register(run)["runStatus"] == "EXTRACTING"
        assert all(c["claimed"] for c in flow.claim_all(run))


def once_each(replies, run):
    """True when every chunk of run is answered exactly once in replies."""
    c = collections.Counter((v["partitionId"], v["chunkIndex"]) for v in replies if v["runId"] == run.run_id)
    return sorted(c) == sorted((pid, i) for pid in run.nonempty() for i in range(3)) and set(c.values()) == {1}


def blocked_by(cur, dbname, pid_of_session):
    """The completion backend waiting on a lock the session holds, or None."""
    cur.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = 'completion'"
                " AND wait_event_type = 'Lock' AND %s = ANY(pg_blocking_pids(pid))", (dbname, pid_of_session))
    row = cur.fetchone()
    return row and row[0]


def row_locked(cur, run_id):
    """True when run_id's load_run row is locked (pgrowlocks; a lock taken under a savepoint
    shows no backend pid, so the test only asks whether it is held: by then nobody but the
    service can hold it)."""
    cur.execute("SELECT count(*) FROM pgrowlocks('nifi_ops.load_run') l JOIN nifi_ops.load_run r"
                " ON r.ctid = l.locked_row WHERE r.run_id = %s", (run_id,))
    return cur.fetchone()[0] == 1


@pytest.mark.parametrize("victim", ["service", "session"])
def test_a_deadlock_with_a_session_answers_each_chunk_once(victim):
    iso = Isolated("deadlock")
    st = iso.stack
    service_timeout, session_timeout = TIMEOUTS[victim]
    admin = st.db()
    admin.autocommit = True
    mon = admin.cursor()
    mon.execute("CREATE EXTENSION IF NOT EXISTS pgrowlocks")
    mon.execute('ALTER ROLE ll_completion IN DATABASE "%s" SET deadlock_timeout = %%s' % iso.dbname,
                (service_timeout,))
    for s in ("registrar", "claimer"):
        st.start(s)
    flow = Flow(Nifi(st.bootstrap, st.prefix))
    session = st.db()
    session.autocommit = False  # the session's locks last until it ends its transaction
    try:
        a, b = sorted((new_run(), new_run()), key=lambda r: r.run_id)  # the batch locks a first
        admitted(flow, a, b)
        cur = session.cursor()
        cur.execute("SET deadlock_timeout = %s", (session_timeout,))
        cur.execute("SET statement_timeout = '30s'")
        cur.execute("SELECT pg_backend_pid()")
        session_pid = cur.fetchone()[0]
        cur.execute("SELECT 1 FROM nifi_ops.load_run WHERE run_id = %s FOR UPDATE", (b.run_id,))
        for run in (a, b):  # one backlog on one Kafka partition: the service's first batch holds both
            for pid in run.nonempty():
                for c in run.chunks(pid):
                    send_to(flow.nifi, "chunks", c, partition=PART)
        flow.nifi.flush()
        st.start("completion", "completion-0",
                 settings={"db.lock_timeout": "PT30S", "loop.retry_backoff_max": "PT1S"})
        service_pid = wait_until(lambda: blocked_by(mon, iso.dbname, session_pid), 30, "the service waiting on B",
                                 interval=0.05)
        assert service_pid and row_locked(mon, a.run_id), "the service's transaction does not hold run A"
        # the session asks for A: a cycle
        if victim == "session":
            with pytest.raises(psycopg2.errors.DeadlockDetected):
                cur.execute("SELECT 1 FROM nifi_ops.load_run WHERE run_id = %s FOR UPDATE", (a.run_id,))
            session.rollback()
        else:
            # the service is aborted: it rolls back B's part, commits A's, and so lets the session on
            cur.execute("SELECT 1 FROM nifi_ops.load_run WHERE run_id = %s FOR UPDATE", (a.run_id,))
            session.commit()
        n = 3 * len(a.nonempty())
        flow.reply("chunk-outcomes", a.run_id, count=n, timeout=30)
        flow.reply("chunk-outcomes", b.run_id, count=n, timeout=30)
        flow.r["chunk-outcomes"].drain(2)
        replies = [r["value"] for r in flow.r["chunk-outcomes"].records]
        for run in (a, b):
            assert once_each(replies, run), [(v["partitionId"], v["chunkIndex"]) for v in replies
                                             if v["runId"] == run.run_id]
        assert {v["outcome"] for v in replies} == {"ACCEPTED"}, replies
        mon.execute("SELECT run_id::text, count(*) FROM nifi_ops.load_file WHERE status = 'WRITTEN' GROUP BY 1")
        assert dict(mon.fetchall()) == {a.run_id: n, b.run_id: n}
        mon.execute("SELECT run_id::text, status FROM nifi_ops.load_run")
        assert dict(mon.fetchall()) == {a.run_id: "EXTRACTED_VALIDATED", b.run_id: "EXTRACTED_VALIDATED"}
        log = st.log_path("completion-0")
        deadlocks = [e for e in events(log, "db_busy") if "40P01" in e.get("msg", e.get("message", ""))]
        if victim == "service":
            assert deadlocks and all(e.get("runId") == b.run_id for e in deadlocks), events(log, "db_busy")
            assert [e for e in events(log, "run_held") if e.get("runId") == b.run_id]
        else:
            assert not deadlocks
        assert not events(log, "db_error")
    finally:
        session.close()
        flow.close()
        mon.execute('ALTER ROLE ll_completion IN DATABASE "%s" RESET deadlock_timeout' % iso.dbname)
        admin.close()
        close_clean(iso)


def apply_backlog(runs, instances):
    """Admits runs in a drill of their own, produces every chunk of them, then starts `instances`
    completion instances (1 or 2, each in a consumer group of its own, answering on a topic of
    its own) at once. Returns (the ledger, {instance: its chunk replies})."""
    iso = Isolated("twogroups", extra_topics={"chunk-outcomes-b": 3})
    st = iso.stack
    for s in ("registrar", "claimer"):
        st.start(s)
    flow = Flow(Nifi(st.bootstrap, st.prefix))
    other = RawReader(iso.bootstrap, iso.topic("chunk-outcomes-b"), "chunk-outcomes", from_beginning=False)
    db = st.db()
    try:
        admitted(flow, *runs)
        total = 0
        for run in runs:
            for pid in run.nonempty():
                for c in run.chunks(pid):
                    flow.nifi.send("chunks", c)
                    total += 1
        flow.nifi.flush()
        names = ["completion-a", "completion-b"][:instances]
        settings = {"completion-a": {},
                    "completion-b": {"kafka.group.id": iso.prefix + "completion-b",
                                     "topic.chunk-outcomes.name": iso.topic("chunk-outcomes-b")}}
        starters = [threading.Thread(target=st.start, args=("completion", n), kwargs={"settings": settings[n]})
                    for n in names]
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        readers = {"completion-a": flow.r["chunk-outcomes"], "completion-b": other}
        replies = {}
        for n in names:
            r = readers[n]
            r.wait_for(lambda rec: rec["value"]["runId"] in {x.run_id for x in runs}, count=total, timeout=60)
            r.drain(1)
            replies[n] = [rec["value"] for rec in r.records if rec["value"]["runId"] in {x.run_id for x in runs}]
        for n in names:
            log = st.log_path(n)
            assert not events(log, "db_error") and not events(log, "dead_letter"), log
            assert st.stop(n) == 0, "%s did not exit cleanly; log %s" % (n, log)
        ledger = snapshot(db.cursor(), VOLATILE)
    finally:
        db.close()
        other.close()
        flow.close()
        close_clean(iso)
    return ledger, replies


def test_two_groups_apply_one_backlog_at_once_as_one_instance_alone():
    runs = [new_run() for _ in range(6)]
    alone, _ = apply_backlog(runs, 1)
    both, replies = apply_backlog(runs, 2)
    for run in runs:
        for n, rs in replies.items():
            assert once_each(rs, run), (n, run.run_id)
        a = {(v["partitionId"], v["chunkIndex"]): v for v in replies["completion-a"] if v["runId"] == run.run_id}
        b = {(v["partitionId"], v["chunkIndex"]): v for v in replies["completion-b"] if v["runId"] == run.run_id}
        for k in a:  # one application changed the ledger, the other found it done
            assert {a[k]["outcome"], b[k]["outcome"]} == {"ACCEPTED", "REPLAY"}, (a[k], b[k])
    assert snapshot_diff(alone, both) == []
    assert {r["status"] for r in both["load_run"]} == {"EXTRACTED_VALIDATED"}
