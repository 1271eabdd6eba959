"""The schema registry (issue 30) on the real broker and database, against the registry STAND-IN
tests/registry_standin.py (the documented Confluent endpoints; no real Confluent-compatible
registry could be installed from this machine's package registries: docs/design.md "Schema
registry" says what was tried).

The services of this module run on topics of their own (prefix loadledger.t-registry.), every
input and the replies of the first four inputs Confluent-framed, with schema.registry.url set and
no schema.ids_file: writer ids are fetched from the registry, reply schemas (and the
dispatcher's validate-run command schema) registered under <topic>-value at start; schema.registry.url names a dead URL first, so every request also
passes over a URL that refuses it.

    reference scenario to EXTRACTED_VALIDATED through the registry, an older Manifest writer
        registered mid-run; the replies and the validate-run command carry the ids of their subjects
    registry answering 503: the message is held (no reply, no dead letter, run_held logged)
        while another run whose writer id is cached flows; answered once the registry is back
    registry unreachable (connections closed unanswered) or hanging past schema.registry.timeout:
        held the same way; the hang costs the loop's thread at most the timeout per try, so the
        other run is answered long before the registry would have answered
    an id the registry does not know: a dead letter naming it, after loop.prerequisite_wait
    a schema over codec.max_schema_bytes: a dead letter at once
    basic auth (schema.registry.basic.auth.user.info): refused without it at start (the service
        exits naming the 401), registered with it (topics of their own, nothing consumed)
    HTTPS with a self-signed certificate: refused without schema.registry.ssl.ca.location,
        registered with it
"""
import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import new_run, one
from llsim import avroframe
from llsim.kafkaio import SCHEMAS, Nifi
from llsim.probe import (FramedFlow, answers, dead_letter, dead_letters_of, ensure_topics, header, log_events,
                         log_size, post_many, schema_with, schema_without, start_sides, stop_checked, wait_log)
from llsim.stack import Stack

PREFIX = "loadledger.t-registry."
TAG = "registry"
INPUTS = ("run-requests", "manifests", "partition-claims", "chunks", "partition-failures")
REPLIES = ("run-decisions", "manifest-decisions", "claim-decisions", "chunk-outcomes")
COMMANDS = ("validate-run-commands",)  # the dispatcher's
PREREQ_WAIT_S = 4
MAX_SCHEMA_BYTES = 32768
STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "registry_standin.py")

OLD_MANIFEST = schema_without("Manifest", "sourceNullSplitCount", "sourceMetrics", "sourceMetricsVersion")
_items = OLD_MANIFEST["fields"][-1]["type"]["items"]
_items["fields"] = [f for f in _items["fields"] if f["name"] != "isNullPartition"]
NEW_RUN_REQUEST = schema_with("RunRequest", {"name": "requestedBy", "type": "string", "default": ""})


class Registry:
    """The stand-in, started on a free loopback port."""

    def __init__(self, run_dir, user_info=None, tls=None):
        os.makedirs(run_dir, exist_ok=True)
        port_file = os.path.join(run_dir, "registry.port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.log = open(os.path.join(run_dir, "registry.log"), "w")
        args = [sys.executable, STANDIN, "--port-file", port_file] + (["--user-info", user_info] if user_info else [])
        if tls:
            args += ["--tls-cert", tls[0], "--tls-key", tls[1]]
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.user_info = user_info
        deadline = time.time() + 15
        while not os.path.exists(port_file):
            assert self.proc.poll() is None and time.time() < deadline, "registry stand-in did not start"
            time.sleep(0.05)
        with open(port_file) as f:
            self.url = "%s://127.0.0.1:%s" % ("https" if tls else "http", f.read().strip())
        self.ca = tls[0] if tls else None

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        if self.user_info:
            headers["Authorization"] = "Basic " + base64.b64encode(self.user_info.encode()).decode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        ctx = ssl.create_default_context(cafile=self.ca) if self.ca else None
        try:
            with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def register(self, subject, schema):
        text = schema if isinstance(schema, str) else json.dumps(schema)
        st, body = self.call("POST", "/subjects/%s/versions" % subject, {"schema": text})
        assert st == 200, (st, body)
        return body["id"]

    def latest_id(self, subject):
        st, body = self.call("GET", "/subjects/%s/versions/latest" % subject)
        assert st == 200, (st, body)
        return body["id"]

    def requests(self, path):
        return self.call("GET", "/_standin/requests")[1].get(path, 0)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


def dead_port():
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def registry_requests(rstack, instance, result):
    """loadledger_schema_registry_requests_total{result} on the instance's /metrics."""
    [line] = [json.loads(l) for l in open(rstack.log_path(instance)) if '"http_listening"' in l][-1:]
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % line["port"], timeout=10) as r:
        text = r.read().decode()
    pat = 'loadledger_schema_registry_requests_total{result="%s"} ' % result
    return sum(float(l[len(pat):]) for l in text.splitlines() if l.startswith(pat))


def avsc(logical):
    with open(os.path.join(avroframe.SCHEMA_DIR, SCHEMAS[logical] + ".avsc")) as f:
        return f.read()


@pytest.fixture(scope="module")
def rstack():
    s = Stack(prefix=PREFIX)
    s.migrate()
    ensure_topics(s.bootstrap, PREFIX)
    reg = Registry(os.path.join(s.run_dir, "t-registry"))
    # the writers' side (NiFi's registry-backed AvroRecordSetWriter): each input's schema under its subject
    ids = {t: reg.register(PREFIX + t + "-value", avsc(t)) for t in INPUTS}
    conf = {"topic.%s.framing" % t: "confluent" for t in INPUTS + REPLIES + COMMANDS}
    # two URLs, the first refusing connections: each request tries them in order
    conf.update({"schema.registry.url": "http://127.0.0.1:%d, %s/" % (dead_port(), reg.url),
                 "loop.prerequisite_wait": "PT%dS" % PREREQ_WAIT_S,
                 "codec.max_schema_bytes": str(MAX_SCHEMA_BYTES), "schema.registry.backoff_max": "PT1S",
                 "http.listen": "127.0.0.1:0"})
    try:
        start_sides(s, ("registrar", "claimer", "completion"), TAG, conf)
        start_sides(s, ("dispatcher",), TAG, {k: v for k, v in conf.items()
                                              if k.startswith(("topic.", "schema.registry."))})
    except Exception:
        stop_checked(s)
        reg.stop()
        raise
    s.registry, s.ids = reg, ids
    yield s
    bad = stop_checked(s)
    reg.stop()
    assert not bad, "services did not exit cleanly (sanitizer report or crash): %s; logs in %s" % (bad, s.log_dir)


@pytest.fixture
def rflow(rstack):
    f = FramedFlow(Nifi(rstack.bootstrap, PREFIX), {t: "confluent" for t in REPLIES + COMMANDS})
    yield f
    f.close()


@pytest.fixture
def rdb(rstack):
    c = rstack.db()
    yield c.cursor()
    c.close()


def item(rstack, logical, record, **kw):
    d = dict(logical=logical, record=record, framing="confluent", schema_id=rstack.ids[logical])
    d.update(kw)
    return d


def test_reference_scenario_through_the_registry_with_a_writer_registered_mid_run(rstack, rflow, rdb):
    reg, run, nifi = rstack.registry, new_run(), rflow.nifi
    [d] = answers(rflow, post_many(nifi, [item(rstack, "run-requests", run.run_request())]))
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d
    assert reg.requests("/schemas/ids/%d" % rstack.ids["run-requests"]) >= 1
    # an older Manifest writer registered now, mid-run, under the manifests' subject: a new id
    old_id = reg.register(PREFIX + "manifests-value", OLD_MANIFEST)
    assert old_id not in rstack.ids.values()
    man = run.manifest()
    man = {k: v for k, v in man.items() if k in {f["name"] for f in OLD_MANIFEST["fields"]}}
    man["partitions"] = [{k: v for k, v in p.items() if k != "isNullPartition"} for p in man["partitions"]]
    [m] = answers(rflow, post_many(nifi, [item(rstack, "manifests", man, schema=OLD_MANIFEST, schema_id=old_id)]))
    assert (m["outcome"], m["runStatus"], m["emptyPartitionCount"]) == ("ACCEPTED", "EXTRACTING", 1), m
    assert reg.requests("/schemas/ids/%d" % old_id) == 1  # fetched once, then from the cache
    assert registry_requests(rstack, "registrar-" + TAG, "ok") >= 2  # the run request's id and this one
    claims = answers(rflow, post_many(nifi, [item(rstack, "partition-claims", run.claim(p)) for p in run.nonempty()]))
    assert all(c["claimed"] for c in claims), claims
    chunks = [c for p in run.nonempty() for c in run.chunks(p)]
    outcomes = answers(rflow, post_many(nifi, [item(rstack, "chunks", c) for c in chunks]))
    assert all(o["outcome"] == "ACCEPTED" and o["recorded"] for o in outcomes)
    assert [o["runStatus"] for o in outcomes if o["validationScheduled"]] == ["EXTRACTED_VALIDATED"]
    assert one(rdb, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == "EXTRACTED_VALIDATED"
    assert one(rdb, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'DEAD_LETTER'",
               run.run_id) == 0
    # the validate-run command, Confluent-framed by the dispatcher with its subject's id
    [cmd] = rflow.r["validate-run-commands"].wait_for(lambda r: (r["value"] or {}).get("runId") == run.run_id,
                                                       timeout=60)
    assert cmd["schema_id"] == reg.latest_id(PREFIX + "validate-run-commands-value")
    # the replies carry the ids the services registered their schemas under (<topic>-value)
    for t in REPLIES:
        want = reg.latest_id(PREFIX + t + "-value")
        got = {r["schema_id"] for r in rflow.r[t].records}
        assert got == {want}, (t, got, want)
        st, body = reg.call("GET", "/schemas/ids/%d" % want)
        assert json.loads(body["schema"])["name"] == SCHEMAS[t]


def test_registry_down_holds_the_message_while_other_runs_flow(rstack, rflow, rdb):
    reg, nifi = rstack.registry, rflow.nifi
    dlq = nifi.reader("dead-letters")
    new_id = reg.register(PREFIX + "run-requests-value", NEW_RUN_REQUEST)  # not fetched by anyone yet
    assert reg.call("POST", "/_standin/fault", {"status": 503, "count": -1, "path": "/schemas/ids/"})[0] == 200
    try:
        since = os.path.getsize(rstack.log_path("registrar-" + TAG))
        waiting, other = new_run(), new_run()
        req = dict(waiting.run_request(), requestedBy="coordinator-7")
        [held] = post_many(nifi, [item(rstack, "run-requests", req, schema=NEW_RUN_REQUEST, schema_id=new_id)])
        # another run, its writer id cached: answered while the registry is down
        [o] = answers(rflow, post_many(nifi, [item(rstack, "run-requests", other.run_request())]))
        assert (o["outcome"], o["runStatus"]) == ("ACCEPTED", "CREATED"), o
        time.sleep(PREREQ_WAIT_S + 2)  # past the prerequisite wait: a registry fault is no prerequisite
        assert not dead_letters_of(dlq, held)
        assert one(rdb, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", waiting.run_id) == 0
        held_logs = [e for e in log_events(rstack, "registrar-" + TAG, "run_held", since=since)
                     if "schema id %d" % new_id in e.get("msg", "")]
        assert held_logs and "unavailable" in held_logs[0]["msg"], held_logs
        assert reg.requests("/schemas/ids/%d" % new_id) >= 2  # tried again (with backoff)
        assert registry_requests(rstack, "registrar-" + TAG, "unavailable") >= 2
    finally:
        reg.call("POST", "/_standin/fault", {})
    [d] = answers(rflow, [held])
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d
    assert one(rdb, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", waiting.run_id) == "CREATED"
    assert not dead_letters_of(dlq, held)
    dlq.close()


@pytest.mark.parametrize("fault", ["drop", "hang"])
def test_registry_unreachable_or_hanging_holds_the_message(rstack, rflow, rdb, fault):
    reg, nifi = rstack.registry, rflow.nifi
    dlq = nifi.reader("dead-letters")
    writer = schema_with("RunRequest", {"name": "fault_" + fault, "type": "string", "default": ""})
    new_id = reg.register(PREFIX + "run-requests-value", writer)
    assert reg.call("POST", "/_standin/fault", {"status": fault, "count": -1, "path": "/schemas/ids/",
                                                "seconds": 30})[0] == 200
    try:
        since = os.path.getsize(rstack.log_path("registrar-" + TAG))
        waiting, other = new_run(), new_run()
        req = dict(waiting.run_request(), **{"fault_" + fault: "x"})
        [held] = post_many(nifi, [item(rstack, "run-requests", req, schema=writer, schema_id=new_id)])
        t0 = time.time()
        [o] = answers(rflow, post_many(nifi, [item(rstack, "run-requests", other.run_request())]))
        assert (o["outcome"], o["runStatus"]) == ("ACCEPTED", "CREATED"), o
        assert time.time() - t0 < 15, time.time() - t0  # a 30 s hang is cut at schema.registry.timeout (2 s)
        time.sleep(3)
        assert not dead_letters_of(dlq, held)
        assert one(rdb, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", waiting.run_id) == 0
        held_logs = [e for e in log_events(rstack, "registrar-" + TAG, "run_held", since=since)
                     if "schema id %d" % new_id in e.get("msg", "")]
        assert held_logs and "unavailable" in held_logs[0]["msg"], held_logs
    finally:
        reg.call("POST", "/_standin/fault", {})
    [d] = answers(rflow, [held], timeout=60)
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d
    assert not dead_letters_of(dlq, held)
    dlq.close()


def test_unknown_id_is_a_dead_letter_naming_it_after_the_wait(rstack, rflow):
    nifi = rflow.nifi
    dlq = nifi.reader("dead-letters")
    t0 = time.time()
    [sent] = post_many(nifi, [item(rstack, "run-requests", new_run().run_request(), schema_id=999999)])
    d = dead_letter(dlq, sent, timeout=PREREQ_WAIT_S + 40)
    elapsed = time.time() - t0
    assert header(d, "ll.error.code") == "DECODE_FAILED"
    msg = header(d, "ll.error.message")
    assert "schema id 999999" in msg and "not in the registry after %d ms" % (PREREQ_WAIT_S * 1000) in msg, msg
    assert elapsed >= PREREQ_WAIT_S - 0.5, elapsed
    dlq.close()


def test_schema_over_the_budget_is_a_dead_letter_at_once(rstack, rflow):
    reg, nifi = rstack.registry, rflow.nifi
    dlq = nifi.reader("dead-letters")
    big = json.loads(avsc("run-requests"))
    big["doc"] = "x" * (MAX_SCHEMA_BYTES + 100)
    assert reg.call("POST", "/_standin/schema", {"id": 777777, "schema": json.dumps(big)})[0] == 200
    t0 = time.time()
    [sent] = post_many(nifi, [item(rstack, "run-requests", new_run().run_request(), schema_id=777777)])
    d = dead_letter(dlq, sent, timeout=30)
    elapsed = time.time() - t0
    assert header(d, "ll.error.code") == "DECODE_FAILED"
    msg = header(d, "ll.error.message")
    assert "schema id 777777" in msg and "codec.max_schema_bytes" in msg, msg
    assert elapsed < PREREQ_WAIT_S, elapsed  # not held: refused at once
    dlq.close()


def test_basic_auth_at_start(tmp_path):
    prefix = "loadledger.t-registry-auth."
    s = Stack(prefix=prefix)
    ensure_topics(s.bootstrap, prefix)
    reg = Registry(str(tmp_path), user_info="svc-registrar:s3cret")
    conf = {"topic.run-decisions.framing": "confluent", "schema.registry.url": reg.url,
            "kafka.group.id": "loadledger.registrar.registry-auth"}
    try:
        since = {i: log_size(s, i) for i in ("registrar-registry-noauth", "registrar-registry-auth")}
        s.start("registrar", instance="registrar-registry-noauth", settings=conf)
        code = s.wait_exit("registrar-registry-noauth", timeout=60)
        assert code != 0
        with open(s.log_path("registrar-registry-noauth")) as f:
            f.seek(since["registrar-registry-noauth"])
            log = f.read()
        assert "run-decisions-value" in log and "HTTP 401" in log, log[-2000:]
        assert reg.call("GET", "/subjects")[1] == []
        conf["schema.registry.basic.auth.user.info"] = "svc-registrar:s3cret"
        s.start("registrar", instance="registrar-registry-auth", settings=conf)
        wait_log(s, "registrar-registry-auth", "registry_subject", since=since["registrar-registry-auth"], timeout=60,
                 pred=lambda r: "run-decisions-value" in r.get("msg", ""))
        assert prefix + "run-decisions-value" in reg.call("GET", "/subjects")[1]
        # the credentials are not logged
        with open(s.log_path("registrar-registry-auth")) as f:
            assert "s3cret" not in f.read()
    finally:
        bad = stop_checked(s)
        reg.stop()
    assert not bad, bad


def test_https_with_a_ca_file(tmp_path):
    prefix = "loadledger.t-registry-auth."
    key, cert = str(tmp_path / "key.pem"), str(tmp_path / "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    s = Stack(prefix=prefix)
    ensure_topics(s.bootstrap, prefix)
    reg = Registry(str(tmp_path), tls=(cert, key))
    assert reg.url.startswith("https://")
    conf = {"topic.run-decisions.framing": "confluent", "schema.registry.url": reg.url,
            "kafka.group.id": "loadledger.registrar.registry-tls"}
    names = ("registrar-registry-noca", "registrar-registry-ca")
    since = {i: log_size(s, i) for i in names}
    try:
        s.start("registrar", instance=names[0], settings=conf)
        assert s.wait_exit(names[0], timeout=60) != 0
        with open(s.log_path(names[0])) as f:
            f.seek(since[names[0]])
            log = f.read()
        assert "unavailable" in log and "certificate" in log.lower(), log[-2000:]
        assert reg.call("GET", "/subjects")[1] == []
        conf["schema.registry.ssl.ca.location"] = cert
        s.start("registrar", instance=names[1], settings=conf)
        wait_log(s, names[1], "registry_subject", since=since[names[1]], timeout=60,
                 pred=lambda r: "run-decisions-value" in r.get("msg", ""))
        assert prefix + "run-decisions-value" in reg.call("GET", "/subjects")[1]
    finally:
        bad = stop_checked(s)
        reg.stop()
    assert not bad, bad
