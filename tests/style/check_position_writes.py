#!/usr/bin/env python3
"""The ledger's read positions have one writer (issue 39; docs/design.md §5, "Every write checks the
ledger it last saw"): every statement that writes nifi_ops.consumer_position is in
common/src/loop/position.c, where each position write is a compare-and-set on the row's
write_token and the merge fences; any other C file, or a statement there that writes the table
without the check, fails this test. Reads the source tree only; well under a second.

usage: check_position_writes.py REPO
"""
import os
import re
import sys

OWNER = os.path.join("common", "src", "loop", "position.c")
WRITE = re.compile(r"(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+nifi_ops\.consumer_position\b", re.I)


def c_files(repo):
    for top in ("common", "services", "tools"):
        for d, _, files in os.walk(os.path.join(repo, top)):
            for f in files:
                if f.endswith((".c", ".h")):
                    yield os.path.join(d, f)


def strings(text):
    """The C string literals of text, adjacent ones joined (a statement split over lines)."""
    out, cur = [], []
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"|(;|\)|,)', text):
        if m.group(1) is not None:
            cur.append(m.group(1))
        elif cur:
            out.append("".join(cur))
            cur = []
    if cur:
        out.append("".join(cur))
    return out


def main(repo):
    bad = []
    owner_writes = []
    for path in c_files(repo):
        rel = os.path.relpath(path, repo)
        with open(path, errors="replace") as f:
            for s in strings(f.read()):
                for m in WRITE.finditer(s):
                    if rel != OWNER:
                        bad.append("%s: writes nifi_ops.consumer_position outside %s: %.120s" % (rel, OWNER, s))
                    else:
                        owner_writes.append(s)
    # in the owner: a position write (next_offset) only by compare-and-set on write_token, an
    # insert only where none is expected; the fence sets write_token alone
    for s in owner_writes:
        if "next_offset =" in s and "write_token = NULLIF" not in s:
            bad.append("%s: a position UPDATE without the write_token compare-and-set: %.160s" % (OWNER, s))
        if re.search(r"INSERT\s+INTO\s+nifi_ops\.consumer_position", s, re.I) and \
                ("ON CONFLICT DO NOTHING" not in s or "k.expect = ''" not in s):
            bad.append("%s: a position INSERT that may overwrite a row: %.160s" % (OWNER, s))
    if not owner_writes:
        bad.append("%s: no statement writes nifi_ops.consumer_position (moved? update this check)" % OWNER)
    for b in bad:
        print(b)
    print("%d statements write nifi_ops.consumer_position, all in %s%s" % (
        len(owner_writes), OWNER, "" if not bad else "; %d problems" % len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
