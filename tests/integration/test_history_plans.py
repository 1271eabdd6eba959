"""Every read of the history bounded by an index or a window (issue 42, item 2): on a generated
history of 3,000 runs (scripts/bench/history.sql: a year, 8 partitions of 3 chunks a run, the
statuses in realistic shares, DEAD dispatches, cleanups and failed cleanups) plus a few active runs,
ANALYZEd, the plan of each read that scanned a table of history before 0017_history_reads is
EXPLAINed with realistic parameters, as a prepared statement's custom plan like the services run
it, and must read no table of history sequentially and use the index that bounds it. The texts are
the ones that ship: build/tests/ll-print-reads prints them from the headers the services and
loadctl compile (tests/tools/ll_print_reads.c). Besides, every statement of the services and of
the shared core, taken from the build's own preprocessing of each C file, is EXPLAINed in its
generic plan and must scan no table of history either. A plan test, not a timing: the history is small
enough for the test to take a few seconds, large enough that a scan of a table costs more than
its index to the planner.
"""
import json
import os
import re
import subprocess
import uuid

import psycopg2
import pytest

from llsim.history import HISTORY_TABLES, explain, generate, generic_plan, history_scans, indexes_used, shipped_statements
from llsim.stack import Stack

RUNS = 3000
SUCCESS_MS, FAILED_MS = 3 * 86400 * 1000, 14 * 86400 * 1000  # the contract's default retentions (§9)


@pytest.fixture(scope="module")
def ledger():
    """A database of its own, migrated, with the generated history; (stack, cursor, statements)."""
    st = Stack()
    name = "llplan_" + uuid.uuid4().hex[:10]
    base = st.db()
    with base.cursor() as c:
        c.execute('CREATE DATABASE "%s"' % name)
    st.pg["dbname"] = name
    try:
        st.migrate()
        generate(st, runs=RUNS)
        out = subprocess.run([os.path.join(st.build_dir, "tests", "ll-print-reads")], check=True,
                             capture_output=True, text=True).stdout
        stmts = {d["name"]: d for d in map(json.loads, out.splitlines())}
        conn = psycopg2.connect(st.conninfo())
        conn.autocommit = True
        yield st, conn.cursor(), stmts
        conn.close()
    finally:
        with base.cursor() as c:
            c.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
        base.close()


def one(cur, sql, *args):
    cur.execute(sql, args or None)
    return cur.fetchone()


def bounded(ledger, name, params, want=(), want_any=()):
    """The plan of statement `name` for `params`: no sequential scan of a table of history, every
    index of `want` used, and one of `want_any` if given; returns the indexes used."""
    _, cur, stmts = ledger
    st = stmts[name]
    assert len(params) == st["nparams"], (name, st["nparams"])
    nodes = explain(cur, name, st["sql"], params)
    scans = history_scans(nodes)
    assert not scans, "%s scans history %s; plan: %s" % (name, scans, json.dumps(nodes[0], indent=1)[:6000])
    used = indexes_used(nodes)
    missing = set(want) - used
    assert not missing, "%s does not use %s (uses %s)" % (name, sorted(missing), sorted(used))
    assert not want_any or used & set(want_any), "%s uses none of %s (uses %s)" % (name, sorted(want_any),
                                                                                   sorted(used))
    return used


def test_the_history_is_generated_in_realistic_shares(ledger):
    _, cur, _ = ledger
    total, success, failed, dead, cleaned = one(
        cur, "SELECT count(*), count(*) FILTER (WHERE status = 'SUCCESS'),"
        " count(*) FILTER (WHERE status LIKE 'FAILED%' OR status = 'TIMED_OUT'),"
        " (SELECT count(*) FROM nifi_ops.load_dispatch WHERE status = 'DEAD'),"
        " count(*) FILTER (WHERE cleaned_at IS NOT NULL) FROM nifi_ops.load_run")
    assert total == RUNS + 12
    assert 0.85 * RUNS < success < 0.95 * RUNS and 0.04 * RUNS < failed < 0.15 * RUNS, (success, failed)
    assert 0 < dead < 0.05 * RUNS and cleaned > 0.9 * RUNS, (dead, cleaned)
    files, parts, events = one(cur, "SELECT (SELECT count(*) FROM nifi_ops.load_file),"
                               " (SELECT count(*) FROM nifi_ops.load_partition), (SELECT count(*) FROM nifi_ops.load_event)")
    assert parts > 7 * RUNS and files > 2.5 * parts * 0.9 and events > 20 * RUNS, (parts, files, events)
    first, last = one(cur, "SELECT min(started_at), max(started_at) FROM nifi_ops.load_run")
    assert (last - first).days >= 360


def test_verify_reads_a_page_of_runs_through_indexes(ledger):
    """verify pages the runs in start order (ix_load_run_started, a keyset: the rows of runs that
    started together lie together) and reads every table for the run ids of one page only."""
    _, cur, stmts = ledger
    # a page is 500 of a year's 180,000 runs (0.3 %); of this history's 3,000 runs, a sixth, for
    # which reading all of load_run and sorting it can be the cheaper plan (it was, once, right
    # after the environment started): the plans are asked for the page's share of a year
    share = str(RUNS * 500 // 180000 + 1)
    started, mid = one(cur, "SELECT started_at::text, run_id::text FROM nifi_ops.load_run"
                       " ORDER BY started_at DESC, run_id OFFSET %s LIMIT 1", RUNS // 2)
    for limit in (share, "500"):  # a year's page share, and the page itself
        for name, params in (("verify_page_first", [limit]), ("verify_page_next", [started, mid, limit])):
            bounded(ledger, name, params, want={"ix_load_run_started"})
            # the page is read in the index's order and stopped after LIMIT rows: no sort of the runs
            # before it (ORDER BY the output column started_at::text once sorted every run past the
            # keyset, a text sort no index serves: verify was quadratic again)
            nodes = explain(cur, name, stmts[name]["sql"], params)
            sorts = [n["Node Type"] for n in nodes if "Sort" in n["Node Type"]]
            assert not sorts, "%s sorts the runs (%s): %s" % (name, sorts, json.dumps(nodes[0], indent=1)[:3000])
    for name in ("verify_page_first", "verify_page_next"):  # and so from the sixth page on (generic plan)
        nodes = generic_plan(cur, stmts[name]["sql"], stmts[name]["nparams"])
        sorts = [n["Node Type"] for n in nodes if "Sort" in n["Node Type"]]
        assert not sorts and "ix_load_run_started" in indexes_used(nodes), (name, json.dumps(nodes[0], indent=1)[:3000])
    sql = stmts["verify_page_next"]["sql"]
    for k, v in (("$1::timestamptz", "%(t)s::timestamptz"), ("$2::uuid", "%(r)s::uuid"), ("$3::int", "500")):
        sql = sql.replace(k, v)
    cur.execute(sql, {"t": started, "r": mid})
    page = cur.fetchall()
    # the 500 runs right after (started, mid) in (started_at DESC, run_id) order, none twice
    cur.execute("SELECT run_id::text FROM nifi_ops.load_run WHERE (started_at, run_id::text) <> (%s::timestamptz, %s)"
                " ORDER BY started_at DESC, run_id", (started, mid))
    everyone = [r[0] for r in cur.fetchall()]
    after = everyone[everyone.index(page[0][0]):][:500]
    assert [r[0] for r in page] == after and len(page) == 500
    assert page[0][1] <= started
    ids = "{" + ",".join(r[0] for r in page[:int(share)]) + "}"  # the page's share of a year, as above
    # a run's status events through their own partial index (0019), whose predicate is exactly the
    # list verify writes out (LL_STATUS_EVENT_NAMES_SQL): a name on one side only and the planner
    # reads every event of the run through ix_load_event_run_time again
    bounded(ledger, "verify_run_events", [ids], want={"ix_load_event_status"})
    written = set(re.findall(r"'([A-Z_]+)'", stmts["verify_run_events"]["sql"].split("event_name IN (")[1].split(")")[0]))
    predicate = one(cur, "SELECT pg_get_expr(i.indpred, i.indrelid) FROM pg_index i"
                    " WHERE i.indexrelid = 'nifi_ops.ix_load_event_status'::regclass")[0]
    assert written == set(re.findall(r"'([A-Z_]+)'", predicate)) and len(written) == 13, (written, predicate)
    bounded(ledger, "verify_validate_dispatch", [ids])
    files = {"ix_load_file_partition_status", "load_file_pkey"}  # both lead with (run_id, partition_id)
    bounded(ledger, "verify_partitions", [ids], want_any=files)


def test_sweeper_gauges_read_active_runs_and_dead_dispatches(ledger):
    bounded(ledger, "sweep_gauges", [], want={"ix_load_run_active_status"},
            want_any={"ix_load_dispatch_dead", "ix_load_dispatch_run"})
    # the DEAD dispatches are probed run by run from the active runs, never read all at once: every
    # read of load_dispatch is bounded by the run (DEAD rows of ended runs stay for ever, §3.4)
    _, cur, stmts = ledger
    nodes = explain(cur, "sweep_gauges", stmts["sweep_gauges"]["sql"], [])
    reads = [n for n in nodes if n.get("Index Name", "").startswith(("ix_load_dispatch", "uq_load_dispatch",
                                                                      "load_dispatch"))]
    assert reads and all("run_id" in n.get("Index Cond", "") for n in reads), json.dumps(nodes[0], indent=1)[:4000]


def test_monitor_frame_is_indexes_and_windows(ledger):
    _, cur, _ = ledger
    counts = [str(SUCCESS_MS), str(FAILED_MS), "200"]
    alerts = ["3600000", "1800000", "50"]
    bounded(ledger, "monitor_counts", counts + [None],
            want={"ix_load_run_ended_at", "ix_load_run_cleanup_ended_at", "ix_load_dispatch_dead", "ix_load_dispatch_due"})
    bounded(ledger, "monitor_runs", ["50", None], want_any={"ix_load_run_active_status", "uq_load_run_active"})
    bounded(ledger, "monitor_alerts", alerts + [None],
            want={"ix_load_run_ended_at", "ix_load_dispatch_dead", "ix_load_event_cleanup_failed"})
    # one job (`loadctl monitor --job`): its runs through the job's indexes instead
    job = one(cur, "SELECT job_key FROM nifi_ops.load_run ORDER BY started_at DESC LIMIT 1")[0]
    bounded(ledger, "monitor_counts", counts + [job], want_any={"ix_load_run_job_started", "ix_load_run_ended_at"})
    bounded(ledger, "monitor_runs", ["50", job])
    bounded(ledger, "monitor_alerts", alerts + [job], want={"ix_load_dispatch_dead", "ix_load_event_cleanup_failed"})


def test_runs_newest_first_through_started_index(ledger):
    _, cur, _ = ledger
    bounded(ledger, "loadctl_runs", [None, None, None, "50"], want={"ix_load_run_started"})
    bounded(ledger, "loadctl_runs", [None, None, "SUCCESS", "50"], want={"ix_load_run_started"})
    job = one(cur, "SELECT job_key FROM nifi_ops.load_run LIMIT 1")[0]
    bounded(ledger, "loadctl_runs", [job, None, None, "50"], want={"ix_load_run_job_started"})


def test_cleanup_candidates_in_index_order(ledger):
    _, cur, _ = ledger
    bounded(ledger, "cleanup_candidates", [None, str(SUCCESS_MS), str(FAILED_MS), "50"],
            want={"ix_load_run_cleanup_ended_at"})
    # and the order needs no sort of the candidates: the index gives it
    _, cur, stmts = ledger
    nodes = explain(cur, "cleanup_candidates", stmts["cleanup_candidates"]["sql"],
                    [None, str(SUCCESS_MS), str(FAILED_MS), "50"])
    assert not [n for n in nodes if n["Node Type"] == "Sort"], [n["Node Type"] for n in nodes]


def test_dispatches_of_a_run_through_run_index(ledger):
    _, cur, _ = ledger
    run, pid = one(cur, "SELECT run_id::text, partition_id FROM nifi_ops.load_dispatch"
                   " WHERE dispatch_type = 'REISSUE_PARTITION' AND status = 'ACKED' LIMIT 1")
    bounded(ledger, "show_dispatches", [run], want={"ix_load_dispatch_run"})
    bounded(ledger, "claim_ack_reissue", [run, pid], want={"ix_load_dispatch_run"})


def test_no_service_statement_scans_history(ledger):
    """Every statement of the services and of the shared core (services/, common/: 90 or so), as
    compiled, in its generic plan (the one a prepared statement settles on): no sequential scan of
    a table of history. A table the generated history leaves smaller than a few pages (the refused
    runs, the refusals, the rewinds, the accepted gaps) is read whole by any plan and not judged:
    its statements are lookups by key."""
    st, cur, _ = ledger
    stmts = shipped_statements(st.build_dir)
    assert len(stmts) > 80, sorted(stmts)
    cur.execute("SELECT relname FROM pg_class WHERE relnamespace = 'nifi_ops'::regnamespace AND relkind = 'r'"
                " AND relpages >= 8")
    large = {r[0] for r in cur.fetchall()} & HISTORY_TABLES
    assert {"load_run", "load_partition", "load_file", "load_event", "load_dispatch"} <= large, large
    bad = []
    for name, (src, nparams, sql) in sorted(stmts.items()):
        scans = [t for t, _ in history_scans(generic_plan(cur, sql, nparams)) if t in large]
        if scans:
            bad.append("%s (%s): %s" % (name, src, scans))
    assert not bad, "statements whose plan scans a table of history:\n" + "\n".join(bad)


def test_verify_walks_every_run_once_across_pages(ledger):
    """The keyset walk of verify (pages of 500 runs, newest first) reaches every run: runs at both
    sides of a page boundary and the oldest run, each given a status its events do not imply, are
    the run-status violations reported, each once, and nothing else."""
    st, cur, _ = ledger
    cur.execute("SELECT run_id::text, status FROM nifi_ops.load_run WHERE status = 'SUCCESS'"
                " ORDER BY started_at DESC, run_id")
    success = cur.fetchall()
    cur.execute("SELECT count(*) FROM nifi_ops.load_run")
    assert cur.fetchone()[0] > 1000  # more than two pages
    cur.execute("SELECT run_id::text FROM nifi_ops.load_run ORDER BY started_at DESC, run_id OFFSET 499 LIMIT 2")
    boundary = [r[0] for r in cur.fetchall()]
    by_id = dict(success)
    planted = [r for r in boundary if r in by_id] + [success[-1][0]]
    assert len(planted) >= 2
    cur.execute("UPDATE nifi_ops.load_run SET status = 'FAILED_PUBLISH' WHERE run_id = ANY(%s::uuid[])", (planted,))
    try:
        p = st.loadctl("verify", "--json", check=False)
    finally:
        cur.execute("UPDATE nifi_ops.load_run SET status = 'SUCCESS' WHERE run_id = ANY(%s::uuid[])", (planted,))
    assert p.returncode == 5, p.stderr
    checks = {c["name"]: c for c in json.loads(p.stdout)["checks"]}
    assert checks["run_status"]["violations"] == len(planted), checks["run_status"]
    assert sorted(s.split(":")[0] for s in checks["run_status"]["samples"]) == sorted(planted)
    assert all(c["violations"] == 0 for n, c in checks.items() if n != "run_status" and c["checked"])


def test_sessions_of_the_services_run_without_jit(ledger):
    """Every session of the shared database layer (the services, loadctl) sets jit off: the cost
    estimates of bounded reads grow with the history (verify's page reads passed jit_above_cost at
    60,000 runs and paid 10-20 ms of compilation each: 22 s instead of 8.5 s)."""
    st, cur, _ = ledger
    cur.execute("SHOW jit")
    assert cur.fetchone()[0] == "on"  # the server's default: the layer, not the cluster, turns it off
    out = subprocess.run([os.path.join(st.build_dir, "tests", "ll-db-session"), st.conninfo()],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "jit=off"


def test_sweeper_ended_runs_reads_a_window_of_ended_runs(ledger):
    """The sweeper's rule ended_partitions (contract §7.6) finds the runs that ended in its window
    through ix_load_run_completed alone: the run statuses are checked on that range's rows, never by
    ANDing it with an index of every failed run (ix_load_run_status_heartbeat before 0020, 2-3 ms a
    tick at a year); the stale partitions through the partial index of active partitions."""
    st, cur, _ = ledger
    sql = shipped_statements(st.build_dir)["sweep_ended_runs"][2]
    nodes = explain(cur, "sweep_ended_runs", sql, ["10 minutes", "6 hours"])
    assert not history_scans(nodes)
    used = indexes_used(nodes)
    assert "ix_load_run_completed" in used and "ix_load_partition_active" in used, used
    assert "ix_load_run_active_status" not in used, used


def test_reads_of_active_runs_and_partitions_through_the_partial_indexes(ledger):
    """The reads that took heartbeat_at from ix_load_run_status_heartbeat or ix_load_partition_recovery
    before 0020 (issue 42: the heartbeats are HOT updates only while no index names heartbeat_at) read
    the few active runs or partitions through ix_load_run_active_status / ix_load_partition_active
    and filter the heartbeat on those rows: the sweeper's stale-validation alerts and rule 1's runs,
    in their custom and generic plans, and never an index of terminal runs."""
    st, cur, _ = ledger
    stmts = shipped_statements(st.build_dir)
    for name, params, want in (("sweep_stale_alert", ["1 hour"], {"ix_load_run_active_status"}),
                               ("sweep_stale_runs", ["10 minutes"], {"ix_load_run_active_status"})):
        sql = stmts[name][2]
        for nodes in (explain(cur, name, sql, params), generic_plan(cur, sql, len(params))):
            assert not history_scans(nodes), (name, json.dumps(nodes[0], indent=1)[:3000])
            used = indexes_used(nodes)
            assert want <= used, (name, used)
    # rule 1's stale partitions of a run: by the run's key; the monitor's RUN_STALE alerts: above
    sql = stmts["sweep_stale_partitions"][2]
    run = one(cur, "SELECT run_id::text FROM nifi_ops.load_partition WHERE status = 'RUNNING' LIMIT 1")[0]
    nodes = explain(cur, "sweep_stale_partitions", sql, [run, "10 minutes"])
    assert not history_scans(nodes) and indexes_used(nodes), json.dumps(nodes[0], indent=1)[:3000]


def test_no_index_of_the_heartbeat_tables_names_heartbeat_at(ledger):
    """0020: no index of load_run or load_partition names heartbeat_at (key, expression or predicate),
    both tables keep free room in their pages, and load_run.ended_at is the ended time loadctl's
    reads took before (LC_ENDED was coalesce(completed_at, heartbeat_at)) on every run they can
    select (the terminal ones), NULL on every active run."""
    _, cur, _ = ledger
    cur.execute("SELECT c.relname, i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
                " JOIN pg_class c ON c.oid = x.indrelid WHERE c.relnamespace = 'nifi_ops'::regnamespace"
                " AND c.relname IN ('load_run', 'load_partition')"
                " AND pg_get_indexdef(x.indexrelid) LIKE '%%heartbeat_at%%'")
    assert cur.fetchall() == []
    cur.execute("SELECT relname, reloptions FROM pg_class WHERE relnamespace = 'nifi_ops'::regnamespace"
                " AND relname IN ('load_run', 'load_partition') ORDER BY 1")
    assert [(r, "fillfactor=80" in o) for r, o in cur.fetchall()] == [("load_partition", True), ("load_run", True)]
    terminal = "('SUCCESS', 'FAILED_MANIFEST', 'FAILED_EXTRACT', 'FAILED_STAGE_VALIDATION', 'FAILED_PUBLISH'," \
               " 'FAILED_TARGET_VALIDATION', 'FAILED_SNAPSHOT_EXPIRED', 'TIMED_OUT')"
    cur.execute("SELECT count(*) FILTER (WHERE status IN %s),"
                " count(*) FILTER (WHERE status IN %s AND ended_at = coalesce(completed_at, heartbeat_at)),"
                " count(*) FILTER (WHERE status NOT IN %s), count(*) FILTER (WHERE status NOT IN %s AND ended_at IS NULL)"
                " FROM nifi_ops.load_run" % ((terminal,) * 4))
    ended, same, active, null = cur.fetchone()
    assert ended > 0.9 * RUNS and same == ended and active > 0 and null == active, (ended, same, active, null)
    # a terminal run without completed_at (one written by hand, ledgerfix.py) ends at its heartbeat
    cur.execute("SELECT run_id FROM nifi_ops.load_run WHERE status = 'TIMED_OUT' LIMIT 1")
    rid = cur.fetchone()[0]
    cur.execute("BEGIN")
    try:
        cur.execute("UPDATE nifi_ops.load_run SET completed_at = NULL WHERE run_id = %s"
                    " RETURNING ended_at = heartbeat_at", (rid,))
        assert cur.fetchone()[0] is True
    finally:
        cur.execute("ROLLBACK")


# a year of the benchmark's history (docs/performance.md): 180,000 runs of 8 partitions, a VALIDATE_RUN each
A_YEAR = {"load_run": 180000, "load_partition": 1440000, "load_dispatch": 190000}
# 0021: the dead rows at which autovacuum starts on each table, whatever its size
CHURN_VACUUM_AT = {"load_run": 5000, "load_partition": 10000, "load_dispatch": 1000}


def test_churning_tables_vacuum_after_a_fixed_number_of_dead_rows(ledger):
    """0021: the dead rows after which autovacuum starts on the tables whose active rows churn
    through partial indexes (autovacuum_vacuum_threshold + autovacuum_vacuum_scale_factor x rows,
    each from the table's storage parameters, else the server's setting) is a fixed number, the same
    on the generated history as on a year of it; with PostgreSQL's defaults (50 + 0.2 x rows) it was
    36,000 runs and 288,000 partitions at a year, and the dead entries the sweeper's and dispatcher's
    reads of active rows walk grew with the history."""
    _, cur, _ = ledger
    cur.execute("SELECT current_setting('autovacuum_vacuum_threshold')::float8,"
                " current_setting('autovacuum_vacuum_scale_factor')::float8, current_setting('autovacuum')")
    base_threshold, base_scale, on = cur.fetchone()
    assert on == "on"
    cur.execute("SELECT relname, reloptions, reltuples FROM pg_class WHERE relnamespace = 'nifi_ops'::regnamespace"
                " AND relname IN ('load_run', 'load_partition', 'load_dispatch')")
    rows = cur.fetchall()
    assert len(rows) == 3
    for rel, opts, reltuples in rows:
        o = dict(x.split("=", 1) for x in opts or [])
        assert o.get("autovacuum_enabled", "true") == "true", rel
        threshold = float(o.get("autovacuum_vacuum_threshold", base_threshold))
        scale = float(o.get("autovacuum_vacuum_scale_factor", base_scale))
        here, year = threshold + scale * reltuples, threshold + scale * A_YEAR[rel]
        assert reltuples > 0.5 * RUNS, (rel, reltuples)  # the generated history, analyzed
        assert here == year == CHURN_VACUUM_AT[rel], (rel, here, year)
