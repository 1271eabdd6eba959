#!/usr/bin/env python3
"""The file map of the internal headers is checked (ctest style.header_map).

An internal header (a .h under common/src, services or tools) that many files of its folder share
groups its function declarations under a comment naming the file that defines them:

    /* partition.c */                         or   /* txn.c: dead letters ... */
    void ll_loop_drop_held(part_state *ps);         int ll_loop_dead_letter_event(...);

A comment at the top level whose first word is `<name>.c` starts a group; the group runs to the
next such comment or the header's end. Every function declared in a group must be defined in
that file (of the header's folder), and the file must exist; a declaration before the first group
is not checked. The check fails naming the header, the line, the function, the file the header
names and the file(s) that define it.

Usage: check_header_map.py SOURCE_DIR [HEADER...] (without headers: every internal header).
Reads the source tree only; well under a second.
"""
import os
import re
import sys

MARKER = re.compile(r"/\*\s*([A-Za-z0-9_]+\.c)\b")
DECL = re.compile(r"^(?!typedef\b|struct\b|enum\b|union\b|extern\b)[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\(", re.S)


def strip_strings(text):
    """The text with string and character literals blanked (their length kept)."""
    return re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', lambda m: '"' + " " * (len(m.group(0)) - 2) + '"',
                  text)


def groups(path):
    """(line, function, file the header names) for every declaration inside a group of path."""
    text = strip_strings(open(path, encoding="utf-8").read())
    out = []
    current = None
    depth = 0
    stmt, stmt_line = [], None
    i, line = 0, 1
    n = len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            comment = text[i:end]
            if depth == 0 and not "".join(stmt).strip():
                m = MARKER.match(comment)
                if m:
                    current = m.group(1)
            line += comment.count("\n")
            i = end
            continue
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if c == "#" and not "".join(stmt).strip() and depth == 0:
            # a preprocessor line (with its continuations)
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    line += 1
                    i += 1
                i += 1
            continue
        if c == "\n":
            line += 1
        if c in "{(":
            depth += 1
        elif c in "})":
            depth -= 1
        if depth == 0 and c in ";}":
            s = "".join(stmt + [c]).strip()
            if c == ";" and "{" not in s and "=" not in s:
                m = DECL.match(s)
                if m and current:
                    out.append((stmt_line, m.group(1), current))
            stmt, stmt_line = [], None
            i += 1
            continue
        if stmt_line is None and not c.isspace():
            stmt_line = line
        stmt.append(c)
        i += 1
    return out


DEFN = re.compile(r"(?m)^[A-Za-z_][\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{")


def definers(folder, name, cache):
    """The .c files of folder that define function name."""
    if folder not in cache:
        cache[folder] = {}
        for f in sorted(os.listdir(folder)):
            if f.endswith(".c"):
                text = strip_strings(open(os.path.join(folder, f), encoding="utf-8").read())
                for m in DEFN.finditer(text):
                    cache[folder].setdefault(m.group(1), []).append(f)
    return cache[folder].get(name, [])


def internal_headers(src):
    for top in ("common/src", "services", "tools"):
        for root, _, files in os.walk(os.path.join(src, top)):
            for f in sorted(files):
                if f.endswith(".h"):
                    yield os.path.join(root, f)


def check(src, headers):
    bad = []
    cache = {}
    checked = 0
    for h in headers:
        folder = os.path.dirname(h)
        rel = os.path.relpath(h, src)
        for line, name, named in groups(h):
            checked += 1
            if not os.path.exists(os.path.join(folder, named)):
                bad.append("%s:%d: %s is listed under %s, which does not exist" % (rel, line, name, named))
                continue
            where = definers(folder, name, cache)
            if named not in where:
                bad.append("%s:%d: %s is listed under %s but defined in %s" %
                           (rel, line, name, named, ", ".join(where) if where else "no file of its folder"))
    return checked, bad


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: check_header_map.py SOURCE_DIR [HEADER...]")
    src = sys.argv[1]
    headers = sys.argv[2:] or list(internal_headers(src))
    checked, bad = check(src, headers)
    for b in bad:
        print(b, file=sys.stderr)
    if bad:
        print("style.header_map: %d of %d grouped declarations are not defined where their header says "
              "(move the declaration under its file's comment, or fix the comment)" % (len(bad), checked),
              file=sys.stderr)
        return 1
    print("style.header_map: %d grouped declarations in %d headers, each defined where its header says" %
          (checked, len(headers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
