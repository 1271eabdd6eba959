"""Migrations as operators expect them (issue 29 §2; schemas/sql/README.md, docs/operations.md
"Schema versions").

Each test migrates a database of its own inside the environment's PostgreSQL. `loadctl migrate`
records every file with the sha256 of its bytes; `loadctl migrate status` lists applied, pending,
changed and missing-file migrations (exit 0, or 5 when some are pending or changed); an applied file that
changed is refused (exit 2, MIGRATION_CHANGED) and nothing is applied; a database migrated by the
older migrator (version rows only) is baselined with the files' checksums. A service whose
ledger schema is too old (or too new) stays up, not ready: /readyz 503 names the reason and
`loadctl migrate`, it applies nothing and commits no offset; once migrated it runs; a newer but
compatible schema runs with a notice. Two migrators at once apply each file once; a held
migration lock fails a migrator after --lock-timeout.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
import uuid

import psycopg2
import pytest
from confluent_kafka import Consumer, TopicPartition

from conftest import close_clean, new_run
from llsim.drills import Isolated, wait_until
from llsim.kafkaio import Nifi
from llsim.stack import Stack
from test_metrics import get, port_of

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SQL_DIR = os.path.join(REPO, "schemas", "sql")
FILES = sorted(f[:-4] for f in os.listdir(SQL_DIR) if f.endswith(".sql"))
NEWEST = FILES[-1]


def schema_min():
    """LL_SCHEMA_MIN of this build (common/include/ll/schema_version.h): the oldest version its services run on."""
    with open(os.path.join(REPO, "common", "include", "ll", "schema_version.h")) as f:
        return int(re.search(r"#define LL_SCHEMA_MIN (\d+)", f.read()).group(1))


# the migrations of a ledger too old for this build's services: every file below LL_SCHEMA_MIN (the newest
# files may be additive ones the services do not need, e.g. 0018's retention role)
TOO_OLD = [f for f in FILES if int(f[:4]) < schema_min()]
HTTP = {"http.listen": "127.0.0.1:0"}


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture
def fresh():
    """A database of its own (dropped at the end) and a loadctl bound to it: (lc, connect)."""
    st = Stack()
    name = "llmig_" + uuid.uuid4().hex[:10]
    base = st.db()
    with base.cursor() as c:
        c.execute('CREATE DATABASE "%s"' % name)
    st.pg["dbname"] = name

    def lc(*args, user="postgres"):
        p = st.loadctl(*args, check=False, user=user)
        doc = json.loads(p.stdout) if "--json" in args and p.stdout.strip() else None
        return p.returncode, doc, p.stdout, p.stderr

    def connect():
        c = psycopg2.connect(st.conninfo())
        c.autocommit = True
        return c

    yield lc, connect
    with base.cursor() as c:
        c.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
    base.close()


def copy_dir(tmp_path, only=None):
    d = tmp_path / "sql"
    d.mkdir()
    for f in FILES:
        if only is None or f in only:
            shutil.copy(os.path.join(SQL_DIR, f + ".sql"), d / (f + ".sql"))
    return d


def history(connect):
    c = connect()
    with c.cursor() as cur:
        cur.execute("SELECT version, checksum, baselined, applied_by, duration_ms FROM nifi_ops.schema_migrations"
                    " ORDER BY version")
        rows = cur.fetchall()
    c.close()
    return rows


def test_fresh_database_all_applied_with_checksums(fresh):
    lc, connect = fresh
    rc, doc, _, err = lc("migrate", "--json")
    assert rc == 0, err
    assert doc["applied"] == FILES and doc["appliedCount"] == len(FILES)
    assert doc["schemaVersion"] == int(NEWEST[:4])
    rows = history(connect)
    assert [r[0] for r in rows] == FILES
    for version, checksum, baselined, by, ms in rows:
        assert checksum == sha(os.path.join(SQL_DIR, version + ".sql"))
        assert baselined is False and by == "postgres" and ms is not None and ms >= 0
    rc, doc, _, err = lc("migrate", "status", "--json")
    assert rc == 0, err
    assert doc["pending"] == 0 and doc["changed"] == 0 and doc["schemaVersion"] == int(NEWEST[:4])
    states = {m["version"]: m for m in doc["migrations"]}
    assert sorted(states) == FILES
    for v, m in states.items():
        assert m["state"] == "applied" and m["appliedAt"] and m["checksum"] == m["fileChecksum"]
    # status only reads: the operator's role sees the same
    rc, doc2, _, err = lc("migrate", "status", "--json", user="ll_operator")
    assert rc == 0 and doc2["migrations"] == doc["migrations"], err
    # a second run applies nothing
    rc, doc, _, _ = lc("migrate", "--json")
    assert rc == 0 and doc["applied"] == [] and doc["appliedCount"] == 0
    # the text form lists every version with its state
    rc, _, out, _ = lc("migrate", "status")
    assert rc == 0 and all(("%s " % v) in out for v in FILES) and "0 pending, 0 changed" in out


def test_a_changed_applied_file_is_refused(fresh, tmp_path):
    lc, connect = fresh
    assert lc("migrate")[0] == 0
    d = copy_dir(tmp_path)
    victim = "0005_decisions"
    before = sha(d / (victim + ".sql"))
    with open(d / (victim + ".sql"), "a") as f:
        f.write("-- edited after it was applied\n")
    after = sha(d / (victim + ".sql"))
    # a new migration after it must not run either: the whole run is refused
    (d / "0011_extra.sql").write_text("CREATE TABLE nifi_ops.mig_extra (id int);\n")
    rc, doc, _, err = lc("migrate", "--dir", str(d), "--json")
    assert rc == 2, err
    assert doc["ok"] is False and doc["code"] == "MIGRATION_CHANGED" and doc["exitCode"] == 2
    assert doc["details"]["version"] == victim
    assert doc["details"]["recordedChecksum"] == before and doc["details"]["fileChecksum"] == after
    assert victim + ".sql" in err and before in err and after in err
    assert "0011_extra" not in [r[0] for r in history(connect)]
    c = connect()
    with c.cursor() as cur:
        cur.execute("SELECT to_regclass('nifi_ops.mig_extra')")
        assert cur.fetchone()[0] is None
    c.close()
    rc, doc, _, _ = lc("migrate", "status", "--dir", str(d), "--json")
    assert rc == 5 and doc["changed"] == 1 and doc["pending"] == 1
    states = {m["version"]: m for m in doc["migrations"]}
    assert states[victim]["state"] == "changed"
    assert states[victim]["checksum"] == before and states[victim]["fileChecksum"] == after
    assert states["0011_extra"]["state"] == "pending"


def test_pending_and_missing_files_in_status(fresh, tmp_path):
    lc, connect = fresh
    older = copy_dir(tmp_path, only=FILES[:-2])
    rc, doc, _, err = lc("migrate", "--dir", str(older), "--json")
    assert rc == 0 and doc["applied"] == FILES[:-2], err
    rc, doc, _, _ = lc("migrate", "status", "--json")
    assert rc == 5 and doc["pending"] == 2 and doc["changed"] == 0
    assert doc["schemaVersion"] == int(FILES[-3][:4])
    assert [m["version"] for m in doc["migrations"] if m["state"] == "pending"] == FILES[-2:]
    assert all(m["appliedAt"] is None for m in doc["migrations"] if m["state"] == "pending")
    rc, _, out, _ = lc("migrate", "status")
    assert rc == 5 and "2 pending" in out
    rc, doc, _, _ = lc("migrate", "--json")
    assert rc == 0 and doc["applied"] == FILES[-2:]
    # the older folder lacks the two newest: they are applied, their files missing there (exit 0)
    rc, doc, _, _ = lc("migrate", "status", "--dir", str(older), "--json")
    assert rc == 0 and doc["missingFile"] == 2
    assert [m["version"] for m in doc["migrations"] if m["state"] == "missing-file"] == FILES[-2:]


def test_a_database_of_the_older_migrator_is_baselined(fresh):
    """What the migrator before issue 29 did: the bare history table, each file in one transaction
    with a version row and nothing else."""
    lc, connect = fresh
    old = FILES[:FILES.index("0010_schema_history")]  # it never knew 0010
    c = connect()
    c.autocommit = False
    with c.cursor() as cur:
        cur.execute("CREATE SCHEMA IF NOT EXISTS nifi_ops; CREATE TABLE IF NOT EXISTS nifi_ops.schema_migrations"
                    " (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())")
        c.commit()
        for v in old:
            with open(os.path.join(SQL_DIR, v + ".sql")) as f:
                cur.execute(f.read())
            cur.execute("INSERT INTO nifi_ops.schema_migrations (version) VALUES (%s)", (v,))
            c.commit()
    c.close()
    # status reads the older table as it is: applied, no checksum yet, 0010 pending; writes nothing
    rc, doc, _, err = lc("migrate", "status", "--json", user="ll_operator")
    assert rc == 5 and doc["pending"] == len(FILES) - len(old) and doc["changed"] == 0, err
    states = {m["version"]: m for m in doc["migrations"]}
    assert all(states[v]["state"] == "applied" and states[v]["checksum"] is None for v in old)
    assert all(states[v]["state"] == "pending" for v in FILES[len(old):])
    c = connect()
    with c.cursor() as cur:
        cur.execute("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'nifi_ops'"
                    " AND table_name = 'schema_migrations' AND column_name = 'checksum'")
        assert cur.fetchone()[0] == 0
    c.close()
    rc, doc, _, err = lc("migrate", "--json")
    assert rc == 0, err
    assert doc["applied"] == FILES[len(old):]
    rows = {r[0]: r for r in history(connect)}
    for v in old:
        assert rows[v][1] == sha(os.path.join(SQL_DIR, v + ".sql")) and rows[v][2] is True
        assert rows[v][3] is None  # who applied it was never recorded
    for v in FILES[len(old):]:
        assert rows[v][2] is False and rows[v][3] == "postgres"
    rc, doc, _, _ = lc("migrate", "status", "--json")
    assert rc == 0 and all(m["state"] == "applied" for m in doc["migrations"])
    assert [m["version"] for m in doc["migrations"] if m["baselined"]] == old


# ---- the services -----------------------------------------------------------------------------

def committed(iso, service, logical):
    """The committed offsets of a service's group on one input topic (negative: none)."""
    topic = iso.topic(logical)
    c = Consumer({"bootstrap.servers": iso.bootstrap, "group.id": iso.groups[service],
                  "enable.auto.commit": False})
    try:
        parts = [TopicPartition(topic, p) for p in range(iso.topics[logical])]
        return [tp.offset for tp in c.committed(parts, timeout=20)]
    finally:
        c.close()


def log_events(iso, instance, event):
    with open(iso.stack.log_path(instance)) as f:
        return [json.loads(ln) for ln in f if ('"%s"' % event) in ln]


@pytest.fixture
def drill():
    iso = Isolated("mig")
    yield iso
    close_clean(iso)


def test_a_service_on_a_too_old_schema_waits_not_ready_and_applies_nothing(drill, tmp_path):
    iso = drill
    st = iso.stack
    db = st.db()
    # a ledger older than this build needs: every migration below LL_SCHEMA_MIN (a fresh schema: the newest
    # file need not be re-runnable, and is not, since 0012 creates a table)
    older = tmp_path / "older"
    older.mkdir()
    for v in TOO_OLD:
        shutil.copy(os.path.join(SQL_DIR, v + ".sql"), str(older))
    with db.cursor() as cur:
        cur.execute("DROP SCHEMA nifi_ops CASCADE")
    st.loadctl("migrate", "--dir", str(older))
    st.start("registrar", settings=HTTP)
    port = port_of(st.log_path("registrar-0"))
    status, body = wait_until(lambda: (lambda r: r if r[0] == 503 and "schema: " in r[1] else None)(
        get(port, "/readyz")), 30, "readyz names the schema")
    prev = TOO_OLD[-1][:4]
    assert "schema version %s is older than" % prev in body and "loadctl migrate" in body, body
    assert "database: up" in body, body
    run = new_run()
    nifi = Nifi(iso.bootstrap, iso.prefix)
    nifi.send("run-requests", run.run_request())
    nifi.flush()
    time.sleep(7)  # past one retry of the check (LL_SCHEMA_RETRY_MS)
    assert get(port, "/readyz")[0] == 503
    with db.cursor() as cur:
        cur.execute("SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
        assert cur.fetchone()[0] == 0
    assert all(o < 0 for o in committed(iso, "registrar", "run-requests"))
    refused = log_events(iso, "registrar-0", "schema_refused")
    assert len(refused) == 1, refused  # one line per reason, not one per try
    assert "loadctl migrate" in refused[0]["msg"] and refused[0]["verdict"] == "too_old"
    assert st.alive("registrar-0")
    # migrated: the waiting service goes on by itself and applies the request it held back
    st.migrate()
    wait_until(lambda: get(port, "/readyz")[0] == 200, 60, "registrar ready after migrate")

    def applied():
        with db.cursor() as cur:
            cur.execute("SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
            return cur.fetchone()[0] == 1
    wait_until(applied, 60, "the run request applied")
    wait_until(lambda: any(o > 0 for o in committed(iso, "registrar", "run-requests")), 30, "offset committed")
    assert "schema: ok" in get(port, "/readyz")[1]
    db.close()


def test_newer_compatible_runs_and_too_new_waits(drill):
    iso = drill
    st = iso.stack
    db = st.db()
    compat = "%04d_future_additive" % (int(NEWEST[:4]) + 1)
    with db.cursor() as cur:
        cur.execute("INSERT INTO nifi_ops.schema_migrations (version, seq) VALUES (%s, %s)",
                    (compat, int(compat[:4])))
    st.start("sweeper", settings=HTTP)
    port = port_of(st.log_path("sweeper-0"))
    wait_until(lambda: get(port, "/readyz")[0] == 200, 30, "sweeper ready on a newer compatible schema")
    newer = log_events(iso, "sweeper-0", "schema_newer")
    assert len(newer) == 1 and newer[0]["schema_version"] == int(compat[:4])
    assert newer[0]["verdict"] == "newer_compatible"
    assert st.stop("sweeper-0") == 0
    with db.cursor() as cur:
        cur.execute("INSERT INTO nifi_ops.schema_migrations (version, seq) VALUES ('9000_contract', 9000)")
    st.start("sweeper", instance="sweeper-1", settings=HTTP)
    port = port_of(st.log_path("sweeper-1"))
    status, body = wait_until(lambda: (lambda r: r if r[0] == 503 and "schema: " in r[1] else None)(
        get(port, "/readyz")), 30, "readyz names the schema")
    assert "schema version 9000 is newer than ll-sweeper accepts" in body, body
    refused = log_events(iso, "sweeper-1", "schema_refused")
    assert len(refused) == 1 and refused[0]["verdict"] == "too_new"
    # SIGTERM while waiting: a clean exit
    assert st.stop("sweeper-1") == 0
    db.close()


def test_two_migrators_at_once_apply_each_file_once(fresh):
    lc, connect = fresh
    c = connect()
    st_conninfo = c.dsn
    c.close()
    binary = os.path.join(os.environ.get("LL_BUILD_DIR", os.path.join(REPO, "build")), "tools", "loadctl")
    procs = [subprocess.Popen([binary, "--db", st_conninfo, "migrate", "--json"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        docs.append(json.loads(out))
    a, b = docs[0]["applied"], docs[1]["applied"]
    assert sorted(a + b) == FILES and not set(a) & set(b)
    assert [r[0] for r in history(connect)] == FILES


def test_a_held_lock_bounds_the_wait(fresh):
    lc, connect = fresh
    holder = connect()
    holder.autocommit = False
    with holder.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(hashtext('loadledger_migrate'))")
        t0 = time.time()
        rc, doc, _, err = lc("migrate", "--lock-timeout", "1", "--json")
        took = time.time() - t0
    holder.rollback()
    holder.close()
    assert rc == 3 and doc["code"] == "DATABASE_ERROR" and "migration lock" in doc["message"], err
    assert took < 10
    assert lc("migrate")[0] == 0
