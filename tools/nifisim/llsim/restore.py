"""The restore drill's steps (issue 9 §5, docs/operations.md "Restore from a backup"): a base
backup of a ledger database with the input groups' committed offsets recorded just before it, the
database restored from it, the groups reset to the recorded offsets, and a business digest of the
ledger to compare the result with.

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
from confluent_kafka import Consumer, TopicPartition

from .drills import committed, ledger_tables

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


def backup(stack, path, bootstrap, groups):
    """Records {group: {(topic, partition): offset}} of the input groups, then pg_dump -Fc of the
    stack's database into path (while the services run). Returns the recorded offsets."""
    offsets = {g: committed(bootstrap, g, ts) for g, ts in groups.items()}
    pg_dump = os.path.join(stack.env["LL_PG_BINDIR"], "pg_dump")
    subprocess.run([pg_dump, "-Fc", "-f", path, "-h", stack.pg["host"], "-p", str(stack.pg["port"]),
                    "-U", "postgres", stack.pg["dbname"]], check=True, capture_output=True, timeout=120)
    return offsets


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


def reset_groups(bootstrap, offsets):
    """Commits the recorded offsets for each group (no member may be running), as
    kafka-consumer-groups --reset-offsets --from-file does; a partition without a recorded
    offset goes to its earliest. Checks that the commit took."""
    for group, offs in offsets.items():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        try:
            tps = []
            for (t, p), off in offs.items():
                lo = c.get_watermark_offsets(TopicPartition(t, p), timeout=10)[0]
                tps.append(TopicPartition(t, p, off if off >= 0 else lo))
            c.commit(offsets=tps, asynchronous=False)
        finally:
            c.close()
        after = committed(bootstrap, group, sorted({t for t, _ in offs}))
        want = {(tp.topic, tp.partition): tp.offset for tp in tps}
        assert after == want, "reset of %s did not take: %s != %s" % (group, after, want)
