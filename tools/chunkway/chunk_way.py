"""One ChunkWritten through ll-completion under gdb (tools/chunkway/chunk_way.sh): the registrar and
the claimer run as they are, ll-completion under gdb's dprintf; a run is registered and its
partitions claimed, then one chunk is sent; the way printed is from the turn that took the chunk
to the produce of its reply, in order.

Usage: chunk_way.py BUILD_DIR GDB_SCRIPT TRACE_FILE (the environment's variables set)."""
import os
import subprocess
import sys
import time
import uuid

from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.probe import ensure_topics
from llsim.scenario import Run
from llsim.stack import Stack


def trace(build, script, out):
    st = Stack(build_dir=build)
    st.migrate()
    ensure_topics(st.bootstrap, st.prefix)
    st.start("registrar")
    st.start("claimer")
    conf = st.write_config("completion", "completion-0", {})
    open(out, "w").close()
    log = open(out, "a")
    gdb = subprocess.Popen(["gdb", "-batch", "-nx", "-x", script, "--args",
                            os.path.join(build, "services", "ll-completion"), "--config", conf],
                           stdout=log, stderr=subprocess.STDOUT)
    try:
        t0 = time.time()
        while time.time() - t0 < 120 and "partitions_assigned" not in open(out).read():
            time.sleep(0.5)
        time.sleep(3)
        nifi = Nifi(st.bootstrap, st.prefix)
        flow = Flow(nifi)
        run = Run(business_key="chunkway-" + uuid.uuid4().hex[:12])  # a run of its own, never a duplicate
        flow.create(run)
        flow.register(run)
        flow.claim_all(run)
        time.sleep(2)
        with open(out, "a") as f:
            f.write("@@ MARK sending one chunk\n")
        nifi.send("chunks", run.chunks(run.nonempty()[0])[0])
        nifi.flush()
        reply = flow.reply("chunk-outcomes", run.run_id, count=1, timeout=120)[0]
        time.sleep(3)
        flow.close()
        return reply
    finally:
        gdb.terminate()
        try:
            gdb.wait(10)
        except subprocess.TimeoutExpired:
            gdb.kill()
        st.stop_all()


def way(path):
    lines = open(path).read().split("\n")
    mark = [i for i, ln in enumerate(lines) if ln.startswith("@@ MARK sending")][0]
    evs = [(i, ln.split()[2], ln.split()[3]) for i, ln in enumerate(lines)
           if ln.startswith("@@ ") and not ln.startswith("@@ MARK")]
    first = [k for k, e in enumerate(evs) if e[0] > mark and e[2] in ("completion_apply_chunk", "chunk_bulk")][0]
    start = max(k for k in range(first) if evs[k][2] == "ll_loop_turn")
    end = [k for k in range(first, len(evs)) if evs[k][2] == "produce"][0]
    seq = evs[start:end + 1]
    funcs, files, moves, order = [], [], 0, []
    for _, f, fn in seq:
        if (f, fn) not in funcs:
            funcs.append((f, fn))
        if f not in files:
            files.append(f)
        if order and order[-1][0] == f:
            if order[-1][1][-1] != fn:
                order[-1][1].append(fn)
        else:
            if order:
                moves += 1
            order.append((f, [fn]))
    print("calls %d, distinct functions %d, files %d, moves between files %d" % (len(seq), len(funcs), len(files), moves))
    for f in files:
        print("  %s: %s" % (f, ", ".join(fn for ff, fn in funcs if ff == f)))
    print(" -> ".join("%s(%s)" % (os.path.basename(f), ", ".join(fns)) for f, fns in order))


if __name__ == "__main__":
    r = trace(sys.argv[1], sys.argv[2], sys.argv[3])
    print("reply: %s %s" % (r["outcome"], r.get("code")))
    way(sys.argv[3])
