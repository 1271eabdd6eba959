"""The cluster drill (scripts/drill.sh cluster, issue 9 item 3): a workload of runs through the
simulator against the 3-node KRaft cluster of `LL_KAFKA_BROKERS=3 scripts/env.sh up`, and in the
middle of it, once per cycle:

1. kill -9 of the node that leads the chunks partition of the run being extracted (the busiest
   partition: every chunk report of the run goes there), half-way through its chunk reports;
2. kill -9 of the node that is the transaction coordinator of the completion service (the leader
   of the __transaction_state partition of its transactional.id), the same way.

After each kill the drill goes on with the other two nodes: the rest of the run's chunk reports,
then `--down-runs` whole runs, each bounded by --reply-timeout (replication 3 and
min.insync.replicas 2: one node down stops nothing). Then the node comes back (`env.sh start
broker N`) and the drill waits until every replica is in sync again before the next kill. At the
end every run must be SUCCESS, every input committed, and `loadctl verify --topics` must pass.
No operator action: the services are never touched.

Figures (stdout, and --json FILE): runs, kills, the seconds from each kill to the first reply
after it (the first chunk outcome of the run in flight) and to the end of that run.
"""
import argparse
import json
import os
import signal
import sys
import time
import uuid

from confluent_kafka.admin import AdminClient

from . import avroframe
from .drills import Isolated, env_sh, lag, loadctl_verify, wait_until
from .flow import Flow
from .kafkaio import SCHEMAS, Nifi
from .lifecycle import Lifecycle
from .scenario import Run
from .stack import read_env

# transaction.state.log.num.partitions of scripts/kafka/cluster.properties.in
TXN_PARTITIONS = 10
# the inputs of each consuming service (their lag must reach 0 before verify)
INPUTS = {"registrar": ("run-requests", "manifests"),
          "claimer": ("partition-claims",),
          "completion": ("chunks", "validation-starts", "validation-metrics", "stage-validations",
                         "publish-results", "run-successes")}


def say(msg):
    print("drill cluster: " + msg, flush=True)


def java_hash(s):
    """Java's String.hashCode of an ASCII/BMP string (a signed 32-bit int)."""
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def txn_partition(txid, partitions=TXN_PARTITIONS):
    """The __transaction_state partition of a transactional id, as Kafka's transaction
    coordinator places it (Utils.abs(txid.hashCode()) % partitions; abs(MIN_VALUE) is 0)."""
    h = java_hash(txid)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class Cluster:
    """The nodes of the environment's cluster: leaders, kill -9, restart, in-sync replicas."""

    def __init__(self, env, stack):
        if env.get("LL_KAFKA_BROKERS") != "3":
            raise SystemExit("drill cluster: %s/env is not a 3-node cluster (LL_KAFKA_BROKERS=3 scripts/env.sh up)"
                             % env.get("LL_RUN_DIR"))
        self.nodes_dir = env["LL_KAFKA_NODES_DIR"]
        self.stack = stack
        self.admin = AdminClient({"bootstrap.servers": env["LL_KAFKA_BOOTSTRAP"]})

    def leader(self, topic, partition):
        md = self.admin.list_topics(topic, timeout=10).topics[topic]
        return md.partitions[partition].leader

    def port(self, node):
        """The broker port of a node (from the cluster's metadata)."""
        return self.admin.list_topics(timeout=10).brokers[node].port

    def pid(self, node):
        path = os.path.join(self.nodes_dir, "node%d" % node)
        with open(os.path.join(path, "kafka.pid")) as f:
            pid = int(f.read().strip())
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        assert "kafka.Kafka " + os.path.join(path, "server.properties") in cmd, "pid %d is not node %d" % (pid, node)
        return pid

    def kill(self, node):
        """kill -9 of one node; returns when the process is gone."""
        pid = self.pid(node)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not os.path.exists("/proc/%d" % pid) or _zombie(pid), 10, "node %d gone" % node, 0.05)

    def start(self, node):
        """Brings a node back (env.sh start broker N: it waits until all three answer)."""
        env_sh(self.stack, "start", "broker", str(node))

    def in_sync(self, topics):
        """True when every partition of the topics (and of the internal ones) has 3 in sync."""
        md = self.admin.list_topics(timeout=10).topics
        for t in list(topics) + ["__transaction_state", "__consumer_offsets"]:
            if t not in md or any(len(p.isrs) < 3 or p.leader < 0 for p in md[t].partitions.values()):
                return False
        return True


def _zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


class Drill:
    """The workload of one drill: its own database and topics (llsim.drills.Isolated) on the
    cluster, the four services, NiFi's side; the runs made and the kills with their figures."""

    def __init__(self, args):
        self.args = args
        self.iso = Isolated("cluster")
        self.cluster = Cluster(self.iso.stack.env, self.iso.stack)
        self.iso.stack.start_all()
        self.nifi = Nifi(self.iso.bootstrap, self.iso.prefix)
        self.flow = Flow(self.nifi)
        self.life = Lifecycle(self.flow)
        self.runs = []
        self.kills = []
        self.down = None  # the node killed and not yet back

    def txid(self, service, instance=None):
        """The transactional.id of a service instance (<group>.<instance>, setup.c)."""
        return "%s.%s" % (self.iso.groups[service], instance or service + "-0")

    def send_chunks(self, chunks):
        """Publishes chunk reports; returns the Kafka partition they went to (key: the run id)."""
        parts = set()
        for c in chunks:
            value = avroframe.encode(c, SCHEMAS["chunks"], "bare")
            self.nifi.producer.produce(self.nifi.topic("chunks"), value=value, key=c["runId"].encode(),
                                       on_delivery=lambda err, m: parts.add(m.partition()) if not err else None)
        self.nifi.flush()
        return parts.pop() if parts else None

    def run(self, kill=None):
        """One run from request to SUCCESS; kill: None, "leader" or "coordinator" (kill -9 of that
        node half-way through the chunk reports). Returns the node killed (or None)."""
        t = self.args.reply_timeout
        run = Run(business_key="2026-09-28.c" + uuid.uuid4().hex[:10])
        self.runs.append(run)
        t0 = time.time()
        assert self.flow.create(run)["outcome"] != "REJECTED"
        self.flow.register(run)
        self.flow.claim_all(run)
        chunks = [c for pid in run.nonempty() for c in run.chunks(pid)]
        half = len(chunks) // 2
        part = self.send_chunks(chunks[:half])
        self.flow.reply("chunk-outcomes", run.run_id, count=half, timeout=t)
        node = None
        if kill:
            if kill == "leader":
                node = self.cluster.leader(self.nifi.topic("chunks"), part)
                what = "leader of %s[%d]" % (self.nifi.topic("chunks"), part)
            else:
                tp = txn_partition(self.txid("completion"))
                node = self.cluster.leader("__transaction_state", tp)
                what = "transaction coordinator of %s (__transaction_state[%d])" % (self.txid("completion"), tp)
            port = self.cluster.port(node)
            log = self.iso.stack.log_path("completion-0")
            seen = os.path.getsize(log)
            k0 = self.k0 = time.time()
            self.cluster.kill(node)
            self.down = node
            say("kill -9 node %d, %s, run %d" % (node, what, len(self.runs)))
        self.send_chunks(chunks[half:])
        self.flow.reply("chunk-outcomes", run.run_id, count=half + 1, timeout=t)
        first = time.time()
        self.flow.reply("chunk-outcomes", run.run_id, count=len(chunks), timeout=t)
        if kill == "coordinator":
            # librdkafka names the coordinator it lost: proof the node killed was the one
            with open(log, errors="replace") as f:
                f.seek(seen)
                lost = "TxnCoordinator: 127.0.0.1:%d" % port
                assert lost in f.read(), "completion-0 did not lose its coordinator (%s)" % lost
        cmd = self.flow.validate_commands(run, timeout=t)[0]
        self.life.to_success(run, cmd["dispatchId"])
        if kill:
            self.kills.append({"node": node, "what": kill, "first_reply_s": round(first - k0, 2),
                               "run_done_s": round(time.time() - k0, 2)})
            say("  first reply %.1f s after the kill, run done after %.1f s" % (first - k0, time.time() - k0))
        else:
            say("run %d: SUCCESS in %.1f s" % (len(self.runs), time.time() - t0))
        return node

    def kill_cycle(self, what):
        """One kill ("leader" or "coordinator"), runs while the node is down, the node back and
        every replica in sync again."""
        node = self.run(kill=what)
        for _ in range(self.args.down_runs):
            self.run()
        self.cluster.start(node)
        self.down = None
        s0 = time.time()
        wait_until(lambda: self.cluster.in_sync(self.iso.topic(t) for t in self.iso.topics), self.args.isr_timeout,
                   "every replica in sync again", 0.5)
        self.kills[-1]["in_sync_s"] = round(time.time() - self.k0, 1)
        say("node %d back, every replica in sync %.1f s after the restart (%.1f s after the kill)" % (
            node, time.time() - s0, time.time() - self.k0))

    def workload(self):
        """--cycles times: plain runs, the leader's kill cycle, plain runs, the coordinator's."""
        for _ in range(self.args.cycles):
            for _ in range(self.args.runs_between):
                self.run()
            self.kill_cycle("leader")
            for _ in range(self.args.runs_between):
                self.run()
            self.kill_cycle("coordinator")
        for _ in range(self.args.runs_between):
            self.run()

    def check(self):
        """Every run SUCCESS, every input committed, loadctl verify passes. Returns failures."""
        bad = []
        cur = self.iso.stack.db().cursor()
        for r in self.runs:
            cur.execute("SELECT status FROM nifi_ops.load_run WHERE run_id = %s", (r.run_id,))
            row = cur.fetchone()
            if not row or row[0] != "SUCCESS":
                bad.append("run %s: %s" % (r.run_id, row[0] if row else "missing"))
        try:
            wait_until(lambda: all(lag(self.iso.bootstrap, self.iso.groups[s], [self.iso.topic(t) for t in ts]) == 0
                                   for s, ts in INPUTS.items()), self.args.reply_timeout, "every input committed", 1)
        except TimeoutError as e:
            bad.append(str(e))
        rc, checks = loadctl_verify(self.iso)
        for name, c in checks.items():
            say("verify %-20s %s" % (name, json.dumps({k: v for k, v in c.items() if k != "name"})[:150]))
        if rc != 0:
            bad.append("loadctl verify: exit %d" % rc)
        return bad

    def close(self):
        """Stops the services, drops the drill's database and topics; returns the services that
        did not exit 0 ({instance: code})."""
        self.flow.close()
        codes = self.iso.close()
        return {k: v for k, v in codes.items() if v != 0}


def main(argv=None):
    """Runs the drill; exit status 0 when every run reached SUCCESS and verify passed, else 1."""
    ap = argparse.ArgumentParser(prog="drill.sh cluster", description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true", help="CI mode: 1 cycle (2 kills), 1 run between")
    ap.add_argument("--cycles", type=int, default=5, help="kill cycles (leader, then coordinator): 5")
    ap.add_argument("--runs-between", type=int, default=2, help="plain runs before each kill: 2")
    ap.add_argument("--down-runs", type=int, default=1, help="whole runs while the node is down: 1")
    ap.add_argument("--reply-timeout", type=float, default=45, help="seconds each reply may take: 45")
    ap.add_argument("--isr-timeout", type=float, default=120, help="seconds for the replicas to catch up: 120")
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    if args.short:
        args.cycles, args.runs_between = 1, 1
    read_env()  # fails early without an environment
    t0 = time.time()
    d = Drill(args)
    bad = []
    try:
        d.workload()
    except (TimeoutError, AssertionError) as e:
        bad.append("workload: %s" % e)
        if d.down is not None:  # the check needs the whole cluster: the node comes back first
            say("node %d back for the checks" % d.down)
            d.cluster.start(d.down)
    try:
        bad += d.check()
    finally:
        bad += ["service %s exited %s" % kv for kv in d.close().items()]
    figures = {"runs": len(d.runs), "kills": len(d.kills), "kill_detail": d.kills, "seconds": round(time.time() - t0, 1),
               "max_first_reply_s": max([k["first_reply_s"] for k in d.kills] or [0]), "ok": not bad}
    say("figures: %s" % json.dumps(figures))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    for b in bad:
        say("FAILED: " + b)
    say("OK: %d runs, %d kills, verify passed" % (len(d.runs), len(d.kills)) if not bad else "NOT OK")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
