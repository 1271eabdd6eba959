"""The alerts and the dashboard name metrics that exist (issue 29 §4; docs/operations.md "Alerts
and dashboard"), and the sweeper's gauges of the ledger say what the ledger holds.

Every service runs with http.listen = 127.0.0.1:0 on a drill stack of its own. Traffic fills the
families that only appear with a first sample (a run to SUCCESS, a dead letter, a dispatch sent,
the lag); then every service is scraped with prometheus_client's parser, and every metric name
of packaging/prometheus/loadledger.rules.yml and of packaging/grafana/loadledger.json's queries
must be a sample name of some scrape (Prometheus' own `up` excepted).

The ledger then holds one run in PUBLISH_UNKNOWN (the sweeper's publish_stale of 2 s), one in
EXTRACTED_VALIDATED whose validate-run command went DEAD (ack_timeout 2 s, one attempt) and one
SUCCESS run: the sweeper's gauges must say exactly that (every other non-terminal status 0), and
once the DEAD dispatch's run has ended, the DEAD row is no longer counted.
"""
import json
import os
import re

import pytest
import yaml

from conftest import close_clean, new_run, one
from llsim.drills import Isolated, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.lifecycle import Lifecycle, staging_metrics
from test_metrics import get, port_of, scrape, value

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
RULES = os.path.join(ROOT, "packaging", "prometheus", "loadledger.rules.yml")
DASHBOARD = os.path.join(ROOT, "packaging", "grafana", "loadledger.json")
SERVICES = ["registrar", "claimer", "completion", "dispatcher", "sweeper"]
HTTP = {"http.listen": "127.0.0.1:0"}
FAST_STATS = {"kafka.statistics.interval.ms": "1000"}  # the lag, sampled every second
SWEEPER = {"http.listen": "127.0.0.1:0", "recovery.extract_query_timeout": "PT1S", "recovery.stale": "PT3S",
           "recovery.sweeper_interval": "PT0.5S", "recovery.publish_stale": "PT2S",
           "dispatch.ack_timeout": "PT2S", "dispatch.max_attempts": "1", "metrics.runs_ended_settle": "PT1S"}
ACTIVE = ["CREATED", "EXTRACTING", "EXTRACTED_VALIDATED", "STAGE_VALIDATING", "STAGING_VALIDATED",
          "PUBLISHING", "PUBLISHED", "PUBLISH_UNKNOWN"]
STANDARD = {"up"}  # Prometheus' own, not in any scrape
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or",
                "unless", "inf", "nan", "atan2"}


def metric_names(expr):
    """The metric names of a PromQL expression, roughly: strings, label matchers, ranges and
    grouping lists removed, then every identifier that is not a function call or a keyword."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\boffset\s+\w+", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in PROMQL_WORDS:
            continue
        names.add(word)
    return names


def test_metric_names_parser():
    assert metric_names('max by (job, status) (loadledger_active_runs_idle_seconds{status!="X"}) > 7200') == {
        "loadledger_active_runs_idle_seconds"}
    assert metric_names("histogram_quantile(0.99, sum by (le) (rate(a_bucket{job=~\"$job\"}[$__rate_interval])))"
                        " or on (job) (up offset 10m == 1)") == {"a_bucket", "up"}


def rule_exprs():
    groups = yaml.safe_load(open(RULES))["groups"]
    return [r["expr"] for g in groups for r in g["rules"]]


def dashboard_exprs():
    d = json.load(open(DASHBOARD))
    exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
    for v in d["templating"]["list"]:
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else None
        if q and q.startswith("label_values("):
            exprs.append(q[len("label_values("):].split(",")[0])
    return exprs


@pytest.fixture(scope="module")
def drill():
    iso = Isolated("alertmetrics")
    st = iso.stack
    for svc in SERVICES[:3]:
        st.start(svc, settings=dict(HTTP, **FAST_STATS))
    st.start("dispatcher", settings=HTTP)
    ports = {svc: port_of(st.log_path(svc + "-0")) for svc in SERVICES[:4]}
    yield iso, ports
    close_clean(iso)


def gauges(port):
    s, _ = scrape(port)
    runs = {l["status"]: v for l, v in s.get("loadledger_active_runs", [])}
    idle = {l["status"]: v for l, v in s.get("loadledger_active_runs_idle_seconds", [])}
    dead = {l["type"]: v for l, v in s.get("loadledger_dead_dispatches", [])}
    return runs, idle, dead


def test_rules_and_dashboard_name_metrics_that_exist_and_sweeper_gauges(drill):
    iso, ports = drill
    st = iso.stack
    for svc, port in ports.items():
        wait_until(lambda: get(port, "/readyz")[0] == 200, 60, svc + " ready")
    nifi = Nifi(iso.bootstrap, iso.prefix)
    flow = Flow(nifi)
    life = Lifecycle(flow)
    db = st.db()
    db.autocommit = True
    cur = db.cursor()
    try:
        done = new_run()
        life.to_success(done, flow.to_extracted(done)["commands"][0]["dispatchId"])
        unknown = new_run()
        flow.to_extracted(unknown)
        life.start_validation(unknown, one(cur, "SELECT dispatch_id::text FROM nifi_ops.load_dispatch"
                                               " WHERE run_id = %s", unknown.run_id))
        life.metrics(unknown, "STAGING", staging_metrics(unknown))
        life.stage_validated(unknown)
        life.claim_publish(unknown)
        dead = new_run()
        flow.to_extracted(dead)  # its validate-run command is sent and never acknowledged
        nifi.send("chunks", None, key=done.run_id, raw=b"\x07not avro")  # a dead letter
        nifi.flush()

        # the sweeper only now: the publish and the unacknowledged command go stale under it
        # with a broker: the groups' lag (loadledger_group_lag_*), read for this drill's groups
        st.start("sweeper", settings=dict(SWEEPER, **{"kafka.bootstrap.servers": iso.bootstrap,
                                                      "lag.groups": ",".join(iso.groups.values())}))
        ports["sweeper"] = port_of(st.log_path("sweeper-0"))
        sw = ports["sweeper"]
        want_runs = dict.fromkeys(ACTIVE, 0.0)
        want_runs.update({"PUBLISH_UNKNOWN": 1.0, "EXTRACTED_VALIDATED": 1.0})
        want_dead = {"VALIDATE_RUN": 1.0, "REISSUE_PARTITION": 0.0}
        try:
            wait_until(lambda: gauges(sw)[0] == want_runs and gauges(sw)[2] == want_dead, 60,
                       "the sweeper's gauges")
        except TimeoutError:
            assert gauges(sw)[0] == want_runs and gauges(sw)[2] == want_dead
        assert one(cur, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", unknown.run_id) == "PUBLISH_UNKNOWN"
        assert one(cur, "SELECT status FROM nifi_ops.load_dispatch WHERE run_id = %s", dead.run_id) == "DEAD"
        _, idle, _ = gauges(sw)
        assert set(idle) == set(ACTIVE)
        assert all(idle[s] == 0 for s in ACTIVE if s not in ("PUBLISH_UNKNOWN", "EXTRACTED_VALIDATED")), idle
        age = one(cur, "SELECT floor(extract(epoch FROM clock_timestamp() - heartbeat_at)) FROM nifi_ops.load_run"
                       " WHERE run_id = %s", dead.run_id)
        assert 1 <= idle["EXTRACTED_VALIDATED"] <= float(age) + 2, (idle, age)
        assert 0 <= idle["PUBLISH_UNKNOWN"] <= 60, idle

        # the DEAD command's run ends (set here by hand: no input fails EXTRACTED_VALIDATED): its
        # DEAD row is history, no longer counted
        cur.execute("UPDATE nifi_ops.load_run SET status = 'TIMED_OUT', completed_at = clock_timestamp()"
                    " WHERE run_id = %s", (dead.run_id,))
        want_runs["EXTRACTED_VALIDATED"] = 0.0
        want_dead["VALIDATE_RUN"] = 0.0
        wait_until(lambda: gauges(sw)[0] == want_runs and gauges(sw)[2] == want_dead, 30,
                   "the gauges after the run ended")
        assert one(cur, "SELECT status FROM nifi_ops.load_dispatch WHERE run_id = %s", dead.run_id) == "DEAD"
    finally:
        cur.close()
        db.close()
        flow.close()

    # every metric the rules and the dashboard name is a sample of some service's scrape
    def names_seen():
        seen = set()
        for port in ports.values():
            s, _ = scrape(port)
            seen.update(n for n, samples in s.items() if samples)
        return seen

    used = set().union(*(metric_names(e) for e in rule_exprs() + dashboard_exprs()))
    assert {"loadledger_active_runs", "loadledger_dead_dispatches", "loadledger_consumer_lag_messages",
            "loadledger_dead_letters_total", "loadledger_kafka_commit_duration_seconds_bucket", "up"} <= used, used
    # counters and the lag appear with their first sample, a moment after the transaction commits
    try:
        wait_until(lambda: not (used - STANDARD - names_seen()), 30, "every metric named")
    except TimeoutError:
        assert not (used - STANDARD - names_seen())
    assert value(scrape(ports["sweeper"])[0], "loadledger_db_up") == 1
    assert value(scrape(ports["completion"])[0], "loadledger_dead_letters_total", code="DECODE_FAILED") == 1
