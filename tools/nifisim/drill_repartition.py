#!/usr/bin/python3
"""The repartition drill (scripts/drill.sh repartition; docs/operations.md "Repartition drill").

Two instances of every service (drill_chaos's set: registrar, claimer, completion, dispatcher,
sweeper; one consumer group per consuming service) run on a database and topics of their own,
under the chaos drill's workload (llsim/chaos_flow.py: random delays, duplicates, events of a
stage in random order, rival claims). While runs are in flight the drill

1. raises every input topic (the twelve topics the three consuming services read) from 3 to 6
   partitions with the admin API (what `kafka-topics.sh --alter --partitions 6` does). NiFi's
   producer (here the simulator's, `topic.metadata.refresh.interval.ms` 1000) and the services
   (2000, llsim/stack.py) see the new partitions within seconds; the default partitioner then
   sends half of the run ids to another partition (crc32(key) % 6 instead of % 3), so a run's
   later events land on another partition than its earlier ones, read by whichever instance
   the group gives it;
2. waits until every consuming service's group has assigned all 6 partitions of its topics to
   its two members, which must happen before the join (--join-after, 50 s): a group sees new
   partitions through its members' metadata refresh (the services' default
   kafka.topic.metadata.refresh.interval.ms, 30000; the tests' 2000 is not used here unless
   --service-refresh names it), not only when a member joins;
3. starts two more instances of every service (`-c`, `-d`; the consumer groups rebalance over
   6 partitions and 4 members).

Beyond the chaos drill's workload, 30 % (--ahead-rate) of the manifests go out with their run
request and of the partitions' chunk reports with their claim, before the reply, as a pipelining
flow would send them: a prerequisite may then be read after what needs it, by another instance
(on another partition after the repartition: the run request on partition p, its manifest on
p + 3), and what needs it is deferred (loop.prerequisite_wait) until it is applied.

--kills N also kills random instances (-9, restarted with the same id) as the chaos drill does,
from the start to the end of the workload (long mode).

At the end:
- drill_chaos.judge: every run answered SUCCESS and SUCCESS in the ledger, every input
  committed (the 6 partitions of every input topic), `loadctl verify --topics` passes, every
  instance exits 0 on SIGTERM, none died unkilled, no partition granted to two tokens;
- every consumer group has all 6 partitions of each of its input topics assigned, and every
  consuming instance (the new ones too) holds at least one;
- nothing is answered twice: read back (read_committed), every input offset of every input
  topic has exactly one answer, a reply (by its sourceTopic/sourcePartition/sourceOffset) or a
  dead letter (by its ll.source.* headers), and no input is dead-lettered (the workload sends
  only events the contract accepts or refuses: a dead letter here is a prerequisite that was
  never seen across partitions);
- the drill did what it says: the input topics have 6 partitions, events were written to the
  new partitions, and at least --min-moved runs have input events on two partitions (earlier
  ones on partition p of 3, later ones on p + 3 of 6; default an eighth of the runs in flight
  at the change, at least 1). About half of the runs in flight are expected to move (a run's key
  stays on p or goes to p + 3; 6 of 21 to 36 of 73 moved in the runs kept), so the floor is set
  far below the half: with a quarter, at least 3, a CI run failed by chance with 2 of 11 moved
  (2026-12-07; a binomial's 3 % tail at 11); with an eighth, at least 1, the chance of failing a
  correct run at 11 in flight is about 0.1 % (none of 11 moving), and a drill whose change found no
  run in flight, or whose runs never straddled the change, still fails.

The seed is printed; --seed replays the same workload (not the same timing). The last line sums
it up: REPARTITION ... result=PASS|FAIL.
"""
import argparse
import os
import random
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import NewPartitions  # noqa: E402

from drill_chaos import INPUTS, drive, judge  # noqa: E402
from llsim import lifecycle  # noqa: E402,F401 - registers the lifecycle topics' schemas
from llsim.chaos_flow import Workload  # noqa: E402
from llsim.chaos_kill import SERVICES, SETTINGS, Killer  # noqa: E402
from llsim import avroframe  # noqa: E402
from llsim.drills import Isolated, assignment, events, partitions_of, wait_until, watermarks  # noqa: E402
from llsim.kafkaio import SCHEMAS, Nifi, client_conf  # noqa: E402
from llsim.stack import Stack  # noqa: E402

# runs, kills at least, mean s between kills, the largest random delay of an event (s: longer
# than the chaos drill's 0.3, so that many runs are in flight at the repartition, each living
# ~10 s), seconds of admission per run, share of the admission spread before the repartition,
# seconds from the repartition to the new instances, timeout (s)
MODES = {
    "short": (100, 0, 0.0, 1.0, 0.6, 0.3, 50.0, 420),
    "long": (400, 150, 2.0, 1.0, 0.4, 0.3, 50.0, 2400),
}
FROM, TO = 3, 6
REPLIES = ("run-decisions", "manifest-decisions", "claim-decisions", "chunk-outcomes", "partition-failure-outcomes",
           "validation-start-decisions", "validation-metrics-outcomes", "stage-validation-outcomes",
           "publish-claim-decisions", "publish-result-outcomes", "run-success-outcomes", "run-failure-outcomes")
JOINING = ("c", "d")
REFRESH = "kafka.topic.metadata.refresh.interval.ms"


def say(msg):
    print(msg, flush=True)


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=sorted(MODES), default="short")
    ap.add_argument("--seed", type=int, default=None, help="replay a drill (default: random, printed)")
    ap.add_argument("--runs", type=int, help="runs of the workload (mode's default)")
    ap.add_argument("--kills", type=int, help="kills at least (mode's default; short: 0)")
    ap.add_argument("--kill-every", type=float, help="mean seconds between kills (mode's default)")
    ap.add_argument("--spread", type=float, help="seconds over which the runs are admitted (mode's default: 0.4 s a run)")
    ap.add_argument("--at", type=float, help="share of the spread after which the partitions are added")
    ap.add_argument("--join-after", type=float, help="seconds from the repartition to the new instances")
    ap.add_argument("--min-moved", type=int, help="runs whose input events must span two partitions (default:"
                                                   " an eighth of the runs in flight at the change, at least 1;"
                                                   " about half are expected)")
    ap.add_argument("--max-delay", type=float, help="largest random delay of an event (s; mode's default)")
    ap.add_argument("--dup-rate", type=float, default=0.15, help="share of events sent twice")
    ap.add_argument("--rival-rate", type=float, default=0.05, help="share of partitions claimed by two workers")
    ap.add_argument("--ahead-rate", type=float, default=0.3,
                    help="share of manifests sent with their run request and of partitions whose chunks are sent"
                         " with their claim, before the reply (prerequisites read after what needs them)")
    ap.add_argument("--timeout", type=float, help="give up after this many seconds (mode's default)")
    ap.add_argument("--stall", type=float, default=120, help="give up when no run moved for this many seconds")
    ap.add_argument("--service-refresh", type=int, default=None,
                    help="the consuming services' kafka.topic.metadata.refresh.interval.ms (ms; default: not set,"
                         " the services' own default, 30000; librdkafka's is 300000)")
    ap.add_argument("--keep", action="store_true", help="keep the drill's database and topics")
    a = ap.parse_args()
    runs, kills, every, delay, per_run, at, join, timeout = MODES[a.mode]
    a.runs = a.runs or runs
    a.kills = a.kills if a.kills is not None else kills
    a.kill_every = a.kill_every or every or 1.4
    a.max_delay = a.max_delay if a.max_delay is not None else delay
    a.spread = a.spread or per_run * a.runs
    a.at = a.at if a.at is not None else at
    a.join_after = a.join_after if a.join_after is not None else join
    a.timeout = a.timeout or timeout
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "big")
    return a


class OwnRefresh(Stack):
    """A Stack whose consuming services keep their own kafka.topic.metadata.refresh.interval.ms
    (llsim.stack sets 2000 for the tests) unless the drill's settings name one."""

    def write_config(self, service, instance, settings):
        path = super().write_config(service, instance, settings)
        if REFRESH not in settings:
            with open(path) as f:
                lines = [ln for ln in f if not ln.startswith(REFRESH + " ")]
            with open(path, "w") as f:
                f.writelines(lines)
        return path


class GrowingKiller(Killer):
    """The chaos drill's killer over a set of instances that grows (join())."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.names = ["a", "b"]

    def instances(self):
        return ["%s-%s" % (s, i) for s in SERVICES for i in self.names]

    def join(self, names):
        for n in names:
            self.names.append(n)
            for s in SERVICES:
                self._start("%s-%s" % (s, n))


class Repartitioner:
    """drive()'s `also`: adds the partitions when due, then the instances; True while work is left."""

    def __init__(self, a, iso, work, killer):
        self.a, self.iso, self.work, self.killer = a, iso, work, killer
        self.t0 = None
        self.added_at = self.joined_at = None
        self.in_flight = {}
        self.failures = []
        self.seen = {}  # consuming service -> s from the repartition to all 6 partitions assigned
        self.looked = 0.0

    def _in_flight(self):
        return sum(1 for r in self.work.runs if r.stage not in ("new", "final"))

    def __call__(self):
        now = time.time()
        if self.t0 is None:
            self.t0 = now
        if self.added_at is None:
            if now - self.t0 < self.a.at * self.a.spread:
                return True
            topics = [self.iso.topic(t) for ts in INPUTS.values() for t in ts]
            fs = self.iso.admin.create_partitions([NewPartitions(t, TO) for t in topics], operation_timeout=30)
            for t, f in fs.items():
                try:
                    f.result()
                except Exception as e:  # noqa: BLE001 - reported, the drill fails
                    self.failures.append("create_partitions %s: %s" % (t, e))
            self.added_at = time.time()
            self.in_flight["repartition"] = self._in_flight()
            say("  t=%3.0fs input topics %d -> %d partitions (%.1f s; %d runs in flight)" % (
                self.added_at - self.t0, FROM, TO, self.added_at - now, self.in_flight["repartition"]))
            return True
        if self.joined_at is None:
            if now - self.looked >= 1.0:
                self.looked = now
                for svc in INPUTS:
                    if svc not in self.seen and not group_problems(self.iso, self.killer, svc):
                        self.seen[svc] = now - self.added_at
                        say("  t=%3.0fs %s: the group reads all %d partitions of its topics, %.0f s after the"
                            " repartition" % (now - self.t0, svc, TO, self.seen[svc]))
            if now - self.added_at < self.a.join_after:
                return True
            for svc in INPUTS:
                if svc not in self.seen:
                    self.failures.append("%s: the new partitions not all assigned %.0f s after the repartition,"
                                         " before any member joined: %s" % (
                                             svc, now - self.added_at, group_problems(self.iso, self.killer, svc)))
            self.killer.join(JOINING)
            self.joined_at = time.time()
            self.in_flight["join"] = self._in_flight()
            say("  t=%3.0fs instances %s of every service started (%d runs in flight)" % (
                self.joined_at - self.t0, "/".join(JOINING), self.in_flight["join"]))
        return False


def group_problems(iso, killer, svc):
    """[] when every input topic of the service has its 6 partitions assigned in its group and
    each of the service's instances holds at least one (their last logged assignment), else what
    is wrong."""
    out = []
    insts = ["%s-%s" % (svc, n) for n in killer.names]
    got = {i: assignment(iso.stack.log_path(i)) or {} for i in insts}
    for i, asg in got.items():
        if not any(asg.get(iso.topic(t)) for t in INPUTS[svc]):
            out.append("%s holds no partition" % i)
    for t in INPUTS[svc]:
        held = sorted(p for asg in got.values() for p in asg.get(iso.topic(t), []))
        if held != list(range(TO)):
            out.append("%s: partitions assigned %s" % (t, held))
    return out


def check_assignments(iso, killer, timeout=60):
    """group_problems of every consuming service, waited for up to `timeout` s."""
    def problems():
        return [p for svc in INPUTS for p in group_problems(iso, killer, svc)]
    try:
        wait_until(lambda: not problems(), timeout, "every partition assigned", 1.0)
        return []
    except TimeoutError:
        return problems()


def read_all(iso, logicals, idle=3.0, limit=180):
    """{logical: [record]} of every record of the topics from their start (read_committed, one
    consumer), until `idle` s pass without a record. A record: {"value" (decoded where the topic
    has a schema), "key", "headers", "partition", "offset"}."""
    c = Consumer({"bootstrap.servers": iso.bootstrap, "group.id": "llsim-repart-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    logical_of = {iso.topic(t): t for t in logicals}
    parts = [TopicPartition(iso.topic(t), p, lo) for t in logicals
             for p, (lo, _hi) in watermarks(iso.bootstrap, iso.topic(t)).items()]
    c.assign(parts)
    out = {t: [] for t in logicals}
    end = time.time() + limit
    last = time.time()
    try:
        while time.time() < end and time.time() - last < idle:
            for m in c.consume(1000, 0.3):
                if m.error():
                    continue
                last = time.time()
                t = logical_of[m.topic()]
                schema = SCHEMAS.get(t)
                v = avroframe.decode(m.value(), schema) if schema and m.value() else None
                out[t].append({"value": v, "key": m.key(), "headers": dict(m.headers() or []),
                               "partition": m.partition(), "offset": m.offset()})
    finally:
        c.close()
    return out


def answers(iso):
    """(inputs {(topic, partition, offset)}, moved runs, runs on a new partition, records on new
    partitions, answers {(topic, partition, offset): [what]}, dead letters)."""
    inputs = set()
    parts_of_run = {}
    on_new = 0
    inputs_of = [t for ts in INPUTS.values() for t in ts]
    recs = read_all(iso, inputs_of + list(REPLIES) + ["dead-letters"])
    for ts in INPUTS.values():
        for logical in ts:
            topic = iso.topic(logical)
            for rec in recs[logical]:
                inputs.add((topic, rec["partition"], rec["offset"]))
                key = (rec["key"] or b"").decode(errors="replace")
                parts_of_run.setdefault(key, set()).add(rec["partition"])
                on_new += rec["partition"] >= FROM
    moved = sum(1 for ps in parts_of_run.values() if len(ps) > 1)
    new_runs = sum(1 for ps in parts_of_run.values() if any(p >= FROM for p in ps))
    ans = {}
    for logical in REPLIES:
        for rec in recs[logical]:
            v = rec["value"] or {}
            if "sourceOffset" in v:
                k = (v["sourceTopic"], v["sourcePartition"], v["sourceOffset"])
                ans.setdefault(k, []).append("%s[%d]@%d" % (logical, rec["partition"], rec["offset"]))
    dls = []
    for rec in recs["dead-letters"]:
        h = {k: (v.decode(errors="replace") if isinstance(v, bytes) else v) for k, v in rec["headers"].items()}
        try:
            k = (h["ll.source.topic"], int(h["ll.source.partition"]), int(h["ll.source.offset"]))
        except (KeyError, ValueError):
            k = None
        dls.append((k, h))
        if k:
            ans.setdefault(k, []).append("dead-letters[%d]@%d" % (rec["partition"], rec["offset"]))
    return inputs, moved, new_runs, on_new, ans, dls, parts_of_run


def cross_deferrals(iso, killer, parts_of_run):
    """Deferrals (message_deferred in the consuming instances' logs) of a message on a new
    partition whose run also has input events on an old one: a prerequisite waited for across
    partitions."""
    n = 0
    for svc in INPUTS:
        for name in killer.names:
            for e in events(iso.stack.log_path("%s-%s" % (svc, name)), "message_deferred"):
                ps = parts_of_run.get(e.get("runId"), set())
                n += e.get("kafkaPartition", -1) >= FROM and any(p < FROM for p in ps)
    return n


def main():
    a = parse()
    say("repartition drill: mode %s, seed %d, %d runs over %.0f s, input topics %d -> %d partitions after %.0f s,"
        " instances %s joining %.0f s later, >= %d kills (replay: scripts/drill.sh repartition --mode %s --seed %d)"
        % (a.mode, a.seed, a.runs, a.spread, FROM, TO, a.at * a.spread, "/".join(JOINING), a.join_after, a.kills,
           a.mode, a.seed))
    rnd = random.Random(a.seed)
    iso = Isolated("repart", stack_cls=OwnRefresh)
    say("database %s, topic prefix %s, logs in %s" % (iso.dbname, iso.prefix, iso.stack.log_dir))
    nifi = Nifi(iso.bootstrap, iso.prefix)
    # NiFi's PublishKafka (a Java producer: metadata.max.age.ms) sees new partitions within its
    # metadata age; librdkafka's default is 5 minutes, longer than the drill
    nifi.producer = Producer(client_conf({"bootstrap.servers": iso.bootstrap, "enable.idempotence": True,
                                          "linger.ms": 5, "topic.metadata.refresh.interval.ms": 1000}))
    work = Workload(nifi, rnd, a.seed, a.runs, a.spread, a.max_delay, a.dup_rate, a.rival_rate, a.ahead_rate)
    settings = {svc: dict(SETTINGS.get(svc, {})) for svc in SERVICES}
    for svc in INPUTS:
        if a.service_refresh is not None:
            settings[svc][REFRESH] = a.service_refresh
    killer = GrowingKiller(iso.stack, rnd, a.kill_every, settings=settings)
    rep = Repartitioner(a, iso, work, killer)
    ok = False
    verdict = "NOT RUN"
    try:
        killer.start_all()
        duration = drive(a, iso, work, killer, kill=a.kills > 0, also=rep)
        nifi.flush()
        failures = list(rep.failures)
        if rep.added_at is None or rep.joined_at is None:
            failures.append("the repartition or the join did not happen (timeout or stall)")
        for logical in (t for ts in INPUTS.values() for t in ts):
            n = len(partitions_of(iso.bootstrap, iso.topic(logical)))
            if n != TO:
                failures.append("%s has %d partitions" % (logical, n))
        failures += check_assignments(iso, killer)
        res = judge(iso, work, killer, a.runs)
        verdict, statuses = res["verdict"], res["statuses"]
        inputs, moved, new_runs, on_new, ans, dls, parts_of_run = answers(iso)
        crossed = cross_deferrals(iso, killer, parts_of_run)
        twice = {k: v for k, v in ans.items() if len(v) > 1}
        unanswered = sorted(inputs - set(ans))
        for k, v in sorted(twice.items())[:10]:
            say("  answered twice: input %s[%d]@%d: %s" % (k[0], k[1], k[2], ", ".join(v)))
        for k in unanswered[:10]:
            say("  unanswered: input %s[%d]@%d" % k)
        for k, h in dls[:10]:
            say("  dead letter: %s %s" % (k, {x: y for x, y in h.items() if x.startswith("ll.")}))
        if twice:
            failures.append("inputs answered twice: %d" % len(twice))
        if unanswered:
            failures.append("inputs without an answer: %d" % len(unanswered))
        if dls:
            failures.append("inputs dead-lettered: %d" % len(dls))
        if not on_new:
            failures.append("no event was written to a new partition")
        # an eighth, at least 1: far below the half expected, so that chance does not fail a correct run
        min_moved = a.min_moved if a.min_moved is not None else max(1, rep.in_flight.get("repartition", 0) // 8)
        if moved < min_moved:
            failures.append("runs with events on two partitions: %d < %d" % (moved, min_moved))
        for f in failures:
            say("  %s" % f)
        ok = res["ok"] and not failures and killer.total() >= a.kills
        say("REPARTITION seed=%d mode=%s runs_final=%d/%d ledger_success=%d partitions=%d->%d instances=%d->%d"
            " groups_saw_new_partitions=%s in_flight_at_repartition=%d in_flight_at_join=%d runs_moved=%d runs_on_new_partitions=%d"
            " deferred_across_partitions=%d"
            " events_on_new_partitions=%d inputs=%d answered_twice=%d dead_letters=%d kills=%d restarts=%d"
            " unexpected_exits=%d events_sent=%d duplicates=%d sent_ahead=%d rival_claims=%d double_grants=%d"
            " longest_reply_gap=%.1fs longest_stage_wait=%.1fs duration=%.0fs verify=%s result=%s" % (
                a.seed, a.mode, work.final(), a.runs, statuses.get("SUCCESS", 0), FROM, TO, 2 * len(SERVICES),
                len(killer.names) * len(SERVICES),
                ",".join("%s:%s" % (svc, "%.0fs" % rep.seen[svc] if svc in rep.seen else "NO") for svc in INPUTS),
                rep.in_flight.get("repartition", -1),
                rep.in_flight.get("join", -1), moved, new_runs, crossed, on_new, len(inputs), len(twice), len(dls),
                killer.total(), killer.restarts, len(killer.unexpected), work.sent, work.duplicates,
                work.ahead, work.rival_claims, len(work.double_grants), work.longest_gap, work.longest_wait, duration, verdict,
                "PASS" if ok else "FAIL"))
    finally:
        work.close()
        iso.close(drop=ok and not a.keep)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
