"""The chaos drill's workload: many runs driven through their whole life as NiFi's flows would
drive them, each event sent after a random delay, some sent twice, the events of one stage in a
random order (scripts/drill.sh chaos, tools/nifisim/drill_chaos.py).

A run moves one stage at a time, on the reply loadledger gives (read_committed, one consumer
over every reply topic): run request -> manifest -> one claim per non-empty partition; a granted
claim sends that partition's chunk reports (shuffled); every copy of the validate-run command
sends a validation start with its dispatchId, and only `started: true` goes on: STAGING
metrics, stage-validated, publish claim, publish result PUBLISHED, TARGET metrics, success. A
run is final when its success is answered with runStatus SUCCESS. Nothing is ever resent on a
timeout: an input lost by the services leaves its run stuck, and the drill fails on it.

ahead_rate (0 unless a drill sets it: the repartition drill's) is the chance that an event does not
wait for the reply to the one before it, as a pipelining flow would send it: a run's manifest
right after its run request, a partition's chunk reports right after its claim. Its prerequisite
may then be read after it, by another instance (another partition after a repartition): the
services defer it until the prerequisite is applied (docs/design.md §6).

Randomness comes from one random.Random(seed): the run ids, delays, duplicates and orders are
the same for the same seed (the services' timing is not).
"""
import heapq
import time
import uuid

from confluent_kafka import Consumer, TopicPartition

from . import avroframe
from .kafkaio import SCHEMAS
from .lifecycle import staging_metrics, target_metrics
from .scenario import Run

# reply topic -> the stage whose answer it carries (validation-metrics-outcomes: by its `stage`)
REPLY_TOPICS = ("run-decisions", "manifest-decisions", "claim-decisions", "validate-run-commands",
                "validation-start-decisions", "validation-metrics-outcomes", "stage-validation-outcomes",
                "publish-claim-decisions", "publish-result-outcomes", "run-success-outcomes")


class ChaosRun:
    """One run of the workload: its reference-scenario events and the stage it waits in."""

    def __init__(self, rnd, index, seed):
        rid = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
        self.run = Run(business_key="chaos-%d-%04d" % (seed, index), run_id=rid)
        for pid in self.run.nonempty():
            self.run.claim(pid, token=str(uuid.UUID(int=rnd.getrandbits(128), version=4)))
        self.publish_token = str(uuid.UUID(int=rnd.getrandbits(128), version=4))
        self.stage = "new"
        self.pending = set()  # partitions without a granted claim yet
        self.rivals = {}  # partition -> the token of a competing worker's claim
        self.winner = {}  # partition -> the first token granted
        self.dispatches = set()
        self.since = None
        self.manifest_ahead = False  # the manifest went out with the run request
        self.chunks_ahead = set()  # partitions whose chunks went out with their claim


class Workload:
    """Drives `runs` runs through the services of one drill on prefix `prefix`.

    start_at(i) gives the second (from begin()) at which run i is admitted; max_delay (s) bounds
    the random delay of a send; dup_rate is the chance that an event is also sent a second time,
    up to 3 max_delay later; rival_rate the chance that a partition is also claimed by a second
    worker with a token of its own. step() does the work that is due and returns quickly."""

    def __init__(self, nifi, rnd, seed, runs, spread, max_delay=0.3, dup_rate=0.15, rival_rate=0.05,
                 ahead_rate=0.0):
        self.nifi = nifi
        self.rnd = rnd
        self.max_delay = max_delay
        self.dup_rate = dup_rate
        self.rival_rate = rival_rate
        self.rival_claims = 0
        self.ahead_rate = ahead_rate
        self.ahead = 0  # events sent before the reply to their prerequisite
        self.double_grants = set()  # (run id, partition) granted to two tokens
        self.runs = [ChaosRun(rnd, i, seed) for i in range(runs)]
        self.by_id = {r.run.run_id: r for r in self.runs}
        self.admit = sorted((spread * i / max(1, runs), i) for i in range(runs))
        self.queue = []  # (due, seq, logical, record)
        self.seq = 0
        self.sent = 0
        self.duplicates = 0
        self.commands = 0
        self.rejected = {}
        self.last_reply = None
        self.longest_gap = 0.0  # s without any reply while runs were pending
        self.longest_wait = 0.0  # s the slowest stage of one run took (event sent -> its answer)
        self.t0 = None
        self.progress = None  # when a run last moved to its next stage
        self.consumer = self._open_replies()

    # -- Kafka -----------------------------------------------------------------------------------
    def _open_replies(self):
        c = Consumer({"bootstrap.servers": self.nifi.bootstrap, "group.id": "llsim-chaos-" + uuid.uuid4().hex,
                      "enable.auto.commit": False, "isolation.level": "read_committed"})
        parts = []
        for logical in REPLY_TOPICS:
            topic = self.nifi.topic(logical)
            for p in c.list_topics(topic, timeout=10).topics[topic].partitions:
                _lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                parts.append(TopicPartition(topic, p, hi))
        c.assign(parts)
        self.logical = {self.nifi.topic(t): t for t in REPLY_TOPICS}
        return c

    def close(self):
        self.consumer.close()

    def send(self, logical, record, dup=True):
        """Schedules one event after a random delay, and maybe a duplicate of it later."""
        now = time.time()
        heapq.heappush(self.queue, (now + self.rnd.uniform(0, self.max_delay), self.seq, logical, record))
        self.seq += 1
        if dup and self.rnd.random() < self.dup_rate:
            heapq.heappush(self.queue, (now + self.rnd.uniform(0, 3 * self.max_delay), self.seq, logical, record))
            self.seq += 1
            self.duplicates += 1

    # -- the loop --------------------------------------------------------------------------------
    def begin(self):
        self.t0 = time.time()
        self.last_reply = self.t0
        self.progress = self.t0

    def step(self, poll=0.05):
        now = time.time()
        while self.admit and self.t0 + self.admit[0][0] <= now:
            _, i = self.admit.pop(0)
            r = self.runs[i]
            self._enter(r, "request")
            self.send("run-requests", r.run.run_request())
            if self.ahead_rate and self.rnd.random() < self.ahead_rate:
                r.manifest_ahead = True
                self.ahead += 1
                self.send("manifests", r.run.manifest())
        while self.queue and self.queue[0][0] <= now:
            _, _, logical, record = heapq.heappop(self.queue)
            self.nifi.send(logical, record)
            self.sent += 1
        self.nifi.producer.poll(0)
        for m in self.consumer.consume(500, poll):
            if m.error() or m.value() is None:
                continue
            logical = self.logical[m.topic()]
            v = avroframe.decode(m.value(), SCHEMAS[logical])
            t = time.time()
            self.longest_gap = max(self.longest_gap, t - self.last_reply) if self.pending_runs() else self.longest_gap
            self.last_reply = t
            r = self.by_id.get(v.get("runId"))
            if r is not None:
                self._on_reply(r, logical, v)

    def idle(self):
        """Every run admitted and final, and nothing left to send (the late duplicates too)."""
        return not self.admit and not self.queue and not self.pending_runs()

    def pending_runs(self):
        return [r for r in self.runs if r.stage != "final"]

    def final(self):
        return sum(1 for r in self.runs if r.stage == "final")

    def _enter(self, r, stage):
        now = time.time()
        if r.since is not None and r.stage != "new":
            self.longest_wait = max(self.longest_wait, now - r.since)
        r.stage = stage
        r.since = now
        self.progress = now

    def _on_reply(self, r, logical, v):
        outcome = v.get("outcome")
        if outcome == "REJECTED":
            key = "%s/%s" % (logical, v.get("code"))
            self.rejected[key] = self.rejected.get(key, 0) + 1
            return
        run = r.run
        if logical == "run-decisions" and r.stage == "request":
            self._enter(r, "manifest")
            if not r.manifest_ahead:
                self.send("manifests", run.manifest())
        elif logical == "manifest-decisions" and (r.stage == "manifest" or r.stage == "request" and r.manifest_ahead):
            # (a manifest sent ahead may be answered before its run request: two transactions)
            self._enter(r, "claims")
            r.pending = set(run.nonempty())
            pids = list(r.pending)
            self.rnd.shuffle(pids)
            for pid in pids:
                self.send("partition-claims", run.claim(pid))
                if self.ahead_rate and self.rnd.random() < self.ahead_rate:
                    r.chunks_ahead.add(pid)
                    self.ahead += 1
                    chunks = run.chunks(pid, token=run.tokens[pid])
                    self.rnd.shuffle(chunks)
                    for c in chunks:
                        self.send("chunks", c)
                if self.rnd.random() < self.rival_rate:
                    # a second worker got the same partition (a duplicated dispatch): one wins
                    rival = str(uuid.UUID(int=self.rnd.getrandbits(128), version=4))
                    r.rivals[pid] = rival
                    self.rival_claims += 1
                    self.send("partition-claims", dict(run.claim(pid), claimToken=rival, workerNode="rival"))
        elif logical == "claim-decisions" and v["claimed"]:
            self._granted(r, v["partitionId"], v["claimToken"])
        elif logical == "validate-run-commands":
            # every copy of the command, even a late one, is answered with a validation start
            # (nifi/README.md, "Plugging in a NiFi flow": NiFi needs no state of its own; the completion CAS lets one win)
            if r.stage in ("claims", "extract"):
                self._enter(r, "start")
            r.dispatches.add(v["dispatchId"])
            self.commands += 1
            self.send("validation-starts", {"runId": run.run_id, "dispatchId": v["dispatchId"], "node": "chaos"})
        elif logical == "validation-start-decisions" and r.stage == "start" and v["started"]:
            self._enter(r, "staging")
            self.send("validation-metrics", {"runId": run.run_id, "stage": "STAGING", "queryVersion": "v1",
                                             "metrics": staging_metrics(run)})
        elif logical == "validation-metrics-outcomes" and r.stage == "staging" and v["stage"] == "STAGING":
            self._enter(r, "stage_validated")
            self.send("stage-validations", {"runId": run.run_id})
        elif logical == "stage-validation-outcomes" and r.stage == "stage_validated" and v["stageValidated"]:
            self._enter(r, "publish_claim")
            self.send("publish-claims", {"runId": run.run_id, "publishToken": r.publish_token})
        elif logical == "publish-claim-decisions" and r.stage == "publish_claim" and v["claimed"] \
                and v["publishToken"] == r.publish_token:
            self._enter(r, "publish_result")
            self.send("publish-results", {"runId": run.run_id, "publishToken": r.publish_token,
                                          "outcome": "PUBLISHED", "errorCode": None, "message": ""})
        elif logical == "publish-result-outcomes" and r.stage == "publish_result" \
                and v["publishToken"] == r.publish_token:
            self._enter(r, "target")
            self.send("validation-metrics", {"runId": run.run_id, "stage": "TARGET", "queryVersion": "v1",
                                             "metrics": target_metrics(run)})
        elif logical == "validation-metrics-outcomes" and r.stage == "target" and v["stage"] == "TARGET":
            self._enter(r, "success")
            self.send("run-successes", {"runId": run.run_id, "targetCount": None})
        elif logical == "run-success-outcomes" and r.stage == "success" and v["runStatus"] == "SUCCESS":
            self._enter(r, "final")

    def _granted(self, r, pid, token):
        """A granted claim: the first token granted extracts the partition (shuffled chunks); a
        second token granted for the same partition is a double grant (the claim CAS broken)."""
        if token not in (r.run.tokens.get(pid), r.rivals.get(pid)):
            return
        won = r.winner.setdefault(pid, token)
        if won != token:
            self.double_grants.add((r.run.run_id, pid))
            return
        if pid not in r.pending:
            return  # a replayed grant of the winner
        r.pending.discard(pid)
        if not (pid in r.chunks_ahead and token == r.run.tokens.get(pid)):
            chunks = r.run.chunks(pid, token=token)
            self.rnd.shuffle(chunks)
            for c in chunks:
                self.send("chunks", c)
        if not r.pending and r.stage == "claims":
            self._enter(r, "extract")

    def stuck(self, limit=10):
        """Up to `limit` (run id, stage, seconds in it) of runs not final, longest waiting first."""
        now = time.time()
        out = sorted(((r.run.run_id, r.stage, now - (r.since or now)) for r in self.pending_runs()),
                     key=lambda x: -x[2])
        return out[:limit]
