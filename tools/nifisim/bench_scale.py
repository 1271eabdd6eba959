"""The scaling phase of scripts/bench.sh --scaling (issue 41, docs/scaling.md): chunk events per
second of ll-completion with P partitions per input topic and N instances of the service in one
consumer group, for each configuration "PxN" of --scale-configs, next to what each event cost in
CPU in each process (the instances, PostgreSQL's processes, the broker, the load generator), and the
database connections each service holds.

Each pass has a ledger and topics of its own (llsim.drills.Isolated; every topic with P
partitions). The runs are admitted (registrar, claimer), N instances of ll-completion are started
and the pass waits until their group is stable: every instance's last rebalance line is an
assignment and the chunk topic's P partitions are each assigned once. Only then is the workload
produced (pre-encoded, as fast as the producer goes), so no rebalance falls inside the measured
span; a read_committed reader counts the chunk outcomes, and events/s is taken first to last
reply, from the replies' own timestamps (as bench.py's throughput()).

CPU: utime + stime from /proc, from just before the workload is produced to the last reply seen,
of the instances; of PostgreSQL (the postmaster, its live children and the children it reaped:
cutime); of the broker ($LL_RUN_DIR/kafka/kafka.pid); of this process (the producer and the
reader). Divided by the events: CPU ms per 1,000 events, the figure that says where the limit
moves with more cores (docs/scaling.md).
"""
import json
import os
import time
import urllib.request

from llsim.drills import Isolated, read_topics_conf

CLK = os.sysconf("SC_CLK_TCK")


def say(msg=""):
    print(msg, flush=True)


def fmt1(v):
    return "-" if v is None else "%.1f" % v


def _median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[(len(xs) - 1) // 2] if xs else None


def parse_configs(text):
    """[(partitions, instances)] of "3x1,3x2,6x6"; ValueError on anything else."""
    out = []
    for item in filter(None, text.split(",")):
        p, _, n = item.partition("x")
        p, n = int(p), int(n)
        if p < 1 or n < 1 or p > 64 or n > 16:
            raise ValueError("scale config %r: 1-64 partitions, 1-16 instances" % item)
        out.append((p, n))
    if not out:
        raise ValueError("no scale config")
    return out


def _ticks(path):
    """(utime + stime, cutime + cstime) in clock ticks of a /proc/<pid>/stat file, or (0, 0)."""
    try:
        with open(path) as f:
            w = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0, 0
    return int(w[11]) + int(w[12]), int(w[13]) + int(w[14])


def cpu_ms(pid):
    """CPU ms (utime + stime) a live process has used so far, 0 when it is gone."""
    return _ticks("/proc/%d/stat" % pid)[0] * 1000.0 / CLK


def _ppid(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _pidfile(path):
    try:
        with open(path) as f:
            return int(f.readline().strip())
    except (OSError, ValueError):
        return None


def cpu_sample(instances):
    """CPU ms so far: {"completion", "postgres", "broker", "generator"}."""
    run_dir = os.environ["LL_RUN_DIR"]
    out = {"completion": sum(_ticks("/proc/%d/stat" % p)[0] for p in instances)}
    pm = _pidfile(os.path.join(run_dir, "pg", "data", "postmaster.pid"))
    pg = 0
    if pm:
        own, reaped = _ticks("/proc/%d/stat" % pm)
        pg = own + reaped
        for d in os.listdir("/proc"):
            if d.isdigit() and _ppid(int(d)) == pm:
                pg += _ticks("/proc/%s/stat" % d)[0]
    out["postgres"] = pg
    broker = _pidfile(os.path.join(run_dir, "kafka", "kafka.pid"))
    out["broker"] = _ticks("/proc/%d/stat" % broker)[0] if broker else 0
    out["generator"] = _ticks("/proc/self/stat")[0]
    return {k: v * 1000.0 / CLK for k, v in out.items()}


def _http_port(stack, instance, timeout=30):
    """The port of the instance's /metrics (its http_listening log line; http.listen port 0)."""
    end = time.time() + timeout
    while time.time() < end:
        try:
            with open(stack.log_path(instance), "rb") as f:
                for line in f.read().decode(errors="replace").splitlines():
                    if '"http_listening"' in line:
                        return json.loads(line)["port"]
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.1)
    raise TimeoutError("%s: no http_listening line" % instance)


METRICS = ("loadledger_batch_messages_sum", "loadledger_batch_messages_count",
           "loadledger_kafka_commit_duration_seconds_sum", "loadledger_kafka_commit_duration_seconds_count",
           "loadledger_db_commit_duration_seconds_sum", "loadledger_db_commit_duration_seconds_count")


def scrape(ports):
    """The sums of METRICS over the instances' /metrics (unlabelled series)."""
    out = dict.fromkeys(METRICS, 0.0)
    for port in ports:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
            for line in r.read().decode().splitlines():
                name, _, value = line.partition(" ")
                if name in out:
                    out[name] += float(value)
    return out


def _assignments(stack, instance, topic):
    """The partitions of `topic` the instance's last rebalance line gives it, or None when its
    last line is a revocation (or there is none yet)."""
    last = None
    try:
        with open(stack.log_path(instance), "rb") as f:
            for line in f.read().decode(errors="replace").splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("event") in ("partitions_assigned", "partitions_revoked"):
                    last = rec
    except OSError:
        return None
    if last is None or last["event"] != "partitions_assigned":
        return None
    return sorted(last.get("partitions", {}).get(topic, []))


def wait_stable(stack, instances, topic, partitions, timeout=60):
    """Until the group of `instances` has assigned each of the topic's partitions exactly once,
    the same for 1 s; returns {instance: [partition, ...]}."""
    end = time.time() + timeout
    seen, since = None, None
    while time.time() < end:
        a = {i: _assignments(stack, i, topic) for i in instances}
        flat = [p for v in a.values() if v is not None for p in v]
        ok = None not in a.values() and sorted(flat) == list(range(partitions))
        if ok and a == seen:
            if time.time() - since >= 1.0:
                return a
        elif ok:
            seen, since = a, time.time()
        else:
            seen = None
        for i in instances:
            if not stack.alive(i):
                raise AssertionError("%s exited while its group formed (%s)" % (i, stack.log_path(i)))
        time.sleep(0.1)
    raise TimeoutError("the group of %s did not settle on %d partitions of %s" % (instances, partitions, topic))


def connections(b, iso):
    """{role: connections} of the pass's database (pg_stat_activity), the services' roles only."""
    rows = b.pg(iso, "SELECT usename, count(*) FROM pg_stat_activity WHERE datname = current_database()"
                       " AND usename LIKE 'll\\_%%' GROUP BY usename ORDER BY usename")
    return {r[0]: r[1] for r in rows}


def one_pass(args, b, partitions, instances, count_connections=False):
    """One configuration once; its figures (b: the bench module, for its workload helpers)."""
    iso = Isolated("benchscale", extra_topics=[(t, partitions) for t, _ in read_topics_conf()])
    try:
        st = iso.stack
        st.start("registrar")
        st.start("claimer")
        runs = [b.bench_run(args.partitions, args.scale_chunks_per_part) for _ in range(args.scale_runs)]
        b.admit(iso, runs)
        records = []
        s = b.Sender(iso.bootstrap, iso.prefix, linger_ms=20)
        for r in runs:
            for pid in r.nonempty():
                for c in r.chunks(pid, rows_per_chunk=b.ROWS_PER_CHUNK):
                    records.append((s.encode("chunks", c), r.run_id))
        names = ["completion-%d" % i for i in range(instances)]
        procs = [st.start("completion", instance=n, settings={"http.listen": "127.0.0.1:0"}) for n in names]
        assigned = wait_stable(st, names, iso.topic("chunks"), partitions)
        ports = [_http_port(st, n) for n in names]
        conns = None
        if count_connections:
            st.start("dispatcher")
            st.start("sweeper")
            time.sleep(3)
            conns = connections(b, iso)
            st.stop("dispatcher-0")
            st.stop("sweeper-0")
        counter = b.Counter(iso.bootstrap, iso.topic("chunk-outcomes"), [r.run_id for r in runs])
        m0 = scrape(ports)
        cpu0 = cpu_sample([p.pid for p in procs])
        for value, key in records:
            s.send("chunks", value, key)
        s.flush()
        seen = counter.wait(len(records), args.timeout)
        cpu1 = cpu_sample([p.pid for p in procs])
        time.sleep(0.3)  # the last batch's commit observed
        m1 = scrape(ports)
        counter.close()
        d = {k: m1[k] - m0[k] for k in METRICS}
        batches = d["loadledger_batch_messages_count"]
        kc = d["loadledger_kafka_commit_duration_seconds_count"]
        dc = d["loadledger_db_commit_duration_seconds_count"]
        ts = sorted(x[0] for x in seen)
        span = max(ts[-1] - ts[0], 1) / 1000.0
        n = len(seen)
        files = b.pg(iso, "SELECT count(*) FROM nifi_ops.load_file")[0][0]
        assert files == len(records), "%d files of %d chunks" % (files, len(records))
        per_instance = {}
        for i, name in enumerate(names):
            per_instance[name] = len(assigned[name])
        return {"partitions": partitions, "instances": instances, "events": n, "eps": n / span,
                "cpu_ms_per_1000": {k: (cpu1[k] - cpu0[k]) * 1000.0 / n for k in cpu0},
                "assigned": per_instance, "connections": conns,
                "batch_mean": d["loadledger_batch_messages_sum"] / batches if batches else None,
                "kafka_commits": kc, "kafka_commit_ms_mean": d["loadledger_kafka_commit_duration_seconds_sum"] * 1000 / kc
                if kc else None, "db_commit_ms_mean": d["loadledger_db_commit_duration_seconds_sum"] * 1000 / dc
                if dc else None}
    finally:
        iso.close()


def scaling(args, b):
    """Every configuration of --scale-configs, --scale-repeat passes each (interleaved: pass 1 of
    every configuration, then pass 2, ...: a drift of the machine's speed spreads over all of
    them); returns {"configs": [...], "connections": {...}}."""
    configs = parse_configs(args.scale_configs)
    say("-- scaling: %d runs x %d partitions x %d chunks per pass; configurations (partitions x instances)"
        " %s, %d passes each" % (args.scale_runs, args.partitions, args.scale_chunks_per_part,
                                 ", ".join("%dx%d" % c for c in configs), args.scale_repeat))
    results = {c: [] for c in configs}
    conns = None
    w = one_pass(args, b, configs[0][0], configs[0][1])  # the broker's JIT compilers, the page cache
    say("   warm-up pass (%dx%d, not counted): %.0f events/s" % (configs[0] + (w["eps"],)))
    for rep in range(args.scale_repeat):
        for p, n in configs:
            f = one_pass(args, b, p, n, count_connections=conns is None)
            if conns is None:
                conns = dict(f["connections"], completion_instances=n)
            results[(p, n)].append(f)
            say("   %dx%d pass %d: %6.0f events/s; CPU ms per 1,000 events: %s; batches of %s messages on average,"
                " %d Kafka commits of %s ms, database commits of %s ms; assigned %s" % (
                    p, n, rep + 1, f["eps"], ", ".join("%s %.0f" % kv for kv in sorted(f["cpu_ms_per_1000"].items())),
                    fmt1(f["batch_mean"]), f["kafka_commits"], fmt1(f["kafka_commit_ms_mean"]),
                    fmt1(f["db_commit_ms_mean"]), f["assigned"]))
    out = []
    base = None
    for p, n in configs:
        fs = sorted(results[(p, n)], key=lambda f: f["eps"])
        med = fs[(len(fs) - 1) // 2]
        cpu = {k: sorted(f["cpu_ms_per_1000"][k] for f in fs)[(len(fs) - 1) // 2] for k in med["cpu_ms_per_1000"]}
        row = {"partitions": p, "instances": n, "eps_median": med["eps"], "passes": [f["eps"] for f in results[(p, n)]],
               "cpu_ms_per_1000_median": cpu,
               "batch_mean_median": _median([f["batch_mean"] for f in fs]),
               "kafka_commit_ms_median": _median([f["kafka_commit_ms_mean"] for f in fs]),
               "db_commit_ms_median": _median([f["db_commit_ms_mean"] for f in fs])}
        base = base or row["eps_median"]
        row["ratio_to_first"] = row["eps_median"] / base
        out.append(row)
    say()
    say("scaling (median of %d passes; CPU ms per 1,000 chunk events, medians):" % args.scale_repeat)
    say("  %-6s %10s %7s %11s %9s %7s %10s %7s %9s %9s  passes" % (
        "PxN", "events/s", "ratio", "completion", "postgres", "broker", "generator", "batch", "kafka ms", "db ms"))
    for r in out:
        c = r["cpu_ms_per_1000_median"]
        say("  %-6s %10.0f %7.2f %11.0f %9.0f %7.0f %10.0f %7s %9s %9s  %s" % (
            "%dx%d" % (r["partitions"], r["instances"]), r["eps_median"], r["ratio_to_first"], c["completion"],
            c["postgres"], c["broker"], c["generator"], fmt1(r["batch_mean_median"]),
            fmt1(r["kafka_commit_ms_median"]), fmt1(r["db_commit_ms_median"]),
            ", ".join("%.0f" % x for x in r["passes"])))
    say("connections per service instance (roles of one instance each, at rest after start): %s" % conns)
    return {"configs": out, "connections": conns}
