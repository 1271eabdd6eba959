"""The schema registry (issue 30) on the real broker and database, against two registries:

APICURIO REGISTRY 2.0.2.Final, a real Confluent-compatible registry (tests/registry/apicurio: built
once into ~/.cache/loadledger by llsim.apicurio, in-memory storage, started by this module on a free
loopback port; its Confluent API at /apis/ccompat/v6), with the rules of schemas/README.md switched
on: compatibility FULL_TRANSITIVE on every subject and validity FULL. The services of the main stack
(prefix loadledger.t-registry.) use it: every input and the replies of the first four inputs
Confluent-framed, schema.registry.url set and no schema.ids_file, so writer ids are fetched from the
registry and the reply schemas (and the dispatcher's validate-run command schema) registered under
<topic>-value at start; schema.registry.url names a dead URL first, so every request also passes
over a URL that refuses it.

    reference scenario to EXTRACTED_VALIDATED through the registry, an evolved Manifest writer
        registered mid-run (an incompatible one refused by the registry); the replies and the
        validate-run command carry the ids of their subjects
    an id the registry does not know (its real 404): a dead letter naming it, after
        loop.prerequisite_wait
    a schema over codec.max_schema_bytes registered under the topic's subject: a dead letter at once
    a JSON Schema's id (Apicurio 2.0.2 answers it without "schemaType"): a dead letter at once
    a reply schema the registry refuses as incompatible (409): the service stops at start naming it
    HTTPS with a self-signed certificate (a second Apicurio serving HTTPS only): refused without
        schema.registry.ssl.ca.location, registered with it
    schema.registry.auto.register.schemas = false (prefix loadledger.t-registry-lookup., a registrar of
        its own): the reply schema looked up under its subject (POST /subjects/{s}), the replies
        carrying the id of the version registered beforehand, not the subject's latest; nothing
        registered. A subject lacking the schema (Apicurio answers 40401 whether the subject or only
        the schema is missing) stops the registrar and the dispatcher at start with exit 1, naming the
        subject, the code and what to do

The REGISTRY STAND-IN tests/registry_standin.py (the documented Confluent endpoints, Python standard
library) for what needs fault injection or what Apicurio 2.0.2 cannot do without a Keycloak server
(its only authentication is OpenID Connect): a registrar of its own (prefix
loadledger.t-registry-standin.) with the dead URL first too.

    registry answering 503: the message is held (no reply, no dead letter, run_held logged)
        while another run whose writer id is cached flows; answered once the registry is back
    registry unreachable (connections closed unanswered) or hanging past schema.registry.timeout:
        held the same way; the hang costs the loop's thread at most the timeout per try, so the
        other run is answered long before the registry would have answered
    basic auth (schema.registry.basic.auth.user.info): refused without it at start (the service
        exits naming the 401), registered with it (topics of their own, nothing consumed)
"""
import base64
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import new_run, one
from llsim import apicurio, avroframe
from llsim.kafkaio import SCHEMAS, Nifi
from llsim.probe import (FramedFlow, answers, dead_letter, dead_letters_of, ensure_topics, header, log_events,
                         log_size, post_many, schema_with, start_sides, stop_checked, wait_log)
from llsim.stack import Stack, read_env

PREFIX = "loadledger.t-registry."
TAG = "registry"
PREFIX_S = "loadledger.t-registry-standin."
TAG_S = "registry-standin"
START_PREFIX = "loadledger.t-registry-auth."  # the tests of a service's start (nothing consumed)
LOOKUP_PREFIX = "loadledger.t-registry-lookup."  # schema.registry.auto.register.schemas = false
INPUTS = ("run-requests", "manifests", "partition-claims", "chunks", "partition-failures")
REPLIES = ("run-decisions", "manifest-decisions", "claim-decisions", "chunk-outcomes")
COMMANDS = ("validate-run-commands",)  # the dispatcher's
PREREQ_WAIT_S = 4
MAX_SCHEMA_BYTES = 32768
STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "registry_standin.py")

# a newer Manifest writer: one field added with a default (schemas/README.md, evolution rule 1)
EVOLVED_MANIFEST = schema_with("Manifest", {"name": "extractedBy", "type": "string", "default": ""})
# a Manifest writer FULL_TRANSITIVE forbids: a field's type changed
BROKEN_MANIFEST = json.loads(json.dumps(avroframe.schema_json("Manifest")))
BROKEN_MANIFEST["fields"][0]["type"] = "long"
NEW_RUN_REQUEST = schema_with("RunRequest", {"name": "requestedBy", "type": "string", "default": ""})


class StandIn:
    """The stand-in, started on a free loopback port."""

    def __init__(self, run_dir, user_info=None):
        os.makedirs(run_dir, exist_ok=True)
        port_file = os.path.join(run_dir, "registry.port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.log = open(os.path.join(run_dir, "registry-standin.log"), "w")
        args = [sys.executable, STANDIN, "--port-file", port_file] + (["--user-info", user_info] if user_info else [])
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        self.user_info = user_info
        deadline = time.time() + 15
        while not os.path.exists(port_file):
            assert self.proc.poll() is None and time.time() < deadline, "registry stand-in did not start"
            time.sleep(0.05)
        with open(port_file) as f:
            self.url = "http://127.0.0.1:%s" % f.read().strip()

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
        if self.user_info:
            headers["Authorization"] = "Basic " + base64.b64encode(self.user_info.encode()).decode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def requests(self, path):
        return self.call("GET", "/_standin/requests")[1].get(path, 0)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()


def register(reg, subject, schema):
    """POST /subjects/{subject}/versions on either registry: the id (asserts a 200)."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    st, body = reg.call("POST", "/subjects/%s/versions" % subject, {"schema": text})
    assert st == 200, (st, body)
    return body["id"]


def latest_id(reg, subject):
    st, body = reg.call("GET", "/subjects/%s/versions/latest" % subject)
    assert st == 200, (st, body)
    return body["id"]


def dead_port():
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def registry_requests(stack, instance, result):
    """loadledger_schema_registry_requests_total{result} on the instance's /metrics."""
    [line] = [json.loads(l) for l in open(stack.log_path(instance)) if '"http_listening"' in l][-1:]
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % line["port"], timeout=10) as r:
        text = r.read().decode()
    pat = 'loadledger_schema_registry_requests_total{result="%s"} ' % result
    return sum(float(l[len(pat):]) for l in text.splitlines() if l.startswith(pat))


def avsc(logical):
    with open(os.path.join(avroframe.SCHEMA_DIR, SCHEMAS[logical] + ".avsc")) as f:
        return f.read()


def compact(logical):
    """The schema text the services send for a topic (ll_schema_text: jansson's compact dump of the .avsc,
    members in file order). Apicurio 2.0.2 compares a looked-up text byte for byte (Confluent's registry
    compares parsed schemas), so the subjects are given this text."""
    return json.dumps(json.loads(avsc(logical)), separators=(",", ":"), ensure_ascii=False)


def run_dir():
    return read_env().get("LL_RUN_DIR") or os.environ.get("LL_RUN_DIR", "/tmp/loadledger-run")


def registry_conf(url, topics):
    """The services' settings: the topics Confluent-framed, the dead URL first, then url."""
    conf = {"topic.%s.framing" % t: "confluent" for t in topics}
    conf.update({"schema.registry.url": "http://127.0.0.1:%d, %s/" % (dead_port(), url),
                 "loop.prerequisite_wait": "PT%dS" % PREREQ_WAIT_S,
                 "codec.max_schema_bytes": str(MAX_SCHEMA_BYTES), "schema.registry.backoff_max": "PT1S",
                 "http.listen": "127.0.0.1:0"})
    return conf


@pytest.fixture(scope="module")
def registry():
    """Apicurio Registry (built when not cached), FULL_TRANSITIVE and validity FULL enforced."""
    reg = apicurio.Apicurio(os.path.join(run_dir(), "t-registry", "apicurio"))
    try:
        print("apicurio registry: %s, ready in %.1f s, RSS %d MiB" % (reg.url, reg.start_secs, reg.rss_kib() // 1024))
        reg.enforce_rules()
        assert reg.call("GET", "/config")[1] == {"compatibilityLevel": "FULL_TRANSITIVE"}
    except Exception:
        reg.stop()
        raise
    yield reg
    reg.stop()


@pytest.fixture(scope="module")
def rstack(registry):
    s = Stack(prefix=PREFIX)
    s.migrate()
    ensure_topics(s.bootstrap, PREFIX)
    # the writers' side (NiFi's registry-backed AvroRecordSetWriter): each input's schema under its subject
    ids = {t: register(registry, PREFIX + t + "-value", avsc(t)) for t in INPUTS}
    conf = registry_conf(registry.url, INPUTS + REPLIES + COMMANDS)
    try:
        start_sides(s, ("registrar", "claimer", "completion"), TAG, conf)
        start_sides(s, ("dispatcher",), TAG, {k: v for k, v in conf.items()
                                              if k.startswith(("topic.", "schema.registry."))})
    except Exception:
        stop_checked(s)
        raise
    s.registry, s.ids = registry, ids
    yield s
    bad = stop_checked(s)
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


@pytest.fixture(scope="module")
def sstack():
    """A registrar on the stand-in, the run requests' writer id already in its cache."""
    s = Stack(prefix=PREFIX_S)
    s.migrate()
    ensure_topics(s.bootstrap, PREFIX_S)
    reg = StandIn(os.path.join(s.run_dir, "t-registry"))
    ids = {"run-requests": register(reg, PREFIX_S + "run-requests-value", avsc("run-requests"))}
    try:
        start_sides(s, ("registrar",), TAG_S, registry_conf(reg.url, ("run-requests", "run-decisions")))
        s.registry, s.ids = reg, ids
        f = sflow_of(s)
        try:
            [d] = answers(f, post_many(f.nifi, [item(s, "run-requests", new_run().run_request())]))
            assert d["outcome"] == "ACCEPTED", d
        finally:
            f.close()
    except Exception:
        stop_checked(s)
        reg.stop()
        raise
    yield s
    bad = stop_checked(s)
    reg.stop()
    assert not bad, "services did not exit cleanly (sanitizer report or crash): %s; logs in %s" % (bad, s.log_dir)


def sflow_of(s):
    return FramedFlow(Nifi(s.bootstrap, PREFIX_S), {"run-decisions": "confluent"}, topics=("run-decisions",))


@pytest.fixture
def sflow(sstack):
    f = sflow_of(sstack)
    yield f
    f.close()


def item(stack, logical, record, **kw):
    d = dict(logical=logical, record=record, framing="confluent", schema_id=stack.ids[logical])
    d.update(kw)
    return d


# -- Apicurio Registry ---------------------------------------------------------------------------------
def test_reference_scenario_through_apicurio_with_an_evolved_writer_registered_mid_run(rstack, rflow, rdb):
    reg, run, nifi = rstack.registry, new_run(), rflow.nifi
    inst = {s: "%s-%s" % (s, TAG) for s in ("registrar", "claimer", "completion")}
    before = {s: registry_requests(rstack, i, "ok") for s, i in inst.items()}
    [d] = answers(rflow, post_many(nifi, [item(rstack, "run-requests", run.run_request())]))
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d
    # an evolved Manifest writer registered now, mid-run, under the manifests' subject: version 2, a new id
    subject = PREFIX + "manifests-value"
    new_id = register(reg, subject, EVOLVED_MANIFEST)
    assert new_id not in rstack.ids.values()
    assert reg.call("GET", "/subjects/%s/versions" % subject)[1] == [1, 2]
    # FULL_TRANSITIVE: a writer whose field changed type is refused, the subject keeps its versions
    st, body = reg.call("POST", "/subjects/%s/versions" % subject, {"schema": json.dumps(BROKEN_MANIFEST)})
    assert st == 409 and "Incompatible" in body["message"], (st, body)
    assert reg.call("GET", "/subjects/%s/versions" % subject)[1] == [1, 2]
    man = dict(run.manifest(), extractedBy="pg10-node-2")
    [m] = answers(rflow, post_many(nifi, [item(rstack, "manifests", man, schema=EVOLVED_MANIFEST, schema_id=new_id)]))
    assert (m["outcome"], m["runStatus"], m["emptyPartitionCount"]) == ("ACCEPTED", "EXTRACTING", 1), m
    assert registry_requests(rstack, inst["registrar"], "ok") - before["registrar"] == 2  # both writer ids
    claims = answers(rflow, post_many(nifi, [item(rstack, "partition-claims", run.claim(p)) for p in run.nonempty()]))
    assert all(c["claimed"] for c in claims), claims
    chunks = [c for p in run.nonempty() for c in run.chunks(p)]
    outcomes = answers(rflow, post_many(nifi, [item(rstack, "chunks", c) for c in chunks]))
    assert all(o["outcome"] == "ACCEPTED" and o["recorded"] for o in outcomes)
    assert [o["runStatus"] for o in outcomes if o["validationScheduled"]] == ["EXTRACTED_VALIDATED"]
    # 7 claims and 21 chunk reports: each writer id asked for once, then read from the cache
    assert registry_requests(rstack, inst["claimer"], "ok") - before["claimer"] == 1
    assert registry_requests(rstack, inst["completion"], "ok") - before["completion"] == 1
    assert one(rdb, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == "EXTRACTED_VALIDATED"
    assert one(rdb, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'DEAD_LETTER'",
               run.run_id) == 0
    # the validate-run command, Confluent-framed by the dispatcher with its subject's id
    [cmd] = rflow.r["validate-run-commands"].wait_for(lambda r: (r["value"] or {}).get("runId") == run.run_id,
                                                       timeout=60)
    assert cmd["schema_id"] == latest_id(reg, PREFIX + "validate-run-commands-value")
    # the replies carry the ids the services registered their schemas under (<topic>-value)
    for t in REPLIES:
        want = latest_id(reg, PREFIX + t + "-value")
        got = {r["schema_id"] for r in rflow.r[t].records}
        assert got == {want}, (t, got, want)
        st, body = reg.call("GET", "/schemas/ids/%d" % want)
        assert json.loads(body["schema"])["name"] == SCHEMAS[t]


def test_apicurio_unknown_id_is_a_dead_letter_naming_it_after_the_wait(rstack, rflow):
    nifi = rflow.nifi
    assert rstack.registry.call("GET", "/schemas/ids/999999")[0] == 404  # the registry's own answer
    dlq = nifi.reader("dead-letters")
    t0 = time.time()
    [sent] = post_many(nifi, [item(rstack, "run-requests", new_run().run_request(), schema_id=999999)])
    d = dead_letter(dlq, sent, timeout=PREREQ_WAIT_S + 40)
    elapsed = time.time() - t0
    assert header(d, "ll.error.code") == "DECODE_FAILED"
    msg = header(d, "ll.error.message")
    assert "schema id 999999" in msg and "not in the registry after %d ms" % (PREREQ_WAIT_S * 1000) in msg, msg
    assert elapsed >= PREREQ_WAIT_S - 0.5, elapsed
    assert registry_requests(rstack, "registrar-" + TAG, "not_found") >= 2  # asked again (with backoff)
    dlq.close()


def test_apicurio_schema_over_the_budget_is_a_dead_letter_at_once(rstack, rflow):
    reg, nifi = rstack.registry, rflow.nifi
    dlq = nifi.reader("dead-letters")
    # a valid, compatible RunRequest version (only its doc grew) whose text is over codec.max_schema_bytes
    big = json.loads(avsc("run-requests"))
    big["doc"] = "x" * (MAX_SCHEMA_BYTES + 100)
    big_id = register(reg, PREFIX + "run-requests-value", big)
    t0 = time.time()
    [sent] = post_many(nifi, [item(rstack, "run-requests", new_run().run_request(), schema_id=big_id)])
    d = dead_letter(dlq, sent, timeout=30)
    elapsed = time.time() - t0
    assert header(d, "ll.error.code") == "DECODE_FAILED"
    msg = header(d, "ll.error.message")
    assert "schema id %d" % big_id in msg and "codec.max_schema_bytes" in msg, msg
    assert elapsed < PREREQ_WAIT_S, elapsed  # not held: refused at once
    dlq.close()


def test_apicurio_json_schema_writer_is_a_dead_letter_at_once(rstack, rflow):
    reg, nifi = rstack.registry, rflow.nifi
    dlq = nifi.reader("dead-letters")
    json_schema = {"type": "object", "properties": {"runId": {"type": "string"}}}
    st, body = reg.call("POST", "/subjects/%sjson-value/versions" % PREFIX,
                        {"schemaType": "JSON", "schema": json.dumps(json_schema)})
    assert st == 200, (st, body)
    # Apicurio 2.0.2 answers such an id without "schemaType": the codec refuses the text as Avro
    st, answer = reg.call("GET", "/schemas/ids/%d" % body["id"])
    assert st == 200 and "schemaType" not in answer, answer
    t0 = time.time()
    [sent] = post_many(nifi, [item(rstack, "run-requests", new_run().run_request(), schema_id=body["id"])])
    d = dead_letter(dlq, sent, timeout=30)
    elapsed = time.time() - t0
    assert header(d, "ll.error.code") == "DECODE_FAILED"
    msg = header(d, "ll.error.message")
    assert "schema id %d from the registry: unknown type object" % body["id"] in msg, msg
    assert elapsed < PREREQ_WAIT_S, elapsed  # not held: refused at once
    dlq.close()


def test_apicurio_refusing_a_reply_schema_stops_the_service_at_start(registry):
    s = Stack(prefix=START_PREFIX)
    ensure_topics(s.bootstrap, START_PREFIX)
    subject = START_PREFIX + "run-decisions-value"
    broken = json.loads(avsc("run-decisions"))
    broken["fields"][0]["type"] = "long"  # runId: the subject's first version, which RunDecision cannot follow
    register(registry, subject, broken)
    instance = "registrar-registry-compat"
    since = log_size(s, instance)
    try:
        s.start("registrar", instance=instance,
                settings={"topic.run-decisions.framing": "confluent", "schema.registry.url": registry.url,
                          "kafka.group.id": "loadledger.registrar.registry-compat"})
        assert s.wait_exit(instance, timeout=60) != 0
        with open(s.log_path(instance)) as f:
            f.seek(since)
            log = f.read()
        assert subject in log and "HTTP 409" in log and "Incompatible" in log, log[-2000:]
        assert registry.call("GET", "/subjects/%s/versions" % subject)[1] == [1]
    finally:
        bad = stop_checked(s)
    assert not bad, bad


def test_apicurio_https_with_a_ca_file(tmp_path):
    key, cert = str(tmp_path / "key.pem"), str(tmp_path / "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    s = Stack(prefix=START_PREFIX)
    ensure_topics(s.bootstrap, START_PREFIX)
    reg = apicurio.Apicurio(str(tmp_path / "apicurio"), tls=(cert, key))
    assert reg.url.startswith("https://")
    conf = {"topic.run-decisions.framing": "confluent", "schema.registry.url": reg.url,
            "kafka.group.id": "loadledger.registrar.registry-tls"}
    names = ("registrar-registry-noca", "registrar-registry-ca")
    since = {i: log_size(s, i) for i in names}
    try:
        # a certificate refused is, to the client, a registry that does not answer: retried for
        # schema.registry.start_wait (short here), then the stop
        s.start("registrar", instance=names[0], settings=dict(conf, **{"schema.registry.start_wait": "PT2S"}))
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
        assert reg.call("GET", "/subjects")[1] == [START_PREFIX + "run-decisions-value"]
    finally:
        bad = stop_checked(s)
        reg.stop()
    assert not bad, bad


def lookup_conf(registry, topics):
    conf = registry_conf(registry.url, topics)
    conf["schema.registry.auto.register.schemas"] = "false"
    return conf


def subject_state(reg):
    """Every subject and its versions."""
    return {sub: reg.call("GET", "/subjects/%s/versions" % sub)[1] for sub in reg.call("GET", "/subjects")[1]}


def test_apicurio_lookup_only_replies_carry_the_id_registered_beforehand(registry):
    s = Stack(prefix=LOOKUP_PREFIX)
    s.migrate()
    ensure_topics(s.bootstrap, LOOKUP_PREFIX)
    subject = LOOKUP_PREFIX + "run-decisions-value"
    # registered beforehand (by an operator): the service's RunDecision, then a newer compatible version,
    # so the lookup must find version 1's id and not take the subject's latest
    want = register(registry, subject, compact("run-decisions"))
    newer = register(registry, subject, schema_with("RunDecision", {"name": "decidedBy", "type": "string",
                                                                    "default": ""}))
    assert newer != want and registry.call("GET", "/subjects/%s/versions" % subject)[1] == [1, 2]
    before = subject_state(registry)
    tag = "registry-lookup"
    since = log_size(s, "registrar-" + tag)
    f = None
    try:
        t0 = time.time()
        start_sides(s, ("registrar",), tag, lookup_conf(registry, ("run-decisions",)))
        print("registrar started (lookup) in %.1f s" % (time.time() - t0))
        [line] = log_events(s, "registrar-" + tag, "registry_subject", since=since)
        assert "%s: id %d (version 1, looked up)" % (subject, want) in line["msg"], line
        f = FramedFlow(Nifi(s.bootstrap, LOOKUP_PREFIX), {"run-decisions": "confluent"}, topics=("run-decisions",))
        runs = [new_run() for _ in range(3)]
        replies = answers(f, post_many(f.nifi, [dict(logical="run-requests", record=r.run_request()) for r in runs]))
        assert [(d["outcome"], d["runStatus"]) for d in replies] == [("ACCEPTED", "CREATED")] * 3, replies
        assert {r["schema_id"] for r in f.r["run-decisions"].records} == {want}
        assert subject_state(registry) == before  # nothing registered
    finally:
        if f:
            f.close()
        bad = stop_checked(s)
    assert not bad, bad


def start_failure(s, service, instance, settings):
    """Starts an instance that must stop at start: its exit code and what it logged."""
    since = log_size(s, instance)
    t0 = time.time()
    s.start(service, instance=instance, settings=settings)
    code = s.wait_exit(instance, timeout=60)
    print("%s exited %d after %.1f s" % (instance, code, time.time() - t0))
    with open(s.log_path(instance)) as f:
        f.seek(since)
        return code, f.read()


def test_apicurio_lookup_only_stops_at_start_on_a_subject_without_the_schema(registry):
    s = Stack(prefix=LOOKUP_PREFIX)
    ensure_topics(s.bootstrap, LOOKUP_PREFIX)
    found = LOOKUP_PREFIX + "run-decisions-value"
    if registry.call("GET", "/subjects/%s/versions" % found)[0] != 200:  # this test alone (-k)
        register(registry, found, compact("run-decisions"))
    # the subject exists but lacks the service's ManifestDecision: only a newer version is registered
    lacking = LOOKUP_PREFIX + "manifest-decisions-value"
    register(registry, lacking, schema_with("ManifestDecision", {"name": "decidedBy", "type": "string",
                                                                 "default": ""}))
    absent = LOOKUP_PREFIX + "validate-run-commands-value"  # the dispatcher's: no such subject
    before = subject_state(registry)
    assert absent not in before
    try:
        code, log = start_failure(s, "registrar", "registrar-registry-lookup-missing",
                                  dict(lookup_conf(registry, ("run-decisions", "manifest-decisions")),
                                       **{"kafka.group.id": "loadledger.registrar.registry-lookup-missing"}))
        assert code == 1, (code, log[-2000:])  # a configuration error: systemd does not restart it
        [err] = [ln for ln in log.splitlines() if ln.startswith("ll-registrar: ")]
        assert ("subject %s has no version with the schema of topic %smanifest-decisions (HTTP 404, error code "
                "40401 subject not found)" % (lacking, LOOKUP_PREFIX)) in err, err
        assert "register schemas/avro/ManifestDecision.avsc under %s" % lacking in err, err
        assert "or set schema.registry.auto.register.schemas = true" in err, err
        # the URL and the registry's own answer in the log
        [detail] = [json.loads(ln) for ln in log.splitlines() if '"registry_lookup_failed"' in ln]
        assert registry.url + "/subjects/" + lacking in detail["msg"] and "HTTP 404" in detail["msg"], detail
        # the dispatcher (its validate-run commands): the same, through ll_daemon_fail, before it opens the database
        code, log = start_failure(s, "dispatcher", "dispatcher-registry-lookup-missing",
                                  {k: v for k, v in lookup_conf(registry, ("validate-run-commands",)).items()
                                   if k.startswith(("topic.", "schema.registry."))})
        assert code == 1, (code, log[-2000:])
        [err] = [ln for ln in log.splitlines() if ln.startswith("ll-dispatcher: ")]
        assert "subject %s has no version" % absent in err and "error code 40401" in err, err
        assert "register schemas/avro/ValidateRunCommand.avsc under %s" % absent in err, err
        assert subject_state(registry) == before  # nothing registered
    finally:
        bad = stop_checked(s)
    assert not bad, bad


# -- the stand-in (fault injection, basic auth) --------------------------------------------------------
def test_standin_503_holds_the_message_while_other_runs_flow(sstack, sflow, rdb_s):
    reg, nifi = sstack.registry, sflow.nifi
    dlq = nifi.reader("dead-letters")
    new_id = register(reg, PREFIX_S + "run-requests-value", NEW_RUN_REQUEST)  # not fetched by anyone yet
    assert reg.call("POST", "/_standin/fault", {"status": 503, "count": -1, "path": "/schemas/ids/"})[0] == 200
    try:
        since = os.path.getsize(sstack.log_path("registrar-" + TAG_S))
        waiting, other = new_run(), new_run()
        req = dict(waiting.run_request(), requestedBy="coordinator-7")
        [held] = post_many(nifi, [item(sstack, "run-requests", req, schema=NEW_RUN_REQUEST, schema_id=new_id)])
        # another run, its writer id cached: answered while the registry is down
        [o] = answers(sflow, post_many(nifi, [item(sstack, "run-requests", other.run_request())]))
        assert (o["outcome"], o["runStatus"]) == ("ACCEPTED", "CREATED"), o
        time.sleep(PREREQ_WAIT_S + 2)  # past the prerequisite wait: a registry fault is no prerequisite
        assert not dead_letters_of(dlq, held)
        assert one(rdb_s, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", waiting.run_id) == 0
        held_logs = [e for e in log_events(sstack, "registrar-" + TAG_S, "run_held", since=since)
                     if "schema id %d" % new_id in e.get("msg", "")]
        assert held_logs and "unavailable" in held_logs[0]["msg"], held_logs
        assert reg.requests("/schemas/ids/%d" % new_id) >= 2  # tried again (with backoff)
        assert registry_requests(sstack, "registrar-" + TAG_S, "unavailable") >= 2
    finally:
        reg.call("POST", "/_standin/fault", {})
    [d] = answers(sflow, [held])
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d
    assert one(rdb_s, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", waiting.run_id) == "CREATED"
    assert not dead_letters_of(dlq, held)
    dlq.close()


@pytest.fixture
def rdb_s(sstack):
    c = sstack.db()
    yield c.cursor()
    c.close()


@pytest.mark.parametrize("fault", ["drop", "hang"])
def test_standin_unreachable_or_hanging_holds_the_message(sstack, sflow, rdb_s, fault):
    reg, nifi = sstack.registry, sflow.nifi
    dlq = nifi.reader("dead-letters")
    writer = schema_with("RunRequest", {"name": "fault_" + fault, "type": "string", "default": ""})
    new_id = register(reg, PREFIX_S + "run-requests-value", writer)
    assert reg.call("POST", "/_standin/fault", {"status": fault, "count": -1, "path": "/schemas/ids/",
                                                "seconds": 30})[0] == 200
    try:
        since = os.path.getsize(sstack.log_path("registrar-" + TAG_S))
        waiting, other = new_run(), new_run()
        req = dict(waiting.run_request(), **{"fault_" + fault: "x"})
        [held] = post_many(nifi, [item(sstack, "run-requests", req, schema=writer, schema_id=new_id)])
        t0 = time.time()
        [o] = answers(sflow, post_many(nifi, [item(sstack, "run-requests", other.run_request())]))
        assert (o["outcome"], o["runStatus"]) == ("ACCEPTED", "CREATED"), o
        assert time.time() - t0 < 15, time.time() - t0  # a 30 s hang is cut at schema.registry.timeout (2 s)
        time.sleep(3)
        assert not dead_letters_of(dlq, held)
        assert one(rdb_s, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", waiting.run_id) == 0
        held_logs = [e for e in log_events(sstack, "registrar-" + TAG_S, "run_held", since=since)
                     if "schema id %d" % new_id in e.get("msg", "")]
        assert held_logs and "unavailable" in held_logs[0]["msg"], held_logs
    finally:
        reg.call("POST", "/_standin/fault", {})
    [d] = answers(sflow, [held], timeout=60)
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d
    assert not dead_letters_of(dlq, held)
    dlq.close()


def test_standin_basic_auth_at_start(tmp_path):
    s = Stack(prefix=START_PREFIX)
    ensure_topics(s.bootstrap, START_PREFIX)
    reg = StandIn(str(tmp_path), user_info="svc-registrar:s3cret")
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
        assert START_PREFIX + "run-decisions-value" in reg.call("GET", "/subjects")[1]
        # the credentials are not logged
        with open(s.log_path("registrar-registry-auth")) as f:
            assert "s3cret" not in f.read()
    finally:
        bad = stop_checked(s)
        reg.stop()
    assert not bad, bad


def test_standin_unavailable_at_start_is_waited_for_then_a_clear_stop(tmp_path):
    """A registry answering 503 when a service starts (a registry restarting with the hosts): the
    registration is retried with backoff for schema.registry.start_wait, logged registry_unavailable,
    and the service starts once the registry answers; a registry still down after the wait stops the
    service with exit 3 (LL_EXIT_REGISTRY_UNAVAILABLE: the systemd unit restarts it, unlike exit 1, a
    configuration error) naming the subject, the key and the time waited; a stop signal during the
    wait ends it at once with exit 0 (issue 39, item 6; a database down at start is waited for as
    well: docs/design.md §9)."""
    s = Stack(prefix=START_PREFIX)
    s.migrate()
    ensure_topics(s.bootstrap, START_PREFIX)
    reg = StandIn(str(tmp_path))
    conf = {"topic.run-decisions.framing": "confluent", "schema.registry.url": reg.url,
            "schema.registry.start_wait": "PT60S", "kafka.group.id": "loadledger.registrar.registry-startwait"}
    subject = START_PREFIX + "run-decisions-value"
    try:
        assert reg.call("POST", "/_standin/fault", {"status": 503, "count": -1, "path": "/subjects/"})[0] == 200
        since = log_size(s, "registrar-registry-startwait")
        s.start("registrar", instance="registrar-registry-startwait", settings=conf)
        wait_log(s, "registrar-registry-startwait", "registry_unavailable", since=since, timeout=30,
                 pred=lambda r: subject in r.get("msg", ""))
        assert reg.requests("/subjects/%s/versions" % subject) >= 1
        assert subject not in reg.call("GET", "/subjects")[1]
        reg.call("POST", "/_standin/fault", {})
        wait_log(s, "registrar-registry-startwait", "registry_subject", since=since, timeout=30,
                 pred=lambda r: "run-decisions-value" in r.get("msg", ""))
        assert subject in reg.call("GET", "/subjects")[1]
        assert s.procs["registrar-registry-startwait"][0].poll() is None  # running
        # down for longer than the wait: a clear stop
        conf = dict(conf, **{"schema.registry.url": "http://127.0.0.1:%d" % dead_port(),
                             "schema.registry.start_wait": "PT2S"})
        t0 = time.time()
        code, log = start_failure(s, "registrar", "registrar-registry-gone", conf)
        assert code == 3 and time.time() - t0 >= 2, (code, log[-2000:])
        assert "schema.registry.start_wait" in log and subject in log and "2000 ms" in log, log[-2000:]
        assert log.count('"registry_unavailable"') >= 2, log[-3000:]
        # a stop signal during a long wait ends it at once, exit 0 (nothing was applied)
        conf = dict(conf, **{"schema.registry.start_wait": "PT60S"})
        since = log_size(s, "registrar-registry-term")
        s.start("registrar", instance="registrar-registry-term", settings=conf)
        wait_log(s, "registrar-registry-term", "registry_unavailable", since=since, timeout=30)
        t0 = time.time()
        s.procs["registrar-registry-term"][0].terminate()
        code = s.wait_exit("registrar-registry-term", timeout=30)
        assert code == 0 and time.time() - t0 < 5, (code, time.time() - t0)
    finally:
        bad = stop_checked(s)
        reg.stop()
    assert not bad, bad
