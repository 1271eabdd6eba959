#!/usr/bin/python3
"""The chaos drill (scripts/drill.sh chaos; docs/operations.md "Chaos drill").

Two instances of every service (registrar, claimer, completion, dispatcher, sweeper; one consumer
group per consuming service, distinct instance ids) run on a database and topics of their own.
A workload of runs goes through its whole life as NiFi would drive it (llsim/chaos_flow.py:
random delays, duplicates, events of a stage in random order), while a random live instance is
killed with SIGKILL at random moments and restarted after a random pause (llsim/chaos_kill.py).

At the end every run must be SUCCESS (no event is ever resent on a timeout), every input
committed, `loadctl verify --topics` must pass and every instance must stop cleanly on SIGTERM
(sanitizer builds: no report). The seed is printed; --seed replays the same workload and kill
choices (not the same timing). The last line sums it up: CHAOS ... result=PASS|FAIL.
"""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from llsim.chaos_flow import Workload  # noqa: E402
from llsim.chaos_kill import SERVICES, Killer  # noqa: E402
from llsim.drills import Isolated, lag, loadctl_verify  # noqa: E402
from llsim.kafkaio import Nifi  # noqa: E402

MODES = {  # runs, kills at least, seconds between kills on average, overall timeout (s)
    "short": (100, 50, 1.4, 420),
    "medium": (200, 200, 1.4, 900),
    "long": (500, 500, 1.4, 2400),
}
INPUTS = {
    "registrar": ("run-requests", "manifests"),
    "claimer": ("partition-claims", "publish-claims"),
    "completion": ("chunks", "partition-failures", "validation-starts", "validation-metrics", "stage-validations",
                   "publish-results", "run-successes", "run-failures"),
}


def say(msg):
    print(msg, flush=True)


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=sorted(MODES), default="short")
    ap.add_argument("--seed", type=int, default=None, help="replay a drill (default: random, printed)")
    ap.add_argument("--runs", type=int, help="runs of the workload (mode's default)")
    ap.add_argument("--kills", type=int, help="kills at least (mode's default)")
    ap.add_argument("--kill-every", type=float, help="mean seconds between kills (mode's default)")
    ap.add_argument("--max-delay", type=float, default=0.3, help="largest random delay of an event (s)")
    ap.add_argument("--dup-rate", type=float, default=0.15, help="share of events sent twice")
    ap.add_argument("--rival-rate", type=float, default=0.05, help="share of partitions claimed by two workers")
    ap.add_argument("--timeout", type=float, help="give up after this many seconds (mode's default)")
    ap.add_argument("--stall", type=float, default=120,
                    help="give up when no run moved for this many seconds after the last kill due")
    ap.add_argument("--keep", action="store_true", help="keep the drill's database and topics")
    a = ap.parse_args()
    runs, kills, every, timeout = MODES[a.mode]
    a.runs = a.runs or runs
    a.kills = a.kills if a.kills is not None else kills
    a.kill_every = a.kill_every or every
    a.timeout = a.timeout or timeout
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "big")
    return a


def drive(a, iso, work, killer, kill=True, also=None):
    """The workload under kills until every run is final and enough kills happened (or the
    timeout); returns the seconds it took. kill=False: the killer only restarts what died
    without being killed (no kill of its own unless begun by the caller). also: a function
    called every turn (the upgrade drill's replacements) that returns True while it has work
    left; the drive lasts at least until it returns False."""
    t0 = time.time()
    work.begin()
    if kill:
        killer.begin()
    last = t0
    while time.time() - t0 < a.timeout:
        work.step()
        killer.step()
        busy = also() if also else False
        if killer.active and killer.total() >= a.kills and not work.pending_runs():
            killer.stop_killing()
            killer.settle()
        if not killer.active and not killer.down and work.idle() and not busy:
            break
        if killer.total() >= a.kills and work.pending_runs() and time.time() - work.progress > a.stall:
            say("  no run moved for %.0f s: giving up" % (time.time() - work.progress))
            break
        if time.time() - last >= 10:
            last = time.time()
            stages = {}
            for r in work.pending_runs():
                stages[r.stage] = stages.get(r.stage, 0) + 1
            say("  t=%3.0fs runs final %d/%d, kills %d, pending %s" % (last - t0, work.final(), len(work.runs),
                                                                       killer.total(), stages))
    killer.stop_killing()
    killer.settle()
    return time.time() - t0


def settle_inputs(iso, timeout=90):
    """Waits until every input topic is committed by its group; returns the lag left."""
    end = time.time() + timeout
    left = None
    while time.time() < end:
        left = sum(lag(iso.bootstrap, iso.groups[s], [iso.topic(t) for t in ts]) for s, ts in INPUTS.items())
        if left == 0:
            return 0
        time.sleep(1)
    return left


def judge(iso, work, killer, runs):
    """The checks after drive() (the workload flushed): every input committed, `loadctl verify
    --topics` (with the stack's build_dir loadctl), the ledger's run statuses, every instance
    stopped with SIGTERM exits 0, no partition granted twice, no instance died unkilled, every
    one of `runs` final and SUCCESS. Prints what fails and a ledger line; returns {"ok",
    "verdict" (of verify), "statuses", "left", "unclean"}."""
    left = settle_inputs(iso)
    rc, checks = loadctl_verify(iso)
    verdict = "PASS" if rc == 0 else "FAIL"
    bad = {n: c["violations"] for n, c in checks.items() if c["violations"]}
    if bad:
        say("loadctl verify: %s" % bad)
        for n in bad:
            say("  %s: %s" % (n, checks[n].get("examples", [])[:3]))
    conn = iso.stack.db()
    with conn.cursor() as cur:
        cur.execute("SELECT status, count(*) FROM nifi_ops.load_run GROUP BY status ORDER BY status")
        statuses = dict(cur.fetchall())
    conn.close()
    for run_id, stage, secs in work.stuck():
        say("  stuck: run %s waits in %s for %.0f s" % (run_id, stage, secs))
    codes = iso.stack.stop_all()
    unclean = {k: v for k, v in codes.items() if v != 0}
    if unclean:
        say("instances that did not stop cleanly on SIGTERM: %s (logs in %s)" % (unclean, iso.stack.log_dir))
    if work.double_grants:
        say("partitions granted to two workers (claim CAS broken): %s" % sorted(work.double_grants)[:10])
    if killer.unexpected:
        say("instances that died without being killed: %s" % killer.unexpected)
    ok = (work.final() == runs and statuses.get("SUCCESS", 0) == runs and rc == 0 and left == 0
          and not unclean and not killer.unexpected and not work.double_grants)
    say("ledger: %s; input lag at the end %s; rejected replies (duplicates, late copies) %s" % (
        statuses, left, work.rejected or {}))
    return {"ok": ok, "verdict": verdict, "statuses": statuses, "left": left, "unclean": unclean}


def main():
    a = parse()
    say("chaos drill: mode %s, seed %d, %d runs, >= %d kills, one every %.1f s on average "
        "(replay: scripts/drill.sh chaos --mode %s --seed %d)" % (a.mode, a.seed, a.runs, a.kills, a.kill_every,
                                                                  a.mode, a.seed))
    rnd = random.Random(a.seed)
    iso = Isolated("chaos")
    say("database %s, topic prefix %s, logs in %s" % (iso.dbname, iso.prefix, iso.stack.log_dir))
    nifi = Nifi(iso.bootstrap, iso.prefix)
    spread = 0.85 * a.kills * a.kill_every
    work = Workload(nifi, rnd, a.seed, a.runs, spread, a.max_delay, a.dup_rate, a.rival_rate)
    killer = Killer(iso.stack, rnd, a.kill_every)
    ok = False
    verdict = "NOT RUN"
    try:
        killer.start_all()
        duration = drive(a, iso, work, killer)
        nifi.flush()
        res = judge(iso, work, killer, a.runs)
        verdict, statuses = res["verdict"], res["statuses"]
        ok = res["ok"] and killer.total() >= a.kills
        say("CHAOS seed=%d mode=%s runs_final=%d/%d ledger_success=%d kills=%d (%s) restarts=%d unexpected_exits=%d"
            " events_sent=%d duplicates=%d rival_claims=%d double_grants=%d validate_commands=%d"
            " longest_reply_gap=%.1fs longest_stage_wait=%.1fs duration=%.0fs verify=%s result=%s" % (
                a.seed, a.mode, work.final(), a.runs, statuses.get("SUCCESS", 0), killer.total(),
                " ".join("%s=%d" % (s, killer.kills[s]) for s in SERVICES), killer.restarts,
                len(killer.unexpected), work.sent, work.duplicates, work.rival_claims, len(work.double_grants),
                work.commands, work.longest_gap, work.longest_wait, duration, verdict, "PASS" if ok else "FAIL"))
    finally:
        work.close()
        iso.close(drop=ok and not a.keep)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
