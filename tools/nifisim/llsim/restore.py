"""The restore drill's steps (issue 9 §5, docs/operations.md "Restore from a backup"): a base
backup of a ledger database with the input groups' committed offsets recorded just before it
(`loadctl offsets save`), the database restored from it (the groups are then reset with
`loadctl offsets restore`), and a business digest of the ledger to compare the result with.

The drills' common workload (workload()) and the checks around it (settled(), digest()) are
here too: tests/integration/test_restore_drill.py (pg_dump) and test_pitr_drill.py (a
point-in-time recovery of a cluster of its own, llsim.pitr) share them.

Why the recorded offsets are safe: a service commits an input offset only after the database
transaction that applied it (docs/contract.md K§3), so offsets read before the dump's snapshot starts
are never ahead of what the dump holds; everything above them is replayed, and a replay of what
the dump already holds changes nothing (CAS, REPLAY answers).
"""
import collections
import hashlib
import json
import os
import subprocess
import time

import psycopg2
from .drills import committed, lag, ledger_tables, wait_until

RUNS = 4
SERVICES = ("registrar", "claimer", "completion", "dispatcher")

# Columns outside the business digest besides every timestamp column: random ids of events
# (a replayed event is the same event with another id) and the outbox's delivery bookkeeping.
NOT_BUSINESS = {"load_event": {"event_id", "duration_ms"},
                "load_dispatch": {"attempt_count", "last_error", "last_http_status"}}


def business_digest(cur):
    """{table: SHA-256 hex} of every nifi_ops table as a multiset of rows, without timestamps and
    the NOT_BUSINESS columns; ids that are derived from the input (run, dispatch, claim token)
    stay in."""
    out = {}
    for t in ledger_tables(cur):
        cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = 'nifi_ops'"
                    " AND table_name = %s AND data_type NOT LIKE 'timestamp%%' ORDER BY ordinal_position", (t,))
        cols = [r[0] for r in cur.fetchall() if r[0] not in NOT_BUSINESS.get(t, ())]
        cur.execute("SELECT %s FROM nifi_ops.%s" % (", ".join('"%s"' % c for c in cols), t))
        rows = collections.Counter(json.dumps(dict(zip(cols, r)), sort_keys=True, default=str)
                                   for r in cur.fetchall())
        h = hashlib.sha256()
        for row, n in sorted(rows.items()):
            h.update(("%d %s\n" % (n, row)).encode())
        out[t] = h.hexdigest()
    return out


def backup(stack, path, record_offsets):
    """record_offsets() (`loadctl offsets save`: the input groups' committed offsets), then
    pg_dump -Fc of the stack's database into path (while the services run): the offsets are read
    before the dump's snapshot, so they are never ahead of it."""
    record_offsets()
    pg_dump = os.path.join(stack.env["LL_PG_BINDIR"], "pg_dump")
    subprocess.run([pg_dump, "-Fc", "-f", path, "-h", stack.pg["host"], "-p", str(stack.pg["port"]),
                    "-U", "postgres", stack.pg["dbname"]], check=True, capture_output=True, timeout=120)


def restore(stack, path):
    """The database lost and restored: DROP DATABASE (WITH FORCE), CREATE DATABASE, pg_restore of
    the dump (roles are the cluster's and stay)."""
    base = psycopg2.connect(host=stack.pg["host"], port=stack.pg["port"], dbname="postgres", user="postgres")
    base.autocommit = True
    with base.cursor() as c:
        c.execute('DROP DATABASE "%s" WITH (FORCE)' % stack.pg["dbname"])
        c.execute('CREATE DATABASE "%s"' % stack.pg["dbname"])
    base.close()
    pg_restore = os.path.join(stack.env["LL_PG_BINDIR"], "pg_restore")
    subprocess.run([pg_restore, "--exit-on-error", "-h", stack.pg["host"], "-p", str(stack.pg["port"]),
                    "-U", "postgres", "-d", stack.pg["dbname"], path], check=True, capture_output=True, timeout=120)


def group_topics(iso):
    """{group: [topics it has committed offsets for]}: the input topics of each consuming service."""
    topics = [iso.topic(t) for t in iso.topics]
    out = {}
    for g in iso.groups.values():
        com = committed(iso.bootstrap, g, topics)
        out[g] = sorted({t for (t, _p), off in com.items() if off >= 0})
    return out


def settled(iso, groups):
    """Every group caught up and no dispatch left to send."""
    if not all(lag(iso.bootstrap, g, ts) == 0 for g, ts in groups.items()):
        return False
    return ledger_value(iso, "SELECT count(*) FROM nifi_ops.load_dispatch WHERE status = 'PENDING'") == 0


def ledger_value(iso, sql):
    """The one value a query gives on a drill's ledger."""
    db = iso.stack.db()
    try:
        with db.cursor() as c:
            c.execute(sql)
            return c.fetchone()[0]
    finally:
        db.close()


def digest(iso):
    """The business digest of a drill's ledger."""
    db = iso.stack.db()
    try:
        with db.cursor() as c:
            return business_digest(c)
    finally:
        db.close()


def digest_diff(before, after):
    """The tables whose business digests differ."""
    return sorted(t for t in set(before) | set(after) if before.get(t) != after.get(t))


def start_services(st):
    for s in SERVICES:
        st.start(s, settings={"loop.retry_backoff_max": "PT2S"} if s != "dispatcher" else {})


def stop_services(st):
    codes = st.stop_all()
    assert set(codes.values()) == {0}, "services did not exit cleanly: %s; logs in %s" % (codes, st.log_dir)


def start_drill(iso):
    """A drill's database made to commit synchronously (a real database does, docs/operations.md)
    and the services started on it."""
    db = iso.stack.db()
    with db.cursor() as c:
        c.execute('ALTER DATABASE "%s" SET synchronous_commit = on' % iso.dbname)
    db.close()
    start_services(iso.stack)


def workload(iso, flow, runs, take_backup, pace=0.0):
    """The restore drills' workload: the first half of the runs to EXTRACTED_VALIDATED, the others
    registered and claimed with the chunks of their first 4 partitions sent; then take_backup()
    (the services running); then the rest of the chunks (pace: seconds between two partitions'
    chunks, so that the ledger changes over a while after the backup), every run's validate-run
    command and every group caught up with the outbox empty. Returns group_topics()."""
    nifi = flow.nifi
    for run in runs[: len(runs) // 2]:
        flow.to_extracted(run)
    late = runs[len(runs) // 2:]
    for run in late:
        flow.create(run)
        flow.register(run)
        flow.claim_all(run)
    for run in late:
        for pid in run.nonempty()[:4]:
            for c in run.chunks(pid):
                nifi.send("chunks", c)
    nifi.flush()
    take_backup()
    for run in late:
        for pid in run.nonempty()[4:]:
            for c in run.chunks(pid):
                nifi.send("chunks", c)
            if pace:
                nifi.flush()
                time.sleep(pace)
    nifi.flush()
    for run in runs:
        flow.validate_commands(run, timeout=120)
    groups = group_topics(iso)
    wait_until(lambda: settled(iso, groups), 120, "workload consumed")
    return groups


def count_validated(iso):
    return ledger_value(iso, "SELECT count(*) FROM nifi_ops.load_run WHERE status = 'EXTRACTED_VALIDATED'")
