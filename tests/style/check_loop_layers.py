#!/usr/bin/env python3
"""The consumer loop's structure, as docs/design.md §3 draws it (ctest style.loop_layers; issue 40).

The loop is common/src/loop/*.c. Three checks, each failing with what to fix:

1. The file map. docs/design.md §3 ("The files, and who calls whom") lists the loop's files in a
   code block, top first, one file at the start of a line (after indentation). The files it lists
   must be the folder's .c files, no more and no fewer.
2. Calls go down. A file "calls" another when it names, followed by `(`, a function that the other
   defines with external linkage (not `static`); a call through a pointer (`l->kio->seek(`,
   `m->ops->touch_run(`) is not one: that is a table (io.h, ll_msg_ops). Every file calls only
   files listed below it in the map: a call up (a part calling back into what called it, a
   callback reaching its caller by name) fails, naming the call.
3. One object's struct is its file's. A struct whose body is in a loop header (not private to one
   .c file) has an owner (OWNERS below); a member of it (a name no other struct of the loop has)
   used as `->member` or `.member` in another file is a use of that object's insides. struct
   ll_loop is the loop's objects side by side: its header marks each part `owned by X.c`, and
   its environment (handles and settings made by setup.c, read by every object), which only
   setup.c may assign. A struct may mark a part `handed down` (struct lmsg: the message's
   coordinates and bytes, read by every object it is handed to) before its owners' part. A
   variable that always holds one struct (NAMED: `ps` is a partition) is counted by every member
   used through it, the names the struct shares with others too; a member that is another
   object's struct, embedded (EMBEDDED: part_state.pos, position.c's), is its owner's. Any use
   fails (issue 40 paid the last of 368).

What it reads is text, so it can be fooled, and says what it is not: a call through a function
value (a table entry, a registered callback such as the rebalance callback librdkafka runs) is not
a call; the inline functions of the headers (accessors such as ll_loop_recovering) are not read; a
member name another struct also has, or one of three letters or fewer, is not counted (unless
used through a NAMED variable); the
environment is checked for writes of the form `l->member op= ...`, `++`, `--` only. It keeps
honest code honest; it is no proof.

Usage: check_loop_layers.py SOURCE_DIR. Reads the source tree only; well under a second.
"""
import os
import re
import sys

DEF = re.compile(r"^(?!static\b)(?:[A-Za-z_][\w\s\*]*?)\b([A-Za-z_]\w*)\s*\([^;{]*\)\s*\{", re.M | re.S)
STRUCT = re.compile(r"(?:typedef\s+)?struct\s+(\w+)\s*\{(.*?)\}\s*(\w*)\s*;", re.S)

# The object each shared struct belongs to: the files that may use its members.
OWNERS = {
    "topic_io": {"setup.c"},
    "lmsg": {"batch.c", "partition.c"},  # the batch's messages and the held queues' copies of them
    "part_state": {"partition.c"},
    "part_position": {"position.c"},  # a partition's read position in the ledger (part_state.pos)
    "run_clock": {"partition.c"},
    "ll_recovery_state": {"loop.c"},
    "batch": {"batch.c"},
    "run_waits": {"batch.c"},
}
# Shared on purpose: a table of calls (io.h), and values one object hands another (returned, or
# passed down as an argument: a result of the transaction, an offset done, what the precommit
# statement writes, an undo point).
INTERFACES = {"ll_loop_io", "ll_batch_end", "out_item", "done_mark", "ll_precommit", "ll_txn_mark",
              "ll_part_merged"}
# How the loop always names one struct (a regular expression of the name and its `->` or `.`, per
# struct): every member used through it is counted, a name the struct shares with others too.
NAMED = {"part_state": r"ps->", "ll_recovery_state": r"rec\.", "lmsg": r"m->"}
# A member that is another object's struct, embedded (its owner reaches it through the outer one).
EMBEDDED = {("part_state", "pos"): "position.c"}
# librdkafka's message (rd_kafka_message_t): its member names are not the loop's to count.
RKM = {"err", "rkt", "partition", "payload", "len", "key", "key_len", "offset", "_private"}


def strip(text):
    """The text without comments, string and character literals."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', '""', text)


def design_map(src):
    """The files docs/design.md §3 lists, top first (None when the block is not found)."""
    text = open(os.path.join(src, "docs", "design.md"), encoding="utf-8").read()
    at = text.find("### The files, and who calls whom")
    if at < 0:
        return None
    block = re.search(r"```\n(.*?)```", text[at:], re.S)
    if not block:
        return None
    out = []
    for line in block.group(1).split("\n"):
        m = re.match(r"\s*(\w+\.c)\b", line)
        if m and m.group(1) not in out:
            out.append(m.group(1))
    return out


def loop_parts(text):
    """struct ll_loop's parts as its header marks them: {owner file or "": member names} ("": the
    environment)."""
    m = re.search(r"struct ll_loop \{(.*?)\n\};", text, re.S)
    body = re.sub(r"/\* ---- (?:owned by (\w+\.c)|the environment).*?\*/", lambda x: "@@PART " + (x.group(1) or "") + "\n",
                  m.group(1) if m else "")
    parts, owner, stmt = {}, None, ""
    for line in strip(body).split("\n"):
        if line.strip().startswith("@@PART"):
            owner = line.strip()[len("@@PART"):].strip()
            continue
        stmt += " " + line
        if ";" in line and owner is not None:
            parts.setdefault(owner, set()).update(members(stmt))
            stmt = ""
        elif ";" in line:
            stmt = ""
    return parts


def handed_down(text, name):
    """A struct whose header marks a part handed down (a value every object it is handed to reads,
    a line '/* ---- handed down') before its owners' part (a line '/* ---- owned by'): the two
    member sets (shared, owned); (set(), set()) when it has no such marks."""
    m = re.search(r"typedef struct %s \{(.*?)\n\}" % re.escape(name), text, re.S)
    if not m or "/* ---- handed down" not in m.group(1):
        return set(), set()
    body = m.group(1)
    at = body.find("/* ---- owned by")
    if at < 0:
        return members(body), set()
    return members(body[:at]), members(body[at:])


def members(body):
    """The member names declared in a struct body (without nested comments)."""
    names = set()
    for decl in strip(body).split(";"):
        decl = re.sub(r"\[[^\]]*\]", "", decl)
        decl = re.sub(r"\(\s*\*\s*(\w+)\s*\)\s*\(.*", r"\1", decl, flags=re.S)
        for part in decl.split(","):
            m = re.search(r"(\w+)\s*$", part.strip())
            if m:
                names.add(m.group(1))
    return names


def main(src):
    loop = os.path.join(src, "common", "src", "loop")
    files = sorted(f for f in os.listdir(loop) if f.endswith(".c"))
    texts = {f: strip(open(os.path.join(loop, f), encoding="utf-8").read()) for f in files}
    bad = []
    order = design_map(src)
    if order is None:
        print("docs/design.md §3: no file map (a code block after '### The files, and who calls whom')")
        return 1
    for f in files:
        if f not in order:
            bad.append(f"{f} is in common/src/loop but not in the file map of docs/design.md §3")
    for f in order:
        if f not in files:
            bad.append(f"{f} is in the file map of docs/design.md §3 but not in common/src/loop")
    defined = {}
    for f, t in texts.items():
        for m in DEF.finditer(t):
            defined.setdefault(m.group(1), f)
    rank = {f: i for i, f in enumerate(order)}
    edges = 0
    for f, t in texts.items():
        for name, g in sorted(defined.items()):
            if g == f or f not in rank or g not in rank:
                continue
            m = re.search(r"(?<![\w>.])" + re.escape(name) + r"\s*\(", t)
            if m:
                edges += 1
                if rank[g] < rank[f]:
                    bad.append(f"{f} calls {g} ({name}), which the map of docs/design.md §3 lists above it: "
                               "a call goes up (report by the result, and let the caller act)")
    # structs of the loop's headers and their members
    structs = {}
    public = {}
    env = set()
    for h in sorted(os.listdir(loop)):
        if h.endswith(".h"):
            raw = open(os.path.join(loop, h), encoding="utf-8").read()
            for m in STRUCT.finditer(strip(raw)):
                name = m.group(3) or m.group(1)
                if name == "ll_loop":
                    for owner, ms in loop_parts(raw).items():
                        if owner:
                            structs[f"ll_loop[{owner}]"] = ms
                            OWNERS[f"ll_loop[{owner}]"] = {owner}
                        else:
                            env = ms
                    continue
                shared, own = handed_down(raw, name)
                if shared:
                    public[f"{name} (handed down)"] = shared
                structs[name] = own if shared else members(m.group(2))
    if not env:
        bad.append("struct ll_loop (loop_int.h): no part marked 'the environment' (a '/* ---- the environment' line)")
    for f, text in texts.items():
        if f == "setup.c":
            continue
        envs = "|".join(map(re.escape, sorted(env)))
        writes = r"\bl->(%s)\b\s*(?:[-+*/|&]?=(?!=)|\+\+|--)|(?:\+\+|--)\s*l->(%s)\b" % (envs, envs)
        for m in re.finditer(writes, text) if env else []:
            bad.append(f"{f} assigns the loop's environment (l->{m.group(1) or m.group(2)}): only setup.c makes it")
    # member names are told apart from those of every other struct the loop sees (its headers and
    # the public ones, librdkafka's message): a name two structs share, or a short generic one, is
    # not counted
    public["rd_kafka_message_t"] = RKM
    inc = os.path.join(src, "common", "include", "ll")
    for h in sorted(os.listdir(inc)):
        if h.endswith(".h"):
            for m in STRUCT.finditer(strip(open(os.path.join(inc, h), encoding="utf-8").read())):
                public[m.group(3) or m.group(1)] = members(m.group(2))
    for name in INTERFACES:
        public[name] = structs.pop(name, set())
    for f, text in texts.items():  # the structs private to a .c file share no member name either
        for m in STRUCT.finditer(text):
            public[f + ":" + (m.group(3) or m.group(1))] = members(m.group(2))
    for name in structs:
        if name not in OWNERS:
            bad.append(f"struct {name} (a loop header) has no owner in OWNERS of this check: make it private "
                       "to its .c file, or name the file that owns it")
    counts = {}
    unique = {}
    for name, ms in structs.items():
        others = set().union(set(), *(v for k, v in structs.items() if k != name), *public.values())
        unique[name] = sorted(m for m in ms - others if len(m) > 3)
    for name, ms in unique.items():
        if not ms:
            continue
        pat = re.compile(r"(?:->|\.)(" + "|".join(map(re.escape, ms)) + r")\b")
        # a struct the loop names one way (NAMED: a partition is `ps`) is counted by every member,
        # the names it shares with others too
        shared = sorted(m for m in structs[name] - set(ms) if name in NAMED and (name, m) not in EMBEDDED)
        by_name = re.compile(r"(?:(?<![\w.>])|(?<=->)|(?<=\.))(?:%s)(%s)\b" % (NAMED.get(name, "@"), "|".join(map(re.escape, shared)) or "@"))
        for f, t in texts.items():
            if f in OWNERS.get(name, set()):
                continue
            n = len(pat.findall(t)) + len(by_name.findall(t))
            n += sum(1 for (s_, m_), owner in EMBEDDED.items() if s_ == name and f != owner
                     for _ in re.finditer(r"(?:(?<![\w.>])|(?<=->)|(?<=\.))(?:%s)%s\b" % (NAMED.get(name, "@"), m_), t))
            if n:
                counts[(name, f)] = n
    for key, n in sorted(counts.items()):
        bad.append(f"{key[1]} uses the members of struct {key[0]} ({n} times), which belongs to "
                   f"{', '.join(sorted(OWNERS.get(key[0], {'?'})))}: ask its owner through its header")
    if bad:
        for b in bad:
            print(b)
        return 1
    print("the loop: " + " > ".join(order) + f" ({edges} calls between files, each going down)")
    print("uses of another object's struct members: none")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
