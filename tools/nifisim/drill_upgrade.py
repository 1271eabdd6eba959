#!/usr/bin/python3
"""The rolling upgrade drill (scripts/drill.sh upgrade; docs/upgrading.md).

Release N is the fixed older commit llsim/upgrade_base.BASE_COMMIT, built once into a cache
folder; release N+1 is this tree's build (LL_BUILD_DIR). On a database and topics of its own
the drill migrates the ledger with N's loadctl and N's migrations, starts two instances of every
service from N's binaries and starts the chaos drill's workload (drill_chaos: random delays,
duplicates, reorderings, rival claims). Under that workload it then runs N+1's `loadctl migrate`
(the expand step; --migrate-after K moves it after the K-th replacement) and replaces the
instances one at a time, service by service in the order of docs/upgrading.md (dispatcher,
sweeper, completion, claimer, registrar: every service before the ones whose rows it reads):
SIGTERM to the N instance, its exit awaited (0 expected), the N+1 binary started with the same
service.instance_id (so the same transactional id), and the next step only once it has its
partitions (consumers) or has started (dispatcher, sweeper) and `--gap` seconds have passed.

At the end the checks of the chaos drill (drill_chaos.judge, with N+1's loadctl): every run
SUCCESS, every input committed, `loadctl verify --topics` (one reply per input), every instance
exits 0 on SIGTERM, none died on its own, no partition granted twice. Before it all, the
migrations N+1 adds are read: one that changed a migration of N, or that is not expand-only
(llsim/upgrade_base.CONTRACT: drops, renames, type changes, SET NOT NULL, REVOKE), fails the
drill at once.

--mode long: more runs, the instances replaced in a random order, rolled forward, back to N
(the rollback of docs/upgrading.md: the expand migration stays) and forward again, while random
instances are also killed -9 and restarted (with the release they run). The last line sums it
up: UPGRADE ... result=PASS|FAIL.
"""
import argparse
import os
import random
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from drill_chaos import drive, judge  # noqa: E402
from llsim import upgrade_base  # noqa: E402
from llsim.avroframe import REPO  # noqa: E402
from llsim.chaos_flow import Workload  # noqa: E402
from llsim.chaos_kill import INSTANCES, SETTINGS, Killer  # noqa: E402
from llsim.drills import Isolated  # noqa: E402
from llsim.kafkaio import Nifi  # noqa: E402
from llsim.stack import Stack  # noqa: E402

# docs/upgrading.md "Order": the outbox's reader before its writers, and every service before
# the services whose ledger rows it reads (the dispatcher reads the outbox the completion service
# and the sweeper write; the sweeper acts on what the consumers write; the completion service on
# the claims; the claimer on the runs and partitions the registrar admits)
ORDER = ("dispatcher", "sweeper", "completion", "claimer", "registrar")
CONSUMERS = ("registrar", "claimer", "completion")
MODES = {  # runs, rounds of replacements, kills at least, mean s between kills, gap (s), timeout (s)
    "short": (100, ("N+1",), 0, 0.0, 4.0, 420),
    "long": (300, ("N+1", "N", "N+1"), 40, 2.5, 3.0, 1800),
}


def say(msg):
    print(msg, flush=True)


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=sorted(MODES), default="short")
    ap.add_argument("--seed", type=int, default=None, help="replay a drill (default: random, printed)")
    ap.add_argument("--runs", type=int, help="runs of the workload (mode's default)")
    ap.add_argument("--gap", type=float, help="seconds between two replacements, after the new one is ready")
    ap.add_argument("--migrate-after", type=int, default=0,
                    help="run N+1's loadctl migrate after this many replacements (default 0: before the first)")
    ap.add_argument("--base", default=upgrade_base.BASE_COMMIT, help="the commit of release N")
    ap.add_argument("--base-build", help="a build folder of release N to use as it is (with --base-src)")
    ap.add_argument("--base-src", help="the source tree of --base-build (its schemas)")
    ap.add_argument("--max-delay", type=float, default=0.3, help="largest random delay of an event (s)")
    ap.add_argument("--dup-rate", type=float, default=0.15, help="share of events sent twice")
    ap.add_argument("--rival-rate", type=float, default=0.05, help="share of partitions claimed by two workers")
    ap.add_argument("--ready-timeout", type=float, default=60, help="seconds a new instance has to get ready")
    ap.add_argument("--timeout", type=float, help="give up after this many seconds (mode's default)")
    ap.add_argument("--stall", type=float, default=120, help="give up when no run moved for this many seconds")
    ap.add_argument("--keep", action="store_true", help="keep the drill's database and topics")
    a = ap.parse_args()
    runs, a.rounds, a.kills, a.kill_every, gap, timeout = MODES[a.mode]
    a.runs = a.runs or runs
    a.gap = a.gap if a.gap is not None else gap
    a.timeout = a.timeout or timeout
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "big")
    if not 0 <= a.migrate_after <= len(a.rounds) * 10:
        ap.error("--migrate-after: 0 to %d (the replacements of the mode)" % (len(a.rounds) * 10))
    if bool(a.base_build) != bool(a.base_src):
        ap.error("--base-build and --base-src go together")
    return a


class Release:
    """One release's binaries (build folder) and sources (its Avro schemas and migrations)."""

    def __init__(self, name, build, src):
        self.name, self.build, self.src = name, build, src
        self.avro = os.path.join(src, "schemas", "avro")
        self.sql = os.path.join(src, "schemas", "sql")


class TwoReleases(Stack):
    """A Stack whose instances each run release N or N+1 (self.release: instance -> name, N
    unless set), each with its own binary and Avro schemas; restarts keep the instance's release.
    migrate() is N's (Isolated's first migration)."""

    def __init__(self, releases, **kw):
        super().__init__(build_dir=releases["N"].build, **kw)
        self.releases = releases
        self.release = {}
        self.started = {}  # instance -> LogWatch of its service_started since its last start

    def start(self, service, instance=None, settings=None, env=None):
        rel = self.releases[self.release.get(instance, "N")]
        self.binaries[instance] = rel.build
        self.started[instance] = LogWatch(self.log_path(instance), "service_started")
        return super().start(service, instance, settings, dict(env or {}, LL_SCHEMA_DIR=rel.avro))

    def migrate(self):
        return self.loadctl_of("N", "migrate", "--dir", self.releases["N"].sql)

    def loadctl_of(self, name, *args):
        """loadctl of release `name` (as postgres, the migration account); raises on failure."""
        saved, self.build_dir = self.build_dir, self.releases[name].build
        try:
            return self.loadctl(*args)
        finally:
            self.build_dir = saved


class LogWatch:
    """Waits for an event in the lines an instance appends to its log after now."""

    def __init__(self, path, event):
        self.path, self.needle = path, '"event":"%s"' % event
        self.offset = os.path.getsize(path) if os.path.exists(path) else 0
        self.hit = False

    def seen(self):
        if self.hit:
            return True
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                text = f.read().decode(errors="replace")
        except FileNotFoundError:
            return False
        self.hit = self.needle in text.replace(" ", "")
        return self.hit


class Roller:
    """The replacements of a drill, one per call when due (drive()'s `also`): plan is
    [(instance, release name)]; N+1's migration runs after a.migrate_after replacements.
    A step waits while its instance is down (killed, restart pending), then for the new instance
    to be ready, then `gap` seconds. Returns True while steps are left."""

    def __init__(self, a, stack, killer, work, plan):
        self.a, self.stack, self.killer, self.work, self.plan = a, stack, killer, work, plan
        self.i = 0
        self.migrated = False
        self.migrate_failed = False
        self.next_at = None
        self.waiting = None  # (instance, release, LogWatch, stop seconds, exit code, started at)
        self.steps = []  # one line per step, for the summary
        self.failures = []
        self.applied = None  # the migrations N+1's loadctl applied
        self.longest = 0.0  # s of the longest replacement (the stop and the readiness)
        self.first = self.last = None  # when the first step began, when the last one ended
        self.t0 = time.time()

    def in_flight(self):
        return sum(1 for r in self.work.runs if r.stage not in ("new", "final"))

    def __call__(self):
        now = time.time()
        if self.next_at is None:
            self.t0, self.next_at = now, now + self.a.gap
        if self.waiting:
            return self._wait_ready(now)
        if now < self.next_at:
            return True
        if not self.migrated and self.i >= self.a.migrate_after:
            self._migrate()
            self.next_at = time.time() + self.a.gap
            return True
        if self.i >= len(self.plan):
            return False
        inst, rel = self.plan[self.i]
        if inst not in self.stack.procs or inst in self.killer.down or not self.stack.started[inst].seen():
            # killed: replaced once the killer has started it again and it has started (a SIGTERM
            # before its service_started line meets no handler yet: the default action, exit -15)
            return True
        self._replace(inst, rel)
        return True

    def _note(self, line):
        self.steps.append(line)
        self.last = time.time()
        say("  t=%3.0fs %s" % (time.time() - self.t0, line))

    def _migrate(self):
        t = time.time()
        self.first = self.first or t
        self.migrated = True
        try:
            p = self.stack.loadctl_of("N+1", "migrate", "--dir", self.stack.releases["N+1"].sql)
        except subprocess.CalledProcessError as e:
            self.failures.append("loadctl migrate (N+1) failed, rc %d: %s" % (e.returncode,
                                                                             (e.stdout + e.stderr).strip()))
            self.migrate_failed = True
            self._note("loadctl migrate (N+1): FAILED")
            return
        self.applied = [ln.split(None, 1)[1] for ln in p.stdout.splitlines() if ln.startswith("applied ")]
        what = ("applied " + ", ".join(self.applied)) if self.applied else "no pending migration"
        self._note("loadctl migrate (N+1): %s (%.1f s, %d runs in flight)" % (what, time.time() - t,
                                                                             self.in_flight()))

    def _replace(self, inst, rel):
        svc = Killer.service_of(inst)
        t = time.time()
        self.first = self.first or t
        code = self.stack.stop(inst)
        stopped = time.time() - t
        if code != 0:
            self.failures.append("%s (release %s) exited %s on SIGTERM" % (inst, self.stack.release.get(inst, "N"),
                                                                          code))
        self.stack.release[inst] = rel
        watch = LogWatch(self.stack.log_path(inst), "partitions_assigned" if svc in CONSUMERS else "service_started")
        self.stack.start(svc, inst, settings=SETTINGS.get(svc, {}))
        self.waiting = (inst, rel, watch, stopped, code, time.time())

    def _wait_ready(self, now):
        inst, rel, watch, stopped, code, started = self.waiting
        ready = watch.seen()
        if not ready and now - started < self.a.ready_timeout:
            return True
        if not ready:
            self.failures.append("%s (release %s) not ready after %.0f s" % (inst, rel, self.a.ready_timeout))
        self.waiting = None
        self.i += 1
        self.longest = max(self.longest, stopped + (now - started))
        self.next_at = time.time() + self.a.gap
        self._note("%s -> %s (SIGTERM exit %s in %.1f s; ready in %.1f s; %d runs in flight)" % (
            inst, rel, code, stopped, now - started if ready else float("nan"), self.in_flight()))
        return True


def plan_of(a, rnd):
    """[(instance, release)]: service by service in ORDER (short), or every round in a random order."""
    plan = []
    for rel in a.rounds:
        insts = ["%s-%s" % (s, i) for s in ORDER for i in INSTANCES]
        if a.mode != "short":
            rnd.shuffle(insts)
        plan += [(inst, rel) for inst in insts]
    return plan


def releases_of(a):
    new_build = os.environ.get("LL_BUILD_DIR", os.path.join(REPO, "build"))
    if a.base_build:
        old = Release("N", os.path.abspath(a.base_build), os.path.abspath(a.base_src))
    else:
        build, src, secs = upgrade_base.build(a.base, jobs=2, say=say)
        old = Release("N", build, src)
    return {"N": old, "N+1": Release("N+1", new_build, REPO)}


def main():
    a = parse()
    try:
        rels = releases_of(a)
    except upgrade_base.BaseError as e:
        say("upgrade drill: release N: %s" % e)
        return 2
    added, problems = upgrade_base.check_migrations(rels["N"].sql, rels["N+1"].sql)
    say("upgrade drill: mode %s, seed %d, %d runs; release N %s (%s), N+1 %s; migrations N+1 adds: %s "
        "(replay: scripts/drill.sh upgrade --mode %s --seed %d)" % (
            a.mode, a.seed, a.runs, a.base, rels["N"].build, rels["N+1"].build, ", ".join(added) or "none",
            a.mode, a.seed))
    if problems:
        for p in problems:
            say("  %s" % p)
        say("UPGRADE seed=%d mode=%s migrations not expand-only: result=FAIL" % (a.seed, a.mode))
        return 1
    rnd = random.Random(a.seed)
    iso = Isolated("upgrade", stack_cls=lambda **kw: TwoReleases(rels, **kw))
    stack = iso.stack
    say("database %s, topic prefix %s, logs in %s" % (iso.dbname, iso.prefix, stack.log_dir))
    nifi = Nifi(iso.bootstrap, iso.prefix)
    plan = plan_of(a, rnd)
    # the runs are admitted over the time the replacements are expected to take
    # (a step takes its gap, the stop and the readiness, and with kills the wait for a killed
    # instance's restart: measured 4.5-5 s a step in short mode, 5.5-6 s in long)
    spread = (len(plan) + 1) * (a.gap + (3.0 if a.kills else 2.0))
    work = Workload(nifi, rnd, a.seed, a.runs, spread, a.max_delay, a.dup_rate, a.rival_rate)
    killer = Killer(stack, rnd, a.kill_every or 1.0)
    roller = Roller(a, stack, killer, work, plan)
    ok = False
    verdict = "NOT RUN"
    try:
        killer.start_all()
        duration = drive(a, iso, work, killer, kill=a.kills > 0, also=roller)
        nifi.flush()
        left_steps = len(plan) - roller.i
        if left_steps:
            roller.failures.append("%d replacements not done (timeout or stall)" % left_steps)
        stack.build_dir = rels["N+1"].build  # verify with N+1's loadctl
        res = judge(iso, work, killer, a.runs)
        verdict, statuses = res["verdict"], res["statuses"]
        final_rel = a.rounds[-1]
        wrong = sorted(i for i in killer.instances() if stack.release.get(i, "N") != final_rel)
        if wrong:
            roller.failures.append("instances not on release %s at the end: %s" % (final_rel, wrong))
        for f in roller.failures:
            say("  %s" % f)
        ok = res["ok"] and not roller.failures and killer.total() >= a.kills
        say("UPGRADE seed=%d mode=%s base=%s runs_final=%d/%d ledger_success=%d replaced=%d/%d migrated=%s"
            " roll=%.0fs longest_replacement=%.1fs kills=%d restarts=%d unexpected_exits=%d events_sent=%d"
            " duplicates=%d validate_commands=%d longest_stage_wait=%.1fs duration=%.0fs verify=%s result=%s" % (
                a.seed, a.mode, a.base[:10], work.final(), a.runs, statuses.get("SUCCESS", 0), roller.i, len(plan),
                "FAILED" if roller.migrate_failed else
                (",".join(roller.applied or []) or ("none-pending" if roller.migrated else "NOT-RUN")),
                (roller.last or 0) - (roller.first or 0), roller.longest,
                killer.total(), killer.restarts, len(killer.unexpected), work.sent, work.duplicates, work.commands,
                work.longest_wait, duration, verdict, "PASS" if ok else "FAIL"))
    finally:
        work.close()
        iso.close(drop=ok and not a.keep)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
