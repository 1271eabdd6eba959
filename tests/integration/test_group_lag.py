"""Consumer-group lag from the broker's view and the runs ended (issue 41 item 5;
docs/operations.md, "Consumer lag from the broker" and "Runs ended and their duration").

A drill stack of its own: the four consuming/dispatching services and the sweeper, every one
with http.listen = 127.0.0.1:0; the sweeper reads the lag of the drill's registrar and completion
groups (lag.groups) and counts runs one second after they end (metrics.runs_ended_settle PT1S).

- A run reaches SUCCESS: the sweeper's loadledger_runs_ended_total{status="SUCCESS",load_job}
  is exactly 1, its loadledger_run_duration_seconds{load_job} has count 1 and a sum equal to the
  ledger's completed_at - started_at; no other status counted. A second scrape later (ticks
  between) still says 1: a run is counted once.
- The registrar is stopped (its own lag gauge is gone with it); N run requests are sent to a
  partition of run-requests its group has committed: the sweeper's
  loadledger_group_lag_messages{group=<registrar group>, topic=<run-requests>, partition} is
  exactly N, and equals the high watermark minus the group's committed offset read back with
  confluent_kafka; loadledger_group_lag_read_ok is 1. The registrar started again works the
  requests off: the lag returns to 0.
"""
import time
import uuid

import pytest

from conftest import close_clean, new_run, one
from llsim.drills import Isolated, committed, send_to, wait_until, watermarks
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.lifecycle import Lifecycle
from test_metrics import get, port_of, scrape, value

HTTP = {"http.listen": "127.0.0.1:0"}
N = 5


@pytest.fixture(scope="module")
def drill():
    iso = Isolated("grouplag")
    st = iso.stack
    for svc in ("registrar", "claimer", "completion", "dispatcher"):
        st.start(svc, settings=HTTP)
    st.start("sweeper", settings=dict(HTTP, **{
        "kafka.bootstrap.servers": iso.bootstrap,  # the lag's broker (the stack gives the sweeper none)
        "recovery.sweeper_interval": "PT0.5S", "metrics.runs_ended_settle": "PT1S", "lag.timeout": "PT5S",
        "lag.groups": "%s,%s" % (iso.groups["registrar"], iso.groups["completion"])}))
    ports = {svc: port_of(st.log_path(svc + "-0")) for svc in ("registrar", "claimer", "completion",
                                                              "dispatcher", "sweeper")}
    yield iso, ports
    close_clean(iso)


def group_lag(port, group, topic):
    """{partition: lag} of the sweeper's loadledger_group_lag_messages for group and topic."""
    s, _ = scrape(port)
    return {int(l["partition"]): v for l, v in s.get("loadledger_group_lag_messages", [])
            if l["group"] == group and l["topic"] == topic}


def test_runs_ended_and_group_lag_with_the_service_down(drill):
    iso, ports = drill
    st = iso.stack
    sw = ports["sweeper"]
    for svc, port in ports.items():
        wait_until(lambda: get(port, "/readyz")[0] == 200, 60, svc + " ready")
    time.sleep(2)  # the sweeper's watermark is set (its first tick) before the run ends
    nifi = Nifi(iso.bootstrap, iso.prefix)
    flow = Flow(nifi)
    life = Lifecycle(flow)
    db = st.db()
    db.autocommit = True
    cur = db.cursor()
    try:
        run = new_run()
        life.to_success(run, flow.to_extracted(run)["commands"][0]["dispatchId"])
        assert one(cur, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == "SUCCESS"
        duration = float(one(cur, "SELECT extract(epoch FROM completed_at - started_at) FROM nifi_ops.load_run"
                                  " WHERE run_id = %s", run.run_id))

        # ---- the run ended, counted once --------------------------------------------------------
        def ended():
            s, _ = scrape(sw)
            return value(s, "loadledger_runs_ended_total", load_job=run.job) >= 1
        wait_until(ended, 30, "the run counted by the sweeper")
        time.sleep(2)  # ticks pass: nothing is counted again
        s, types = scrape(sw)
        assert types["loadledger_runs_ended"] == "counter"
        assert types["loadledger_run_duration_seconds"] == "histogram"
        assert value(s, "loadledger_runs_ended_total", status="SUCCESS", load_job=run.job) == 1
        assert value(s, "loadledger_runs_ended_total") == 1, s["loadledger_runs_ended_total"]
        assert value(s, "loadledger_run_duration_seconds_count", load_job=run.job) == 1
        assert abs(value(s, "loadledger_run_duration_seconds_sum", load_job=run.job) - duration) < 1e-3
        assert value(s, "loadledger_run_duration_seconds_bucket", load_job=run.job, le="+Inf") == 1

        # ---- the registrar's group, as the broker sees it ---------------------------------------
        group, topic = iso.groups["registrar"], iso.topic("run-requests")
        done = {p: o for (t, p), o in committed(iso.bootstrap, group, [topic]).items() if o >= 0}
        assert done, "the registrar committed no partition of run-requests"
        part = sorted(done)[0]
        wait_until(lambda: group_lag(sw, group, topic).get(part) == 0, 30, "the registrar's lag 0 on the broker")

        assert st.stop("registrar-0") == 0
        for _ in range(N):
            send_to(nifi, "run-requests", new_run().run_request(), part, key=str(uuid.uuid4()))
        nifi.flush()
        lo, hi = watermarks(iso.bootstrap, topic)[part]
        com = committed(iso.bootstrap, group, [topic])[(topic, part)]
        assert hi - com == N, (lo, hi, com)
        wait_until(lambda: group_lag(sw, group, topic).get(part) == N, 30,
                   "the lag of the stopped registrar's group from the sweeper")
        s, _ = scrape(sw)
        assert value(s, "loadledger_group_lag_read_ok") == 1
        assert value(s, "loadledger_group_lag_read_timestamp_seconds") > time.time() - 30
        # the completion group is read too (its partitions all done)
        assert set(group_lag(sw, iso.groups["completion"], iso.topic("chunks")).values()) <= {0}

        st.start("registrar", settings=HTTP)
        wait_until(lambda: group_lag(sw, group, topic).get(part) == 0, 60, "the lag worked off")
    finally:
        cur.close()
        db.close()
        flow.close()
