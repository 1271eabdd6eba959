"""The restore drill's steps (issue 9 §5, docs/operations.md "Restore from a backup"): a base
backup of a ledger database with the input groups' committed offsets recorded just before it
(`loadctl offsets save`), the database restored from it (the groups are then reset with
`loadctl offsets restore`), and a business digest of the ledger to compare the result with.

Why the recorded offsets are safe: a service commits an input offset only after the database
transaction that applied it (kafka-edition §3), so offsets read before the dump's snapshot starts
are never ahead of what the dump holds; everything above them is replayed, and a replay of what
the dump already holds changes nothing (CAS, REPLAY answers).
"""
import collections
import hashlib
import json
import os
import subprocess

import psycopg2
from .drills import ledger_tables

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
