#!/usr/bin/python3
"""The benchmark driver of scripts/bench.sh (issue 8): chunk events per second of ll-completion on
a durable PostgreSQL, with the loop's default settings and with loop.batch_max=1, next to pgbench
running the service's own statements: the per-message ones (scripts/bench/chunk.sql), 1 and
--pgbench-batch per transaction, and the set-based ones as the service groups them for a poll batch
(pgbench_bulk.py); statements, commits and RSS per event; latency from a run's last chunk to its
validate-run command; a run held by an early chunk.

It needs the environment of scripts/env.sh up in $LL_RUN_DIR (durable, with pg_stat_statements)
and a build in $LL_BUILD_DIR. Each measurement gets a ledger database and a topic set of its own
(llsim.drills.Isolated). Figures go to stdout, and as JSON to --json.

Timing: the chunk events of a workload are produced while ll-completion is stopped; then it is
started and a read_committed reader counts its chunk outcomes. events/s is given twice: over the
replies' own timestamps, first to last (the service's pace once it runs), and from the service's
start to the last reply visible to the reader (start-up and the last commit included).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402

from llsim import avroframe  # noqa: E402
from llsim.avroframe import REPO  # noqa: E402
from llsim.drills import Isolated, watermarks  # noqa: E402
from llsim.kafkaio import SCHEMAS  # noqa: E402
from llsim.scenario import Run  # noqa: E402
import bench_history  # noqa: E402
import bench_scale  # noqa: E402
import pgbench_bulk  # noqa: E402

ROWS_PER_CHUNK = 100
CHUNK_SQL = os.path.join(REPO, "scripts", "bench", "chunk.sql")
CHUNK_END_SQL = os.path.join(REPO, "scripts", "bench", "chunk_end.sql")


def say(msg=""):
    print(msg, flush=True)


def bench_run(partitions, chunks, run_id=None):
    """A run of `partitions` non-empty partitions of `chunks` chunks each (100 rows a chunk)."""
    run_id = run_id or str(uuid.uuid4())
    r = Run(run_id=run_id, business_key="bench-" + run_id, empty=(), partitions=partitions)
    for p in r.parts:
        p["expectedRowCount"] = chunks * ROWS_PER_CHUNK
    return r


def numbered_id(prefix, i):
    """The run id pgbench builds in SQL for run i (scripts/bench/chunk.sql)."""
    return "%s-0000-4000-8000-%012d" % (prefix, i)


# -- Kafka -------------------------------------------------------------------------------------

class Sender:
    """An idempotent producer of pre-encoded NiFi events. Its record batches are at most 16 KiB
    (batch.size 16384, the default of Kafka's Java producer, which NiFi's PublishKafka uses):
    librdkafka's own 1 MB would hand the services, on a pre-produced backlog, record batches that
    no NiFi flow writes, and a consumer fetches a record batch whole whatever its fetch sizes
    (KIP-74)."""

    def __init__(self, bootstrap, prefix, linger_ms=5, ack_logical=None):
        self.prefix = prefix
        # (produce call, delivery report) of every record of topic ack_logical, wall seconds: the
        # broker's own answer time for this producer (the reports are taken at each send's poll)
        self.ack_logical, self.acks = ack_logical, []
        self.p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                           "linger.ms": linger_ms, "batch.size": 16384,
                           "queue.buffering.max.messages": 1000000,
                           "log_level": 3})  # no notices about the topics a phase deletes

    @staticmethod
    def encode(logical, record):
        return avroframe.encode(record, SCHEMAS[logical], "bare")

    def send(self, logical, value, key, partition=None):
        kw = {} if partition is None else {"partition": partition}
        if logical == self.ack_logical:
            t = time.time()
            kw["on_delivery"] = lambda err, msg: err is None and self.acks.append((t, time.time()))
        while True:
            try:
                self.p.produce(self.prefix + logical, value=value, key=key.encode(), **kw)
                break
            except BufferError:
                self.p.poll(0.05)
        self.p.poll(0)

    def flush(self):
        assert self.p.flush(60) == 0, "messages not delivered to the broker"


class Counter:
    """A read_committed reader of one topic from its current end that counts the records whose
    key is one of `keys`, without decoding them: (record timestamp ms, time seen) of each, and
    with decode=True the decoded values too."""

    def __init__(self, bootstrap, topic, keys, logical=None, decode=False):
        self.keys = {k.encode() for k in keys}
        self.schema = SCHEMAS.get(logical) if decode else None
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": "llbench-" + uuid.uuid4().hex,
                           "enable.auto.commit": False, "isolation.level": "read_committed",
                           "log_level": 3})
        self.c.assign([TopicPartition(topic, p, hi) for p, (lo, hi) in watermarks(bootstrap, topic).items()])
        self.topic = topic
        self.seen = []   # (timestamp ms, wall time seen, key)
        self.values = []
        # connected and fetching before anything is timed: a consumer assigned less than about a
        # second ago sees a new record only after its first fetch (up to fetch.wait.max.ms, 500
        # ms, later: measured), which a flow of single records would count as the services' time
        ready = time.time() + 1.2
        while time.time() < ready:
            self.poll(0.2)

    def poll(self, timeout=0.2):
        # consume(n, timeout) waits for n records or the whole timeout: poll() returns with the
        # first record, then what is already fetched is taken without waiting (the time a record
        # is seen is the reader's, not the reader's poll period)
        first = self.c.poll(timeout)
        if first is None:
            return
        for m in [first] + self.c.consume(2000, 0):
            if m.error() or m.key() not in self.keys:
                continue
            self.seen.append((m.timestamp()[1], time.time(), m.key().decode()))
            if self.schema:
                self.values.append(avroframe.decode(m.value(), self.schema))

    def wait(self, count, timeout, partial_after=None, key=None):
        """Until `count` records (of `key` only, if given) are seen, and returns them; after
        partial_after seconds (if given) returns what was seen so far instead of raising at
        timeout."""
        end = time.time() + timeout
        stop = time.time() + partial_after if partial_after else None
        while True:
            mine = self.seen if key is None else [x for x in self.seen if x[2] == key]
            if len(mine) >= count or (stop and time.time() > stop and mine):
                return mine
            if time.time() > end:
                raise TimeoutError("%s: %d of %d records%s after %ss" % (
                    self.topic, len(mine), count, "" if key is None else " of " + key, timeout))
            self.poll()

    def close(self):
        self.c.close()


def admit(iso, runs, claim=True, timeout=120):
    """Run requests, manifests and (claim=True) every claim of `runs`, each step waited for and
    checked ACCEPTED (registrar and claimer must run)."""
    s = Sender(iso.bootstrap, iso.prefix)
    keys = [r.run_id for r in runs]
    steps = [("run-requests", "run-decisions", lambda r: [r.run_request()]),
             ("manifests", "manifest-decisions", lambda r: [r.manifest()])]
    if claim:
        steps.append(("partition-claims", "claim-decisions", lambda r: [r.claim(p) for p in r.nonempty()]))
    for logical, reply, records in steps:
        c = Counter(iso.bootstrap, iso.topic(reply), keys, reply, decode=True)
        n = 0
        for r in runs:
            for rec in records(r):
                s.send(logical, s.encode(logical, rec), r.run_id)
                n += 1
        s.flush()
        c.wait(n, timeout)
        bad = [v for v in c.values if v["outcome"] != "ACCEPTED"]
        c.close()
        assert not bad, "%s: %d not ACCEPTED, e.g. %s" % (reply, len(bad), bad[0])


def produce_chunks(iso, runs):
    """Every chunk of `runs`, run by run, partition by partition, in chunk order; returns the count."""
    s = Sender(iso.bootstrap, iso.prefix, linger_ms=20)
    n = 0
    for r in runs:
        for pid in r.nonempty():
            for c in r.chunks(pid, rows_per_chunk=ROWS_PER_CHUNK):
                s.send("chunks", s.encode("chunks", c), r.run_id)
                n += 1
    s.flush()
    return n


# -- the database ------------------------------------------------------------------------------

def pg(iso, sql, args=()):
    c = iso.stack.db()
    try:
        with c.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else None
    finally:
        c.close()


def stat_reset(iso):
    pg(iso, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    pg(iso, "SELECT pg_stat_statements_reset()")
    return pg(iso, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")[0][0]


def stat_read(iso, role):
    """Commits of the database (pg_stat_database) and the top-level statements of `role` in it
    (pg_stat_statements): [(calls, total ms, rows, query)] most time first."""
    commits = pg(iso, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")[0][0]
    rows = pg(iso, "SELECT s.calls, s.total_exec_time, s.rows, s.query FROM pg_stat_statements s"
                   " JOIN pg_roles r ON r.oid = s.userid JOIN pg_database d ON d.oid = s.dbid"
                   " WHERE r.rolname = %s AND d.datname = current_database() ORDER BY 2 DESC", (role,))
    return commits, rows


def vm_hwm(pid):
    """VmHWM of a process in KiB (None when gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def proc_status(pid, keys=("VmHWM", "RssFile", "RssAnon")):
    """{key: KiB} of /proc/<pid>/status (missing keys absent)."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in keys:
                out[k] = int(v.split()[0])
    return out


def floor(args):
    """The memory floor (issue 8's RSS target): ll-rss-floor (scripts/bench/rss_floor.c: libpq and
    librdkafka only, connected, a transactional producer and a subscribed consumer) and each
    service started on an empty ledger, idle for --floor-seconds; {name: {VmHWM, RssFile, RssAnon}}."""
    say("-- floor: the libraries alone and each service at rest (%d s)" % args.floor_seconds)
    iso = Isolated("benchfloor")
    res = {}
    try:
        exe = os.path.join(os.environ["LL_BUILD_DIR"], "ll-rss-floor")
        out = subprocess.run([exe, iso.bootstrap, iso.stack.conninfo("postgres"), iso.topic("chunks"),
                              str(args.floor_seconds)], capture_output=True, text=True, timeout=120, check=True)
        w = out.stdout.split()
        res["libraries"] = {w[i]: int(w[i + 1]) for i in range(0, len(w) - 1, 2)}
        procs = {s: iso.stack.start(s) for s in ("registrar", "claimer", "completion", "dispatcher")}
        time.sleep(args.floor_seconds)
        for s, p in procs.items():
            res[s] = proc_status(p.pid)
    finally:
        iso.close()
    for k, v in res.items():
        say("   %-12s VmHWM %6d KiB = file-backed %6d + anonymous %6d" % (k, v["VmHWM"], v["RssFile"], v["RssAnon"]))
    return res


def short(q, n=60):
    q = " ".join(q.split())
    return q if len(q) <= n else q[:n - 1] + "…"


# -- measurements ------------------------------------------------------------------------------

def pgbench_prefix(s):
    """The run-id prefix of pgbench's run set number s (admitted by throughput(pgbench_sets=...))."""
    return "%08x" % (0xbbbbbbbb + s)


def broker_jit_ms():
    """CPU ms the broker's JIT compiler threads (HotSpot's "C1/C2 CompilerThread") have used so
    far, or None when the broker's pid is not known ($LL_RUN_DIR/kafka/kafka.pid, env.sh)."""
    try:
        with open(os.path.join(os.environ["LL_RUN_DIR"], "kafka", "kafka.pid")) as f:
            pid = int(f.read().strip())
        tasks = os.listdir("/proc/%d/task" % pid)
    except (KeyError, OSError, ValueError):
        return None
    ticks = 0
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
                if not f.read().startswith(("C1 ", "C2 ")):
                    continue
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                w = f.read().rsplit(")", 1)[1].split()
            ticks += int(w[11]) + int(w[12])  # utime, stime
        except OSError:
            continue  # a compiler thread that ended
    return ticks * 1000.0 / os.sysconf("SC_CLK_TCK")


def jit_since(before):
    """The broker's JIT compilers' CPU ms since broker_jit_ms() gave `before`, or None."""
    after = broker_jit_ms()
    return after - before if before is not None and after is not None else None


def warm_up(args):
    """Unmeasured passes until the broker is warm, each of the default workload with twice the runs
    and twice the chunks (four times the events): at least --warmup-passes, then more (up to
    --warmup-max-passes) while a pass still costs the broker's JIT compilers --warmup-jit-ms or more
    of CPU per 1,000 events. A fresh broker's compilers took 9.4 s of CPU over twelve 8,000-event
    passes and still 42 ms per 1,000 events in the last, bursts of a core beside the measured loop
    and PostgreSQL; after about 600,000 events they took 16, and the same build's loop ran at
    25,000-28,000 events/s there against 20,900 after the twelve passes (docs/performance-history.md,
    2026-12-02, session 12). Returns [(events, JIT ms or None)] per pass."""
    jit = []
    runs, chunks = args.runs * 2, args.chunks * 2
    for i in range(args.warmup_max_passes):
        before = broker_jit_ms()
        f, _ = throughput(args, "warm-up %d (not measured)" % (i + 1), runs, args.partitions, chunks, {})
        ms = jit_since(before)
        jit.append((f["produced"], ms))
        per_k = ms * 1000.0 / f["produced"] if ms is not None else None
        say("   the broker's JIT compilers: %s ms of CPU during the pass, %s per 1,000 events"
            % (fmt(ms), fmt(per_k)))
        if i + 1 >= args.warmup_passes and (per_k is None or per_k < args.warmup_jit_ms):
            break
    else:
        say("   WARNING: the broker's JIT compilers still worked after %d warm-up passes" % args.warmup_max_passes)
    return jit


def throughput(args, label, runs_n, parts, chunks, settings, pgbench_sets=0, keep=False, max_seconds=None):
    """Chunk events/s of ll-completion over a pre-produced workload; returns (figures, iso).
    max_seconds: stop counting after that long and measure over the replies seen so far."""
    say("-- %s: %d runs x %d partitions x %d chunks, completion settings %s" %
        (label, runs_n, parts, chunks, settings or "default"))
    iso = Isolated("bench")
    st = iso.stack
    reg, cla = st.start("registrar"), st.start("claimer")
    runs = [bench_run(parts, chunks) for _ in range(runs_n)]
    extra = []
    for s in range(pgbench_sets):
        pre = pgbench_prefix(s)
        extra += [bench_run(parts, chunks, run_id=numbered_id(pre, i)) for i in range(runs_n)]
    t = time.time()
    admit(iso, runs + extra)
    say("   admitted %d runs (%d for pgbench) in %.1f s" % (len(runs) + len(extra), len(extra), time.time() - t))
    total = produce_chunks(iso, runs)
    counter = Counter(iso.bootstrap, iso.topic("chunk-outcomes"), [r.run_id for r in runs])
    commits0 = stat_reset(iso)
    t0 = time.time()
    jit0 = broker_jit_ms()
    comp = st.start("completion", settings=settings)
    seen = list(counter.wait(total, args.timeout, partial_after=max_seconds))
    t_end = seen[-1][1]
    jit = jit_since(jit0)
    counter.close()
    partial = len(seen) < total
    hwm = {"completion": vm_hwm(comp.pid), "registrar": vm_hwm(reg.pid), "claimer": vm_hwm(cla.pid)}
    st.stop("completion-0")
    time.sleep(0.5)
    commits1, stmts = stat_read(iso, "ll_completion")
    files = pg(iso, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id = ANY(%s::uuid[])",
               ([r.run_id for r in runs],))[0][0]
    done = pg(iso, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id = ANY(%s::uuid[])"
                   " AND status = 'EXTRACTED_VALIDATED'", ([r.run_id for r in runs],))[0][0]
    assert partial or (files == total and done == runs_n), "%s: %d files of %d, %d runs of %d validated" % (
        label, files, total, done, runs_n)
    n = len(seen)  # rates: over the replies seen
    applied = files  # statements and commits: per applied chunk (a stopped service may have
    # applied a few whose replies were not visible yet)
    ts = sorted(x[0] for x in seen)
    span = max(ts[-1] - ts[0], 1) / 1000.0
    tail = max(1, n // 10)
    tail_span = max(ts[-1] - ts[-tail - 1], 1) / 1000.0 if n > tail else span
    calls = sum(r[0] for r in stmts)
    server_ms = sum(r[1] for r in stmts)
    commit_calls = sum(r[0] for r in stmts if r[3].strip().upper().startswith("COMMIT"))
    f = {"label": label, "runs": runs_n, "partitions": parts, "chunks": chunks, "events": n,
         "produced": total, "applied": applied, "partial": partial, "settings": settings,
         "eps_first_last": n / span, "eps_start_last": n / (t_end - t0),
         "ms_per_event": span * 1000.0 / n, "ms_per_event_last10pct": tail_span * 1000.0 / tail,
         "db_commits_per_event": (commits1 - commits0 - 1) / applied,  # 1: the read of commits0
         "commit_statements_per_event": commit_calls / applied,
         "statements_per_event": calls / applied, "server_ms_per_event": server_ms / applied,
         "top_statements": [(c, round(ms, 1), short(q)) for c, ms, _r, q in stmts[:8]], "vm_hwm_kib": hwm,
         "broker_jit_ms": jit}
    if partial:
        say("   stopped after %.0f s: %d of %d replies seen, %d chunks applied" % (max_seconds, n, total, applied))
    say("   %d events: %.0f/s (first→last reply), %.0f/s (start→last reply), %.3f ms/event,"
        " %.2f statements/event; the broker's JIT compilers %s ms of CPU meanwhile"
        % (n, f["eps_first_last"], f["eps_start_last"], f["ms_per_event"], f["statements_per_event"],
           fmt(f["broker_jit_ms"])))
    if not keep:
        iso.close()
        iso = None
    return f, iso


def run_pgbench(iso, script_text, name, tx, defines, pre, runs_n, files_n):
    """pgbench -c 1 -M prepared, `tx` transactions of the script, as ll_completion; afterwards every
    run whose id starts with `pre` must be EXTRACTED_VALIDATED with its `files_n` file rows in
    all. Returns (tps, wall seconds)."""
    script = os.path.join(iso.stack.conf_dir, name)
    with open(script, "w") as f:
        f.write(script_text)
    env = dict(os.environ, PGHOST=iso.stack.pg["host"], PGPORT=str(iso.stack.pg["port"]))
    cmd = [os.path.join(iso.stack.env.get("LL_PG_BINDIR", "/usr/lib/postgresql/15/bin"), "pgbench"), "-n",
           "-c", "1", "-M", "prepared", "-t", str(tx), "-U", "ll_completion"]
    for k, v in defines:
        cmd += ["-D", "%s=%s" % (k, v)]
    cmd += ["-D", "pre=" + pre, "-f", script, iso.dbname]
    stat_reset(iso)
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.time() - t
    if p.returncode != 0:
        raise RuntimeError("pgbench failed (%s): %s %s" % (script, p.stdout[-2000:], p.stderr[-2000:]))
    _commits, stmts = stat_read(iso, "ll_completion")
    tps = next(float(line.split("=")[1].split()[0]) for line in p.stdout.splitlines() if line.startswith("tps"))
    done = pg(iso, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id::text LIKE %s"
                   " AND status = 'EXTRACTED_VALIDATED'", (pre + "%",))[0][0]
    files = pg(iso, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id::text LIKE %s", (pre + "%",))[0][0]
    assert done == runs_n and files == files_n, "pgbench (%s): %d of %d runs validated, %d of %d files" % (
        script, done, runs_n, files, files_n)
    return tps, wall, {"statements_per_event": sum(r[0] for r in stmts) / files_n,
                       "server_ms_per_event": sum(r[1] for r in stmts) / files_n,
                       "top_statements": [(c, round(ms, 1), short(q)) for c, ms, _r, q in stmts[:8]]}


def pgbench(args, iso, parts, chunks, runs_n, per_tx, pre):
    """pgbench -c 1 over scripts/bench/chunk.sql, per_tx chunks per transaction, on the runs whose
    ids start with `pre` (claimed by throughput()); tps in chunks per second."""
    total = runs_n * parts * chunks
    while total % per_tx:  # whole transactions only: every run of the set is completed
        per_tx -= 1
    body = open(CHUNK_SQL).read()
    end = open(CHUNK_END_SQL).read()
    if per_tx > 1:  # a savepoint per message, as batch.c takes them
        body = "SAVEPOINT m;\n" + body
    tx = total // per_tx
    tps, wall, st = run_pgbench(iso, "BEGIN ISOLATION LEVEL READ COMMITTED;\n" + body * per_tx + end + "COMMIT;\n",
                            "chunk_tx%d.sql" % per_tx, tx, [("n", -1), ("C", chunks), ("P", parts)], pre,
                            runs_n, total)
    f = {"kind": "per-message", "per_tx": per_tx, "transactions": tx, "events": tx * per_tx,
         "eps": tps * per_tx, "wall_s": wall, **st}
    say("-- pgbench %d chunk(s) per transaction: %d chunks, %.0f chunks/s, %.2f statements/chunk,"
        " %.3f server ms/chunk" % (per_tx, tx * per_tx, f["eps"], st["statements_per_event"],
                                   st["server_ms_per_event"]))
    return f


def pgbench_set_based(args, iso, parts, chunks, runs_n, per_tx, pre):
    """pgbench -c 1 over the set-based statements (pgbench_bulk.py), per_tx chunks per transaction
    (the service's poll batch: whole transactions only), on the runs whose ids start with `pre`; tps in chunks per second."""
    total = runs_n * parts * chunks
    per_tx = min(per_tx, total)
    while per_tx > 2 and total % per_tx:
        per_tx -= 1
    if total % per_tx:
        raise RuntimeError("pgbench set-based: no batch of 2 or more divides %d chunks" % total)
    tx = total // per_tx
    text = pgbench_bulk.script(REPO, per_tx, chunks, parts, open(CHUNK_SQL).read())
    tps, wall, st = run_pgbench(iso, text, "chunk_bulk_tx%d.sql" % per_tx, tx,
                            [("t", -1), ("N", per_tx), ("C", chunks), ("P", parts)], pre, runs_n, total)
    f = {"kind": "set-based", "per_tx": per_tx, "transactions": tx, "events": tx * per_tx,
         "eps": tps * per_tx, "wall_s": wall, **st}
    say("-- pgbench set-based, %d chunks per transaction: %d chunks, %.0f chunks/s, %.2f statements/chunk,"
        " %.3f server ms/chunk" % (per_tx, tx * per_tx, f["eps"], st["statements_per_event"],
                                   st["server_ms_per_event"]))
    for c, ms, q in st["top_statements"]:
        say("    %7d %9.1f  %s" % (c, ms, q))
    return f


def standby(args, single, single_bulk):
    """The default workload with a synchronous standby (scripts/bench/standby.sh: a streaming
    replica of the benchmark's cluster on this machine, synchronous_standby_names set): --standby-
    repeat passes, each a loop pass followed at once by a set-based pgbench pass on its ledger, as
    the single node's. Returns their medians beside the single node's (same run of the script)."""
    script = os.path.join(REPO, "scripts", "bench", "standby.sh")
    subprocess.run([script, "up"], check=True, timeout=300)
    passes, bulk = [], []
    try:
        for i in range(args.standby_repeat):
            a, iso = throughput(args, "loop default, synchronous standby, pass %d of %d" % (i + 1, args.standby_repeat),
                                args.runs, args.partitions, args.chunks, {}, pgbench_sets=1, keep=True)
            passes.append(a)
            try:
                bulk.append(pgbench_set_based(args, iso, args.partitions, args.chunks, args.runs,
                                              args.pgbench_bulk_batch, pgbench_prefix(0)))
            finally:
                iso.close()
    finally:
        subprocess.run([script, "down"], timeout=300)
    loop = median_of(passes, "eps_first_last")["eps_first_last"]
    pgb = median_of(bulk, "eps")["eps"]
    f = {"passes": [x["eps_first_last"] for x in passes], "pgbench_passes": [x["eps"] for x in bulk],
         "eps": loop, "pgbench_eps": pgb, "single_eps": single, "single_pgbench_eps": single_bulk,
         "ratio_to_single": loop / single if single else None,
         "pgbench_ratio_to_single": pgb / single_bulk if single_bulk else None,
         "db_commits_per_event": median_of(passes, "eps_first_last")["db_commits_per_event"]}
    say("   synchronous standby: loop %.0f/s (single node %.0f/s, x%.2f); pgbench set-based %.0f/s (single node"
        " %s/s, x%s)" % (loop, single, f["ratio_to_single"] or 0, pgb, fmt(single_bulk),
                         fmt(f["pgbench_ratio_to_single"], "%.2f")))
    return f


def kafka_data():
    """Where the broker keeps its log segments: (path, file system type as `stat -f` names it, as
    scripts/bench.sh prints it), from the environment's run dir (bench.sh puts them on a tmpfs,
    off the disk of PostgreSQL's WAL, unless --kafka-data disk), or None outside an env.sh
    environment."""
    run_dir = os.environ.get("LL_RUN_DIR")
    if not run_dir or not os.path.exists(os.path.join(run_dir, "kafka", "data")):
        return None
    path = os.path.realpath(os.path.join(run_dir, "kafka", "data"))
    out = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True)
    return (path, out.stdout.strip() or "?")


def sched_autogroup():
    """kernel.sched_autogroup_enabled now ("0"/"1"), or "n/a" without the knob: with autogroup on, the
    CPU is shared between sessions and the broker's bursts wait for its session's turn (bench.sh
    turns it off for the run; docs/performance-history.md, 2026-12-02)."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip()
    except OSError:
        return "n/a"


def latency(args, rate):
    """p50/p99 from a run's last chunk produced to its validate-run command seen by a
    read_committed reader, under a paced load of `rate` chunk events/s (all services run)."""
    parts, chunks = args.partitions, args.latency_chunks or args.chunks
    per_run = parts * chunks
    n_runs = max(5, int(math.ceil(rate * args.latency_seconds / per_run)))
    n_warm = int(math.ceil(rate * args.latency_warmup / per_run))
    say("-- latency: %d runs x %d partitions x %d chunks paced at %.0f events/s, after %d runs (%.0f s) not"
        " measured" % (n_runs, parts, chunks, rate, n_warm, args.latency_warmup))
    iso = Isolated("benchlat")
    st = iso.stack
    procs = {s: st.start(s) for s in ("registrar", "claimer", "completion")}
    procs["dispatcher"] = st.start("dispatcher", settings={"dispatch.poll_interval": "PT5S",
                                                           "dispatch.lease": "PT%dS" % LEASE_S,
                                                           "dispatch.backoff_min": "PT5S"})
    warm = [bench_run(parts, chunks) for _ in range(n_warm)]
    runs = [bench_run(parts, chunks) for _ in range(n_runs)]
    admit(iso, warm + runs)
    cmds = Counter(iso.bootstrap, iso.topic("validate-run-commands"), [r.run_id for r in runs])
    stop = threading.Event()

    def read():
        while not stop.is_set():
            cmds.poll(0.05)
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    # linger.ms 5, the default of Kafka 4's Java producer (NiFi's PublishKafka): a producer
    # sending 3,000 records/s one request each (linger 0) costs the broker, on the same two
    # cores, more CPU than the services it feeds. The linger is inside the measured latency.
    s = Sender(iso.bootstrap, iso.prefix, linger_ms=5, ack_logical="chunks")
    plan, warm_ids = [], {r.run_id for r in warm}
    for r in warm + runs:
        cs = [c for pid in r.nonempty() for c in r.chunks(pid, rows_per_chunk=ROWS_PER_CHUNK)]
        for i, c in enumerate(cs):
            plan.append((r.run_id, s.encode("chunks", c), i == len(cs) - 1 and r.run_id not in warm_ids))
    last = {}
    t0 = time.time()
    for i, (rid, value, is_last) in enumerate(plan):
        delay = t0 + i / rate - time.time()
        if delay > 0:
            time.sleep(delay)
        s.send("chunks", value, rid)
        if is_last:
            last[rid] = time.time()
    s.flush()
    produced_s = time.time() - t0
    end = time.time() + args.timeout
    while len({k for _t, _w, k in cmds.seen}) < n_runs and time.time() < end:
        time.sleep(0.2)
    stop.set()
    reader.join()
    first_seen = {}
    for _ts, w, k in cmds.seen:
        first_seen.setdefault(k, w)
    lat = sorted((first_seen[k] - last[k]) * 1000.0 for k in last if k in first_seen)
    # the same load generator's produce call → the broker's acknowledgement, every chunk of the
    # measured part (after the warm-up): the broker's answer time under this load, a floor of the
    # command's latency (a chunk cannot be applied before the broker has appended it)
    t_measured = t0 + n_warm * per_run / rate  # when the first measured run's first chunk was due
    acks = sorted((b - a) * 1000.0 for a, b in s.acks if a >= t_measured)
    hwm = {k: vm_hwm(p.pid) for k, p in procs.items()}
    stages, stage_raw = latency_stages(iso, last, cmds.seen)
    cmds.close()
    iso.close()
    f = {"rate": rate, "runs": n_runs, "partitions": parts, "chunks": chunks, "warmup_runs": n_warm,
         "warmup_s": args.latency_warmup, "answered": len(lat),
         "produced_s": produced_s, "vm_hwm_kib": hwm,
         "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "max_ms": lat[-1] if lat else None, "stages": stages,
         "produce_ack_ms": spread(acks) + (len(acks),),
         "sched_autogroup": sched_autogroup(), "kafka_data": kafka_data(),
         "raw": {"lat": lat, "acks": acks, "stages": stage_raw}}  # pooled by latency_phases, then dropped
    say("   %d of %d commands: p50 %s ms, p99 %s ms" % (len(lat), n_runs, fmt(f["p50_ms"]), fmt(f["p99_ms"])))
    say("   the load generator's chunks, produce → broker ack: p50 %s ms, p99 %s ms, max %s ms (%d records)"
        % (fmt(pct(acks, 50), "%.1f"), fmt(pct(acks, 99), "%.1f"), fmt(acks[-1] if acks else None, "%.1f"), len(acks)))
    return f


# The steps between a run's last chunk produced and its command seen, from the ledger's own
# timestamps (same clock: one machine): the last file row written (the chunk applied, inside the
# completion's batch transaction), the outbox row inserted (same transaction), that transaction's
# commit (only with track_commit_timestamp = on), the dispatcher's lease (next_attempt_at minus
# dispatch.lease, first attempt), sent_at (marked SENT after the broker's ack), the command
# record's CreateTime (the dispatcher's produce call) and the reader seeing it.
LEASE_S = 60  # dispatch.lease of the latency phase (the default)
STAGES = ("produced→applied", "applied→outbox row", "outbox row→commit", "commit→lease", "outbox row→lease",
          "lease→produce", "produce→marked SENT", "marked SENT→seen")


def latency_stages(iso, last, seen):
    """({stage: (p50, p99, max) ms}, {stage: [ms, ...]}) over the runs answered at their first attempt."""
    commit_ts = pg(iso, "SELECT current_setting('track_commit_timestamp') = 'on'")[0][0]
    rows = pg(iso, "SELECT d.run_id::text, extract(epoch FROM (SELECT max(written_at) FROM nifi_ops.load_file f"
                   "  WHERE f.run_id = d.run_id)), extract(epoch FROM d.created_at), %s,"
                   " extract(epoch FROM d.next_attempt_at) - %d, extract(epoch FROM d.sent_at)"
                   " FROM nifi_ops.load_dispatch d LEFT JOIN nifi_ops.load_event e ON e.run_id = d.run_id"
                   "  AND e.event_name = 'EXTRACT_VALIDATED'"
                   " WHERE d.dispatch_type = 'VALIDATE_RUN' AND d.status = 'SENT' AND d.attempt_count = 1"
                   % ("extract(epoch FROM pg_xact_commit_timestamp(e.xmin))" if commit_ts else "NULL", LEASE_S))
    first = {}
    for ts, w, k in seen:
        first.setdefault(k, (ts / 1000.0, w))
    d = {s: [] for s in STAGES}
    for rid, applied, outbox, commit, lease, sent in rows:
        if rid not in last or rid not in first:
            continue
        created, w = first[rid]
        pts = [("produced→applied", last[rid], applied), ("applied→outbox row", applied, outbox),
               ("outbox row→lease", outbox, lease), ("lease→produce", lease, created),
               ("produce→marked SENT", created, sent), ("marked SENT→seen", sent, w)]
        if commit is not None:
            pts += [("outbox row→commit", outbox, commit), ("commit→lease", commit, lease)]
        for s, a, b in pts:
            if a is not None and b is not None:
                d[s].append((float(b) - float(a)) * 1000.0)
    out = {}
    for s in STAGES:
        xs = sorted(d[s])
        if xs:
            out[s] = spread(xs)
            say("   %-22s p50 %7.1f  p99 %7.1f  max %7.1f ms" % ((s,) + out[s]))
    return out, d


def latency_phases(args, rate):
    """latency() --latency-repeat times, its runs pooled: p50/p99/max (and the stages', the floor's)
    over every measured run of every phase, each phase's own figures beside them. One phase of
    40 s measures about 1,330 runs at 13,300 events/s, so its p99 is its 14th slowest: a single
    stall of a second or two anywhere on the machine makes it. Phases of the same build, minutes
    apart, gave p99s from 28 to 224 ms (docs/performance-history.md, session 14)."""
    phases = []
    for i in range(max(1, args.latency_repeat)):
        say("-- latency phase %d of %d" % (i + 1, args.latency_repeat))
        before = broker_jit_ms()
        f = latency(args, rate)
        f["jit_ms"] = jit_since(before)
        phases.append(f)
    raw = [f.pop("raw") for f in phases]
    lat = sorted(x for r in raw for x in r["lat"])
    acks = sorted(x for r in raw for x in r["acks"])
    stages = {}
    for s in STAGES:
        xs = sorted(x for r in raw for x in r["stages"][s])
        if xs:
            stages[s] = spread(xs)
    hwm = {}
    for f in phases:
        for k, v in f["vm_hwm_kib"].items():
            hwm[k] = max(hwm.get(k, 0), v or 0)
    first = phases[0]
    return dict(first, runs=sum(f["runs"] for f in phases), answered=len(lat), vm_hwm_kib=hwm,
                p50_ms=pct(lat, 50), p99_ms=pct(lat, 99), max_ms=lat[-1] if lat else None, stages=stages,
                produce_ack_ms=spread(acks) + (len(acks),),
                phases=[{k: f[k] for k in ("runs", "answered", "p50_ms", "p99_ms", "max_ms", "jit_ms",
                                           "produced_s")} for f in phases])


def median_of(figures, key):
    """The one of `figures` (dicts) whose `key` is the median (the lower middle of an even count)."""
    return sorted(figures, key=lambda f: f[key])[(len(figures) - 1) // 2]


def pct(xs, p):
    if not xs:
        return None
    return xs[max(0, int(math.ceil(p / 100.0 * len(xs))) - 1)]


def spread(xs):
    """(p50, p99, max) of the sorted list xs; Nones when it is empty."""
    return pct(xs, 50), pct(xs, 99), xs[-1] if xs else None


def fmt(v, spec="%.0f"):
    return "n/a" if v is None else spec % v


FLOW_REPLIES = ("run-decisions", "manifest-decisions", "claim-decisions", "validate-run-commands")


def flow_readers(iso, runs):
    """One reader per reply topic of flow(), for every run of `runs`, made once (each takes a
    second to be ready); close them after the flows."""
    return {t: Counter(iso.bootstrap, iso.topic(t), [r.run_id for r in runs]) for t in FLOW_REPLIES}


def flow(readers, run, sender, partition, timeout):
    """One run's whole flow through Kafka partition `partition` of every input topic, each step
    waited for as NiFi does, with `readers` of flow_readers(): (ms from its run request to its
    validate-run command, ms from its last chunk to the command)."""
    t0 = time.time()
    sender.send("run-requests", sender.encode("run-requests", run.run_request()), run.run_id, partition)
    sender.flush()
    readers["run-decisions"].wait(1, timeout, key=run.run_id)
    sender.send("manifests", sender.encode("manifests", run.manifest()), run.run_id, partition)
    sender.flush()
    readers["manifest-decisions"].wait(1, timeout, key=run.run_id)
    for pid in run.nonempty():
        sender.send("partition-claims", sender.encode("partition-claims", run.claim(pid)), run.run_id, partition)
    sender.flush()
    readers["claim-decisions"].wait(len(run.nonempty()), timeout, key=run.run_id)
    for pid in run.nonempty():
        for c in run.chunks(pid, rows_per_chunk=ROWS_PER_CHUNK):
            sender.send("chunks", sender.encode("chunks", c), run.run_id, partition)
    sender.flush()
    t_last = time.time()
    seen = readers["validate-run-commands"].wait(1, timeout, key=run.run_id)
    return (seen[0][1] - t0) * 1000.0, (seen[0][1] - t_last) * 1000.0


HELD_FLOWS = 5  # flows measured with and without the held run (after one warm-up flow)


def held(args):
    """Other runs' whole flows on the Kafka partition of a run held by an early chunk (its claim
    sent args.hold seconds late), and the same flows without the held run: HELD_FLOWS each, one
    after the other, after an unmeasured first flow (the services' first statements and the
    broker's first requests on the partition); medians and the worst."""
    say("-- held run: claim delayed %d s, another run's flow on the same Kafka partition" % args.hold)
    iso = Isolated("benchheld")
    st = iso.stack
    for s in ("registrar", "claimer", "dispatcher"):
        st.start(s)
    st.start("completion", settings={"loop.prerequisite_wait": "PT%dS" % (args.hold * 2 + 30)})
    s = Sender(iso.bootstrap, iso.prefix, linger_ms=0)
    flows = [bench_run(2, 5) for _ in range(2 * HELD_FLOWS + 1)]
    readers = flow_readers(iso, flows)
    flow(readers, flows[0], s, 0, args.timeout)  # warm-up
    base = [flow(readers, r, s, 0, args.timeout) for r in flows[1:HELD_FLOWS + 1]]
    h = bench_run(1, 2)
    admit_on(iso, s, h, 0)
    first = h.chunks("0000", token=h.claim("0000")["claimToken"], rows_per_chunk=ROWS_PER_CHUNK)
    outs = Counter(iso.bootstrap, iso.topic("chunk-outcomes"), [h.run_id])
    s.send("chunks", s.encode("chunks", first[0]), h.run_id, 0)
    s.flush()
    t_held = time.time()
    timer = threading.Timer(args.hold, lambda: (s.send("partition-claims", s.encode(
        "partition-claims", h.claim("0000")), h.run_id, 0), s.flush()))
    time.sleep(1.0)  # the early chunk reaches the service and waits for its claim
    timer.start()
    with_held = [flow(readers, r, s, 0, args.timeout + args.hold) for r in flows[HELD_FLOWS + 1:]]
    still_held = not outs.seen  # all measured while the early chunk still waited
    outs.wait(1, args.timeout + args.hold)
    held_answer_s = outs.seen[0][1] - t_held
    timer.join()
    outs.close()
    for r in readers.values():
        r.close()
    iso.close()
    def med(xs):
        return pct(sorted(xs), 50)
    f = {"hold_s": args.hold, "flows": HELD_FLOWS, "still_held": still_held,
         "without_ms": med([b[0] for b in base]), "with_ms": med([w[0] for w in with_held]),
         "without_last_ms": med([b[1] for b in base]), "with_last_ms": med([w[1] for w in with_held]),
         "without_max_ms": max(b[0] for b in base), "with_max_ms": max(w[0] for w in with_held),
         "held_answered_after_s": held_answer_s}
    f["added_ms"] = f["with_ms"] - f["without_ms"]
    say("   flow without %.0f ms, with the held run %.0f ms (medians of %d; held chunk answered after %.1f s%s)" %
        (f["without_ms"], f["with_ms"], HELD_FLOWS, held_answer_s, "" if still_held else
         "; WARNING: answered before the flows ended: raise --hold"))
    return f


def admit_on(iso, s, run, partition):
    """Run request and manifest of `run` through one Kafka partition (no claim)."""
    for logical, reply, rec in (("run-requests", "run-decisions", run.run_request()),
                                ("manifests", "manifest-decisions", run.manifest())):
        c = Counter(iso.bootstrap, iso.topic(reply), [run.run_id])
        s.send(logical, s.encode(logical, rec), run.run_id, partition)
        s.flush()
        c.wait(1, 60)
        c.close()


# -- report ------------------------------------------------------------------------------------

def report(res):
    a, b = res.get("default"), res.get("batch1")
    say("\n== loadledger benchmark (durable PostgreSQL: fsync, synchronous_commit, full_page_writes on)")
    if res.get("warmup"):
        say("warm-up: %d unmeasured passes of %d events, the broker's JIT compilers' CPU in each (ms): %s" % (
            len(res["warmup"]), res["warmup"][0][0], ", ".join(fmt(ms) for _n, ms in res["warmup"])))
    if a and b:
        say("chunk events/s, %d runs x %d partitions x %d chunks = %d events:" % (
            a["runs"], a["partitions"], a["chunks"], a["produced"]))
        say("  %-34s %12s %12s" % ("", "loop default", "batch_max=1"))
        if b["partial"]:
            say("  (batch_max=1 stopped after --batch1-seconds: timed over its first %d of %d events)" % (
                b["events"], b["produced"]))
        say("  %-34s %12.0f %12.0f   ratio %.2f" % ("first→last reply", a["eps_first_last"], b["eps_first_last"],
                                                   a["eps_first_last"] / b["eps_first_last"]))
        if len(a.get("passes", [])) > 1:
            say("  %-34s %s (the median's pass gives every figure of this column)" % (
                "  loop default, each pass", ", ".join("%.0f" % x for x in a["passes"])))
        say("  %-34s %12.0f %12.0f   ratio %.2f" % ("start→last reply", a["eps_start_last"], b["eps_start_last"],
                                                   a["eps_start_last"] / b["eps_start_last"]))
        say("  %-34s %12.2f %12.2f" % ("DB commits/event (pg_stat_database)", a["db_commits_per_event"],
                                       b["db_commits_per_event"]))
        say("  %-34s %12.2f %12.2f" % ("COMMIT statements/event", a["commit_statements_per_event"],
                                       b["commit_statements_per_event"]))
        say("  %-34s %12.2f %12.2f" % ("statements/event (= round trips", a["statements_per_event"],
                                       b["statements_per_event"]))
        say("  %-34s %12s %12s" % ("  when not pipelined)", "", ""))
        say("  %-34s %12.3f %12.3f" % ("server ms/event (pg_stat_statements)", a["server_ms_per_event"],
                                       b["server_ms_per_event"]))
        say("  %-34s %12.3f %12.3f" % ("wall ms/event", a["ms_per_event"], b["ms_per_event"]))
        say("  %-34s %12s %12s" % ("VmHWM completion KiB", a["vm_hwm_kib"]["completion"],
                                   b["vm_hwm_kib"]["completion"]))
        c = res.get("overlap")
        if c:
            say("  loop.overlap_commit=false (each batch's Kafka commit in line, before the next poll): %.0f"
                " events/s first→last, %.0f start→last; default/this %.2f" % (
                    c["eps_first_last"], c["eps_start_last"], a["eps_first_last"] / c["eps_first_last"]))
        say("  statements of the default run, most server time first (calls, total ms):")
        for c, ms, q in a["top_statements"]:
            say("    %7d %9.1f  %s" % (c, ms, q))
    for pb in res.get("pgbench", []):
        if pb.get("kind") == "set-based":
            line = "pgbench, set-based statements, %d chunks/transaction: %.0f chunks/s" % (pb["per_tx"], pb["eps"])
            if len(pb.get("passes", [])) > 1:
                line += " (median of %s)" % ", ".join("%.0f" % x for x in pb["passes"])
            if a:
                line += "; service/this ceiling = %.2f (medians)" % (a["eps_first_last"] / pb["eps"])
            say(line)
            if pb.get("pair_ratios"):
                say("  each loop pass / the pgbench pass right after it: %s; median %.2f" % (
                    ", ".join("%.2f" % x for x in pb["pair_ratios"]), pb["pair_ratio_median"]))
            continue
        line = "pgbench, same statements, %d chunk(s)/transaction: %.0f chunks/s" % (pb["per_tx"], pb["eps"])
        if pb["per_tx"] == 1 and a:
            line += "; service/pgbench = %.2f (default loop), %.2f (batch_max=1)" % (
                a["eps_first_last"] / pb["eps"], b["eps_first_last"] / pb["eps"] if b else float("nan"))
        elif a:
            line += "; service (default loop)/this ceiling = %.2f" % (a["eps_first_last"] / pb["eps"])
        say(line)
    sb = res.get("standby")
    if sb:
        say("durable rate with a synchronous standby (this machine: loopback, one disk; %d passes each):" %
            len(sb["passes"]))
        say("  loop default %.0f chunks/s (single node %.0f, x%.2f); pgbench set-based %.0f chunks/s (single node"
            " %s, x%s); loop/pgbench with the standby %.2f" % (
                sb["eps"], sb["single_eps"], sb["ratio_to_single"], sb["pgbench_eps"], fmt(sb["single_pgbench_eps"]),
                fmt(sb["pgbench_ratio_to_single"], "%.2f"), sb["eps"] / sb["pgbench_eps"]))
        say("  loop passes %s; pgbench passes %s" % (", ".join("%.0f" % x for x in sb["passes"]),
                                                      ", ".join("%.0f" % x for x in sb["pgbench_passes"])))
    c10, c10k = res.get("cost10"), res.get("cost10k")
    if c10 and c10k:
        say("per-event cost (default loop): %d chunks/partition %.3f ms (%d events); %d chunks/partition"
            " %.3f ms over all %d events, %.3f ms over the last 10%%; ratio %.2f (all), %.2f (last 10%%)" % (
                c10["chunks"], c10["ms_per_event"], c10["events"], c10k["chunks"], c10k["ms_per_event"],
                c10k["events"], c10k["ms_per_event_last10pct"], c10k["ms_per_event"] / c10["ms_per_event"],
                c10k["ms_per_event_last10pct"] / c10["ms_per_event"]))
    lat = res.get("latency")
    if lat:
        ph = lat.get("phases") or []
        say("last chunk → validate-run command visible (read_committed), %d runs of %d partitions x %d chunks at"
            " %.0f events/s (%s; %d phase(s), each after %d runs, %.0f s, not measured): p50 %s ms, p99 %s ms,"
            " max %s ms (%d of %d answered)"
            % (lat["runs"], lat["partitions"], lat["chunks"], lat["rate"], lat["rate_from"], max(1, len(ph)),
               lat["warmup_runs"], lat["warmup_s"], fmt(lat["p50_ms"]), fmt(lat["p99_ms"]), fmt(lat["max_ms"]),
               lat["answered"], lat["runs"]))
        if len(ph) > 1:
            say("  each phase, p50 / p99 / max ms (the broker's JIT compilers' CPU ms during it): " + ", ".join(
                "%s / %s / %s (%s)" % (fmt(f["p50_ms"]), fmt(f["p99_ms"]), fmt(f["max_ms"]), fmt(f["jit_ms"]))
                for f in ph))
        for s, (p50, p99, mx) in lat["stages"].items():
            say("  %-22s p50 %7.1f  p99 %7.1f  max %7.1f ms" % (s, p50, p99, mx))
        a50, a99, amax, an = lat["produce_ack_ms"]
        say("  the floor: the same load generator's chunks, produce call → broker ack (linger 5 ms included),"
            " p50 %s ms, p99 %s ms, max %s ms over %d records" % (fmt(a50, "%.1f"), fmt(a99, "%.1f"),
                                                                   fmt(amax, "%.1f"), an))
        ag = lat.get("sched_autogroup", "n/a")
        say("  kernel.sched_autogroup_enabled = %s during the phase%s" % (
            ag, " (the CPU shared between sessions: the broker's bursts wait for its session's turn;"
                " scripts/bench.sh turns it off when it may)" if ag == "1" else ""))
        kd = lat.get("kafka_data")
        if kd:
            say("  the broker's log segments: %s (%s)%s" % (kd[0], kd[1], "" if kd[1] == "tmpfs" else
                " (on PostgreSQL's disk: its writes and the WAL's fsyncs wait for each other;"
                " scripts/bench.sh puts them on a tmpfs unless --kafka-data disk)"))
    h = res.get("held")
    if h:
        say("held run (claim %d s late) on the same Kafka partition: another run's whole flow, median of %d,"
            " %.0f ms without, %.0f ms with (%+.0f ms), worst %.0f / %.0f ms; its last chunk → command %.0f / %.0f"
            " ms" % (h["hold_s"], h["flows"], h["without_ms"], h["with_ms"], h["added_ms"], h["without_max_ms"],
                     h["with_max_ms"], h["without_last_ms"], h["with_last_ms"]))
    hw = {}
    for k in ("default", "overlap", "batch1", "cost10", "cost10k", "latency"):
        for svc, v in ((res.get(k) or {}).get("vm_hwm_kib") or {}).items():
            if v:
                hw[svc] = max(hw.get(svc, 0), v)
    say("RSS high-water (VmHWM, max over the phases, KiB): " +
        ", ".join("%s %d" % (k, v) for k, v in sorted(hw.items())))
    fl = res.get("floor")
    if fl:
        say("RSS at rest (KiB, VmHWM = file-backed + anonymous): " + ", ".join(
            "%s %d = %d + %d" % (k, v["VmHWM"], v["RssFile"], v["RssAnon"]) for k, v in fl.items()))
    for k, why in res.get("not_measured", {}).items():
        say("not measured: %s: %s" % (k, why))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--chunks", type=int, default=50)
    ap.add_argument("--scale-chunks", type=int, default=10000, help="chunks per partition of the 1 x 2 run")
    ap.add_argument("--small-runs", type=int, default=100, help="runs of the 10-chunks-per-partition cost")
    ap.add_argument("--pgbench-batch", type=int, default=40,
                    help="chunks per transaction of the per-message ceiling (pgbench 15 crashed with 50"
                         " copies of the script)")
    ap.add_argument("--pgbench-bulk-batch", type=int, default=240,
                    help="chunks per transaction of the set-based ceiling (the default loop.batch_max; lowered"
                         " to divide the workload)")
    ap.add_argument("--repeat", type=int, default=5,
                    help="passes of the default workload and of the set-based pgbench; the median of each"
                         " is reported and compared")
    ap.add_argument("--warmup-passes", type=int, default=2,
                    help="unmeasured passes of the default workload, at least")
    ap.add_argument("--warmup-max-passes", type=int, default=16,
                    help="more warm-up passes while the broker's JIT compilers still work (--warmup-jit-ms)")
    ap.add_argument("--warmup-jit-ms", type=float, default=20,
                    help="the broker is warm once its JIT compiler threads take less CPU than this (ms) per"
                         " 1,000 events of a warm-up pass")
    ap.add_argument("--latency-seconds", type=float, default=40)
    ap.add_argument("--latency-repeat", type=int, default=3,
                    help="latency phases, each of --latency-seconds with fresh services and ledger; their runs"
                         " pooled for the percentiles, each phase's shown too")
    # The runs of the latency phase have the shape of the throughput workload (--chunks per
    # partition) by default: "half the measured throughput" is then half of the load measured.
    # Runs of 5 chunks a partition (the default before 2026-12-02, session 12) carry ten times the
    # gates, completions and dispatches per event, and at half the events/s of the throughput
    # workload kept the loop at about 83% of its capacity for that shape (docs/performance-history.md).
    ap.add_argument("--latency-chunks", type=int, default=0,
                    help="chunks per partition of the latency phase's runs (default: --chunks)")
    ap.add_argument("--latency-warmup", type=float, default=5,
                    help="seconds of the paced load before the measured runs (their latency not counted:"
                         " the producer's connection and the services' first batches)")
    ap.add_argument("--latency-rate", type=float, default=0,
                    help="chunk events/s of the latency phase (default 0: half of the default loop's measured rate)")
    ap.add_argument("--hold", type=int, default=30)
    ap.add_argument("--batch1-seconds", type=float, default=90,
                    help="stop the loop.batch_max=1 phase after this long (0: never) and time what was answered")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--floor-seconds", type=int, default=10, help="how long the floor phase's processes idle")
    ap.add_argument("--skip", default="",
                    help="comma list of phases to skip: warmup,pgbench,standby,overlap,cost,latency,held,floor")
    ap.add_argument("--standby-repeat", type=int, default=3,
                    help="passes of the default workload with a synchronous standby (phase standby)")
    ap.add_argument("--scaling", action="store_true",
                    help="run only the scaling phase (bench_scale.py; docs/scaling.md)")
    ap.add_argument("--scale-configs", default="3x1,3x2,3x3,6x1,6x3,6x6",
                    help="the scaling phase's configurations: partitions per topic x instances of ll-completion")
    ap.add_argument("--scale-repeat", type=int, default=3, help="passes of each scaling configuration")
    ap.add_argument("--scale-runs", type=int, default=40, help="runs of a scaling pass (of --partitions partitions)")
    ap.add_argument("--scale-chunks-per-part", type=int, default=100, help="chunks per partition of a scaling pass")
    ap.add_argument("--history", type=int, default=0, metavar="RUNS",
                    help="run only the history phase (bench_history.py; docs/performance.md): RUNS ended runs"
                         " generated over a year beside an empty ledger")
    ap.add_argument("--history-pairs", type=int, default=5, help="pairs (empty, history) of the history phase")
    ap.add_argument("--history-chunk-runs", type=int, default=150,
                    help="runs (of --partitions x --chunks) of the chunk path's workload in the history phase")
    ap.add_argument("--history-ticks", type=int, default=5, help="sweeper ticks measured per ledger")
    ap.add_argument("--history-flows", type=int, default=5,
                    help="small runs timed from admission to their validate-run command per ledger")
    ap.add_argument("--history-parts", type=int, default=8, help="partitions per generated run")
    ap.add_argument("--history-chunks", type=int, default=3, help="chunks per partition of a generated run")
    ap.add_argument("--history-warmup", type=int, default=1,
                    help="1: one unmeasured chunk-path pass on the empty ledger first; 0: none")
    ap.add_argument("--history-generate-timeout", type=float, default=3600,
                    help="seconds each half of the generation may take")
    ap.add_argument("--history-soak", type=int, default=600, metavar="SECONDS",
                    help="the history phase's soak on the history ledger after the pairs (issue 42 item 5): SECONDS of"
                         " chunk events paced at --history-soak-share of the pairs' chunk rate; 0 skips it")
    ap.add_argument("--history-soak-share", type=float, default=0.8,
                    help="the soak's pace: this share of the history ledger's median chunk events/s of the pairs")
    ap.add_argument("--history-soak-rate", type=float, default=0,
                    help="the soak's pace in chunk events/s instead (0: --history-soak-share)")
    ap.add_argument("--history-soak-parts", type=int, default=8, help="partitions per run of the soak")
    ap.add_argument("--history-soak-chunks", type=int, default=50,
                    help="chunks per partition of a soak run (50: the shape of the pairs' chunk path)")
    ap.add_argument("--history-soak-window", type=int, default=60,
                    help="seconds of each window of the soak's figures (the first and the last compared)")
    ap.add_argument("--history-soak-sweep", type=int, default=1,
                    help="the sweeper's recovery.sweeper_interval during the soak, seconds")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.repeat < 1 or args.warmup_passes < 0 or args.warmup_max_passes < args.warmup_passes:
        ap.error("--repeat must be at least 1, --warmup-passes at least 0 and at most --warmup-max-passes")
    skip = set(filter(None, args.skip.split(",")))
    res = {"not_measured": {}}
    t = time.time()
    if args.history:
        if args.history < 2 or args.history_pairs < 1 or args.history_ticks < 1 or args.history_flows < 1:
            ap.error("--history needs at least 2 runs, --history-pairs, --history-ticks and --history-flows at least 1")
        if args.history_soak < 0 or (args.history_soak and (
                args.history_soak_window < 1 or args.history_soak_parts < 1 or args.history_soak_chunks < 1
                or args.history_soak_sweep < 1 or (args.history_soak_rate or args.history_soak_share) <= 0
                or args.history_soak < 2)):
            ap.error("--history-soak SECONDS: 0, or 2 or more; its window, parts, chunks, sweep and pace positive")
        if args.history_soak and args.history_soak < 2 * args.history_soak_window:
            # a first and a last window to compare: a short soak (a smoke test) gets two
            args.history_soak_window = args.history_soak // 2
            say("bench.py: --history-soak-window %d s (two windows of a %d s soak)" % (
                args.history_soak_window, args.history_soak))
        res = {"history": bench_history.history(args, sys.modules[__name__]), "elapsed_s": time.time() - t}
        say("(measurements took %.0f s)" % res["elapsed_s"])
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1, default=str)
        return
    if args.scaling:
        try:
            bench_scale.parse_configs(args.scale_configs)
        except ValueError as e:
            ap.error(str(e))
        res = {"scaling": bench_scale.scaling(args, sys.modules[__name__]), "elapsed_s": time.time() - t}
        say("(measurements took %.0f s)" % res["elapsed_s"])
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1, default=str)
        return
    if "warmup" not in skip:
        res["warmup"] = warm_up(args)
    # The default workload lasts about half a second at the default loop's pace: one slow Kafka
    # commit or broker pause moves a single pass by a factor of two (9,217-20,151 events/s, one
    # build on one machine). So it runs --repeat times, each on a ledger and topics of its own, and so
    # does the set-based pgbench; the ratios use the medians. The machine's own speed drifts over
    # minutes too (set-based pgbench 21,196-27,372/s in one run of the script), so each loop pass
    # is followed at once by a set-based pgbench pass on the same ledger: a pair measured in the
    # same minute, whose ratio is printed with the median of the pairs' ratios (since 2026-12-02,
    # session 13; before, the pgbench passes ran together after the first loop pass).
    passes, bulk = [], []
    for i in range(args.repeat):
        sets = 0 if "pgbench" in skip else (3 if i == 0 else 1)  # the first pass: the per-message ceilings too
        a, iso = throughput(args, "loop default, pass %d of %d" % (i + 1, args.repeat), args.runs, args.partitions,
                            args.chunks, {}, pgbench_sets=sets, keep=sets > 0)
        passes.append(a)
        if iso:
            try:
                bulk.append(pgbench_set_based(args, iso, args.partitions, args.chunks, args.runs,
                                              args.pgbench_bulk_batch, pgbench_prefix(sets - 1)))
                say("   the pair's ratio (loop/pgbench set-based): %.2f" % (a["eps_first_last"] / bulk[-1]["eps"]))
                if i == 0:
                    res["pgbench"] = [pgbench(args, iso, args.partitions, args.chunks, args.runs, 1,
                                              pgbench_prefix(0)),
                                      pgbench(args, iso, args.partitions, args.chunks, args.runs,
                                              args.pgbench_batch, pgbench_prefix(1))]
            finally:
                iso.close()  # its services too, also when pgbench fails
    if bulk:
        pairs = [x["eps_first_last"] / y["eps"] for x, y in zip(passes, bulk)]
        res["pgbench"].append(dict(median_of(bulk, "eps"), passes=[x["eps"] for x in bulk], pair_ratios=pairs,
                                   pair_ratio_median=sorted(pairs)[(len(pairs) - 1) // 2]))
    a = res["default"] = dict(median_of(passes, "eps_first_last"), passes=[x["eps_first_last"] for x in passes])
    if "standby" not in skip:
        res["standby"] = standby(args, a["eps_first_last"], res["pgbench"][-1]["eps"] if bulk else None)
    if "overlap" not in skip:
        res["overlap"], _ = throughput(args, "loop.overlap_commit=false", args.runs, args.partitions,
                                       args.chunks, {"loop.overlap_commit": "false"})
    res["batch1"], _ = throughput(args, "loop.batch_max=1", args.runs, args.partitions, args.chunks,
                                  {"loop.batch_max": "1"}, max_seconds=args.batch1_seconds or None)
    if "cost" not in skip:
        res["cost10"], _ = throughput(args, "cost at 10 chunks/partition", args.small_runs, 2, 10, {})
        res["cost10k"], _ = throughput(args, "cost at %d chunks/partition" % args.scale_chunks, 1, 2,
                                       args.scale_chunks, {})
    if "latency" not in skip:
        res["latency"] = latency_phases(args, args.latency_rate or a["eps_first_last"] / 2.0)
        res["latency"]["rate_from"] = "--latency-rate" if args.latency_rate else \
            "half of the default loop's median first→last rate"
    if "held" not in skip:
        res["held"] = held(args)
    if "floor" not in skip:
        res["floor"] = floor(args)
    res["elapsed_s"] = time.time() - t
    report(res)
    say("(measurements took %.0f s)" % res["elapsed_s"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1, default=str)


if __name__ == "__main__":
    main()
