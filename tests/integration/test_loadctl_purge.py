"""`loadctl purge` (issue 42 item 3, docs/ledger.md "Retention", migration 0018): the ledger's retention.

Against the real ledger of scripts/env.sh, as the ll_retention role:
- old terminal runs leave the ledger with every row keyed by them (partitions, files, claim and publish
  tokens, validations, validation start, dispatches, events, the run);
- an active run (even one whose times are old, even one carrying a completed_at), PUBLISH_UNKNOWN, a
  recent terminal run and a run another run names as retry_of_run_id keep every row;
- batches are bounded: --batch 2 over 5 old runs is 3 transactions, 3 audit rows (RUNS_PURGED,
  run_id null: who, the period, the cutoff, the run ids and the rows per table);
- a run locked by another transaction is skipped at once, not waited for, and purged once free;
- --dry-run counts and deletes nothing; --max-runs caps the runs; bad options are usage (1), a
  period under P30D is refused (2);
- on a generated history of a few thousand runs (rolled back), the candidates' read and the deletes
  use an index (EXPLAIN), not a scan of the table.
The role's grants are in test_roles.py.
"""
import json
import os
import subprocess
import time
import uuid

import psycopg2
import pytest

from llsim import ledgerfix as lf  # tools/nifisim is on sys.path (conftest.py)
from llsim.stack import Stack

DAY = 86400
OLD = 500 * DAY  # ended longer ago than the default period (P400D)
TABLES = ["load_claim_token", "load_file", "load_partition", "load_validation", "load_validation_start",
          "load_dispatch", "load_publish_token", "load_event", "load_run"]


CREATED = []  # every run this module made: removed at its end, so no other module sees them


@pytest.fixture(scope="module")
def stack():
    s = Stack()
    s.migrate()
    yield s
    c = s.db()
    with c.cursor() as cur:
        for t in TABLES:
            cur.execute("DELETE FROM nifi_ops.%s WHERE run_id = ANY(%%s::uuid[])" % t, (CREATED,))
    c.close()


@pytest.fixture
def cur(stack):
    c = stack.db()
    yield c.cursor()
    c.close()


def purge(stack, *args, env=None):
    """loadctl purge as ll_retention: (exit code, stdout, stderr, seconds)."""
    penv = dict(os.environ)
    penv.update(env or {})
    penv.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    t0 = time.monotonic()
    p = subprocess.run([os.path.join(stack.build_dir, "tools", "loadctl"), "--db", stack.conninfo("ll_retention"),
                        "purge"] + list(args), capture_output=True, text=True, env=penv, timeout=60)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t0


def purge_json(stack, *args, **kw):
    rc, out, err, secs = purge(stack, *(args + ("--json",)), **kw)
    return rc, json.loads(out), err


def populate(cur, status, completed_ago=OLD, cleaned=True, **kw):
    """A run with one row in every table keyed by a run; its run id."""
    ago = completed_ago or 0
    run = lf.insert_run(cur, status, completed_ago=completed_ago, heartbeat_ago=ago, cleaned=cleaned, **kw)
    CREATED.append(run)
    for pid in ("0000", "0001"):
        lf.insert_partition(cur, run, pid, status="SUCCESS", actual=15000)
        cur.execute("INSERT INTO nifi_ops.load_claim_token (run_id, partition_id, claim_token, attempt_no,"
                    " worker_node) VALUES (%s, %s, %s, 1, 'nifi-node-1')", (run, pid, str(uuid.uuid4())))
        cur.execute("INSERT INTO nifi_ops.load_file (run_id, partition_id, chunk_index, fragment_count, hdfs_path,"
                    " record_count) VALUES (%s, %s, 0, 1, %s, 15000)",
                    (run, pid, "/data/purge/run_id=%s/part-%s-0.parquet" % (run, pid)))
    lf.insert_metric(cur, run, "STAGING", "STAGE_COUNT", "30000", "30000")
    dispatch = lf.insert_dispatch(cur, run, "ACKED")
    lf.insert_dispatch(cur, run, "DEAD", dispatch_type="REISSUE_PARTITION", partition_id="0001")
    cur.execute("INSERT INTO nifi_ops.load_validation_start (run_id, dispatch_id, node) VALUES (%s, %s, 'n1')",
                (run, dispatch))
    cur.execute("INSERT INTO nifi_ops.load_publish_token (run_id, publish_token) VALUES (%s, %s)",
                (run, str(uuid.uuid4())))
    lf.insert_event(cur, run, "RUN_STARTED", level="INFO", ago=ago)
    lf.insert_event(cur, run, "CLEANUP_FAILED", ago=ago)
    return run


def rows_of(cur, run):
    """{table: rows keyed by run} for every table the purge deletes from."""
    out = {}
    for t in TABLES:
        cur.execute("SELECT count(*) FROM nifi_ops.%s WHERE run_id = %%s" % t, (run,))
        out[t] = cur.fetchone()[0]
    return out


FULL = {"load_claim_token": 2, "load_file": 2, "load_partition": 2, "load_validation": 1,
        "load_validation_start": 1, "load_dispatch": 2, "load_publish_token": 1, "load_event": 2, "load_run": 1}
GONE = {t: 0 for t in TABLES}


def audit_rows(cur, since):
    """The RUNS_PURGED events written after `since` (a database timestamp), oldest first."""
    cur.execute("SELECT run_id, event_level, row_count, message, details FROM nifi_ops.load_event"
                " WHERE event_name = 'RUNS_PURGED' AND event_time > %s ORDER BY event_time", (since,))
    return cur.fetchall()


def now(cur):
    cur.execute("SELECT clock_timestamp()")
    return cur.fetchone()[0]


@pytest.fixture
def empty_of_candidates(stack):
    """Purges whatever old terminal runs other tests left, so a test counts only its own."""
    rc, _, err, _ = purge(stack, "--max-runs", "1000000", "--batch", "1000")
    assert rc == 0, err


def test_purges_old_runs_in_bounded_audited_batches(stack, cur, empty_of_candidates):
    old = [populate(cur, s) for s in ("SUCCESS", "FAILED_EXTRACT", "TIMED_OUT", "FAILED_PUBLISH", "SUCCESS")]
    uncleaned = populate(cur, "FAILED_MANIFEST", cleaned=False)
    old.append(uncleaned)
    # never candidates: active (even with old times and a completed_at), PUBLISH_UNKNOWN, recent, retried
    active = populate(cur, "STAGE_VALIDATING")
    unknown = populate(cur, "PUBLISH_UNKNOWN", completed_ago=None)
    cur.execute("UPDATE nifi_ops.load_run SET heartbeat_at = clock_timestamp() - interval '500 days'"
                " WHERE run_id = %s", (unknown,))
    recent = populate(cur, "SUCCESS", completed_ago=10 * DAY)
    retried = populate(cur, "FAILED_EXTRACT")
    retry = populate(cur, "SUCCESS", completed_ago=20 * DAY)
    cur.execute("UPDATE nifi_ops.load_run SET retry_of_run_id = %s WHERE run_id = %s", (retried, retry))
    kept = [active, unknown, recent, retried, retry]

    since = now(cur)
    rc, doc, err = purge_json(stack, "--batch", "2", env={"SUDO_USER": "retention-operator"})
    assert rc == 0, err
    assert (doc["ok"], doc["dryRun"], doc["olderThan"], doc["runs"], doc["batches"], doc["uncleaned"]) == (
        True, False, "P400D", 6, 3, 1), doc
    assert doc["rows"] == {t: n * 6 for t, n in FULL.items()}, doc
    for run in old:
        assert rows_of(cur, run) == GONE, run
    for run in kept:
        assert rows_of(cur, run) == FULL, run

    audits = audit_rows(cur, since)
    assert [a[4]["runs"] for a in audits] == [2, 2, 2], audits
    assert [a[4]["batch"] for a in audits] == [1, 2, 3]
    purged_ids = [r for a in audits for r in a[4]["runIds"]]
    assert sorted(purged_ids) == sorted(old)
    for run_id, level, row_count, message, d in audits:
        assert (run_id, level) == (None, "INFO")
        assert row_count == sum(n * 2 for n in FULL.values())
        assert message.startswith("retention purge: 2 runs ended before ")
        assert (d["operatorRole"], d["operatorUser"], d["olderThan"], d["olderThanMs"]) == (
            "retention", "retention-operator", "P400D", 400 * DAY * 1000)
        assert d["cutoff"] == doc["cutoff"]
        assert d["rows"] == {t: n * 2 for t, n in FULL.items()}
    assert sum(a[4]["uncleaned"] for a in audits) == 1

    # again: nothing left to purge, nothing written
    since = now(cur)
    rc, doc, err = purge_json(stack, "--batch", "2")
    assert rc == 0, err
    assert (doc["runs"], doc["batches"]) == (0, 0)
    assert audit_rows(cur, since) == []
    for run in kept:
        assert rows_of(cur, run) == FULL, run


def test_batch_of_two_over_five_is_three_transactions(stack, cur, empty_of_candidates):
    old = [populate(cur, "SUCCESS", completed_ago=OLD + i * DAY) for i in range(5)]
    since = now(cur)
    rc, out, err, _ = purge(stack, "--batch", "2")
    assert rc == 0, err
    assert "purged 5 runs" in out and "in 3 transactions" in out, out
    audits = audit_rows(cur, since)
    assert [a[4]["runs"] for a in audits] == [2, 2, 1]
    # oldest ended first: the first batch holds the two oldest
    assert sorted(audits[0][4]["runIds"]) == sorted(old[3:5])
    for run in old:
        assert rows_of(cur, run) == GONE


def test_max_runs_caps_the_purge(stack, cur, empty_of_candidates):
    old = [populate(cur, "SUCCESS", completed_ago=OLD + i * DAY) for i in range(3)]
    rc, doc, err = purge_json(stack, "--batch", "2", "--max-runs", "2")
    assert rc == 0, err
    assert (doc["runs"], doc["batches"]) == (2, 1), doc
    assert [rows_of(cur, r)["load_run"] for r in old] == [1, 0, 0]  # the two oldest went


def test_locked_run_is_skipped_not_waited_for(stack, cur, empty_of_candidates):
    locked, free = populate(cur, "SUCCESS", completed_ago=OLD + DAY), populate(cur, "SUCCESS")
    holder = psycopg2.connect(stack.conninfo())
    try:
        hc = holder.cursor()
        hc.execute("SELECT 1 FROM nifi_ops.load_run WHERE run_id = %s FOR UPDATE", (locked,))
        rc, out, err, secs = purge(stack, "--json")
        assert rc == 0, err
        doc = json.loads(out)
        assert (doc["runs"], doc["batches"]) == (1, 1), doc
        # skipped, not waited for: a wait would have ended in the 2 s lock timeout (exit 3)
        assert secs < 1.9, secs
        assert rows_of(cur, locked) == FULL
        assert rows_of(cur, free) == GONE
    finally:
        holder.rollback()
        holder.close()
    rc, doc, err = purge_json(stack)
    assert rc == 0, err
    assert doc["runs"] == 1
    assert rows_of(cur, locked) == GONE


def test_dry_run_deletes_nothing(stack, cur, empty_of_candidates):
    old = [populate(cur, "SUCCESS", completed_ago=OLD + i * DAY) for i in range(3)]
    old.append(populate(cur, "TIMED_OUT", cleaned=False))
    since = now(cur)
    rc, doc, err = purge_json(stack, "--dry-run")
    assert rc == 0, err
    assert (doc["dryRun"], doc["runs"], doc["uncleaned"]) == (True, 4, 1), doc
    assert doc["oldest"] < doc["newest"] < doc["cutoff"]
    rc, doc, err = purge_json(stack, "--dry-run", "--max-runs", "2")
    assert doc["runs"] == 2, doc
    rc, out, err, _ = purge(stack, "--dry-run")
    assert rc == 0 and "dry run: 4 runs ended before" in out and "nothing deleted" in out, out
    for run in old:
        assert rows_of(cur, run) == FULL
    assert audit_rows(cur, since) == []
    # a period that takes none of them
    rc, doc, err = purge_json(stack, "--dry-run", "--older-than", "P600D")
    assert (rc, doc["runs"]) == (0, 0), doc


@pytest.mark.parametrize("args,code", [
    (("--batch", "0"), 1), (("--batch", "1001"), 1), (("--max-runs", "x"), 1), (("--older-than", "soon"), 1),
    (("--older-than", "400"), 2), (("--older-than", "P29D"), 2), (("extra",), 1), (("--nope",), 1)])
def test_bad_options(stack, cur, args, code):
    run = populate(cur, "SUCCESS")
    rc, out, err, _ = purge(stack, *args)
    assert rc == code, (out, err)
    if code == 2:
        assert "PURGE_PERIOD_TOO_SHORT" in err
    assert rows_of(cur, run) == FULL


def test_candidates_and_deletes_use_an_index(stack):
    """On a generated history of 20,000 runs (rolled back), EXPLAIN of the lock function's body and of
    the deletes: an index, never a sequential scan of the history table."""
    c = psycopg2.connect(stack.conninfo())
    try:
        cur = c.cursor()
        # no autovacuum ANALYZE of these tables while the transaction runs: it cannot see the
        # uncommitted rows and writes pg_class.reltuples in place, so the plans below would be made
        # for the small committed table (a Seq Scan, 1 run in 4 after other modules had written)
        cur.execute("LOCK TABLE nifi_ops.load_run, nifi_ops.load_dispatch, nifi_ops.load_event"
                    " IN SHARE UPDATE EXCLUSIVE MODE")
        cur.execute(
            "INSERT INTO nifi_ops.load_run (run_id, job_key, business_key, status, started_at, heartbeat_at,"
            " completed_at) SELECT gen_random_uuid(), 'PURGE_PLAN', 'k' || g, 'SUCCESS',"
            " clock_timestamp() - g * interval '2 hours', clock_timestamp() - g * interval '2 hours',"
            " clock_timestamp() - g * interval '2 hours' FROM generate_series(1, 20000) g")
        cur.execute("INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, status)"
                    " SELECT gen_random_uuid(), run_id, 'VALIDATE_RUN', 'ACKED' FROM nifi_ops.load_run"
                    " WHERE job_key = 'PURGE_PLAN'")
        cur.execute("INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, run_id)"
                    " SELECT gen_random_uuid(), 'INFO', 'RUN_STARTED', run_id FROM nifi_ops.load_run,"
                    " generate_series(1, 2) WHERE job_key = 'PURGE_PLAN'")
        cur.execute("ANALYZE nifi_ops.load_run, nifi_ops.load_dispatch, nifi_ops.load_event")
        cur.execute("SELECT prosrc FROM pg_proc WHERE proname = 'lock_runs' AND pronamespace = 'nifi_ops_retention'::regnamespace")
        body = cur.fetchone()[0].replace("p_cutoff", "(clock_timestamp() - interval '300 days')") \
            .replace("p_limit", "100")
        cur.execute("EXPLAIN " + body)
        plan = "\n".join(r[0] for r in cur.fetchall())
        assert "ix_load_run_completed" in plan, plan
        assert "Seq Scan on load_run" not in plan, plan
        cur.execute("SELECT array_agg(run_id) FROM (SELECT run_id FROM nifi_ops.load_run"
                    " WHERE job_key = 'PURGE_PLAN' LIMIT 100) x")
        ids = cur.fetchone()[0]
        for t in ("load_run", "load_dispatch", "load_event"):
            cur.execute("EXPLAIN DELETE FROM nifi_ops.%s WHERE run_id = ANY(%%s::uuid[])" % t, (ids,))
            plan = "\n".join(r[0] for r in cur.fetchall())
            assert "Seq Scan" not in plan, (t, plan)
    finally:
        c.rollback()
        c.close()
