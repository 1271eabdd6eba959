#!/usr/bin/python3
"""The PostgreSQL HA drill (scripts/drill.sh failover; issue 27 item 3; docs/operations.md
"PostgreSQL high availability").

A primary and a standby under Patroni with etcd on loopback (scripts/env_patroni.sh; made for the
drill in ${LL_RUN_DIR}-patroni, or -patroni-sync, and stopped at the end), asynchronous
replication unless --sync (synchronous_mode: true). Two instances of every service run on a
database and topics of their own, connected with the multi-host conninfo
`host=127.0.0.1,127.0.0.1 port=P1,P2 target_session_attrs=read-write`, under the chaos drill's
workload (llsim/chaos_flow.py: claims, chunks, rival claims, duplicates, random delays). The
services are never restarted.

A failover, --failovers times (short mode 3, long mode 30): the standby is made to lag (the
primary's walsender is stopped with SIGSTOP for --lag seconds while the workload goes on: the
WAL of those commits never leaves the primary; a stopped walreceiver would not do, the kernel's
socket buffers still hold what the walsender sent and the standby replays it after SIGCONT),
then kill -9 of the primary's postmaster (and of the stopped walsender). Patroni
(master_start_timeout 0, maximum_lag_on_failover 1 GiB) promotes the standby; the old primary
comes back as a standby by pg_rewind. The next failover waits until a standby streams again (in
sync mode: the synchronous standby).

At the end, checked against the final ledger and every reply topic (read_committed, from the
start):
  - every run SUCCESS (a run stuck in a stage: its run id and stage);
  - no partition granted to two claim tokens at once (claim replies; the flow's own view too);
  - every reply visible agrees with the ledger: no claim ACCEPTED whose token the ledger never
    held, no recorded chunk missing, no run/manifest decision whose run/partitions are missing,
    no validate-run command whose dispatch row is missing or whose run is not past EXTRACTED, no
    stage validation, publish claim or run success undone;
  - `loadctl verify --topics` passes; no service died.
Per failover: the WAL the standby lacked (bytes), the messages lost (input offsets the new
primary's ledger lacked: the services' nifi_ops.position_rewind rows detected after that kill),
the messages re-applied (those of them the services' positions are past at the end: all, or the
drill fails), the inputs answered twice (a source offset with two replies: none, an input the
ledger lost is applied again without a second answer) and the replies that disagree with the
final ledger, by topic (none). In sync mode nothing may be lost or re-applied. The last line:
FAILOVER ... result=PASS|FAIL.
"""
import argparse
import functools
import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psycopg2  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402

from llsim import avroframe  # noqa: E402
from llsim.avroframe import REPO  # noqa: E402
from llsim.chaos_flow import Workload  # noqa: E402
from llsim.chaos_kill import Killer  # noqa: E402
from llsim.drills import Isolated, lag, loadctl_verify, watermarks  # noqa: E402
from llsim.kafkaio import SCHEMAS, Nifi  # noqa: E402
from llsim.pooler import PgBouncer  # noqa: E402
from llsim.stack import Stack, read_env  # noqa: E402

MODES = {  # failovers, runs, overall timeout (s)
    "short": (3, 45, 300),
    "long": (30, 450, 2400),
}
INPUTS = {
    "registrar": ("run-requests", "manifests"),
    "claimer": ("partition-claims", "publish-claims"),
    "completion": ("chunks", "partition-failures", "validation-starts", "validation-metrics", "stage-validations",
                   "publish-results", "run-successes", "run-failures"),
}
# the replies the audit reads (each carries the source offset of its input, except the
# dispatcher's validate-run commands)
AUDIT_TOPICS = ("run-decisions", "manifest-decisions", "claim-decisions", "chunk-outcomes", "validate-run-commands",
                "validation-start-decisions", "stage-validation-outcomes", "publish-claim-decisions",
                "publish-result-outcomes", "run-success-outcomes")
PAST_EXTRACTED = ("EXTRACTED_VALIDATED", "STAGE_VALIDATING", "STAGING_VALIDATED", "PUBLISHING", "PUBLISHED",
                  "PUBLISH_UNKNOWN", "SUCCESS")
PAST_STAGE_VALIDATED = ("STAGING_VALIDATED", "PUBLISHING", "PUBLISHED", "PUBLISH_UNKNOWN", "SUCCESS")
APPLIED = ("ACCEPTED", "REPLAY")


def say(msg):
    print(msg, flush=True)


class Fail(Exception):
    pass


# -- the Patroni pair ----------------------------------------------------------------------------

class Patroni:
    """The pair of scripts/env_patroni.sh: Patroni's view (REST API), the postmasters, LSNs."""

    def __init__(self, pdir):
        env = read_env(pdir)
        self.dir = pdir
        self.nodes = env["LL_PATRONI_NODES"].split(",")
        self.ports = dict(zip(self.nodes, (int(p) for p in env["LL_PATRONI_PG_PORTS"].split(","))))
        self.rest = dict(zip(self.nodes, (int(p) for p in env["LL_PATRONI_REST_PORTS"].split(","))))
        self.sync = env["LL_PATRONI_SYNC"] == "1"

    def cluster(self):
        """Patroni's /cluster from whichever node answers ({} when none does)."""
        for n in self.nodes:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/cluster" % self.rest[n], timeout=1) as r:
                    return json.load(r)
            except (OSError, ValueError):
                continue
        return {}

    def members(self):
        return {m["name"]: m for m in self.cluster().get("members", [])}

    def leader(self, members=None):
        for name, m in (members if members is not None else self.members()).items():
            if m.get("role") == "leader" and m.get("state") == "running":
                return name
        return None

    def ready(self):
        """A running leader and a standby streaming from it (sync mode: the synchronous one)."""
        ms = self.members()
        lead = self.leader(ms)
        want = ("sync_standby",) if self.sync else ("replica", "sync_standby")
        reps = [m for n, m in ms.items() if n != lead and m.get("role") in want
                and m.get("state") in ("running", "streaming")]
        if not lead or len(reps) != 1:
            return None
        # the standby streams (not only runs): the leader lists it in pg_stat_replication
        try:
            with self.conn(lead) as c, c.cursor() as cur:
                cur.execute("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
                return lead if cur.fetchone()[0] >= 1 else None
        except psycopg2.Error:
            return None

    def conn(self, node):
        c = psycopg2.connect(host="127.0.0.1", port=self.ports[node], dbname="postgres", user="postgres",
                             connect_timeout=2)
        c.autocommit = True
        return c

    def postmaster(self, node):
        data = os.path.join(self.dir, node, "data")
        with open(os.path.join(data, "postmaster.pid")) as f:
            pid = int(f.readline())
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            assert data.encode() in f.read(), "pid %d is not the postmaster of %s" % (pid, node)
        return pid

    def walsenders(self, node):
        pm = self.postmaster(node)
        out = subprocess.run(["pgrep", "-P", str(pm), "-f", "walsender"], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def lsn(self, node, sql):
        try:
            with self.conn(node) as c, c.cursor() as cur:
                cur.execute(sql)
                v = cur.fetchone()[0]
        except psycopg2.Error:
            return None
        if not v:
            return None
        hi, lo = v.split("/")
        return (int(hi, 16) << 32) + int(lo, 16)


class HAStack(Stack):
    """llsim's Stack on the pair: every conninfo is the multi-host one (read-write)."""

    def __init__(self, ports, **kw):
        super().__init__(**kw)
        self.ha_ports = ports

    def conninfo(self, user="postgres", port=None):
        if port:  # the services' conninfo with --pooler: the drill's PgBouncer
            return "host=127.0.0.1 port=%d dbname=%s user=%s connect_timeout=5" % (port, self.pg["dbname"], user)
        return "host=%s port=%s dbname=%s user=%s target_session_attrs=read-write connect_timeout=5" % (
            ",".join("127.0.0.1" for _ in self.ha_ports), ",".join(str(p) for p in self.ha_ports),
            self.pg["dbname"], user)


# -- the failovers -------------------------------------------------------------------------------

class Failovers:
    """One failover at a time, stepped from the drill's loop so that the workload never waits:
    run (until the next is due and a standby streams) -> lagging (walsenders stopped) -> kill ->
    promoting (until another node leads) -> rejoining (until a standby streams again)."""

    def __init__(self, pat, rnd, count, lag_s, gap, pooler=None):
        self.pat = pat
        self.pooler = pooler  # --pooler: repointed to the new leader once it leads
        self.rnd = rnd
        self.count = count
        self.lag = lag_s
        self.gap = gap
        self.done = []  # one dict per failover
        self.state = "run"
        self.next_at = None
        self.cur = None
        self.polled = 0.0
        self.stopped = []

    def begin(self):
        self.next_at = time.time() + self.rnd.uniform(*self.gap)

    def finished(self):
        return len(self.done) >= self.count and self.state == "run"

    def step(self):
        now = time.time()
        if now - self.polled < 0.25:
            return
        self.polled = now
        if self.state == "run":
            if len(self.done) >= self.count or now < self.next_at:
                return
            old = self.pat.ready()
            if not old:
                if now - self.next_at > 120:
                    raise Fail("no streaming standby 120 s after failover %d was due" % (len(self.done) + 1))
                return
            new = [n for n in self.pat.nodes if n != old][0]
            self.cur = {"n": len(self.done) + 1, "old": old, "new": new, "pm": self.pat.postmaster(old),
                        "lag_from": now}
            self.stopped = self.pat.walsenders(old)
            for w in self.stopped:
                os.kill(w, signal.SIGSTOP)
            self.cur["walsenders"] = len(self.stopped)
            self.state = "lagging"
        elif self.state == "lagging":
            if now - self.cur["lag_from"] < self.lag:
                return
            c = self.cur
            if self.pooler:  # the services' client connections now: how many outlive the failover
                c["clients_before"] = self.client_ids()
            primary = self.pat.lsn(c["old"], "SELECT pg_current_wal_lsn()::text")
            standby = self.pat.lsn(c["new"], "SELECT pg_last_wal_receive_lsn()::text")
            os.kill(c["pm"], signal.SIGKILL)
            for w in self.stopped:
                try:
                    os.kill(w, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            c["at"] = time.time()
            c["wal_behind_bytes"] = (primary - standby) if primary is not None and standby is not None else None
            say("  failover %d: %s's postmaster killed -9 after %.1f s with its walsender stopped (standby %s "
                "%s bytes of WAL behind)" % (c["n"], c["old"], self.lag, c["new"], c["wal_behind_bytes"]))
            self.state = "promoting"
        elif self.state == "promoting":
            c = self.cur
            lead = self.pat.leader()
            if lead == c["new"]:
                c["promoted_s"] = round(time.time() - c["at"], 1)
                if self.pooler:  # the pooler's failover hook: its clients' connections stay open
                    self.pooler.repoint(self.pat.ports[lead])
                self.state = "rejoining"
            elif time.time() - c["at"] > 60:
                raise Fail("failover %d: %s not promoted 60 s after the kill" % (c["n"], c["new"]))
        elif self.state == "rejoining":
            c = self.cur
            if self.pat.ready() == c["new"]:
                c["rejoined_s"] = round(time.time() - c["at"], 1)
                if self.pooler:
                    before = c.pop("clients_before")
                    c["clients_kept"] = "%d of %d" % (len(before & self.client_ids()), len(before))
                say("  failover %d: %s leads %.1f s after the kill; %s streams again after %.1f s" % (
                    c["n"], c["new"], c["promoted_s"], c["old"], c["rejoined_s"]))
                self.done.append(c)
                self.cur = None
                self.state = "run"
                self.next_at = time.time() + self.rnd.uniform(*self.gap)
            elif time.time() - c["at"] > 150:
                raise Fail("failover %d: %s not back as a streaming standby 150 s after the kill" % (c["n"], c["old"]))

    def client_ids(self):
        """The services' client connections to the pooler, as (port, connect_time)."""
        return {(r["port"], str(r["connect_time"])) for r in self.pooler.clients() if r["user"].startswith("ll_")}

    def release(self):
        """Whatever is still stopped goes on (a drill cut short)."""
        for w in self.stopped:
            try:
                os.kill(w, signal.SIGCONT)
            except ProcessLookupError:
                pass


# -- the audit -----------------------------------------------------------------------------------

def read_replies(iso):
    """Every record of the audited reply topics, read_committed from the start: [(logical, Kafka
    timestamp s, partition, offset, value)]."""
    c = Consumer({"bootstrap.servers": iso.bootstrap, "group.id": "llsim-failover-audit",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    out = []
    try:
        ends = {}
        parts = []
        for logical in AUDIT_TOPICS:
            t = iso.topic(logical)
            for p, (lo, hi) in watermarks(iso.bootstrap, t).items():
                if hi > lo:
                    parts.append(TopicPartition(t, p, lo))
                    ends[(t, p)] = hi
        c.assign(parts)
        names = {iso.topic(t): t for t in AUDIT_TOPICS}
        deadline = time.time() + 60
        # read_committed: the end is the last stable offset; markers mean < hi records at most
        left = set(ends)
        while left and time.time() < deadline:
            for m in c.consume(500, 0.5):
                if m.error():
                    continue
                key = (m.topic(), m.partition())
                if m.offset() >= ends[key] - 1:
                    left.discard(key)
                if m.value() is None:
                    continue
                logical = names[m.topic()]
                out.append((logical, m.timestamp()[1] / 1000.0, m.partition(), m.offset(),
                            avroframe.decode(m.value(), SCHEMAS[logical])))
            for key in list(left):
                pos = c.position([TopicPartition(key[0], key[1])])[0].offset
                if pos >= ends[key]:
                    left.discard(key)
    finally:
        c.close()
    return out


def ledger(iso):
    """The final ledger's facts the audit needs."""
    conn = iso.stack.db()
    cur = conn.cursor()
    q = {}
    cur.execute("SELECT run_id::text, status FROM nifi_ops.load_run")
    q["runs"] = dict(cur.fetchall())
    cur.execute("SELECT run_id::text, partition_id, claim_token::text, attempt_no FROM nifi_ops.load_claim_token")
    q["tokens"] = {(r, p, t): a for r, p, t, a in cur.fetchall()}
    cur.execute("SELECT run_id::text, count(*) FROM nifi_ops.load_partition GROUP BY run_id")
    q["partitions"] = dict(cur.fetchall())
    cur.execute("SELECT run_id::text, partition_id, chunk_index FROM nifi_ops.load_file")
    q["chunks"] = set(cur.fetchall())
    cur.execute("SELECT dispatch_id::text FROM nifi_ops.load_dispatch")
    q["dispatches"] = {r[0] for r in cur.fetchall()}
    cur.execute("SELECT run_id::text, publish_token::text FROM nifi_ops.load_publish_token")
    q["publish"] = set(cur.fetchall())
    # the ranges each service found the ledger lacked (read and applied again), and whether its
    # position is past them now (applied again for good)
    # (none before migration 0009: a build that reads Kafka's offsets only, for the drill's baseline)
    cur.execute("SELECT to_regclass('nifi_ops.position_rewind') IS NOT NULL")
    q["rewinds"] = []
    if cur.fetchone()[0]:
        cur.execute("SELECT extract(epoch FROM w.detected_at)::float8, w.offsets, coalesce(p.next_offset >="
                    " w.to_offset, false) FROM nifi_ops.position_rewind w LEFT JOIN nifi_ops.consumer_position p"
                    " USING (consumer_group, topic, kafka_partition)")
        q["rewinds"] = cur.fetchall()
    conn.close()
    return q


def disagreement(logical, v, q):
    """Why a visible reply disagrees with the final ledger (None when it agrees)."""
    run = v.get("runId")
    status = q["runs"].get(run)
    out = v.get("outcome")
    if logical == "run-decisions" and out in APPLIED and status is None:
        return "run %s answered %s but the ledger has no such run" % (run, out)
    if logical == "manifest-decisions" and out in APPLIED and not q["partitions"].get(run):
        return "manifest of run %s answered %s but the ledger has none of its partitions" % (run, out)
    if logical == "claim-decisions" and v.get("claimed") and \
            (run, v.get("partitionId"), v.get("claimToken")) not in q["tokens"]:
        return "claim of run %s partition %s ACCEPTED for token %s, a token the ledger never held" % (
            run, v.get("partitionId"), v.get("claimToken"))
    if logical == "chunk-outcomes" and out in APPLIED and v.get("recorded") and \
            (run, v.get("partitionId"), v.get("chunkIndex")) not in q["chunks"]:
        return "chunk %s of run %s partition %s recorded (%s) but missing from the ledger" % (
            v.get("chunkIndex"), run, v.get("partitionId"), out)
    if logical == "validate-run-commands":
        if v.get("dispatchId") not in q["dispatches"]:
            return "validate-run command %s of run %s: no such dispatch in the ledger" % (v.get("dispatchId"), run)
        if status not in PAST_EXTRACTED:
            return "validate-run command %s for run %s whose ledger status is %s (not past EXTRACTED)" % (
                v.get("dispatchId"), run, status)
    if logical == "stage-validation-outcomes" and out in APPLIED and v.get("stageValidated") and \
            status not in PAST_STAGE_VALIDATED:
        return "run %s answered stage-validated but its ledger status is %s" % (run, status)
    if logical == "publish-claim-decisions" and v.get("claimed") and (run, v.get("publishToken")) not in q["publish"]:
        return "publish claim of run %s ACCEPTED for token %s, a token the ledger never held" % (
            run, v.get("publishToken"))
    if logical == "run-success-outcomes" and out in APPLIED and v.get("runStatus") == "SUCCESS" and \
            status != "SUCCESS":
        return "run %s answered SUCCESS but its ledger status is %s" % (run, status)
    return None


def audit(replies, q, failovers):
    """(violations, per-failover {lost, reapplied, twice, disagreeing_by_topic}, double grants)."""
    kills = [f["at"] for f in failovers]

    def which(ts):
        # a lost reply was produced before the kill (its DB commit was), or just after it (the
        # Kafka transaction ends after the DB commit): the first failover at or after ts - 5 s
        for i, k in enumerate(kills):
            if k >= ts - 5:
                return i
        return None

    per = [{"lost": 0, "reapplied": 0, "twice": 0, "disagreeing_by_topic": {}} for _ in failovers]

    def after(ts):
        # a rewind is detected after the kill it follows (the services reconnect to the new primary)
        i = None
        for k, at in enumerate(kills):
            if at <= ts:
                i = k
        return i
    # lost: the offsets the new primary's ledger lacked; re-applied: those its position is past now
    for ts, offsets, passed in q["rewinds"]:
        i = after(ts)
        if i is not None:
            per[i]["lost"] += offsets
            per[i]["reapplied"] += offsets if passed else 0
    violations = []
    for logical, ts, part, off, v in replies:
        why = disagreement(logical, v, q)
        if why:
            i = which(ts)
            violations.append("%s (reply %s[%d]@%d%s)" % (why, logical, part, off,
                                                          ", failover %d" % (i + 1) if i is not None else ""))
            if i is not None:
                per[i]["disagreeing_by_topic"][logical] = per[i]["disagreeing_by_topic"].get(logical, 0) + 1
    # twice: a source offset answered more than once (the later copy after a failover); an input
    # the ledger lost is applied again without a second answer (docs/design.md §5)
    seen = {}
    for logical, ts, part, off, v in sorted(replies, key=lambda r: r[1]):
        if "sourceOffset" not in v:
            continue
        key = (logical, v["sourceTopic"], v["sourcePartition"], v["sourceOffset"])
        if key in seen:
            i = which(ts)
            j = i if i is not None else (len(kills) - 1 if kills and ts >= kills[-1] else None)
            if j is not None:
                per[j]["twice"] += 1
        seen.setdefault(key, ts)
    # two claim tokens at once: two tokens granted for one partition and the same attempt, or a
    # token granted that the ledger's history does not place in an attempt of its own
    grants = {}
    for logical, ts, part, off, v in replies:
        if logical == "claim-decisions" and v.get("claimed"):
            grants.setdefault((v["runId"], v.get("partitionId")), {}).setdefault(v["claimToken"], set()).add(
                v.get("attempt"))
    doubles = []
    for (run, pid), toks in grants.items():
        if len(toks) < 2:
            continue
        attempts = [q["tokens"].get((run, pid, t)) for t in toks]
        if None in attempts or len(set(attempts)) < len(attempts) or \
                len({a for s in toks.values() for a in s}) < len(toks):
            doubles.append("run %s partition %s granted to %d tokens at once: %s" % (run, pid, len(toks),
                                                                                 sorted(toks)))
    return violations, per, doubles


# -- the drill -----------------------------------------------------------------------------------

def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=sorted(MODES), default="short")
    ap.add_argument("--seed", type=int, default=None, help="replay a drill (default: random, printed)")
    ap.add_argument("--sync", action="store_true", help="synchronous_mode: true (nothing may be lost or re-applied)")
    ap.add_argument("--pooler", action="store_true",
                    help="the services connect through a PgBouncer (transaction pooling) that is repointed to the"
                         " new primary after each failover, their client connections left open (issue 39)")
    ap.add_argument("--failovers", type=int, help="failovers (mode's default: short 3, long 30)")
    ap.add_argument("--runs", type=int, help="runs of the workload (mode's default)")
    ap.add_argument("--lag", type=float, default=1.5, help="seconds the primary's walsender is stopped before the kill")
    ap.add_argument("--gap", type=float, nargs=2, default=(3.0, 6.0), metavar=("MIN", "MAX"),
                    help="seconds of workload between a standby streaming again and the next failover")
    ap.add_argument("--max-delay", type=float, default=0.3, help="largest random delay of an event (s)")
    ap.add_argument("--dup-rate", type=float, default=0.15, help="share of events sent twice")
    ap.add_argument("--rival-rate", type=float, default=0.05, help="share of partitions claimed by two workers")
    ap.add_argument("--timeout", type=float, help="give up after this many seconds (mode's default)")
    ap.add_argument("--stall", type=float, default=45,
                    help="give up when no run moved for this many seconds after the last failover")
    ap.add_argument("--keep", action="store_true", help="keep the drill's database, topics and Patroni pair")
    ap.add_argument("--json", help="write the figures to this file")
    a = ap.parse_args()
    count, runs, timeout = MODES[a.mode]
    a.failovers = a.failovers if a.failovers is not None else count
    a.runs = a.runs or runs
    a.timeout = a.timeout or timeout
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "big")
    return a


def patroni_up(a):
    """The pair of this mode: env_patroni.sh up (a fresh one unless it runs already)."""
    run_dir = os.environ.get("LL_RUN_DIR", "/tmp/loadledger-run").rstrip("/")
    pdir = os.environ.get("LL_PATRONI_DIR") or run_dir + ("-patroni-sync" if a.sync else "-patroni")
    env = dict(os.environ, LL_PATRONI_DIR=pdir, LL_PATRONI_SYNC="1" if a.sync else "0")
    script = os.path.join(REPO, "scripts", "env_patroni.sh")
    started = subprocess.run([script, "status"], env=env, capture_output=True).returncode != 0
    if started:
        p = subprocess.run([script, "up"], env=env, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise Fail("env_patroni.sh up failed: %s" % p.stderr[-2000:])
    pat = Patroni(pdir)
    if pat.sync != a.sync:
        raise Fail("%s runs with LL_PATRONI_SYNC=%d: env_patroni.sh down first" % (pdir, pat.sync))

    def down():
        subprocess.run([script, "down"], env=env, capture_output=True, timeout=300)
    return pat, (down if started else None)


def drive(a, work, killer, fo):
    t0 = time.time()
    work.begin()
    fo.begin()
    last = t0
    last_fo = t0
    while time.time() - t0 < a.timeout:
        work.step()
        killer.step()
        fo.step()
        if fo.done:
            last_fo = fo.done[-1]["at"]
        if fo.finished() and work.idle():
            break
        if fo.finished() and work.pending_runs() and time.time() - max(work.progress, last_fo) > a.stall:
            say("  no run moved for %.0f s after the last failover: giving up" % (time.time() - work.progress))
            break
        if time.time() - last >= 10:
            last = time.time()
            stages = {}
            for r in work.pending_runs():
                stages[r.stage] = stages.get(r.stage, 0) + 1
            say("  t=%3.0fs runs final %d/%d, failovers %d/%d (%s), pending %s" % (
                last - t0, work.final(), len(work.runs), len(fo.done), fo.count, fo.state, stages))
    else:
        say("  timeout after %.0f s" % a.timeout)
    return time.time() - t0


def settle_inputs(iso, timeout=60):
    end = time.time() + timeout
    left = None
    while time.time() < end:
        left = sum(lag(iso.bootstrap, iso.groups[s], [iso.topic(t) for t in ts]) for s, ts in INPUTS.items())
        if left == 0:
            return 0
        time.sleep(1)
    return left


def main():
    a = parse()
    # ctest's timeout (SIGTERM): the finally below still stops the services and the pair
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    mode = ("synchronous_mode" if a.sync else "asynchronous") + " replication" + (
        ", the services through PgBouncer" if a.pooler else "")
    say("failover drill: mode %s, %s, seed %d, %d runs, %d failovers, walsender stopped %.1f s before "
        "each kill (replay: scripts/drill.sh failover --mode %s%s --seed %d)" % (
            a.mode, mode, a.seed, a.runs, a.failovers, a.lag, a.mode,
            (" --sync" if a.sync else "") + (" --pooler" if a.pooler else ""), a.seed))
    rnd = random.Random(a.seed)
    t_env = time.time()
    pat, down = patroni_up(a)
    say("Patroni pair in %s (PostgreSQL on %s), ready in %.0f s" % (
        pat.dir, ",".join(str(p) for p in pat.ports.values()), time.time() - t_env))
    ok = False
    iso = None
    work = None
    pooler = None
    if a.pooler:
        pooler = PgBouncer(pat.dir + "-pgbouncer", pat.ports[pat.leader()])
        say("PgBouncer on 127.0.0.1:%d in front of the leader %s (repointed after each failover)" % (
            pooler.port, pat.leader()))
    fo = Failovers(pat, rnd, a.failovers, a.lag, a.gap, pooler)
    figures = {}
    try:
        iso = Isolated("failover", stack_cls=functools.partial(HAStack, list(pat.ports.values())))
        if pooler:
            iso.stack.service_port = pooler.port
        say("database %s, topic prefix %s, logs in %s" % (iso.dbname, iso.prefix, iso.stack.log_dir))
        nifi = Nifi(iso.bootstrap, iso.prefix)
        # runs admitted over about the time the failovers take (one cycle: gap, lag, ~3 s to promote,
        # 10-19 s until the old primary streams again), so that every failover meets runs in flight
        spread = a.failovers * (sum(a.gap) / 2 + a.lag + 16)
        work = Workload(nifi, rnd, a.seed, a.runs, spread, a.max_delay, a.dup_rate, a.rival_rate)
        killer = Killer(iso.stack, rnd, every=1e9)
        killer.start_all()
        bad = []
        try:
            duration = drive(a, work, killer, fo)
        except Fail as e:
            bad.append(str(e))
            duration = None
        fo.release()
        nifi.flush()
        # the checks need a primary and a standby again
        end = time.time() + 150
        while not pat.ready() and time.time() < end:
            time.sleep(1)
        left = settle_inputs(iso)
        rc, checks = loadctl_verify(iso)
        vbad = {n: c["violations"] for n, c in checks.items() if c["violations"]}
        q = ledger(iso)
        replies = read_replies(iso)
        violations, per, doubles = audit(replies, q, fo.done)
        statuses = {}
        for s in q["runs"].values():
            statuses[s] = statuses.get(s, 0) + 1
        codes = iso.stack.stop_all()
        unclean = {k: v for k, v in codes.items() if v != 0}
        for i, f in enumerate(fo.done):
            f.update(per[i])
            say("failover %d: %s -> %s, promoted %.1f s, %s back %.1f s, WAL behind %s bytes, messages lost %d, "
                "re-applied %d, answered twice %d%s" % (
                    f["n"], f["old"], f["new"], f["promoted_s"], f["old"], f["rejoined_s"], f["wal_behind_bytes"],
                    f["lost"], f["reapplied"], f["twice"],
                    (", disagreeing %s" % f["disagreeing_by_topic"] if f["disagreeing_by_topic"] else "") +
                    (", service connections to the pooler kept %s" % f["clients_kept"] if "clients_kept" in f else "")))
        stuck = work.stuck(20)
        if statuses.get("SUCCESS", 0) != a.runs or work.final() != a.runs:
            bad.append("runs SUCCESS in the ledger %d of %d (flow: %d final)" % (statuses.get("SUCCESS", 0), a.runs,
                                                                                work.final()))
            for run_id, stage, secs in stuck:
                say("  stuck: run %s waits in %s for %.0f s (ledger: %s)" % (run_id, stage, secs,
                                                                           q["runs"].get(run_id)))
        if len(fo.done) < a.failovers:
            bad.append("failovers %d of %d" % (len(fo.done), a.failovers))
        flow_doubles = sorted(work.double_grants)
        if doubles or flow_doubles:
            bad.append("partitions granted to two claim tokens at once: %d (flow saw %d)" % (len(doubles),
                                                                                             len(flow_doubles)))
            for d in doubles[:10]:
                say("  " + d)
        if violations:
            bad.append("replies that disagree with the final ledger: %d" % len(violations))
            for v in violations[:20]:
                say("  " + v)
        if rc != 0:
            bad.append("loadctl verify --topics: exit %d %s" % (rc, vbad))
            for n in vbad:
                say("  verify %s: %s" % (n, checks[n].get("samples", [])[:5]))
        if left != 0:
            bad.append("input lag at the end: %s" % left)
        if killer.unexpected or unclean:
            bad.append("services that died %s or did not stop cleanly %s" % (killer.unexpected, unclean))
        lost = sum(f["lost"] for f in fo.done)
        reapplied = sum(f["reapplied"] for f in fo.done)
        twice = sum(f["twice"] for f in fo.done)
        if a.sync and (lost or reapplied):
            bad.append("synchronous_mode: %d messages lost, %d re-applied (must be 0)" % (lost, reapplied))
        if reapplied != lost:
            bad.append("messages lost %d, re-applied %d: the services' positions are not past what was lost"
                       % (lost, reapplied))
        if twice:
            bad.append("inputs answered twice: %d" % twice)
        ok = not bad
        figures = {"mode": a.mode, "sync": a.sync, "seed": a.seed, "runs": a.runs, "failovers": fo.done,
                   "ledger": statuses, "lost": lost, "reapplied": reapplied, "answered_twice": twice,
                   "violations": len(violations),
                   "double_grants": len(doubles), "verify_rc": rc, "seconds": round(time.time() - t_env, 1),
                   "drive_seconds": round(duration, 1) if duration else None, "ok": ok}
        for b in bad:
            say("FAILED: " + b)
        say("FAILOVER seed=%d mode=%s replication=%s%s runs_success=%d/%d failovers=%d/%d lost=%d reapplied=%d"
            " answered_twice=%d disagreeing_replies=%d double_grants=%d verify=%s events_sent=%d duplicates=%d rival_claims=%d"
            " max_promote=%.1fs max_rejoin=%.1fs duration=%.0fs result=%s" % (
                a.seed, a.mode, "sync" if a.sync else "async", " pooler=pgbouncer" if a.pooler else "",
                statuses.get("SUCCESS", 0), a.runs, len(fo.done),
                a.failovers, lost, reapplied, twice, len(violations), len(doubles), "PASS" if rc == 0 else "FAIL",
                work.sent, work.duplicates, work.rival_claims, max([f["promoted_s"] for f in fo.done] or [0]),
                max([f["rejoined_s"] for f in fo.done] or [0]), time.time() - t_env, "PASS" if ok else "FAIL"))
    except Fail as e:
        say("FAILED: %s" % e)
        say("FAILOVER seed=%d result=FAIL" % a.seed)
    finally:
        fo.release()
        if work:
            work.close()
        if iso:
            try:
                # a failed drill's database goes with a pair the drill made: its topics too (the
                # services' logs stay); --keep keeps both
                iso.close(drop=(ok or down is not None) and not a.keep)
            except psycopg2.Error as e:
                say("cleanup: %s" % e)
        if pooler:
            pooler.stop()
        if down and not a.keep:
            down()
        if a.json:
            with open(a.json, "w") as f:
                json.dump(figures, f, indent=1, default=str)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
