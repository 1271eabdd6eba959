"""A password in the database conninfo never reaches a log line or a message (ll/redact.h): the
service's start line, its "database not reachable" line (libpq quotes a malformed URI whole) and
loadctl's DATABASE_UNAVAILABLE message, in text and in --json."""
import os
import subprocess
import time
import uuid

import pytest

from llsim.stack import Stack

SECRET = "TopSecret4711"


@pytest.fixture(scope="module")
def stack():
    s = Stack()
    yield s
    s.stop_all()


def run_registrar_until_started(stack, conninfo):
    """Starts ll-registrar on conninfo (a group and instance of its own), waits for its
    service_started line, stops it; returns its whole log."""
    inst = "registrar-secrets-" + uuid.uuid4().hex[:8]
    stack.start("registrar", instance=inst, settings={"kafka.group.id": "ll-test-secrets." + inst},
                env={"LOADLEDGER_DB__CONNINFO": conninfo})
    deadline = time.time() + 60
    text = ""
    while time.time() < deadline:
        with open(stack.log_path(inst), errors="replace") as f:
            text = f.read()
        if '"service_started"' in text or not stack.alive(inst):
            break
        time.sleep(0.2)
    stack.stop(inst)
    with open(stack.log_path(inst), errors="replace") as f:
        return f.read()


def test_service_logs_no_password_of_a_dbname_uri(stack):
    # libpq expands a dbname that is a URI; the start line used to keep the dbname= word whole
    conninfo = "dbname=postgresql://ll_registrar:%s@%s:%d/%s connect_timeout=3" % (
        SECRET, stack.pg["host"], stack.pg["port"], stack.pg["dbname"])
    log = run_registrar_until_started(stack, conninfo)
    assert '"service_started"' in log, log
    assert SECRET not in log
    assert "ll_registrar:***@" in log


def test_service_logs_no_password_of_a_malformed_uri(stack):
    # libpq's error quotes the whole malformed URI; it is logged as db_unavailable at start
    log = run_registrar_until_started(stack, "postgresql://ll_registrar:%s@[::1/loadledger" % SECRET)
    assert '"db_unavailable"' in log and '"service_started"' in log, log
    assert SECRET not in log
    assert "ll_registrar:***@[::1" in log


@pytest.mark.parametrize("conninfo", [
    "postgresql://ll_operator:%s@[::1/loadledger" % SECRET,
    "postgresql://ll_operator:%s%%zz@127.0.0.1:1/loadledger" % SECRET,
])
def test_loadctl_shows_no_password(stack, conninfo):
    binary = os.path.join(stack.build_dir, "tools", "loadctl")
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1")
    for args in (["runs"], ["runs", "--json"], ["migrate", "--json"]):
        p = subprocess.run([binary, "--db", conninfo] + args, capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 3, (args, p.stderr)
        assert "DATABASE_UNAVAILABLE" in p.stderr
        assert SECRET not in p.stdout + p.stderr, (args, p.stdout, p.stderr)
