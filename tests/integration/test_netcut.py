"""A cut network and a database restart (issue 9 §4): the services talk to the broker and to
PostgreSQL only through proxies the test controls (tools/nifisim/llsim/netproxy.py); a workload of
runs goes through NiFi's side (the simulator, direct to the broker), and in the middle of each
batch of chunk reports one fault is applied:

- drop:          both proxies reset every connection and refuse new ones for DROP_S;
- blackhole:     both proxies keep every connection but pass no byte for BLACKHOLE_S (20 s);
- halfopen-db:   the connections to PostgreSQL open at that moment stop passing the server's
                 answers for good (only a bounded wait, db.response_timeout, gets a service out);
- pg-restart-fast / pg-restart-immediate: `pg_ctl restart -m fast|immediate` of the cluster;
- halfopen-kafka (long mode): the same on the broker connections (librdkafka's socket.timeout.ms).

Without any restart of a service (same processes at the end), every run of every batch reaches
EXTRACTED_VALIDATED with one validate-run command, every input is answered exactly once
(read_committed), and `loadctl verify --topics` holds. The proxies' counters show that the
services' traffic went through them (the broker advertises the proxy's port on its PROXIED
listener, scripts/kafka/server.properties.in). The recovery time of each fault (its end to the
batch's last validate-run command) is printed and written to <drill logs>/netcut.json.

CI runs the short mode (one round of the five faults, 3 runs a batch, ~2 minutes);
LL_NETCUT_LONG=1 runs the long mode (docs/operations.md has its figures): LL_NETCUT_ROUNDS rounds
(3) of the six faults with LL_NETCUT_RUNS runs a batch (8); LL_NETCUT_FAULTS=a,b runs those faults
only.
"""
import collections
import json
import os
import time

import pytest

from conftest import close_clean, new_run
from llsim.drills import Isolated, loadctl_verify, pg_ready
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.netproxy import Proxy, pg_restart

LONG = os.environ.get("LL_NETCUT_LONG") == "1"
ROUNDS = int(os.environ.get("LL_NETCUT_ROUNDS", "3" if LONG else "1"))
RUNS = int(os.environ.get("LL_NETCUT_RUNS", "8" if LONG else "3"))
DROP_S = 3
BLACKHOLE_S = 20
REPLY_TIMEOUT_S = 150
LOOP = {"loop.retry_backoff_max": "PT2S"}
FAULTS = ["drop", "blackhole", "halfopen-db", "pg-restart-fast", "pg-restart-immediate"]
if LONG:
    FAULTS.append("halfopen-kafka")
if os.environ.get("LL_NETCUT_FAULTS"):  # e.g. "halfopen-db,pg-restart-immediate": those only
    FAULTS = os.environ["LL_NETCUT_FAULTS"].split(",")


@pytest.fixture
def cut():
    iso = Isolated("netcut")
    env = iso.stack.env
    # The throwaway cluster commits asynchronously (scripts/env.sh, LL_PG_DURABLE=0): an immediate
    # shutdown may then lose the last transactions a service was told were committed, a loss no
    # service can see or repair. The drill's database commits synchronously, as a real one must.
    db = iso.stack.db()
    with db.cursor() as c:
        c.execute('ALTER DATABASE "%s" SET synchronous_commit = on' % iso.dbname)
    db.close()
    kproxy = Proxy(int(env["LL_KAFKA_PROXIED_PORT"]), int(env["LL_KAFKA_PROXY_PORT"]), "kafka").start()
    pproxy = Proxy(iso.stack.pg["port"], 0, "pg").start()
    # the services (only they) go through the proxies; the simulator and loadctl go direct
    iso.stack.bootstrap = "127.0.0.1:%d" % kproxy.port
    iso.stack.service_port = pproxy.port
    try:
        yield iso, kproxy, pproxy
    finally:
        for p in (kproxy, pproxy):
            p.set_mode("pass")
        if not pg_ready(iso.stack):
            time.sleep(5)
        procs = [p for p, _ in iso.stack.procs.values()]
        try:
            close_clean(iso)
        finally:
            for p in procs:  # a service that hangs even on SIGTERM (a build without bounded waits)
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
            kproxy.stop()
            pproxy.stop()


def wait_replies(flow, topic, runs, per_run, timeout):
    for run in runs:
        flow.reply(topic, run.run_id, count=per_run(run), timeout=timeout)


def batch(flow, nifi, runs):
    """Requests, manifests and claims of the runs, answered; then the first chunk of every
    partition, with at least one answer (the services are busy with the batch)."""
    for run in runs:
        nifi.send("run-requests", run.run_request())
    nifi.flush()
    wait_replies(flow, "run-decisions", runs, lambda r: 1, REPLY_TIMEOUT_S)
    for run in runs:
        nifi.send("manifests", run.manifest())
    nifi.flush()
    wait_replies(flow, "manifest-decisions", runs, lambda r: 1, REPLY_TIMEOUT_S)
    for run in runs:
        for pid in run.nonempty():
            nifi.send("partition-claims", run.claim(pid))
    nifi.flush()
    wait_replies(flow, "claim-decisions", runs, lambda r: len(r.nonempty()), REPLY_TIMEOUT_S)
    for run in runs:
        for pid in run.nonempty():
            nifi.send("chunks", run.chunks(pid)[0])
    nifi.flush()
    flow.reply("chunk-outcomes", runs[0].run_id, timeout=REPLY_TIMEOUT_S)


def rest_of_chunks(nifi, runs):
    for run in runs:
        for pid in run.nonempty():
            for c in run.chunks(pid)[1:]:
                nifi.send("chunks", c)
    nifi.flush()


def apply_fault(fault, iso, kproxy, pproxy, nifi, runs):
    """Applies one fault while the rest of the batch's chunks are sent; returns (the moment the
    fault ended, what it did)."""
    st = iso.stack
    if fault in ("drop", "blackhole"):
        for p in (kproxy, pproxy):
            p.set_mode(fault)
        t0 = time.time()
        rest_of_chunks(nifi, runs)
        time.sleep(max(0.0, (DROP_S if fault == "drop" else BLACKHOLE_S) - (time.time() - t0)))
        for p in (kproxy, pproxy):
            p.set_mode("pass")
        return time.time(), {"seconds": round(time.time() - t0, 1)}
    if fault.startswith("halfopen"):
        proxy = pproxy if fault == "halfopen-db" else kproxy
        stuck = proxy.half_open("down")
        rest_of_chunks(nifi, runs)
        return time.time(), {"stuck_connections": stuck}
    mode = fault.rsplit("-", 1)[1]
    rest_of_chunks(nifi, runs)
    took = pg_restart(st.run_dir, st.env["LL_PG_BINDIR"], mode)
    return time.time(), {"restart_s": round(took, 1)}


def answered(flow, topic, fields, ids):
    c = collections.Counter()
    for r in flow.r[topic].records:
        v = r["value"]
        if v["runId"] in ids:
            c[tuple(v.get(k) for k in fields)] += 1
    return c


def test_services_recover_alone_from_cut_network_and_db_restart(cut):
    iso, kproxy, pproxy = cut
    st = iso.stack
    for s in ("registrar", "claimer", "completion"):
        st.start(s, settings=LOOP)
    st.start("dispatcher")
    st.start("sweeper")
    pids = {i: p.pid for i, (p, _) in st.procs.items()}
    nifi = Nifi(iso.bootstrap, iso.prefix)
    flow = Flow(nifi)
    figures = []
    all_runs = []
    try:
        for rnd in range(ROUNDS):
            for fault in FAULTS:
                runs = [new_run() for _ in range(RUNS)]
                all_runs += runs
                batch(flow, nifi, runs)
                before = {n: p.stats() for n, p in (("kafka", kproxy), ("pg", pproxy))}
                t_end, what = apply_fault(fault, iso, kproxy, pproxy, nifi, runs)
                wait_replies(flow, "chunk-outcomes", runs, lambda r: 3 * len(r.nonempty()), REPLY_TIMEOUT_S)
                wait_replies(flow, "validate-run-commands", runs, lambda r: 1, REPLY_TIMEOUT_S)
                rec = round(time.time() - t_end, 1)
                after = {n: p.stats() for n, p in (("kafka", kproxy), ("pg", pproxy))}
                fig = dict(round=rnd, fault=fault, runs=RUNS, recovery_s=rec, **what)
                fig["new_connections"] = {n: after[n]["accepted"] - before[n]["accepted"] for n in after}
                figures.append(fig)
                print("netcut: %s" % json.dumps(fig), flush=True)
                for i in pids:
                    assert st.alive(i), "%s exited during %s (rc %s): logs in %s" % (
                        i, fault, st.procs[i][0].poll(), st.log_dir)
                # the fault reached the services: they had to connect again through the proxy
                if fault in ("drop", "blackhole"):
                    assert fig["new_connections"]["kafka"] > 0 and fig["new_connections"]["pg"] > 0, fig
                if fault.startswith("pg-restart") or fault == "halfopen-db":
                    assert fig["new_connections"]["pg"] > 0, fig
                if fault == "halfopen-db":
                    assert what["stuck_connections"] > 0, fig
        with open(os.path.join(st.log_dir, "netcut.json"), "w") as f:
            json.dump(figures, f, indent=1)

        time.sleep(3)  # a duplicate would come now
        ids = {r.run_id for r in all_runs}
        for r in flow.r.values():
            r.drain(1)
        claims = answered(flow, "claim-decisions", ("partitionId", "runId"), ids)
        assert set(claims.values()) == {1} and len(claims) == sum(len(r.nonempty()) for r in all_runs), claims
        chunks = answered(flow, "chunk-outcomes", ("partitionId", "chunkIndex", "runId"), ids)
        assert set(chunks.values()) == {1} and len(chunks) == sum(3 * len(r.nonempty()) for r in all_runs)
        assert len(answered(flow, "validate-run-commands", ("runId",), ids)) == len(all_runs)
        db = st.db()
        cur = db.cursor()
        cur.execute("SELECT status, count(*) FROM nifi_ops.load_run GROUP BY status")
        assert cur.fetchall() == [("EXTRACTED_VALIDATED", len(all_runs))]
        db.close()
        for i, p in pids.items():
            assert st.alive(i) and st.procs[i][0].pid == p, "%s was restarted" % i
        # all of the services' traffic went through the proxies
        ks, ps = kproxy.stats(), pproxy.stats()
        assert ks["bytes_down"] > 0 and ks["bytes_up"] > 0, ks
        assert ps["bytes_down"] > 0 and ps["bytes_up"] > 0, ps
        if "drop" in FAULTS:
            assert ks["reset"] > 0 and ps["reset"] > 0, (ks, ps)
        rc, checks = loadctl_verify(iso)
        assert rc == 0, {k: v for k, v in checks.items() if v.get("violations")}
    finally:
        flow.close()
