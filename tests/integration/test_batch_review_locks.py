"""The batch path reviewed (issue 26), items 7 and 9: locks and subtransactions of one batch's
database transaction, on the real broker and database, every message of a test on ONE Kafka
partition of its topic.

- item 7: the set-based chunk path locks runs SKIP LOCKED, and must lock partitions only of the
  runs it locked (docs/contract.md §2.8, docs/design.md §7: run row first, then partition). An operator's
  session holds run R's row; chunks of R and S come in one batch; once the service waits on R
  (the per-message path), the session locks partition (R, P). That must not close a cycle: the
  session gets the row without a deadlock (40P01), S's chunks are answered while R is still
  held, and R's once the session ends, every chunk once;
- item 9: no apply function opens a savepoint of its own inside the loop's per-message savepoint
  (docs/design.md §3: at most loop.db_batch_max <= 60 savepoints, under PostgreSQL's 64 cached
  subtransactions). 60 run requests in one batch, the last one waiting on a session's
  uncommitted run of the same job and business key. While it waits, the registrar backend's
  granted transactionid locks are counted (<= 64; but a released savepoint gives its lock back,
  so this sees only the open ones: 3 before the fix too); what the cache counts, every
  subtransaction id drawn since the top level's, is read from the ids the requests' rows carry:
  one per request (60 for the batch), where a nested savepoint drew two (121). The requests are
  answered as before: 59 ACCEPTED, the last REJECTED DUPLICATE_ACTIVE_RUN once the session
  commits.
"""
import collections
import json
import time
import uuid

import psycopg2
import pytest

from conftest import close_clean, new_run
from confluent_kafka import Producer
from llsim import avroframe
from llsim.drills import Isolated, events, send_to, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi, client_conf

PART = 1  # the one Kafka partition every test's inputs go to


def blocked_by(cur, dbname, app, session_pid):
    """The backend of service `app` waiting on a lock the session holds, or None."""
    cur.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s"
                " AND wait_event_type = 'Lock' AND %s = ANY(pg_blocking_pids(pid))", (dbname, app, session_pid))
    row = cur.fetchone()
    return row and row[0]


def session_of(st, deadlock_timeout="200ms"):
    """An operator's session (its locks last until it ends its transaction) and its backend pid.
    Its short deadlock_timeout makes it the side PostgreSQL aborts when a cycle exists."""
    conn = st.db()
    conn.autocommit = False
    cur = conn.cursor()
    cur.execute("SET deadlock_timeout = %s", (deadlock_timeout,))
    cur.execute("SET statement_timeout = '20s'")
    cur.execute("SELECT pg_backend_pid()")
    return conn, cur, cur.fetchone()[0]


def once_each(replies, run):
    """True when every chunk of run is answered exactly once in replies."""
    c = collections.Counter((v["partitionId"], v["chunkIndex"]) for v in replies if v["runId"] == run.run_id)
    return sorted(c) == sorted((pid, i) for pid in run.nonempty() for i in range(3)) and set(c.values()) == {1}


def test_set_based_path_locks_no_partition_of_a_run_it_skipped():
    iso = Isolated("reviewlocks7")
    st = iso.stack
    admin = st.db()
    admin.autocommit = True
    mon = admin.cursor()
    # the service never detects the cycle first: the session does, and is told so (40P01)
    mon.execute('ALTER ROLE ll_completion IN DATABASE "%s" SET deadlock_timeout = \'60s\'' % iso.dbname)
    for s in ("registrar", "claimer"):
        st.start(s)
    flow = Flow(Nifi(st.bootstrap, st.prefix))
    session, cur, session_pid = session_of(st)
    try:
        r, s = new_run(), new_run()
        for run in (r, s):
            assert flow.create(run)["outcome"] == "ACCEPTED"
            assert flow.register(run)["runStatus"] == "EXTRACTING"
            assert all(c["claimed"] for c in flow.claim_all(run))
        cur.execute("SELECT 1 FROM nifi_ops.load_run WHERE run_id = %s FOR UPDATE", (r.run_id,))
        for run in (r, s):  # one backlog on one Kafka partition: the service's first batch holds both
            for pid in run.nonempty():
                for c in run.chunks(pid):
                    send_to(flow.nifi, "chunks", c, partition=PART)
        flow.nifi.flush()
        st.start("completion", "completion-0",
                 settings={"db.lock_timeout": "PT5S", "loop.retry_backoff_max": "PT1S"})
        wait_until(lambda: blocked_by(mon, iso.dbname, "completion", session_pid), 30,
                   "the service waiting on run R", interval=0.05)
        # run -> partition, as the contract orders them: a plain wait at most, never a cycle
        p = r.nonempty()[0]
        try:
            cur.execute("SELECT 1 FROM nifi_ops.load_partition WHERE run_id = %s AND partition_id = %s FOR UPDATE",
                        (r.run_id, p))
        except psycopg2.errors.DeadlockDetected as e:
            pytest.fail("locking partition (R, %s) after run R deadlocked with the service: %s" % (p, e))
        # the service gives up on R (lock timeout), holds it, and commits S meanwhile
        n = 3 * len(s.nonempty())
        flow.reply("chunk-outcomes", s.run_id, count=n, timeout=30)
        session.commit()
        flow.reply("chunk-outcomes", r.run_id, count=3 * len(r.nonempty()), timeout=60)
        flow.r["chunk-outcomes"].drain(2)
        replies = [x["value"] for x in flow.r["chunk-outcomes"].records]
        for run in (r, s):
            assert once_each(replies, run), [(v["partitionId"], v["chunkIndex"]) for v in replies
                                             if v["runId"] == run.run_id]
        assert {v["outcome"] for v in replies} == {"ACCEPTED"}, replies
        mon.execute("SELECT run_id::text, status FROM nifi_ops.load_run")
        assert dict(mon.fetchall()) == {r.run_id: "EXTRACTED_VALIDATED", s.run_id: "EXTRACTED_VALIDATED"}
        log = st.log_path("completion-0")
        assert not [e for e in events(log, "db_busy") if "40P01" in json.dumps(e)], events(log, "db_busy")
        assert not events(log, "db_error")
    finally:
        session.close()
        flow.close()
        mon.execute('ALTER ROLE ll_completion IN DATABASE "%s" RESET deadlock_timeout' % iso.dbname)
        admin.close()
        close_clean(iso)


INSERT_BLOCKER = ("INSERT INTO nifi_ops.load_run (run_id, job_key, business_key, status, hdfs_run_path,"
                  " stage_table_name, parameters, started_at, heartbeat_at) VALUES (%s, %s, %s, 'CREATED',"
                  " %s, %s, '{}'::jsonb, clock_timestamp(), clock_timestamp())")


def test_sixty_run_requests_stay_within_the_subtransaction_cache():
    iso = Isolated("reviewlocks9")
    st = iso.stack
    admin = st.db()
    admin.autocommit = True
    mon = admin.cursor()
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    session, cur, session_pid = session_of(st, deadlock_timeout="1s")
    try:
        # the loop sorts a batch by run id: the request that waits is the one with the greatest id
        runs = sorted((new_run() for _ in range(60)), key=lambda x: x.run_id)
        blocker = new_run()
        last = runs[-1]
        last.business_key = blocker.business_key
        # the session's uncommitted run of the same job and business key: the last insert waits on it
        cur.execute(INSERT_BLOCKER, (blocker.run_id, blocker.job, blocker.business_key, blocker.hdfs_run_path,
                                     "stg_blocker_" + uuid.uuid4().hex[:8]))
        st.start("registrar", settings={"db.lock_timeout": "PT30S"})
        wait_until(lambda: events(st.log_path("registrar-0"), "partitions_assigned"), 30, "the registrar assigned")
        # one Kafka transaction: its read_committed consumer sees the 60 at once, in one poll
        tx = Producer(client_conf({"bootstrap.servers": st.bootstrap, "transactional.id": iso.prefix + "test"}))
        tx.init_transactions(30)
        tx.begin_transaction()
        for run in runs:
            tx.produce(nifi.topic("run-requests"), value=avroframe.encode(run.run_request(), "RunRequest", "bare"),
                       key=run.run_id.encode(), partition=PART)
        tx.commit_transaction(30)
        reg = wait_until(lambda: blocked_by(mon, iso.dbname, "registrar", session_pid), 60,
                         "the registrar waiting on the session's run", interval=0.05)
        time.sleep(0.5)
        mon.execute("SELECT count(*) FROM pg_locks WHERE pid = %s AND locktype = 'transactionid' AND granted",
                    (reg,))
        xid_locks = mon.fetchone()[0]
        mon.execute("SELECT backend_xid::text::bigint FROM pg_stat_activity WHERE pid = %s", (reg,))
        top = mon.fetchone()[0]
        session.commit()
        replies = {v["runId"]: v for v in
                   (h["value"] for h in flow.r["run-decisions"].wait_for(lambda rec: True, count=60, timeout=60))}
        flow.r["run-decisions"].drain(2)
        assert len(flow.r["run-decisions"].records) == 60, "a request was answered twice"
        # the brief's measure: a released savepoint gives its transaction id lock back at once
        # (PostgreSQL's CommitSubTransaction), so this counts only the savepoints still open
        assert xid_locks <= 64, xid_locks
        # what the 64-entry cache holds: every subtransaction id assigned since the top level's,
        # released or not. Ids are handed out in increasing order, and each request's run row
        # carries the id of the subtransaction that inserted it: two requests' rows one id apart
        # had no other subtransaction between them. A savepoint inside the loop's drew two ids per
        # request (the loop's, then its own: rows always >= 2 apart, 121 ids for the batch); one
        # per request keeps the batch at 60. The span top -> last refusal counts the ids of other
        # sessions drawn meanwhile too, so it is reported, and the gaps are what is asserted.
        mon.execute("SELECT max(xmin::text::bigint) FROM nifi_ops.load_run_rejection WHERE run_id = %s",
                    (last.run_id,))
        span = mon.fetchone()[0] - top
        mon.execute("SELECT xmin::text::bigint FROM nifi_ops.load_run WHERE run_id = ANY(%s::uuid[])"
                    " ORDER BY run_id", ([x.run_id for x in runs],))
        xmins = [r[0] for r in mon.fetchall()]
        assert xmins[0] > top and len(set(xmins)) == 59, (top, xmins)
        gaps = [b - a for a, b in zip([top] + xmins, xmins)]
        ones = sum(g == 1 for g in gaps)
        assert ones >= 50, ("60 requests in one transaction drew %d subtransaction ids (cache: 64), %d of 59"
                            " requests one apart; ids after the top level's: %s" % (span, ones, gaps))
        assert {v["outcome"] for k, v in replies.items() if k != last.run_id} == {"ACCEPTED"}
        assert (replies[last.run_id]["outcome"], replies[last.run_id]["code"]) == \
            ("REJECTED", "DUPLICATE_ACTIVE_RUN"), replies[last.run_id]
        mon.execute("SELECT code FROM nifi_ops.load_run_rejection WHERE run_id = %s", (last.run_id,))
        assert mon.fetchall() == [("DUPLICATE_ACTIVE_RUN",)]
        mon.execute("SELECT count(*) FROM nifi_ops.load_run WHERE run_id = ANY(%s::uuid[])",
                    ([x.run_id for x in runs],))
        assert mon.fetchone()[0] == 59
        log = st.log_path("registrar-0")
        assert not events(log, "db_error") and not events(log, "dead_letter"), log
    finally:
        session.close()
        flow.close()
        admin.close()
        close_clean(iso)
