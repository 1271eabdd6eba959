"""Metrics and health over HTTP (issue 10 §1; docs/operations.md "Metrics and health").

Every service runs with http.listen = 127.0.0.1:0 on a drill stack of its own (database, topic
prefix, groups: the counters start from nothing and only this test's messages reach them). The
reference scenario runs to SUCCESS, plus a second run of the same job and key (REJECTED
DUPLICATE_ACTIVE_RUN), the run request again (REPLAY) and an undecodable chunk (a dead letter).
Every service is scraped with Prometheus' own parser (python3-prometheus-client), and the counts
are checked against the replies and dead letters read back read_committed: per input topic,
outcome and code, exactly equal; `loadctl monitor --once --services` shows the same sums.
/healthz and /readyz answer 200; a sweeper whose database is unreachable answers /readyz 503
while /healthz stays 200.
"""
import collections
import json
import os
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from conftest import close_clean, new_run
from llsim.drills import Isolated, RawReader, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.lifecycle import Lifecycle

CONSUMERS = {
    "registrar": {"run-requests": "run-decisions", "manifests": "manifest-decisions"},
    "claimer": {"partition-claims": "claim-decisions", "publish-claims": "publish-claim-decisions"},
    "completion": {"chunks": "chunk-outcomes", "partition-failures": "partition-failure-outcomes",
                   "validation-starts": "validation-start-decisions",
                   "validation-metrics": "validation-metrics-outcomes",
                   "stage-validations": "stage-validation-outcomes", "publish-results": "publish-result-outcomes",
                   "run-successes": "run-success-outcomes", "run-failures": "run-failure-outcomes"},
}
HTTP = {"http.listen": "127.0.0.1:0"}
FAST_STATS = {"kafka.statistics.interval.ms": "1000"}


def port_of(log_path, timeout=30):
    """The port a service logged in its http_listening line."""
    def find():
        if not os.path.exists(log_path):
            return None
        with open(log_path) as f:
            for line in f:
                if '"http_listening"' in line:
                    return json.loads(line)["port"]
        return None
    return wait_until(find, timeout, "http_listening in " + log_path)


def get(port, path, method="GET"):
    """(status, body) of one request."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def scrape(port):
    """{sample name: [(labels, value)]} of /metrics, parsed by prometheus_client; also the family
    types by name."""
    status, text = get(port, "/metrics")
    assert status == 200
    samples, types = collections.defaultdict(list), {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            samples[s.name].append((s.labels, s.value))
    return samples, types


def value(samples, name, **labels):
    return sum(v for l, v in samples.get(name, []) if all(l.get(k) == x for k, x in labels.items()))


@pytest.fixture(scope="module")
def drill():
    iso = Isolated("metrics")
    st = iso.stack
    for svc in CONSUMERS:
        st.start(svc, settings=dict(HTTP, **FAST_STATS))
    st.start("dispatcher", settings=HTTP)
    st.start("sweeper", settings=HTTP)
    ports = {svc: port_of(st.log_path(svc + "-0")) for svc in list(CONSUMERS) + ["dispatcher", "sweeper"]}
    yield iso, ports
    close_clean(iso)


def test_metrics_count_what_the_replies_say(drill):
    iso, ports = drill
    for svc, port in ports.items():
        wait_until(lambda: get(port, "/readyz")[0] == 200, 60, svc + " ready")
        assert get(port, "/healthz")[0] == 200

    nifi = Nifi(iso.bootstrap, iso.prefix)
    flow = Flow(nifi)
    life = Lifecycle(flow)
    try:
        run = new_run()
        steps = flow.to_extracted(run)
        other = new_run(business_key=run.business_key)
        assert flow.create(other)["code"] == "DUPLICATE_ACTIVE_RUN"
        life.to_success(run, steps["commands"][0]["dispatchId"])
        # the run request again (REPLAY), the same job and key under a new run id (REJECTED
        # DUPLICATE_ACTIVE_RUN while the first is active: sent before its success), an
        # undecodable chunk (a dead letter)
        nifi.send("run-requests", run.run_request())
        nifi.flush()
        assert flow.reply("run-decisions", run.run_id, count=2)[1]["outcome"] == "REPLAY"
        nifi.send("chunks", None, key=run.run_id, raw=b"\x07not avro")
        nifi.flush()
    finally:
        flow.close()

    # every reply and dead letter of the drill's topics, read_committed
    want = collections.Counter()
    for svc, routes in CONSUMERS.items():
        for reply in set(routes.values()):
            r = RawReader(iso.bootstrap, iso.topic(reply), reply)
            r.drain(1.5)
            for rec in r.records:
                v = rec["value"]
                want[(svc, v["sourceTopic"], v["outcome"], v["code"] or "")] += 1
            r.close()
    dlq = RawReader(iso.bootstrap, iso.topic("dead-letters"))
    dlq.wait_for(lambda r: True, 1, 30)
    dead = collections.Counter((r["headers"]["ll.service"].decode(), r["headers"]["ll.source.topic"].decode(),
                                r["headers"]["ll.error.code"].decode()) for r in dlq.records)
    dlq.close()
    assert sum(1 for k in want if k[2] == "REPLAY") >= 1 and sum(1 for k in want if k[2] == "REJECTED") >= 1
    assert sum(want.values()) >= 30 and dead

    def counted():
        got = collections.Counter()
        got_dead = collections.Counter()
        for svc in CONSUMERS:
            s, _ = scrape(ports[svc])
            for labels, v in s.get("loadledger_inputs_total", []):
                got[(svc, labels["topic"], labels["outcome"], labels["code"])] += int(v)
            for labels, v in s.get("loadledger_dead_letters_total", []):
                got_dead[(svc, labels["topic"], labels["code"])] += int(v)
        return got, got_dead

    # the counters move when the Kafka transaction commits, a moment before a reader sees it
    try:
        wait_until(lambda: counted() == (want, dead), 60, "metrics equal to the replies")
    except TimeoutError:
        assert counted() == (want, dead)

    for svc in CONSUMERS:
        s, types = scrape(ports[svc])
        assert types["loadledger_inputs"] == "counter" and types["loadledger_batch_messages"] == "histogram"
        assert value(s, "loadledger_batch_messages_count") >= 1
        assert value(s, "loadledger_batch_messages_sum") >= sum(v for k, v in want.items() if k[0] == svc)
        assert value(s, "loadledger_db_commit_duration_seconds_count") >= 1
        assert value(s, "loadledger_kafka_commit_duration_seconds_count") >= 1
        buckets = s["loadledger_kafka_commit_duration_seconds_bucket"]
        assert [l["le"] for l, _ in buckets][-1] == "+Inf"
        assert buckets[-1][1] == value(s, "loadledger_kafka_commit_duration_seconds_count")
        assert value(s, "loadledger_held_messages") == 0 and value(s, "loadledger_held_runs") == 0
        assert value(s, "process_resident_memory_bytes") > 1e6
        assert value(s, "loadledger_ready") == 1
        # the lag of every assigned partition of the service's inputs, all consumed by now
        topics = {iso.topic(t) for t in CONSUMERS[svc]}
        lag = wait_until(lambda: [x for x in scrape(ports[svc])[0].get("loadledger_consumer_lag_messages", [])
                                  if x[0]["topic"] in topics] or None, 15, svc + " lag")
        assert {l["topic"] for l, _ in lag} == topics
        wait_until(lambda: all(v == 0 for l, v in scrape(ports[svc])[0]["loadledger_consumer_lag_messages"]),
                   15, svc + " lag 0")

    s, _ = scrape(ports["dispatcher"])
    assert value(s, "loadledger_dispatches_total", result="sent") == 1  # the one validate-run command
    assert value(s, "loadledger_outbox_pending_dispatches") == 0
    assert value(s, "loadledger_outbox_oldest_pending_age_seconds") == 0
    s, types = scrape(ports["sweeper"])
    assert types["loadledger_sweeper_actions"] == "counter" and value(s, "loadledger_loop_turns_total") > 0

    # loadctl monitor reads the same endpoints: one line per service, the counts summed
    targets = ",".join("127.0.0.1:%d" % ports[svc] for svc in list(CONSUMERS) + ["dispatcher", "sweeper"])
    out = json.loads(iso.stack.loadctl("--json", "monitor", "--once", "--services", targets).stdout)
    by = {svc: out["services"][i] for i, svc in enumerate(list(CONSUMERS) + ["dispatcher", "sweeper"])}
    assert all(v["up"] and v["ready"] for v in by.values()), by
    for svc in CONSUMERS:
        assert by[svc]["inputs"] == sum(v for k, v in want.items() if k[0] == svc)
        assert by[svc]["rejected"] == sum(v for k, v in want.items() if k[0] == svc and k[2] == "REJECTED")
        assert by[svc]["deadLetters"] == sum(v for k, v in dead.items() if k[0] == svc)


def test_health_and_readiness_answers(drill):
    iso, ports = drill
    port = ports["claimer"]
    assert get(port, "/healthz")[0] == 200
    status, body = get(port, "/readyz")
    assert status == 200 and "partitions assigned: " in body
    assert get(port, "/nothing")[0] == 404
    assert get(port, "/metrics", method="POST")[0] == 405
    # a sweeper whose database does not answer: alive (its loop turns) but not ready
    st = iso.stack
    st.start("sweeper", instance="sweeper-nodb",
             settings=dict(HTTP, **{"db.conninfo": "host=127.0.0.1 port=1 dbname=x user=ll_sweeper connect_timeout=2"}))
    nodb = port_of(st.log_path("sweeper-nodb"))
    wait_until(lambda: get(nodb, "/healthz")[0] == 200, 15, "healthz of the sweeper without database")
    status, body = get(nodb, "/readyz")
    assert status == 503 and "database: unreachable" in body, body
    s, _ = scrape(nodb)
    assert value(s, "loadledger_ready") == 0
    assert st.stop("sweeper-nodb") == 0
