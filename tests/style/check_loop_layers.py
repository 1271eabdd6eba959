#!/usr/bin/env python3
"""The consumer loop's files call only down (ctest style.loop_layers; docs/design.md §3).

The loop is common/src/core/kloop*.c. A file "calls" another when it names, followed by `(`, a
function that the other defines with external linkage (not `static`); a call through a pointer
(`l->kio->seek(`, `io->produce(`) is not one: that is the table of calls out (kloop_io.h). The
check fails when the files call each other in a circle, naming the files of each circle and one
call of each step, and prints the layers it found otherwise (a file's layer: one above the
highest file it calls), top first.

Usage: check_loop_layers.py SOURCE_DIR. Reads the source tree only; well under a second.
"""
import os
import re
import sys

DEF = re.compile(r"^(?!static\b)(?:[A-Za-z_][\w\s\*]*?)\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{", re.M | re.S)


def strip(text):
    """The text without comments, string and character literals."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', '""', text)


def main(src):
    core = os.path.join(src, "common", "src", "core")
    files = sorted(f for f in os.listdir(core) if f.startswith("kloop") and f.endswith(".c"))
    texts = {f: strip(open(os.path.join(core, f), encoding="utf-8").read()) for f in files}
    defined = {}
    for f, t in texts.items():
        for m in DEF.finditer(t):
            defined.setdefault(m.group(1), f)
    calls = {f: {} for f in files}
    for f, t in texts.items():
        for name, g in defined.items():
            if g == f:
                continue
            m = re.search(r"(?<![\w>.])" + re.escape(name) + r"\s*\(", t)
            if m:
                calls[f].setdefault(g, name)
    # Tarjan's strongly connected components: a component of more than one file is a circle
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in calls[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for f in files:
        if f not in index:
            visit(f)
    circles = [c for c in comps if len(c) > 1]
    if circles:
        for c in circles:
            print("circle among the loop's files: " + ", ".join(c))
            for f in c:
                for g, name in sorted(calls[f].items()):
                    if g in c:
                        print(f"  {f} calls {g} ({name})")
        return 1
    layer = {}

    def depth(f):
        if f not in layer:
            layer[f] = 1 + max((depth(g) for g in calls[f]), default=-1)
        return layer[f]

    for f in files:
        depth(f)
    for n in sorted(set(layer.values()), reverse=True):
        print(f"layer {n}: " + ", ".join(f for f in files if layer[f] == n))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
