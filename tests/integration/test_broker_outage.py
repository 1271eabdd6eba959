"""A broker outage is survived in-process (issue 7 §8): the broker is frozen (SIGSTOP) for 20 s
while the services work, then killed -9 and restarted while they work again. Without any restart
of a service:
- every service is still the same process afterwards;
- every input is answered exactly once (read_committed), and each run reaches
  EXTRACTED_VALIDATED with one validate-run command.
A fatal producer error other than fencing recreates the producer in the same process and rewinds
to the committed offsets; a rewind that cannot reach the broker pauses the assignment and retries.
"""
import collections
import os
import signal
import time

import pytest

from conftest import close_clean, new_run
from llsim.drills import Isolated, env_sh, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi

FREEZE_S = 20
LOOP = {"kafka.session.timeout.ms": 10000, "loop.retry_backoff_max": "PT2S"}


def broker_pid(st):
    with open(os.path.join(st.run_dir, "kafka", "kafka.pid")) as f:
        return int(f.read().strip())


@pytest.fixture
def iso():
    i = Isolated("brokerout")
    yield i
    close_clean(i)


def answered(flow, topic, key_fields, run_ids):
    """{key: count} of the replies on topic for the runs."""
    flow.r[topic].drain(2)
    c = collections.Counter()
    for r in flow.r[topic].records:
        v = r["value"]
        if v["runId"] in run_ids:
            c[tuple(v.get(k) for k in key_fields)] += 1
    return c


def test_frozen_then_killed_broker_is_survived_in_process(iso):
    st = iso.stack
    for s in ("registrar", "claimer", "completion", "dispatcher"):
        st.start(s, settings=LOOP if s != "dispatcher" else {})
    pids = {i: p.pid for i, (p, _) in st.procs.items()}
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    runs = [new_run() for _ in range(4)]
    ids = {r.run_id for r in runs}
    try:
        for run in runs:
            flow.create(run)
            flow.register(run)
        # claims of every run and the chunks of the first two, then the broker freezes mid-stream
        for run in runs:
            for pid in run.nonempty():
                nifi.send("partition-claims", run.claim(pid))
        nifi.flush()
        for run in runs[:2]:
            for pid in run.nonempty():
                for c in run.chunks(pid):
                    nifi.send("chunks", c)
        nifi.flush()
        kpid = broker_pid(st)
        os.kill(kpid, signal.SIGSTOP)
        try:
            time.sleep(FREEZE_S)
        finally:
            os.kill(kpid, signal.SIGCONT)
        # the rest of the chunks, then the broker dies hard in the middle of their processing
        for run in runs[2:]:
            for pid in run.nonempty():
                for c in run.chunks(pid):
                    nifi.send("chunks", c)
        nifi.flush()
        time.sleep(1)
        os.kill(kpid, signal.SIGKILL)
        time.sleep(3)
        env_sh(st, "start", "kafka")
        for run in runs:
            flow.validate_commands(run, timeout=180)
        wait_until(lambda: sum(answered(flow, "chunk-outcomes", ("partitionId", "chunkIndex", "runId"), ids).values())
                   >= sum(3 * len(r.nonempty()) for r in runs), 120, "every chunk answered")
        time.sleep(3)  # a duplicate would come now
        for i, p in pids.items():
            assert st.alive(i), "%s exited (rc %s): logs in %s" % (i, st.procs[i][0].poll(), st.log_dir)
            assert st.procs[i][0].pid == p
        claims = answered(flow, "claim-decisions", ("partitionId", "runId"), ids)
        assert set(claims.values()) == {1}, claims
        assert len(claims) == sum(len(r.nonempty()) for r in runs)
        chunks = answered(flow, "chunk-outcomes", ("partitionId", "chunkIndex", "runId"), ids)
        assert set(chunks.values()) == {1}, chunks
        assert len(chunks) == sum(3 * len(r.nonempty()) for r in runs)
        cmds = answered(flow, "validate-run-commands", ("runId",), ids)
        assert len(cmds) == len(runs), cmds  # a command may repeat (docs/design.md §4); inputs may not
        db = st.db()
        cur = db.cursor()
        cur.execute("SELECT status, count(*) FROM nifi_ops.load_run GROUP BY status")
        assert cur.fetchall() == [("EXTRACTED_VALIDATED", len(runs))]
        db.close()
    finally:
        flow.close()
