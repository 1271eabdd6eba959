"""The pgbench script of the set-based ceiling (tools/nifisim/bench.py, issue 8): one pgbench
transaction does, for N consecutive chunk events of the benchmark workload, what ll-completion does
for a poll batch of them (common/src/loop/batch.c ll_loop_batch, batch.c bulk_step, apply_bulk;
services/completion/chunk_bulk.c), statement for statement:

  BEGIN
  the set-based part over the whole batch (chunk_bulk_*): lock runs, lock partitions, read files,
      write files, partition counters, passed gates, and the completion of the runs whose last
      partition the batch gates (runs_complete_extract: completion CAS, outbox row, event,
      NOTIFY); every report of the workload is decided there, so there is no savepoint and no
      per-message statement
  the run heartbeats and the consumer group's read position (kloop_precommit, issue 27: one
      statement before the COMMIT)
  COMMIT

The set-based statements are the service's own text, read from the C sources when the script is
built (a statement missing or with another parameter count stops the benchmark); each $n becomes
an ARRAY(...) built in SQL from pgbench integers over generate_series. What differs from the
service is written into the script's header (HEADER below). Modelled on the set-based run
completion (runs_complete.c, 2026-12-01): the statement counts of the service's default benchmark
run are the script's.

Chunk k (numbered from 0, per client) is run k / (C*P), partition (k / C) % P, chunk index k % C,
as in chunk.sql; transaction t covers chunks t*N .. t*N+N-1.
"""
import os
import re

LOCK_RUNS, LOCK_PARTS, FILES, WRITE, PARTS, GATES = ("chunk_bulk_lock_runs", "chunk_bulk_lock_partitions",
                                                     "chunk_bulk_files", "chunk_bulk_write_files",
                                                     "chunk_bulk_partitions", "chunk_bulk_gates")
COMPLETE = "runs_complete_extract"
PRECOMMIT = "kloop_precommit"

HEADER = """\
-- The set-based ceiling of scripts/bench.sh, written by tools/nifisim/pgbench_bulk.py: one
-- transaction = what ll-completion does for a poll batch of N chunk events of the workload
-- (see that file). Differences from the service:
-- * the arrays are built in SQL from pgbench integers (generate_series) where the service binds
--   array literals; the ids, paths and fragment ids are chunk.sql's;
-- * the partition counters and gate totals the service computes in C from the rows it locked are
--   computed from the workload's numbering (every chunk a new file), and the gates' claim tokens
--   are read with a subquery (the service has them from its partition lock);
-- * which reports the set-based part decides is known from the numbering, not decided;
-- * pgbench nests "SAVEPOINT m" where the service sends "RELEASE SAVEPOINT m; SAVEPOINT m" (one
--   round trip each);
-- * a run's VALIDATE_RUN dispatch id is md5(run id)::uuid where the service computes a name-based
--   uuid (v5) in C;
-- * the run heartbeats are written for the transaction's runs in run order;
-- * the read position is one row per pgbench client (its partition :client_id of a topic
--   "bench.chunks" of group "bench.completion.<pre>"), at the batch's end offset, nothing done
--   above; its compare-and-set (issue 39) expects the token transaction t - 1 wrote and writes
--   md5(pre, client, t) as the new one (the service: a random UUID from libuuid).
"""


def c_statements(*paths):
    """{name: (sql, parameter count)} of the ll_stmt constants in the C files `paths`."""
    out = {}
    lit = r'"(?:[^"\\]|\\.)*"'
    for path in paths:
        with open(path) as f:
            src = f.read()
        for m in re.finditer(r'll_stmt\s+\w+\s*=\s*\{\s*"(\w+)",\s*((?:%s\s*)+),\s*(\d+)\s*\}' % lit, src):
            sql = "".join(s[1:-1] for s in re.findall(lit, m.group(2)))
            out[m.group(1)] = (sql.replace('\\"', '"').replace("\\\\", "\\"), int(m.group(3)))
    return out


def with_arrays(stmts, name, arrays):
    """The service's statement `name` with its parameters $1..$n replaced by `arrays`."""
    if name not in stmts:
        raise RuntimeError("pgbench_bulk: statement %s not found in the service's sources" % name)
    sql, n = stmts[name]
    used = sorted({int(x) for x in re.findall(r"\$(\d+)", sql)})
    if n != len(arrays) or used != list(range(1, n + 1)):
        raise RuntimeError("pgbench_bulk: %s takes %d parameters (%s), the script builds %d" % (
            name, n, used, len(arrays)))
    return re.sub(r"\$(\d+)", lambda m: "(%s)" % arrays[int(m.group(1)) - 1], sql) + ";\n"


# -- SQL over the chunk numbering (k: chunk, q: partition k / C, x: run k / (C*P)) ----------------

def run_id(x):
    """The run id (text) of run number x, as chunk.sql builds it."""
    return "(:pre::text || '-0000-4000-8000-' || lpad((%s)::text, 12, '0'))" % x


def part_id(q):
    """The partition id of global partition number q."""
    return "lpad(((%s) %% :P::int)::text, 4, '0')" % q


def path(k):
    """The file path chunk k reports, as chunk.sql builds it."""
    return ("'/data/stage/ORACLE_INSP_DTL_DAILY/run_id=' || %s || '/part-' || %s || '/chunk-' ||"
            " lpad((%s %% :C::int)::text, 5, '0') || '.parquet'" % (run_id("%s / :CP::int" % k),
                                                                     part_id("%s / :C::int" % k), k))


class Chunks:
    """The chunks k in [lo, hi) (pgbench variables) for which `pred` (SQL over k) holds."""

    def __init__(self, lo, hi, pred="true"):
        self.src = "generate_series(:%s::int, :%s::int - 1) AS k WHERE %s" % (lo, hi, pred)

    def each(self, expr):
        return "ARRAY(SELECT %s FROM %s ORDER BY k)" % (expr, self.src)

    def runs(self):
        return "ARRAY(SELECT %s FROM (SELECT DISTINCT k / :CP::int AS x FROM %s) d ORDER BY x)" % (
            run_id("x"), self.src)

    def parts(self, expr):
        return "ARRAY(SELECT %s FROM (SELECT DISTINCT k / :C::int AS q FROM %s) d ORDER BY q)" % (expr, self.src)

    def counters(self, expr):
        """Per partition written to (q), f = its files once its chunks up to the set's last are
        written (every chunk of the workload is a new file)."""
        return ("ARRAY(SELECT %s FROM (SELECT k / :C::int AS q, max(k) %% :C::int + 1 AS f FROM %s GROUP BY 1) d"
                " ORDER BY q)" % (expr, self.src))


def reads(stmts, s):
    """Steps 1-3 of chunk_bulk.c over the chunks s: lock runs, lock partitions, read files."""
    return (with_arrays(stmts, LOCK_RUNS, [s.runs()]) +
            with_arrays(stmts, LOCK_PARTS, [s.parts(run_id("q / :P::int")), s.parts(part_id("q")), s.runs()]) +
            with_arrays(stmts, FILES, [s.each(run_id("k / :CP::int")), s.each(part_id("k / :C::int")),
                                       s.each("k % :C::int"), s.each(path("k"))]))


def writes(stmts, w):
    """Step 5 of chunk_bulk.c for the decided chunks w: file rows, then partition counters."""
    f = "f::bigint"
    return (with_arrays(stmts, WRITE, [w.each(run_id("k / :CP::int")), w.each(part_id("k / :C::int")),
                                       w.each("k % :C::int"), w.each("'frag-' || " + part_id("k / :C::int")),
                                       w.each(":C::int"), w.each(path("k")), w.each("100::bigint"),
                                       w.each("9600::bigint")]) +
            with_arrays(stmts, PARTS, [w.counters(run_id("q / :P::int")), w.counters(part_id("q")),
                                       w.counters(f), w.counters("100 * " + f), w.counters("9600 * " + f),
                                       w.counters(":C::bigint * " + f),
                                       w.counters(":C::bigint * :C::bigint * " + f)]))


def gates(stmts, g):
    """Step 5 of chunk_bulk.c for the partitions whose last chunk is in g: SUCCESS, run counts,
    events. A gated partition's totals are all its chunks' (C files of 100 rows, 9,600 bytes)."""
    tok = ("(SELECT lp.claim_token FROM nifi_ops.load_partition lp WHERE lp.run_id = %s::uuid"
           " AND lp.partition_id = %s)" % (run_id("k / :CP::int"), part_id("k / :C::int")))
    return with_arrays(stmts, GATES, [g.each(run_id("k / :CP::int")), g.each(part_id("k / :C::int")), g.each(tok),
                                      g.each("100 * :C::bigint"), g.each(":C::int"), g.each("9600 * :C::bigint")])


def completions(stmts, e):
    """Step 6 of chunk_bulk.c (runs_complete.c) for the runs whose last chunk is in e."""
    return with_arrays(stmts, COMPLETE, [e.runs(), "ARRAY(SELECT md5(x::text)::uuid FROM unnest(%s) AS x)" % e.runs()])


def token(t):
    """The position's write token of transaction t (an expression) of this client and run set."""
    return "md5(:pre::text || '-' || :client_id || '-' || (%s))::uuid" % t


def chunk_sql_body(chunk_sql):
    """chunk.sql without its comments and its step of the chunk counter (the caller sets :n)."""
    lines = [x for x in chunk_sql.splitlines() if not x.startswith("--")]
    if not lines or lines[0].strip() != "\\set n :n + 1":
        raise RuntimeError("pgbench_bulk: chunk.sql no longer starts with \\set n :n + 1")
    return "\n".join(lines[1:]) + "\n"


def script(repo, per_tx, chunks, parts, chunk_sql):
    """The pgbench script (text) for per_tx chunks per transaction, `chunks` per partition and
    `parts` partitions per run. Variables: -D t=-1 (transaction counter), N (= per_tx), C, P, pre
    as chunk.sql. chunk_sql: checked only (the per-message path is no longer modelled)."""
    src = os.path.join(repo, "services", "completion")
    stmts = c_statements(*[os.path.join(src, f) for f in sorted(os.listdir(src)) if f.endswith(".c")],
                         *[os.path.join(repo, "common", "src", "loop", f)
                           for f in sorted(os.listdir(os.path.join(repo, "common", "src", "loop")))
                           if f.endswith(".c")])
    chunk_sql_body(chunk_sql)
    run_end = "k % :CP::int = :CP::int - 1"
    out = [HEADER,
           "\\set t :t + 1\n\\set CP :C * :P\n\\set n0 :t * :N\n\\set e :n0 + :N\n",
           # the batch's first run end and how many there are; its partition ends likewise
           "\\set f0 :n0 + (:CP - 1 - :n0 % :CP)\n",
           "\\set ends CASE WHEN :f0 < :e THEN (:e - 1 - :f0) / :CP + 1 ELSE 0 END\n",
           "\\set q0 :n0 + (:C - 1 - :n0 % :C)\n",
           "\\set pends CASE WHEN :q0 < :e THEN (:e - 1 - :q0) / :C + 1 ELSE 0 END\n",
           "BEGIN ISOLATION LEVEL READ COMMITTED;\n",
           reads(stmts, Chunks("n0", "e")),
           writes(stmts, Chunks("n0", "e")),
           "\\if :pends > 0\n",
           gates(stmts, Chunks("n0", "e", "k % :C::int = :C::int - 1")),
           "\\endif\n",
           "\\if :ends > 0\n", completions(stmts, Chunks("n0", "e", run_end)), "\\endif\n",
           with_arrays(stmts, PRECOMMIT, [Chunks("n0", "e").runs(), "'bench.completion.' || :pre::text",
                                          "ARRAY['bench.chunks']", "ARRAY[:client_id]", "ARRAY[:e]", "ARRAY['']",
                                          "ARRAY[CASE WHEN :t = 0 THEN '' ELSE %s::text END]" % token(":t - 1"),
                                          token(":t")]),
           "COMMIT;\n"]
    return "".join(out)


if __name__ == "__main__":
    # python3 tools/nifisim/pgbench_bulk.py [N [C [P]]]: the script, to read (bench.py runs it)
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    with open(os.path.join(repo, "scripts", "bench", "chunk.sql")) as f:
        args = [int(x) for x in sys.argv[1:4]] + [500, 50, 8][len(sys.argv[1:4]):]
        sys.stdout.write(script(repo, args[0], args[1], args[2], f.read()))
