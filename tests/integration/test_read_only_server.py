"""A database server that answers read-only is not one to write to (docs/design.md §3, the
database errors).

SQLSTATE 25006 (read_only_sql_transaction) comes from a standby reached through a multi-host
conninfo without target_session_attrs=read-write, from a pooler still holding connections to a
node that became a standby, or from default_transaction_read_only switched on for maintenance.
Every write of that session fails, however often it is retried: the session must be left, and the
next connection (libpq goes through the conninfo's hosts again) made. Treated as any other SQL
error, the message's run was held and retried on the same session for ever.

Here the claimer's next session is made read-only (ALTER ROLE ... IN DATABASE ... SET
default_transaction_read_only, then its connection terminated), a claim is published, and the
setting is reset once the claimer has met 25006: the claim is answered ACCEPTED, once, without a
restart.
"""
import time

import pytest

from conftest import new_run
from llsim.drills import Isolated, events, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi

LOOP = {"loop.retry_backoff_max": "PT1S"}


@pytest.fixture(scope="module")
def iso():
    i = Isolated("readonly")
    yield i
    db = i.stack.db()
    with db.cursor() as c:
        c.execute('ALTER ROLE ll_claimer IN DATABASE "%s" RESET default_transaction_read_only' % i.dbname)
    db.close()
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


def claimer_backends(st, dbname):
    db = st.db()
    with db.cursor() as c:
        c.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s AND usename = 'll_claimer'", (dbname,))
        pids = [r[0] for r in c.fetchall()]
    db.close()
    return pids


def met_read_only(log):
    """Log lines of the claimer that carry SQLSTATE 25006."""
    with open(log, encoding="utf-8", errors="replace") as f:
        return [ln for ln in f if "25006" in ln]


def test_a_read_only_session_is_left_for_a_new_connection(iso):
    st = iso.stack
    st.start("registrar")
    st.start("claimer", settings=LOOP)
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    try:
        run = new_run()
        flow.create(run)
        flow.register(run)
        nifi.send("partition-claims", run.claim("0000"))
        nifi.flush()
        assert flow.reply("claim-decisions", run.run_id)[0]["outcome"] == "ACCEPTED"

        db = st.db()
        db.autocommit = True
        with db.cursor() as c:
            c.execute('ALTER ROLE ll_claimer IN DATABASE "%s" SET default_transaction_read_only = on' % iso.dbname)
            for pid in claimer_backends(st, iso.dbname):
                c.execute("SELECT pg_terminate_backend(%s)", (pid,))
        nifi.send("partition-claims", run.claim("0001"))
        nifi.flush()
        log = "%s/claimer-0.log" % st.log_dir
        # the claimer reconnects (a read-only session now) and its write meets 25006
        assert wait_until(lambda: met_read_only(log), timeout=30), "the claimer never met SQLSTATE 25006"
        with db.cursor() as c:
            c.execute('ALTER ROLE ll_claimer IN DATABASE "%s" RESET default_transaction_read_only' % iso.dbname)
        db.close()
        t0 = time.time()
        replies = flow.reply("claim-decisions", run.run_id, pred=lambda v: v["partitionId"] == "0001",
                             timeout=30)
        assert [r["outcome"] for r in replies] == ["ACCEPTED"]
        # answered once: no second reply to the same claim
        time.sleep(2)
        again = flow.reply("claim-decisions", run.run_id, pred=lambda v: v["partitionId"] == "0001", count=1,
                           timeout=1)
        assert len(again) == 1, "the claim of 0001 was answered %d times" % len(again)
        assert events(log, "db_read_only"), "no db_read_only line: %s" % log
        print("answered %.1f s after the setting was reset" % (time.time() - t0))
    finally:
        flow.close()
