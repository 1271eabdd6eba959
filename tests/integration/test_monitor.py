"""`loadctl monitor` in a real terminal: tmux runs the ncurses dashboard (as ll_operator) on a
server of its own; the test reads the screen with capture-pane, presses keys with send-keys,
resizes the window, and checks that q and Ctrl-C end the process with exit code 0 and leave the
terminal restored (alternate screen off). The binary is built with the sanitizers in the test
build, so a memory error or leak would show as a non-zero exit code here.
"""
import os
import shlex
import subprocess
import time
import uuid

import pytest

from llsim import ledgerfix as lf  # tools/nifisim is on sys.path (conftest.py)
from llsim.stack import Stack


@pytest.fixture(scope="module")
def stack():
    s = Stack()
    s.migrate()
    return s


@pytest.fixture
def cur(stack):
    c = stack.db()
    yield c.cursor()
    c.close()


class Term:
    """One tmux server (socket of its own) running one command in a 120x40 window."""

    def __init__(self, command, tmp_path, width=120, height=40):
        self.sock = "llt3-%s" % uuid.uuid4().hex[:8]
        self.rc_file = str(tmp_path / "rc")
        script = "%s; echo $? > %s; echo MONITOR-EXITED; sleep 60" % (command, shlex.quote(self.rc_file))
        env = dict(os.environ)
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        env.pop("TMUX", None)
        subprocess.run(["tmux", "-L", self.sock, "-f", "/dev/null", "new-session", "-d", "-x", str(width), "-y",
                        str(height), "-s", "mon", script], check=True, env=env)
        self.socket_path = self.tmux("display-message", "-p", "#{socket_path}").stdout.strip()

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.sock] + list(args), capture_output=True, text=True)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "mon").stdout

    def keys(self, *keys):
        self.tmux("send-keys", "-t", "mon", *keys)

    def resize(self, w, h):
        r = self.tmux("resize-window", "-t", "mon", "-x", str(w), "-y", str(h))
        assert r.returncode == 0, r.stderr

    def wait_for(self, *texts, timeout=20):
        deadline = time.time() + timeout
        screen = ""
        while time.time() < deadline:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            time.sleep(0.2)
        raise AssertionError("screen never showed %r:\n%s" % (texts, screen))

    def wait_gone(self, text, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            screen = self.screen()
            if text not in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError("screen still shows %r:\n%s" % (text, screen))

    def exit_code(self, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if os.path.exists(self.rc_file):
                with open(self.rc_file) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            time.sleep(0.2)
        raise AssertionError("the monitor did not exit:\n%s" % self.screen())

    def alternate_screen(self):
        return self.tmux("display-message", "-p", "-t", "mon", "#{alternate_on}").stdout.strip()

    def close(self):
        self.tmux("kill-server")
        if self.socket_path and os.path.exists(self.socket_path):
            os.remove(self.socket_path)


@pytest.fixture
def ledger(cur):
    """A job of its own: a PUBLISH_UNKNOWN run and an EXTRACTING run with partitions and a metric."""
    job = "LLT3MON_" + uuid.uuid4().hex[:10].upper()
    unknown = lf.insert_run(cur, "PUBLISH_UNKNOWN", job=job, heartbeat_ago=300, error_stage="PUBLISH",
                            error_code="PUBLISH_STALE", error_message="no publish result within PT2H")
    extracting = lf.insert_run(cur, "EXTRACTING", job=job, expected_partitions=3)
    lf.insert_partition(cur, extracting, "0000", "SUCCESS", actual=15000, attempts=1, worker="node-a")
    lf.insert_partition(cur, extracting, "0001", "RUNNING", attempts=1, worker="node-b")
    lf.insert_partition(cur, extracting, "0002", "PENDING")
    lf.insert_metric(cur, extracting, "SOURCE", "AMOUNT_SUM", "1234.50", "1234.50")
    return job, unknown, extracting


def monitor_cmd(stack, job):
    binary = os.path.join(stack.build_dir, "tools", "loadctl")
    return "%s --db %s monitor --job %s --refresh 1" % (shlex.quote(binary), shlex.quote(stack.conninfo("ll_operator")),
                                                        job)


def test_dashboard_shows_runs_alerts_detail_and_quits(stack, ledger, tmp_path):
    job, unknown, extracting = ledger
    term = Term(monitor_cmd(stack, job), tmp_path)
    try:
        screen = term.wait_for(unknown, extracting)
        lines = screen.splitlines()
        row = [ln for ln in lines if unknown in ln and job in ln]
        assert row and "PUBLISH_UNKNOWN" in row[0], screen
        row = [ln for ln in lines if extracting in ln and job in ln]
        assert row and "EXTRACTING" in row[0] and "1/3" in row[0], screen
        assert row[0].startswith(">"), screen  # the first run is selected
        alert = [ln for ln in lines if ln.startswith("ERROR PUBLISH_UNKNOWN")]
        assert alert and unknown[:8] in alert[0] and "no publish result" in alert[0], screen
        assert "active: EXTRACTING 1 PUBLISH_UNKNOWN 1" in screen, screen

        # Enter: the selected run's partitions and metrics
        term.keys("Enter")
        screen = term.wait_for("PARTITION", "node-b", "AMOUNT_SUM")
        assert "0002" in screen and "PENDING" in screen
        # Down: the PUBLISH_UNKNOWN run is selected and its detail shown
        term.keys("Down")
        screen = term.wait_for("PUBLISH_STALE")
        assert [ln for ln in screen.splitlines() if ln.startswith(">") and unknown in ln], screen
        term.keys("Up", "Enter")
        screen = term.wait_gone("PUBLISH_STALE")
        assert "node-b" not in screen and "ALERTS" in screen

        # resizes, down to a window too small for anything, never crash
        term.resize(80, 24)
        screen = term.wait_for("RUNS", unknown[:8])
        assert all(len(ln) <= 80 for ln in screen.splitlines())
        term.resize(20, 4)
        time.sleep(1.5)
        term.resize(1, 1)
        time.sleep(1.5)
        term.resize(120, 40)
        term.keys("r")
        term.wait_for(unknown, "ERROR PUBLISH_UNKNOWN")
        assert not os.path.exists(term.rc_file)

        term.keys("q")
        assert term.exit_code() == 0
        screen = term.wait_for("MONITOR-EXITED")
        assert term.alternate_screen() == "0"
    finally:
        term.close()


def test_refresh_picks_up_changes_and_ctrl_c_exits_cleanly(stack, cur, ledger, tmp_path):
    job, unknown, _ = ledger
    term = Term(monitor_cmd(stack, job), tmp_path, width=80, height=24)
    try:
        term.wait_for(unknown[:8], "ERROR PUBLISH_UNKNOWN")
        # the operator resolves the run elsewhere: the next refresh drops the alert by itself
        cur.execute("UPDATE nifi_ops.load_run SET status = 'PUBLISHED', heartbeat_at = clock_timestamp()"
                    " WHERE run_id = %s", (unknown,))
        screen = term.wait_gone("ERROR PUBLISH_UNKNOWN")
        screen = term.wait_for("PUBLISHED")
        term.keys("C-c")
        assert term.exit_code() == 0
        term.wait_for("MONITOR-EXITED")
        assert term.alternate_screen() == "0"
    finally:
        term.close()


def test_monitor_without_terminal_is_usage_error(stack):
    binary = os.path.join(stack.build_dir, "tools", "loadctl")
    p = subprocess.run([binary, "--db", stack.conninfo("ll_operator"), "monitor"], capture_output=True, text=True,
                       stdin=subprocess.DEVNULL, timeout=30)
    assert p.returncode == 1 and "--once" in p.stderr
