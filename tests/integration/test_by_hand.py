"""A service run by hand (docs/environment.md "Run one service by hand"): `scripts/env.sh up` writes one ready
configuration per service into $LL_RUN_DIR/conf, and each service starts from it alone
(`ll-<service> --config $LL_RUN_DIR/conf/<service>.conf`), logs service_started, and stops
cleanly (exit 0) on SIGTERM, as on Ctrl-C.
"""
import os
import signal
import subprocess
import time

import pytest

from llsim.stack import Stack, read_env  # tools/nifisim is on sys.path (conftest.py)

SERVICES = ("registrar", "claimer", "completion", "dispatcher", "sweeper")


@pytest.fixture(scope="module")
def stack():
    s = Stack()
    s.migrate()
    return s


def conf_values(path):
    values = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                k, v = line.split("=", 1)
                values[k.strip()] = v.strip()
    return values


@pytest.mark.parametrize("service", SERVICES)
def test_env_conf_names_this_broker_and_database(stack, service):
    env = read_env()
    conf = os.path.join(env["LL_RUN_DIR"], "conf", service + ".conf")
    assert os.path.isfile(conf), "scripts/env.sh up wrote no %s" % conf
    v = conf_values(conf)
    assert v["db.conninfo"] == "host=127.0.0.1 port=%s dbname=loadledger user=ll_%s" % (env["LL_PG_PORT"], service)
    if service == "sweeper":
        assert "kafka.bootstrap.servers" not in v
    else:
        assert v["kafka.bootstrap.servers"] == env["LL_KAFKA_BOOTSTRAP"]
        assert v["topic.prefix"] == env["LL_TOPIC_PREFIX"]


@pytest.mark.parametrize("service", SERVICES)
def test_service_runs_from_its_env_conf_and_stops_on_sigterm(stack, service):
    env = read_env()
    conf = os.path.join(env["LL_RUN_DIR"], "conf", service + ".conf")
    log_path = os.path.join(stack.log_dir, service + "-byhand.log")
    binary = os.path.join(stack.build_dir, "services", "ll-" + service)
    penv = dict(os.environ)
    penv.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
    with open(log_path, "wb") as log:
        p = subprocess.Popen([binary, "--config", conf], stdout=log, stderr=subprocess.STDOUT, env=penv)
        try:
            deadline = time.monotonic() + 60
            text = ""
            while time.monotonic() < deadline and p.poll() is None:
                with open(log_path, errors="replace") as f:
                    text = f.read()
                if "service_started" in text:
                    break
                time.sleep(0.2)
            assert "service_started" in text, "ll-%s did not start (exit %s): %s" % (service, p.poll(), text[-2000:])
            time.sleep(1)  # a turn of its loop
            assert p.poll() is None, "ll-%s exited: %s" % (service, text[-2000:])
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=60)
    with open(log_path, errors="replace") as f:
        text = f.read()
    assert rc == 0, "ll-%s exit %d after SIGTERM: %s" % (service, rc, text[-2000:])
    assert "service_stopped" in text
