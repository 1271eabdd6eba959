"""The main path through PgBouncer in transaction pooling mode (issue 9, item 8).

PgBouncer (Debian 12's package, 1.18: no prepared statements in transaction mode) runs in front of
the environment's PostgreSQL (`scripts/env.sh start pgbouncer`); the services' db.conninfo points
at it, with db.pooler left at its default (auto). Its configuration (min_pool_size 2,
server_round_robin) hands a client's consecutive transactions to different server connections,
so a named prepared statement or a session setting would be missed at once. The reference
scenario must still reach EXTRACTED_VALIDATED and SUCCESS with the right ledger; the dispatcher,
which cannot LISTEN through the pooler, polls, or LISTENs on a direct db.listen_conninfo.
"""
import os
import subprocess
import threading
import time

import psycopg2
import pytest

from conftest import close_clean, new_run, one, rows
from llsim.drills import Isolated, env_sh, events, hold_run_row, log_lines
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.lifecycle import Lifecycle
from llsim.probe import wait_log
from llsim.stack import read_env

PGBOUNCER = "/usr/sbin/pgbouncer"

pytestmark = pytest.mark.skipif(
    not os.access(PGBOUNCER, os.X_OK),
    reason="%s missing: Debian's pgbouncer package is not installed (scripts/env.sh install installs it)"
    % PGBOUNCER)

SERVICES = ("registrar", "claimer", "completion", "dispatcher", "sweeper")


@pytest.fixture(scope="module")
def bouncer():
    """PgBouncer of the environment (started for this module, stopped after it): its port."""
    iso = Isolated("pgbouncer")
    env_sh(iso.stack, "start", "pgbouncer")
    port = int(read_env(iso.stack.run_dir)["LL_PGBOUNCER_PORT"])
    iso.stack.service_port = port
    yield iso, port
    close_clean(iso)
    env_sh(iso.stack, "stop", "pgbouncer")


def admin(port, sql):
    """Rows of a PgBouncer admin console command (SHOW ...), as dicts; [] for one that returns
    none (PAUSE, RELOAD, ...)."""
    c = psycopg2.connect(host="127.0.0.1", port=port, dbname="pgbouncer", user="postgres")
    c.autocommit = True
    try:
        with c.cursor() as cur:
            cur.execute(sql)
            if cur.description is None:
                return []
            cols = [d[0] for d in cur.description]
            return [dict(zip(cols, r)) for r in cur.fetchall()]
    finally:
        c.close()


def test_reference_scenario_reaches_success_through_pgbouncer(bouncer):
    iso, port = bouncer
    stack = iso.stack
    for s in SERVICES:
        stack.start(s)
    nifi = Nifi(iso.bootstrap, iso.prefix)
    flow = Flow(nifi)
    life = Lifecycle(flow)
    try:
        run = new_run()
        steps = flow.to_extracted(run)
        assert sum(1 for c in steps["claims"] if c["claimed"]) == 7
        assert sum(1 for o in steps["chunks"] if o["validationScheduled"]) == 1
        dispatch_id = steps["commands"][0]["dispatchId"]
        done = life.to_success(run, dispatch_id)
        assert done["success"]["success"] is True and done["success"]["runStatus"] == "SUCCESS"
        flow.r["validate-run-commands"].drain(2)
        cmds = [r for r in flow.r["validate-run-commands"].records if r["value"]["runId"] == run.run_id]
        assert len(cmds) == 1
    finally:
        flow.close()

    # the ledger, read directly from PostgreSQL
    c = stack.db()
    db = c.cursor()
    try:
        db.execute("SELECT status, extracted_count, staging_count, target_count FROM nifi_ops.load_run"
                   " WHERE run_id = %s", (run.run_id,))
        assert db.fetchone() == ("SUCCESS", 105000, 105000, 105000)
        parts = rows(db, "SELECT partition_id, status, actual_row_count, file_count FROM nifi_ops.load_partition"
                         " WHERE run_id = %s ORDER BY partition_id", run.run_id)
        assert parts == [("%04d" % i, "SUCCESS", 0 if i == 5 else 15000, 0 if i == 5 else 3) for i in range(8)]
        assert one(db, "SELECT count(*), sum(record_count)::bigint FROM nifi_ops.load_file WHERE run_id = %s"
                       " AND status = 'WRITTEN'", run.run_id) == (21, 105000)
        assert rows(db, "SELECT dispatch_id::text, status FROM nifi_ops.load_dispatch WHERE run_id = %s",
                    run.run_id) == [(dispatch_id, "ACKED")]
    finally:
        c.close()

    # it went through PgBouncer: every service is its client, on the drill's database, and the
    # pools rotate over more than one server connection
    clients = {(r["user"], r["database"]) for r in admin(port, "SHOW CLIENTS")}
    for s in SERVICES:
        assert ("ll_" + s, iso.dbname) in clients, clients
    servers = [r for r in admin(port, "SHOW SERVERS") if r["user"] == "ll_completion" and r["database"] == iso.dbname]
    assert len(servers) >= 2, servers
    stats = {r["database"]: r for r in admin(port, "SHOW STATS")}
    assert stats[iso.dbname]["total_xact_count"] > 0  # (counted every stats_period)

    # each service saw the pooler; nothing failed on a statement; the dispatcher polls
    for s in SERVICES:
        path = stack.log_path(s + "-0")
        assert events(path, "db_pooled"), "%s did not detect the pooler (%s)" % (s, path)
        bad = [e for e in log_lines(path) if e.get("level") == "error" or e.get("event") == "sweeper_error"
               or "prepared statement" in e.get("msg", "")]
        assert not bad, (s, bad[:3])
    assert events(stack.log_path("dispatcher-0"), "listen_pooled")
    assert not events(stack.log_path("dispatcher-0"), "listen_connected")


def test_lock_timeout_bounds_a_pooled_transaction(bouncer):
    """The limits reach every transaction, whichever server connection it runs on: a run row held
    locked by a direct session makes the completion's transaction time out after db.lock_timeout
    (2 s), logged as db_busy while the lock is still held, and answered once it is released."""
    iso, _ = bouncer
    stack = iso.stack
    for s in ("registrar", "claimer", "completion"):
        if "%s-0" % s not in stack.procs:
            stack.start(s)
    nifi = Nifi(iso.bootstrap, iso.prefix)
    flow = Flow(nifi)
    try:
        run = new_run()
        flow.create(run)
        flow.register(run)
        nifi.send("partition-claims", run.claim("0000"))
        nifi.flush()
        flow.reply("claim-decisions", run.run_id)
        locked = threading.Event()
        holder = threading.Thread(target=hold_run_row, args=(stack, run.run_id, 8, locked))
        holder.start()
        assert locked.wait(10)
        t0 = time.time()
        for c in run.chunks("0000"):
            nifi.send("chunks", c)
        nifi.flush()
        log = stack.log_path("completion-0")
        busy = []
        while not busy and time.time() - t0 < 7:
            busy = [e for e in events(log, "db_busy") if e.get("runId") == run.run_id]
            time.sleep(0.2)
        assert busy, "no lock timeout within 7 s while the run row was locked (limits not applied per transaction)"
        assert "55P03" in busy[0]["msg"], busy[0]
        holder.join()
        outs = flow.reply("chunk-outcomes", run.run_id, count=3, timeout=60)
        assert [o["outcome"] for o in outs] == ["ACCEPTED"] * 3, outs
    finally:
        flow.close()


def test_dispatcher_listens_on_a_direct_listen_conninfo(bouncer):
    iso, port = bouncer
    stack = iso.stack
    direct = stack.conninfo("ll_dispatcher")  # PostgreSQL's own port
    stack.start("dispatcher", "dispatcher-listen", {"db.listen_conninfo": direct})
    wait_log(stack, "dispatcher-listen", "listen_connected", timeout=30)
    assert events(stack.log_path("dispatcher-listen"), "db_pooled")
    assert not events(stack.log_path("dispatcher-listen"), "listen_pooled")
    assert stack.stop("dispatcher-listen") == 0


def test_an_unknown_pooler_setting_is_refused_at_start(bouncer):
    iso, _ = bouncer
    stack = iso.stack
    p = stack.start("registrar", "registrar-badpooler", {"db.pooler": "session"})
    p.wait(timeout=30)
    stack.procs.pop("registrar-badpooler")[1].close()
    assert p.returncode != 0
    with open(stack.log_path("registrar-badpooler"), errors="replace") as f:
        out = f.read()
    assert "db.pooler must be auto, none or transaction" in out, out[-2000:]


# -- the database went back in time behind the pooler (issue 39, item 1) -------------------------

def pgbouncer_ini(stack):
    return os.path.join(stack.run_dir, "pgbouncer", "pgbouncer.ini")


def past_copy(stack, name):
    """A copy of the stack's database as it is now (pg_dump, pg_restore into a database `name`):
    the ledger an asynchronous standby or a restore would bring back later."""
    dump = os.path.join(stack.log_dir, name + ".dump")
    bindir = stack.env["LL_PG_BINDIR"]
    pg = ["-h", stack.pg["host"], "-p", str(stack.pg["port"]), "-U", "postgres"]
    subprocess.run([os.path.join(bindir, "pg_dump"), "-Fc", "-f", dump] + pg + [stack.pg["dbname"]], check=True,
                   capture_output=True, timeout=120)
    base = stack.db()
    base.autocommit = True
    with base.cursor() as c:
        c.execute('CREATE DATABASE "%s"' % name)
    base.close()
    subprocess.run([os.path.join(bindir, "pg_restore"), "--exit-on-error", "-d", name] + pg + [dump], check=True,
                   capture_output=True, timeout=120)


def redirect_behind_pooler(stack, port, dbname, target):
    """What a pooler does after a failover: its server connections for dbname now reach `target`
    (here a database of the same cluster holding the past), while every client connection stays
    open and is never told (PAUSE, the [databases] entry changed, RELOAD, RECONNECT, RESUME).
    target None: the entry removed again."""
    ini = pgbouncer_ini(stack)
    with open(ini) as f:
        lines = [ln for ln in f.read().splitlines() if not ln.startswith(dbname + " = ")]
    if target:
        at = lines.index("[databases]") + 1
        lines.insert(at, "%s = host=127.0.0.1 port=%d dbname=%s" % (dbname, stack.pg["port"], target))
    if not target:
        with open(ini, "w") as f:
            f.write("\n".join(lines) + "\n")
        admin(port, "RELOAD")
        return
    admin(port, "PAUSE %s" % dbname)
    try:
        with open(ini, "w") as f:
            f.write("\n".join(lines) + "\n")
        admin(port, "RELOAD")
        admin(port, "RECONNECT %s" % dbname)
    finally:
        admin(port, "RESUME %s" % dbname)


def claims_in(stack, dbname, run_id):
    c = psycopg2.connect(host=stack.pg["host"], port=stack.pg["port"], dbname=dbname, user="postgres")
    try:
        with c.cursor() as cur:
            return rows(cur, "SELECT partition_id, status, claim_token::text FROM nifi_ops.load_partition"
                             " WHERE run_id = %s AND status = 'RUNNING' ORDER BY partition_id", run_id)
    finally:
        c.close()


@pytest.mark.parametrize("path", ["idle", "write"])
def test_a_ledger_gone_back_behind_the_pooler_is_found_and_its_lost_claims_applied_again(bouncer, path):
    """Two claims answered ACCEPTED; then the pooler's server connections reach a ledger from
    before them (a failover to an asynchronous standby, behind an unchanged client connection: no
    new libpq connection, no error). The claimer must find the loss by itself and apply both
    claims again, without a second answer: on a partition that receives nothing more (path idle:
    its periodic position check), and at the next write (path write: the position's
    compare-and-set, the idle check off). Before issue 39 neither happened: the claims stayed lost
    and the next batch wrote its position over the restored one."""
    _, port = bouncer
    iso = Isolated("pooled_loss")
    stack = iso.stack
    stack.service_port = port
    past = iso.dbname + "_past"
    settings = {"loop.position_check_interval": "PT1S" if path == "idle" else "PT1H"}
    nifi = Nifi(iso.bootstrap, iso.prefix)
    flow = Flow(nifi)
    try:
        stack.start("registrar")
        stack.start("claimer", None, settings)
        run = new_run()
        flow.create(run)
        flow.register(run)
        past_copy(stack, past)  # the ledger before the claims
        for pid in ("0000", "0001"):
            nifi.send("partition-claims", run.claim(pid))
        nifi.flush()
        got = flow.reply("claim-decisions", run.run_id, count=2)
        assert [(d["partitionId"], d["claimed"]) for d in sorted(got, key=lambda d: d["partitionId"])] == [
            ("0000", True), ("0001", True)]
        want = [(pid, "RUNNING", run.tokens[pid]) for pid in ("0000", "0001")]
        assert claims_in(stack, iso.dbname, run.run_id) == want
        redirect_behind_pooler(stack, port, iso.dbname, past)
        assert claims_in(stack, past, run.run_id) == []
        if path == "write":
            # a third claim of the same run: keyed by the run id, on the Kafka partition of the two
            # lost ones, so its batch writes that partition's position (a partition's loss is
            # found by its own position write, or by the check)
            nifi.send("partition-claims", run.claim("0002"))
            nifi.flush()
            assert flow.reply("claim-decisions", run.run_id, lambda d: d["partitionId"] == "0002")[-1]["claimed"]
            want = want + [("0002", "RUNNING", run.tokens["0002"])]
        end = time.time() + 30
        while time.time() < end and claims_in(stack, past, run.run_id) != want:
            time.sleep(0.3)
        assert claims_in(stack, past, run.run_id) == want, (
            "the claims the ledger lost behind the pooler were not applied again (claimer log %s)"
            % stack.log_path("claimer-0"))
        behind = events(stack.log_path("claimer-0"), "ledger_behind_kafka")
        assert behind, "the loss was not logged"
        # one answer per claim: the worker keeps the one it had
        flow.r["claim-decisions"].drain(2)
        mine = [r for r in flow.r["claim-decisions"].records if r["value"]["runId"] == run.run_id]
        assert len(mine) == len(want), mine
    finally:
        flow.close()
        stack.stop_all()
        try:
            redirect_behind_pooler(stack, port, iso.dbname, None)
        finally:
            iso.close()
            base = psycopg2.connect(stack.conninfo(), dbname="postgres")
            base.autocommit = True
            with base.cursor() as c:
                c.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % past)
            base.close()
