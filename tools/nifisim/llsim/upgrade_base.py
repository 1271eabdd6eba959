"""The previous release of the upgrade drill (tools/nifisim/drill_upgrade.py, docs/upgrading.md):
its sources taken from git at a fixed commit and built once into a cache folder.

The cache is $LL_CACHE_DIR/upgrade-base/<full commit> ($HOME/.cache/loadledger by default, the
folder scripts/env.sh keeps the Kafka jars in: it outlives `env.sh down`), with src/ (the
`git archive` of the commit: the binaries find their Avro schemas and migrations there, the
folder is compiled in as LL_SOURCE_DIR) and build/ (RelWithDebInfo, the five services and
loadctl only). build/.ll-built marks a finished build; an unfinished one is thrown away and
made again. One build at a time per commit (a lock file beside it).
"""
import fcntl
import os
import shutil
import subprocess
import time

from .avroframe import REPO

# main before the session of issue 29 (no tags yet): the "release N" of the drill
BASE_COMMIT = "3502da0333677da9c9a7eac2c49d24522a2f092c"
TARGETS = ("ll-registrar", "ll-claimer", "ll-completion", "ll-dispatcher", "ll-sweeper", "loadctl")
DONE = ".ll-built"


class BaseError(Exception):
    """The previous release cannot be had (commit unknown, not a git checkout, build failed)."""


def _git(*args, check=True):
    try:
        return subprocess.run(["git", "-C", REPO] + list(args), capture_output=True, text=True, check=check)
    except FileNotFoundError:
        raise BaseError("git is not installed (Debian package git; scripts/env.sh install installs it)") from None


def resolve(commit, say=print):
    """The full hash of `commit` in the checkout the drill runs from. A shallow clone that lacks
    it is deepened (`git fetch --unshallow`) once; BaseError when it still is not there."""
    if _git("rev-parse", "--git-dir", check=False).returncode != 0:
        raise BaseError("%s is not a git checkout: the previous release (%s) cannot be taken from git; "
                        "build it yourself and pass --base-build DIR" % (REPO, commit))
    p = _git("rev-parse", "--verify", "--quiet", commit + "^{commit}", check=False)
    if p.returncode != 0 and _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        say("commit %s is not in this shallow clone: git fetch --unshallow" % commit)
        f = _git("fetch", "--quiet", "--unshallow", check=False)
        if f.returncode != 0:
            raise BaseError("git fetch --unshallow failed (%s): clone with full history, or pass --base-build DIR"
                            % f.stderr.strip())
        p = _git("rev-parse", "--verify", "--quiet", commit + "^{commit}", check=False)
    if p.returncode != 0:
        raise BaseError("commit %s is not in %s (clone with full history, or pass --base-build DIR)" % (commit, REPO))
    return p.stdout.strip()


def extract(full, dest, *paths):
    """`git archive full [paths] | tar -x -C dest` (dest exists); BaseError on failure."""
    archive = subprocess.Popen(["git", "-C", REPO, "archive", "--format=tar", full] + list(paths),
                               stdout=subprocess.PIPE)
    tar = subprocess.run(["tar", "-x", "-C", dest], stdin=archive.stdout, capture_output=True, text=True)
    archive.stdout.close()
    if archive.wait() != 0 or tar.returncode != 0:
        raise BaseError("git archive %s | tar -x failed: %s" % (full, tar.stderr.strip()))


def cache_root():
    """$LL_CACHE_DIR/upgrade-base (default $HOME/.cache/loadledger/upgrade-base)."""
    base = os.environ.get("LL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "loadledger")
    return os.path.join(base, "upgrade-base")


def build(commit=BASE_COMMIT, jobs=2, say=print):
    """The build folder of `commit` (services/ll-*, tools/loadctl), built when not cached.
    Returns (build folder, source folder, seconds the build took: 0 when cached)."""
    full = resolve(commit, say)
    root = os.path.join(cache_root(), full)
    src, out = os.path.join(root, "src"), os.path.join(root, "build")
    os.makedirs(cache_root(), exist_ok=True)
    with open(root + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(out, DONE)):
            say("previous release %s: cached in %s" % (full[:10], out))
            return out, src, 0.0
        t0 = time.time()
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(src)
        say("previous release %s: building %s in %s (-j%d)" % (full[:10], " ".join(TARGETS), out, jobs))
        extract(full, src)
        steps = (["cmake", "-S", src, "-B", out, "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DLL_BUILD_TESTS=OFF"],
                 ["cmake", "--build", out, "-j%d" % jobs, "--target"] + list(TARGETS))
        for cmd in steps:
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                raise BaseError("%s failed (rc %d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout[-3000:],
                                                               p.stderr[-3000:]))
        open(os.path.join(out, DONE), "w").close()
        secs = time.time() - t0
        say("previous release %s: built in %.0f s" % (full[:10], secs))
        return out, src, secs


def migrations(sql):
    """The migration files (NNNN_*.sql) of a migrations folder, sorted."""
    return sorted(f for f in os.listdir(sql) if f.endswith(".sql"))


# What a migration of release N+1 must not do while release N still runs (the contract step of
# docs/upgrading.md, release N+2 at the earliest): each a (name, words) pair, matched on the
# upper-cased statement text without comments.
CONTRACT = (
    ("DROP TABLE", ("DROP TABLE",)),
    ("DROP COLUMN", ("DROP COLUMN",)),
    ("DROP VIEW", ("DROP VIEW",)),
    ("RENAME", ("RENAME ",)),
    ("ALTER COLUMN ... TYPE", ("ALTER COLUMN", " TYPE ")),
    ("SET NOT NULL", ("SET NOT NULL",)),
    ("REVOKE", ("REVOKE ",)),
)


def contract_statements(sql):
    """The statements of one migration's text that are not expand-only: [(rule, statement)]."""
    text = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    found = []
    for stmt in text.split(";"):
        flat = " ".join(stmt.upper().split())
        for name, words in CONTRACT:
            if all(w in flat + " " for w in words):
                found.append((name, " ".join(stmt.split())[:160]))
    return found


def check_migrations(old_sql, new_sql):
    """The migrations folder of release N+1 (new_sql) against N's (old_sql): returns (the files
    N+1 adds, [problem]): a migration of N gone or edited in N+1, or a statement of an added one
    that is not expand-only (CONTRACT; docs/upgrading.md, "The compatibility rule")."""
    have = set(migrations(old_sql))
    added = [f for f in migrations(new_sql) if f not in have]
    problems = []
    for f in sorted(have):
        a, b = os.path.join(old_sql, f), os.path.join(new_sql, f)
        if not os.path.exists(b):
            problems.append("%s of release N is gone in N+1" % f)
            continue
        with open(a, "rb") as fa, open(b, "rb") as fb:
            if fa.read() != fb.read():
                problems.append("%s changed since release N (a released migration is never edited)" % f)
    for f in added:
        with open(os.path.join(new_sql, f)) as fh:
            for rule, stmt in contract_statements(fh.read()):
                problems.append("%s is not expand-only (%s): %s" % (f, rule, stmt))
    return added, problems
