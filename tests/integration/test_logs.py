"""Logs (docs/operations.md, "Versions and logs").

librdkafka's own lines go through its log callback into the JSON log (event librdkafka, fields
fac and client, its syslog level mapped: warning -> warn, err -> error): a service's output is
JSON lines only, whatever librdkafka says. Shown with what librdkafka really logs: the
configuration warning of a consumer property given to the producer (the test stack sets
kafka.session.timeout.ms for every consuming service), and "Connect to ... failed" from a
dispatcher and from loadctl pointed at a port where nothing listens.

At the default level (info) a service writes no line per input or per dispatch: the counts are
in loadledger_inputs_total and loadledger_dispatches_total; the dispatcher's rows sent are
summed up in one dispatch_summary line at most every dispatch.log_summary.
"""
import json
import os
import socket
import subprocess
import urllib.request
import uuid

import psycopg2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import new_run
from llsim.drills import Isolated, events, log_lines, wait_until
from llsim.kafkaio import Nifi

HTTP = {"http.listen": "127.0.0.1:0"}


@pytest.fixture(scope="module")
def iso():
    i = Isolated("logs")
    yield i
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


def closed_port():
    """A loopback port where nothing listens (bound, then released)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def json_only(path):
    """Every line of a service's output (stdout and stderr: the stack writes both to one file),
    each parsed; fails on a line that is not a JSON object."""
    out = []
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            try:
                o = json.loads(line)
            except ValueError:
                pytest.fail("%s:%d is not JSON: %r" % (path, n, line[:300]))
            assert isinstance(o, dict) and {"ts", "level", "service", "event", "msg"} <= set(o), line
            out.append(o)
    return out


def metric(port, name, **labels):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def port_of(path):
    return wait_until(lambda: events(path, "http_listening"), 60, "http_listening in " + path)[0]["port"]


def test_librdkafka_warning_of_a_service_is_a_json_line(iso):
    iso.stack.start("registrar", "registrar-l")
    path = iso.stack.log_path("registrar-l")
    wait_until(lambda: events(path, "partitions_assigned"), 60, "registrar assigned")
    lines = json_only(path)
    rdk = [e for e in lines if e["event"] == "librdkafka"]
    warn = [e for e in rdk if e["fac"] == "CONFWARN" and "session.timeout.ms" in e["msg"]]
    assert warn, "no librdkafka CONFWARN line: %s" % rdk
    assert all(e["level"] == "warn" and e["service"] == "registrar" for e in warn), warn
    assert all(e["client"].startswith("rdkafka#producer-") for e in warn), warn
    assert iso.stack.stop("registrar-l") == 0
    assert json_only(path)  # the shutdown too


def test_librdkafka_connect_failure_of_the_dispatcher_is_an_error_line(iso):
    port = closed_port()
    iso.stack.start("dispatcher", "dispatcher-bad", settings={"kafka.bootstrap.servers": "127.0.0.1:%d" % port})
    path = iso.stack.log_path("dispatcher-bad")
    hit = wait_until(lambda: [e for e in log_lines(path) if e.get("event") == "librdkafka"
                              and e.get("fac") == "FAIL" and "Connect to" in e.get("msg", "")], 60,
                     "librdkafka Connect ... failed")
    assert all(e["level"] == "error" and e["client"].startswith("rdkafka#producer-") for e in hit), hit
    assert "127.0.0.1:%d" % port in hit[0]["msg"]
    assert iso.stack.stop("dispatcher-bad") == 0
    json_only(path)


def test_loadctl_writes_librdkafka_lines_as_json_on_stderr(iso, tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("kafka.bootstrap.servers = 127.0.0.1:%d\n" % closed_port())
    p = subprocess.run([os.path.join(iso.stack.build_dir, "tools", "loadctl"), "--json", "dead-letters", "list",
                        "--config", str(conf)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 4, (p.returncode, p.stdout, p.stderr)  # Kafka (docs/operations.md, "loadctl exit codes")
    assert json.loads(p.stdout)["code"] == "BROKER_UNAVAILABLE"  # stdout: the command's own document only
    lines = p.stderr.splitlines()
    own = [ln for ln in lines if ln.startswith("loadctl: ")]  # loadctl's own message, as ever
    rdk = [json.loads(ln) for ln in lines if not ln.startswith("loadctl: ")]
    assert len(own) == 1 and rdk, p.stderr
    assert all(e["event"] == "librdkafka" and e["service"] == "loadctl" for e in rdk), rdk
    assert any(e["fac"] == "FAIL" and e["level"] == "error" and "Connect to" in e["msg"] for e in rdk), rdk


def test_no_info_line_per_input_and_the_metric_counts_them(iso):
    n = 20
    iso.stack.start("registrar", "registrar-n", settings=HTTP)
    path = iso.stack.log_path("registrar-n")
    port = port_of(path)
    wait_until(lambda: events(path, "partitions_assigned"), 60, "registrar assigned")
    nifi = Nifi(iso.bootstrap, iso.prefix)
    runs = [new_run() for _ in range(n)]
    for r in runs:
        nifi.send("run-requests", r.run_request())
    nifi.flush()
    topic = iso.topic("run-requests")
    wait_until(lambda: metric(port, "loadledger_inputs_total", topic=topic, outcome="ACCEPTED") == n, 60,
               "%d run requests counted" % n)
    lines = json_only(path)
    ids = {r.run_id for r in runs}
    loud = [e for e in lines if e["level"] != "debug" and (e.get("runId") in ids or "offset" in e
                                                          or any(i in e["msg"] for i in ids))]
    assert loud == [], "lines per input at info: %s" % loud[:5]
    assert iso.stack.stop("registrar-n") == 0


def add_dispatches(iso, n):
    """n runs in EXTRACTED_VALIDATED, each with a PENDING VALIDATE_RUN row, and one NOTIFY (as the
    completion CAS writes them; tests/integration/test_dispatcher.py has the same)."""
    conn = psycopg2.connect(host=iso.stack.pg["host"], port=iso.stack.pg["port"], dbname=iso.dbname, user="postgres")
    ids = []
    with conn, conn.cursor() as c:
        for _ in range(n):
            run_id, dispatch_id = str(uuid.uuid4()), str(uuid.uuid4())
            c.execute("INSERT INTO nifi_ops.load_run (run_id, job_key, business_key, status, expected_partition_count,"
                      " source_count) VALUES (%s, 'LOG_DRILL', %s, 'EXTRACTED_VALIDATED', 1, 1)",
                      (run_id, "bk-" + run_id[:8]))
            c.execute("INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, status,"
                      " next_attempt_at, created_at) VALUES (%s, %s, 'VALIDATE_RUN', 'PENDING', clock_timestamp(),"
                      " clock_timestamp())", (dispatch_id, run_id))
            ids.append(dispatch_id)
        c.execute("SELECT pg_notify('load_dispatch', 'test')")
    conn.close()
    return ids


def test_dispatcher_sums_up_its_rows_at_info(iso):
    n = 30
    iso.stack.start("dispatcher", "dispatcher-s", settings=dict(HTTP, **{"dispatch.log_summary": "PT1S"}))
    path = iso.stack.log_path("dispatcher-s")
    port = port_of(path)
    wait_until(lambda: events(path, "listen_connected"), 30, "dispatcher listening")
    ids = add_dispatches(iso, n)
    cur = iso.stack.db().cursor()
    wait_until(lambda: (cur.execute("SELECT count(*) FROM nifi_ops.load_dispatch WHERE status = 'SENT' AND"
                                    " dispatch_id = ANY(%s::uuid[])", (ids,)), cur.fetchone()[0])[1] == n, 60,
               "%d rows SENT" % n)
    assert metric(port, "loadledger_dispatches_total", result="sent") == n
    summaries = wait_until(lambda: (lambda s: sum(e["sent"] for e in s) == n and s)(events(path, "dispatch_summary")),
                           30, "dispatch_summary lines adding up to %d" % n)
    assert all(e["level"] == "info" and e["retried"] == 0 and e["dead"] == 0 for e in summaries), summaries
    lines = json_only(path)
    assert [e for e in lines if e["event"] == "dispatch_sent"] == []  # at debug only
    assert not [e for e in lines if e["level"] != "debug" and any(i in json.dumps(e) for i in ids)]
    assert iso.stack.stop("dispatcher-s") == 0
