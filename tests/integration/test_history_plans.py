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
    _, cur, stmts = ledger
    bounded(ledger, "verify_page_first", ["500"], want={"load_run_pkey"})
    mid = one(cur, "SELECT run_id::text FROM nifi_ops.load_run ORDER BY run_id OFFSET %s LIMIT 1", RUNS // 2)[0]
    bounded(ledger, "verify_page_next", [mid, "500"], want={"load_run_pkey"})
    lo, hi = one(cur, stmts["verify_page_next"]["sql"].replace("$1::uuid", "%s::uuid").replace("$2::int", "500"), mid)
    assert lo > mid and hi > lo
    names = "{RUN_STARTED,MANIFEST_CREATED,EXTRACT_VALIDATED,STAGE_VALIDATION_STARTED,RUN_SUCCESS,RUN_FAILED}"
    bounded(ledger, "verify_run_events", [names, lo, hi], want={"ix_load_event_run_time"})
    bounded(ledger, "verify_validate_dispatch", [lo, hi])
    bounded(ledger, "verify_stage_validating", [lo, hi], want={"ix_load_event_run_time"})
    files = {"ix_load_file_partition_status", "load_file_pkey"}  # both lead with (run_id, partition_id)
    bounded(ledger, "verify_partition_rows", [lo, hi], want_any=files)
    bounded(ledger, "verify_partition_counters", [lo, hi], want_any=files)


def test_sweeper_gauges_read_active_runs_and_dead_dispatches(ledger):
    bounded(ledger, "sweep_gauges", [], want={"ix_load_run_status_heartbeat", "ix_load_dispatch_dead"})


def test_monitor_frame_is_indexes_and_windows(ledger):
    _, cur, _ = ledger
    counts = [str(SUCCESS_MS), str(FAILED_MS), "200"]
    alerts = ["3600000", "1800000", "50"]
    bounded(ledger, "monitor_counts", counts + [None],
            want={"ix_load_run_ended", "ix_load_run_cleanup_ended", "ix_load_dispatch_dead", "ix_load_dispatch_due"})
    bounded(ledger, "monitor_runs", ["50", None], want_any={"ix_load_run_status_heartbeat", "uq_load_run_active"})
    bounded(ledger, "monitor_alerts", alerts + [None],
            want={"ix_load_run_ended", "ix_load_dispatch_dead", "ix_load_event_cleanup_failed"})
    # one job (`loadctl monitor --job`): its runs through the job's indexes instead
    job = one(cur, "SELECT job_key FROM nifi_ops.load_run ORDER BY started_at DESC LIMIT 1")[0]
    bounded(ledger, "monitor_counts", counts + [job], want_any={"ix_load_run_job_started", "ix_load_run_ended"})
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
            want={"ix_load_run_cleanup_ended"})
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
