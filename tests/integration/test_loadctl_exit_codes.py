"""loadctl's exit codes: one meaning per code across every command (tools/loadctl/loadctl.h,
docs/operations.md "loadctl exit codes"): 0 ok, 1 usage (or a file it names), 2 not found or
refused, 3 database, 4 Kafka, 5 a check found a violation. Each class is asserted on several
commands, in text and with --json (whose exitCode must be the process's), against the real
database and broker of scripts/env.sh; `migrate --json` prints its result object.
"""
import json
import re
import os
import subprocess
import time
import uuid

import pytest

from llsim import ledgerfix as lf  # tools/nifisim is on sys.path (conftest.py)
from llsim.stack import Stack

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEAD_DB = "host=127.0.0.1 port=1 dbname=x user=x connect_timeout=2"


@pytest.fixture(scope="module")
def stack():
    s = Stack()
    s.migrate()
    return s


@pytest.fixture(scope="module")
def dead_broker_conf(tmp_path_factory):
    """A loadctl --config naming a broker nobody listens on (port 1)."""
    p = tmp_path_factory.mktemp("exit-codes") / "dead-broker.conf"
    p.write_text("kafka.bootstrap.servers = 127.0.0.1:1\ntopic.prefix = loadledger.t-exit.\n")
    return str(p)


@pytest.fixture
def lc(stack):
    """loadctl (as ll_operator unless db is given); returns (exit code, stdout, stderr)."""
    binary = os.path.join(stack.build_dir, "tools", "loadctl")

    def run(*args, db=None):
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1")
        p = subprocess.run([binary, "--db", db or stack.conninfo("ll_operator")] + list(args), capture_output=True,
                           text=True, env=env, timeout=120)
        return p.returncode, p.stdout, p.stderr

    return run


def both(lc, want, *args, code=None, db=None):
    """Runs the command as text and with --json: both exit `want`; the JSON object says so too
    (and names `code` when given). Returns the JSON object."""
    rc, _, err = lc(*args, db=db)
    assert rc == want, (args, rc, err)
    # the line naming the failure (librdkafka may log its own lines before it)
    assert any(ln.startswith("loadctl: ") for ln in err.splitlines()), (args, err)
    rc, out, err = lc(*(args + ("--json",)), db=db)
    assert rc == want, (args, rc, err)
    doc = json.loads(out)
    assert doc["ok"] is False and doc["exitCode"] == want, (args, doc)
    if code:
        assert doc["code"] == code, (args, doc)
    return doc


@pytest.mark.parametrize("args", [
    ("runs", "--bogus"),
    ("show", "not-a-uuid"),
    ("migrate", "--bogus"),
    ("migrate", "--dir", "/nonexistent/sql"),                  # a folder it names
    ("verify", "--max-records", "0"),                           # verify speaks the same table
    ("topics", "create", "--file", "/nonexistent/topics.conf"),
    ("offsets", "save"),                                        # --out missing
    ("dead-letters", "list", "--run", "x"),
])
def test_usage_is_1(lc, args):
    both(lc, 1, *args)


def test_a_config_file_that_cannot_be_read_is_1(lc):
    both(lc, 1, "verify", "--topics", "--config", "/nonexistent/verify.conf", code="CONFIG_INVALID")
    both(lc, 1, "offsets", "save", "--out", "/tmp/x.json", "--config", "/nonexistent/a.conf", code="CONFIG_INVALID")


@pytest.mark.parametrize("args,code", [
    (("show", "RUN"), "RUN_NOT_FOUND"),
    (("resend", "RUN", "DISP"), "RUN_NOT_FOUND"),
    (("cleanup", "RUN"), "RUN_NOT_FOUND"),
    (("resolve-publish-unknown", "RUN", "--as", "PUBLISHED", "--reason", "checked in the Hive metastore"),
     "RUN_NOT_FOUND"),
])
def test_not_found_is_2(lc, args, code):
    args = tuple(str(uuid.uuid4()) if a in ("RUN", "DISP") else a for a in args)
    both(lc, 2, *args, code=code)


@pytest.mark.parametrize("args", [("runs",), ("show", "00000000-0000-0000-0000-000000000001"), ("migrate",),
                                  ("verify",), ("cleanup-candidates",)])
def test_database_unavailable_is_3(lc, args):
    both(lc, 3, *args, db=DEAD_DB, code="DATABASE_UNAVAILABLE")


def test_a_failing_migration_is_3_and_names_the_file(lc, stack, tmp_path):
    (tmp_path / "9999_broken.sql").write_text("SELECT no_such_function_anywhere();\n")
    doc = both(lc, 3, "migrate", "--dir", str(tmp_path), db=stack.conninfo(), code="DATABASE_ERROR")
    assert doc["message"].startswith("9999_broken.sql: ") and "no_such_function_anywhere" in doc["message"]
    assert doc["details"]["applied"] == []
    db = stack.db()
    cur = db.cursor()
    cur.execute("SELECT count(*) FROM nifi_ops.schema_migrations WHERE version = '9999_broken'")
    assert cur.fetchone()[0] == 0  # nothing recorded: the file's transaction was rolled back
    db.close()


def test_kafka_unavailable_is_4(lc, dead_broker_conf):
    """Exit 4 with Kafka's code, and within the command's --timeout: each wait for the broker's
    answer is bounded by it (kreader.h lc_broker_wait_ms), not only by the 10 s of one wait (a
    dead broker made `verify --topics --timeout PT3S` take 20 s and `dead-letters list` 10 s)."""
    cases = [
        (("topics", "create", "--file", os.path.join(REPO, "config", "topics.conf")), "BROKER_UNAVAILABLE"),
        (("dead-letters", "list"), "BROKER_UNAVAILABLE"),
        # the database answers, the broker does not: Kafka's code, not the database's
        (("verify", "--topics"), "TOPICS_UNAVAILABLE"),
    ]
    for args, code in cases:
        t = time.monotonic()
        both(lc, 4, *(args + ("--config", dead_broker_conf, "--timeout", "PT2S")), code=code)
        # two invocations (text and --json), each bounded by its 2 s plus start-up
        assert time.monotonic() - t < 2 * (2 + 2.5), (args, time.monotonic() - t)


def verify_run_status(lc):
    rc, out, err = lc("verify", "--json")
    assert rc in (0, 5), (rc, err)
    doc = json.loads(out)
    assert doc["ok"] == (rc == 0)
    return rc, {c["name"]: c for c in doc["checks"]}["run_status"]["violations"]


def test_a_violated_invariant_is_5(lc, stack):
    _, before = verify_run_status(lc)
    db = stack.db()
    cur = db.cursor()
    # a run in EXTRACTING without the events that would take it there (run_status violated)
    run = lf.insert_run(cur, "EXTRACTING", job="LLTX_" + uuid.uuid4().hex[:10].upper())
    try:
        rc, after = verify_run_status(lc)
        assert rc == 5 and after == before + 1, (rc, before, after)
        rc, out, _ = lc("verify")
        assert rc == 5 and "verify: VIOLATED" in out
    finally:
        cur.execute("DELETE FROM nifi_ops.load_run WHERE run_id = %s", (run,))
        db.close()


def test_ok_is_0_and_migrate_json_reports_what_it_applied(lc, stack, tmp_path):
    rc, out, err = lc("migrate", "--json", db=stack.conninfo())
    assert rc == 0, err
    doc = json.loads(out)
    versions = sorted(f[:-4] for f in os.listdir(os.path.join(REPO, "schemas", "sql")) if f.endswith(".sql"))
    assert doc["ok"] is True and doc["applied"] == [] and doc["appliedCount"] == 0  # the fixture migrated
    assert doc["dir"].endswith("schemas/sql")
    db = stack.db()
    cur = db.cursor()
    cur.execute("SELECT version FROM nifi_ops.schema_migrations ORDER BY 1")
    assert [r[0] for r in cur.fetchall()] == versions
    db.close()
    rc, out, _ = lc("migrate", db=stack.conninfo())
    assert rc == 0 and re.fullmatch(r"migrations up to date \(0 applied now, schema version \d{4}\)\n", out), out
    # a folder with one migration not yet applied: --json names it
    probe = tmp_path / "9998_exit_codes_probe.sql"
    probe.write_text("SELECT 1;\n")
    try:
        rc, out, err = lc("migrate", "--dir", str(tmp_path), "--json", db=stack.conninfo())
        assert rc == 0, err
        doc = json.loads(out)
        assert doc["applied"] == ["9998_exit_codes_probe"] and doc["appliedCount"] == 1 and doc["dir"] == str(tmp_path)
    finally:
        db = stack.db()
        db.cursor().execute("DELETE FROM nifi_ops.schema_migrations WHERE version = '9998_exit_codes_probe'")
        db.close()
    rc, out, _ = lc("runs", "--json", "--limit", "1")
    assert rc == 0 and "runs" in json.loads(out)
