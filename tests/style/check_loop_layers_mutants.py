#!/usr/bin/env python3
"""The loop's structure check fails where it should (ctest style.loop_layers_mutants; issue 40).

Copies what check_loop_layers.py reads (common/, docs/design.md) into a temporary folder, makes one
change at a time that breaks a rule, and asserts that the check fails naming it; the unchanged
copy must pass. A check that cannot fail is no check.

Usage: check_loop_layers_mutants.py SOURCE_DIR. Under a second.
"""
import os
import shutil
import subprocess
import sys
import tempfile

# (file under common/src/loop or docs, text replaced, its replacement, what the failure names)
MUTANTS = [
    ("commit.c", "#include \"commit.h\"", "#include \"commit.h\"\nvoid zz_up(ll_loop *l) { ll_loop_owe_rewind(l, 0); }",
     "commit.c calls loop.c (ll_loop_owe_rewind)"),
    ("txn.c", "#include \"txn.h\"", "#include \"txn.h\"\nstatic int zz(const lmsg *m) { return m->ps->partition; }",
     "txn.c uses the members of struct part_state"),
    ("batch.c", "#include \"batch.h\"",
     "#include \"batch.h\"\nstatic long zz(part_state *ps) { return ps->pos.written_batch; }",
     "batch.c uses the members of struct part_position"),
    ("position.c", "#include \"position.h\"",
     "#include \"position.h\"\nstatic long zz(part_state *ps) { return ps->gap_accepted_to; }",
     "position.c uses the members of struct part_state"),
    ("partition.c", "#include \"partition.h\"",
     "#include \"partition.h\"\nstatic int zz(ll_loop *l) { return (int)l->rec.owed; }",
     "partition.c uses the members of struct ll_recovery_state"),
    ("txn.c", "#include \"txn.h\"", "#include \"txn.h\"\nstatic int zz(const lmsg *m) { return m->replay_step; }",
     "txn.c uses the members of struct lmsg"),
    ("batch.c", "#include \"batch.h\"", "#include \"batch.h\"\nstatic void zz(ll_loop *l) { l->poll_ms += 1; }",
     "batch.c assigns the loop's environment (l->poll_ms)"),
    ("design.md", "io.c          the calls out", "xx.c          the calls out",
     "io.c is in common/src/loop but not in the file map"),
]


def run(src, check):
    r = subprocess.run([sys.executable, check, src], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def main(src):
    check = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_loop_layers.py")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(os.path.join(src, "common"), os.path.join(tmp, "common"))
        os.makedirs(os.path.join(tmp, "docs"))
        shutil.copy(os.path.join(src, "docs", "design.md"), os.path.join(tmp, "docs", "design.md"))
        rc, out = run(tmp, check)
        if rc != 0:
            print(f"the unchanged copy fails the check:\n{out}")
            return 1
        for name, old, new, expect in MUTANTS:
            path = os.path.join(tmp, "docs" if name.endswith(".md") else os.path.join("common", "src", "loop"), name)
            text = open(path, encoding="utf-8").read()
            if old not in text:
                print(f"mutant of {name}: '{old}' not found (update this test)")
                failed += 1
                continue
            open(path, "w", encoding="utf-8").write(text.replace(old, new, 1))
            rc, out = run(tmp, check)
            open(path, "w", encoding="utf-8").write(text)
            if rc == 0 or expect not in out:
                print(f"mutant of {name} ({expect}) not caught: rc {rc}\n{out}")
                failed += 1
            else:
                print(f"caught: {expect}")
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
