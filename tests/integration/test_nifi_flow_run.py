"""The shipped NiFi flow (nifi/loadledger-flow.json and -embedded.json, issue 30 item 4) run against
the real broker, database and services, through the flow's own graph: llsim.flowrun follows its
connections and evaluates its properties (an interpreter of the processors it uses, NOT NiFi, which
is not installable here; tests/nifi-flow runs the same expressions in NiFi's own classes). The
services are configured with nifi/conf/<variant>/<service>.conf, the lines nifi/README.md tells a
team to add; the SITE groups (Oracle, HDFS, Hive) are played by this test.

    both variants: the reference scenario from a "start run" FlowFile to SUCCESS; every request
        released by the reply PG-00 signalled for it (the Wait signals the flow computes from its
        own attributes equal those it computes from the real replies), no alert, nothing left
        waiting; a second run of the same job and business key started at the same time is
        refused (DUPLICATE_ACTIVE_RUN) and goes to the alerts, the first is not disturbed
    the registry flow: three runs failing at three steps: an expired snapshot in one partition
        (FAILED_SNAPSHOT_EXPIRED by the ledger, no alert), a FAILing STAGING metric (PG-40 -> PG-90's
        run failure: FAILED_STAGE_VALIDATION, logged to the operators), a publish outcome unknown
        (PUBLISH_UNKNOWN: an alert for an operator)
The registry variant runs on a real registry, Apicurio Registry 2.0.2 (llsim.apicurio, compatibility
FULL_TRANSITIVE), with the 12 event schemas registered under <prefix><topic>-value as nifi/README.md
says; the flow side reads a subject's latest schema and a schema by id as NiFi's
ConfluentSchemaRegistry does.
"""
import json
import math
import os
import uuid

import pytest

from conftest import one
from llsim import apicurio
from llsim.flowrun import FlowFile, FlowRunner, Registry
from llsim.probe import ensure_topics, start_sides, stop_checked
from llsim.scenario import JOB, SCN, Run
from llsim.stack import Stack

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VARIANTS = {"registry": "loadledger-flow.json", "embedded": "loadledger-flow-embedded.json"}
EVENT_TOPICS = ["run-requests", "manifests", "partition-claims", "chunks", "partition-failures", "validation-starts",
                "validation-metrics", "stage-validations", "publish-claims", "publish-results", "run-successes",
                "run-failures"]


def service_conf(variant, service, registry_url):
    """nifi/conf/<variant>/<service>.conf as settings, with this test's registry."""
    out = {}
    with open(os.path.join(REPO, "nifi", "conf", variant, service + ".conf")) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                k, v = [x.strip() for x in line.split("=", 1)]
                out[k] = v
    if "schema.registry.url" in out:
        out["schema.registry.url"] = registry_url
    return out


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def fstack(request):
    variant = request.param
    # topics of this module's own, shared by its tests: each runner reads from the end offsets at its start
    prefix = "loadledger.t-flow-%s-%s." % (variant[:3], uuid.uuid4().hex[:6])
    s = Stack(prefix=prefix)
    s.migrate()
    ensure_topics(s.bootstrap, prefix)
    reg = None
    if variant == "registry":
        reg = apicurio.Apicurio(os.path.join(s.run_dir, "t-flow", "apicurio"))
        reg.enforce_rules()
        # what nifi/README.md asks of a team: each event schema under its topic's subject
        for t in EVENT_TOPICS:
            with open(os.path.join(REPO, "schemas", "avro", _schema_of(t) + ".avsc")) as f:
                st, body = reg.call("POST", "/subjects/%s%s-value/versions" % (prefix, t), {"schema": f.read()})
                assert st == 200, (t, st, body)
    try:
        for service in ("registrar", "claimer", "completion", "dispatcher"):
            start_sides(s, (service,), "flow" + variant[:3], service_conf(variant, service, reg and reg.url))
    except Exception:
        stop_checked(s)
        if reg:
            reg.stop()
        raise
    s.variant, s.registry, s.prefix = variant, reg, prefix
    yield s
    bad = stop_checked(s)
    if reg:
        reg.stop()
    assert not bad, "services did not exit cleanly (sanitizer report or crash): %s; logs in %s" % (bad, s.log_dir)


def _schema_of(topic):
    for fn in os.listdir(os.path.join(REPO, "schemas", "avro")):
        with open(os.path.join(REPO, "schemas", "avro", fn)) as f:
            if json.load(f).get("doc", "").startswith("Topic %s " % topic):
                return fn[:-5]
    raise KeyError(topic)


class Site:
    """The team's own work (the SITE groups) for the reference load, and what reached the operators."""

    def __init__(self, business_key, failures=None):
        self.business_key = business_key
        self.failures = failures or {}  # business key -> "snapshot", "staging" or "publish"
        self.runs, self.succeeded, self.alerts, self.work_orders = {}, [], [], []

    def fails(self, ff, how):
        a = ff.attrs
        return self.failures.get(a.get("ll.business.key") or a.get("ll.reply.businessKey")) == how

    def __call__(self, port, ff):
        a = ff.attrs
        if port == "plan manifest":
            run = Run(run_id=a["ll.run.id"], business_key=a["ll.business.key"])
            self.runs[run.run_id] = run
            assert a["ll.reply.hdfsRunPath"] == run.hdfs_run_path, a
            return [("manifest", ff.child(json.dumps(run.manifest())))]
        if port == "extract partition":
            self.work_orders.append(dict(a))
            assert a["ll.reply.claimed"] == "true" and a["ll.reply.snapshotScn"] == SCN, a
            if self.fails(ff, "snapshot") and a["ll.partition.id"] == "0003":
                f = ff.child("")
                f.attrs.update({"ll.error.stage": "EXTRACT", "ll.error.class": "ORACLE", "ll.error.code": "ORA-01555",
                                "ll.error.message": "snapshot too old: rollback segment number 7 with name "
                                                    "\"_SYSSMU7$\" too small"})
                return [("extraction failed", f)]
            rows = int(a["ll.reply.expectedRowCount"])
            n = max(1, math.ceil(rows / 5000))
            out = []
            for i in range(n):
                c = ff.child("")
                c.attrs.update({
                    "ll.chunk.index": str(i), "ll.chunk.count": str(n), "ll.fragment.id": "frag-%s" % a["uuid"][:8],
                    "ll.hdfs.path": "%s/part-%s/chunk-%05d.parquet" % (a["ll.reply.hdfsRunPath"], a["ll.partition.id"], i),
                    "ll.record.count": str(min(5000, rows - i * 5000)), "ll.byte.count": str(96 * 5000)})
                out.append(("chunk written", c))
            return out
        if port == "validate staging":
            n = a["ll.source.count"]
            bad = self.fails(ff, "staging")
            return [("staging metrics", ff.child(json.dumps([
                {"metricName": "STAGE_COUNT", "expectedValue": n, "actualValue": "104999" if bad else a["ll.extracted.count"],
                 "tolerance": None, "result": "FAIL" if bad else "PASS", "details": {}}])))]
        if port == "publish":
            assert a["ll.publish.token"], a
            if self.fails(ff, "publish"):
                f = ff.child()
                f.attrs.update({"ll.error.code": "HIVE_TIMEOUT", "ll.error.message": "HiveServer2 did not answer"})
                return [("publish outcome unknown", f)]
            return [("published", ff.child())]
        if port == "validate target":
            return [("target metrics", ff.child(json.dumps([
                {"metricName": "TARGET_COUNT", "expectedValue": a["ll.source.count"], "actualValue": a["ll.source.count"],
                 "tolerance": None, "result": "PASS", "details": {}}])))]
        if port == "run succeeded":
            self.succeeded.append(a["ll.run.id"])
            return []
        if port == "alerts":
            self.alerts.append(dict(a))
            return []
        raise AssertionError("no SITE behaviour for port %r" % port)


def test_reference_scenario_through_the_flow(fstack):
    key = "2026-09-28.f" + uuid.uuid4().hex[:10]
    site = Site(key)
    reg = Registry(fstack.registry.call) if fstack.registry else None
    runner = FlowRunner(os.path.join(REPO, "nifi", VARIANTS[fstack.variant]), {"topic.prefix": fstack.prefix},
                        fstack.bootstrap, site, reg)
    try:
        runner.consume(from_end=True)  # the module's topics are shared by its tests
        # two triggers for the same load at once: one run is admitted, the other refused
        for _ in range(2):
            runner.inject("start run", "SITE Start runs", FlowFile({"ll.job.key": JOB, "ll.business.key": key}))
        assert runner.run(lambda: site.succeeded, 180), (
            "no SUCCESS within 180 s; waiting on %s; alerts %s; logs in %s"
            % (sorted(runner.waiting), site.alerts, fstack.log_dir))
        # the dispatcher's command copies (if any) and late replies: a moment more, then nothing may wait
        runner.run(lambda: False, 3)
    finally:
        runner.close()
    [run_id] = site.succeeded
    refused = [a for a in site.alerts if a.get("ll.reply.code") == "DUPLICATE_ACTIVE_RUN"]
    assert len(refused) == 1 and refused[0]["ll.run.id"] != run_id, site.alerts
    assert len(site.alerts) == 1, json.dumps([{k: v for k, v in a.items() if k.startswith(
        ("ll.reply.code", "ll.reply.outcome", "ll.reply.message", "ll.reply.runStatus", "kafka.topic", "ll.fail",
         "ll.error", "ll.reply.reasons"))} for a in site.alerts], indent=1)
    assert not runner.waiting, sorted(runner.waiting)
    released = {}
    for name, _ in runner.released:
        released[name] = released.get(name, 0) + 1
    assert released == {"Wait for the run decision": 2, "Wait for the manifest decision": 1,
                        "Wait for the claim decision": 7, "Wait for the STAGING metrics outcome": 1,
                        "Wait for the stage-validated outcome": 1, "Wait for the publish claim decision": 1,
                        "Wait for the publish result outcome": 1, "Wait for the TARGET metrics outcome": 1,
                        "Wait for the success outcome": 1}, released
    # every reply PG-00 signalled was taken by the request that waited for it
    assert sorted(runner.notified) == sorted(sig for _, sig in runner.released)
    assert not runner.signals, runner.signals
    sent = {}
    for topic, _ in runner.sent:
        sent[topic[len(fstack.prefix):]] = sent.get(topic[len(fstack.prefix):], 0) + 1
    assert sent == {"run-requests": 2, "manifests": 1, "partition-claims": 7, "chunks": 21, "validation-starts": 1,
                    "validation-metrics": 2, "stage-validations": 1, "publish-claims": 1, "publish-results": 1,
                    "run-successes": 1}, sent
    assert len({w["ll.claim.token"] for w in site.work_orders}) == 7
    c = fstack.db()
    try:
        db = c.cursor()
        db.execute("SELECT status, extracted_count, success_partition_count, staging_count, target_count"
                   " FROM nifi_ops.load_run WHERE run_id = %s", (run_id,))
        assert db.fetchone() == ("SUCCESS", 105000, 8, 105000, 105000)
        assert one(db, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id = %s", run_id) == 21
        assert one(db, "SELECT count(*) FROM nifi_ops.load_run WHERE business_key = %s", key) == 1
        node = one(db, "SELECT node FROM nifi_ops.load_validation_start WHERE run_id = %s", run_id)
        assert "/" in node, node  # the flow's ValidationStart names the node and its FlowFile
        assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'DEAD_LETTER'",
                   run_id) == 0
    finally:
        c.close()


@pytest.mark.parametrize("fstack", ["registry"], indirect=True)
def test_failures_through_the_flow(fstack):
    """Three runs, each failing at another step: an expired Oracle snapshot in one partition (the
    failure report; the ledger fails the run FAILED_SNAPSHOT_EXPIRED), a STAGING metric that FAILs
    (PG-40's gate sends a run failure through PG-90: FAILED_STAGE_VALIDATION), a publish whose
    outcome is unknown (PUBLISH_UNKNOWN, for an operator: an alert). The registry flow only: the
    two flows differ only in how an event is written, which the reference scenario covers for both
    (and the test budget is short)."""
    base = "2026-09-28.g" + uuid.uuid4().hex[:8]
    keys = {how: "%s.%s" % (base, how[:2]) for how in ("snapshot", "staging", "publish")}
    site = Site(base, {k: how for how, k in keys.items()})
    reg = Registry(fstack.registry.call) if fstack.registry else None
    runner = FlowRunner(os.path.join(REPO, "nifi", VARIANTS[fstack.variant]), {"topic.prefix": fstack.prefix},
                        fstack.bootstrap, site, reg)
    want = {"snapshot": "FAILED_SNAPSHOT_EXPIRED", "staging": "FAILED_STAGE_VALIDATION", "publish": "PUBLISH_UNKNOWN"}
    c = fstack.db()
    c.autocommit = True
    db = c.cursor()

    def statuses():
        db.execute("SELECT business_key, status FROM nifi_ops.load_run WHERE business_key LIKE %s", (base + ".%",))
        return dict(db.fetchall())

    def done():
        st = statuses()
        return all(st.get(keys[h]) == s for h, s in want.items()) and not runner.waiting and len(site.alerts) >= 2

    try:
        runner.consume(from_end=True)  # the module's topics are shared by its tests
        for k in keys.values():
            runner.inject("start run", "SITE Start runs", FlowFile({"ll.job.key": JOB, "ll.business.key": k}))
        ok = runner.run(done, 180)
        assert ok, "statuses %s; waiting on %s; alerts %s" % (statuses(), sorted(runner.waiting), site.alerts)
        runner.run(lambda: False, 2)
    finally:
        runner.close()
        c.close()
    assert not site.succeeded
    by_key = {}
    for a in site.alerts:
        by_key.setdefault(a.get("ll.business.key"), []).append(a)
    # the staging failure: reported by PG-90 and its outcome logged to the operators
    [staged] = by_key[keys["staging"]]
    assert (staged["ll.fail.expected"], staged["ll.fail.status"], staged["ll.reply.outcome"]) == (
        "STAGE_VALIDATING", "FAILED_STAGE_VALIDATION", "ACCEPTED"), staged
    # the publish outcome unknown: the operator's (resolve-publish-unknown)
    [unknown] = by_key[keys["publish"]]
    assert (unknown["ll.reply.runStatus"], unknown["ll.publish.outcome"]) == ("PUBLISH_UNKNOWN", "PUBLISH_UNKNOWN")
    # the snapshot failure was accepted (no alert): the ledger failed the run itself
    assert keys["snapshot"] not in by_key, by_key.get(keys["snapshot"])
    assert len(site.alerts) == 2, site.alerts
