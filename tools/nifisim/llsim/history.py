"""A generated history in a ledger (issue 42): scripts/bench/history.sql run by psql against a
migrated ledger, and the plan of a statement as EXPLAIN (FORMAT JSON) gives it.

generate() is what the plan tests (tests/integration/test_history_plans.py) and the history
benchmark call: the rows a span of loads leaves in every table the services write, the statuses in
realistic shares (the script's header lists them), then ANALYZE.
"""
import json
import os
import re
import shlex
import subprocess

from .avroframe import REPO

HISTORY_SQL = os.path.join(REPO, "scripts", "bench", "history.sql")

# The tables that grow with the history (a read of one of them must be an index or a window).
HISTORY_TABLES = frozenset(("load_run", "load_partition", "load_file", "load_event", "load_dispatch",
                            "load_validation", "load_claim_token", "load_publish_token", "load_validation_start",
                            "load_run_rejection", "input_refusal", "position_rewind", "offset_gap_acceptance"))


def psql_path(stack):
    """The environment's psql (its LL_PG_BINDIR), else the one on PATH."""
    bindir = stack.env.get("LL_PG_BINDIR")
    path = os.path.join(bindir, "psql") if bindir else "psql"
    return path if os.path.exists(path) else "psql"


def generate(stack, runs=3000, parts=8, chunks=3, span="365 days", active=12, jobs=50, tag="h", seed=0.42,
             analyze=True, timeout=600, ago="0 days"):
    """Generates the history into the database of stack.conninfo() (migrated; as postgres), then
    (analyze) VACUUM (ANALYZE) of the database: a year-old ledger has been vacuumed by autovacuum,
    its visibility map set, so that the planner costs an index-only scan as it would in production.
    Raises RuntimeError with psql's message when the script fails."""
    cmd = [psql_path(stack), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", stack.conninfo("postgres")]
    for k, v in (("runs", runs), ("parts", parts), ("chunks", chunks), ("span", span), ("active", active),
                 ("jobs", jobs), ("tag", tag), ("seed", seed), ("ago", ago)):
        cmd += ["-v", "%s=%s" % (k, v)]
    cmd += ["-f", HISTORY_SQL]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        # psql's own message (the statement and the constraint), not only its exit status
        raise RuntimeError("%s failed (psql exit %d): %s" % (HISTORY_SQL, p.returncode, p.stderr.strip()[-4000:]))
    if analyze:
        c = stack.db()
        try:
            with c.cursor() as cur:
                cur.execute("VACUUM (ANALYZE)")
        finally:
            c.close()


def plan_nodes(plan):
    """Every node of an EXPLAIN (FORMAT JSON) plan (the "Plan" object), depth first."""
    out = [plan]
    for sub in plan.get("Plans", ()):
        out.extend(plan_nodes(sub))
    return out


def explain(cur, name, sql, params):
    """The plan nodes of `sql` (with $1..$n) for the parameter values `params` (None = NULL), as
    the services run it: a prepared statement's custom plan (EXPLAIN EXECUTE)."""
    cur.execute("DEALLOCATE ALL")
    cur.execute("PREPARE %s AS %s" % (name, sql))
    args = "(%s)" % ", ".join(["%s"] * len(params)) if params else ""
    cur.execute("EXPLAIN (FORMAT JSON) EXECUTE %s%s" % (name, args), list(params))
    doc = cur.fetchone()[0]
    if isinstance(doc, str):
        doc = json.loads(doc)
    return plan_nodes(doc[0]["Plan"])


def history_scans(nodes):
    """The sequential scans of a table of history among the plan nodes: [(table, alias)]."""
    return [(n.get("Relation Name"), n.get("Alias")) for n in nodes
            if n.get("Node Type") == "Seq Scan" and n.get("Relation Name") in HISTORY_TABLES]


def indexes_used(nodes):
    """The names of the indexes the plan reads."""
    return {n["Index Name"] for n in nodes if "Index Name" in n}


STMT = re.compile(r'(?:static\s+)?const\s+ll_stmt\s+(\w+)\s*=\s*\{\s*"([^"]*)"\s*,((?:\s*"(?:\\.|[^"\\])*")+)\s*,'
                  r'\s*(\d+)\s*\}')
LITERAL = re.compile(r'"((?:\\.|[^"\\])*)"')


def shipped_statements(build_dir, folders=("services", "common")):
    """Every ll_stmt of the C files under `folders` exactly as it is compiled: each file of the
    build's compile_commands.json preprocessed with its own command (-E: the SQL macros of
    ll/status_sql.h and the headers expanded), each definition's string literals joined.
    {statement name: (source file relative to the repository, nparams, sql)}."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        commands = json.load(f)
    roots = tuple(os.path.join(REPO, d) + os.sep for d in folders)
    out = {}
    for e in commands:
        src = e["file"]
        if not (src.endswith(".c") and src.startswith(roots)):
            continue
        args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        cmd, skip = [], False
        for a in args:
            if skip:
                skip = False
            elif a == "-o":
                skip = True
            elif a != "-c":
                cmd.append(a)
        text = subprocess.run(cmd + ["-E", "-P"], cwd=e["directory"], check=True, capture_output=True,
                              text=True).stdout
        for m in STMT.finditer(text):
            sql = "".join(json.loads('"%s"' % lit) for lit in LITERAL.findall(m.group(3)))
            out[m.group(2)] = (os.path.relpath(src, REPO), int(m.group(4)), sql)
    return out


def generic_plan(cur, sql, nparams):
    """The plan nodes of the generic plan of `sql` (the plan a prepared statement settles on after
    its first executions, whatever the values): PREPARE, then EXPLAIN EXECUTE with NULLs under
    plan_cache_mode = force_generic_plan."""
    cur.execute("DEALLOCATE ALL")
    cur.execute("SET plan_cache_mode = force_generic_plan")
    try:
        cur.execute("PREPARE generic_stmt AS %s" % sql)
        args = "(%s)" % ", ".join(["NULL"] * nparams) if nparams else ""
        cur.execute("EXPLAIN (FORMAT JSON) EXECUTE generic_stmt%s" % args)
        doc = cur.fetchone()[0]
    finally:
        cur.execute("RESET plan_cache_mode")
    if isinstance(doc, str):
        doc = json.loads(doc)
    return plan_nodes(doc[0]["Plan"])
