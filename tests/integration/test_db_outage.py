"""PostgreSQL unreachable (docs/contract.md K§3.5: "commit nothing, skip nothing, keep polling
(so the group does not evict the member) with partitions paused, retry with backoff, resume by
itself").

PostgreSQL is stopped (scripts/env.sh stop pg) while claims and chunks are published. For
longer than the consumers' session timeout and max.poll.interval.ms (both 10 s here), and
longer than completion's loop.prerequisite_wait (10 s here):
- no reply appears and no consumer group's committed offset moves;
- every service stays up, and no consumer loses its partitions (no revocation: a loop blocked
  on the database instead of polling would be evicted after max.poll.interval.ms);
- the services keep trying (db_unavailable lines in their logs).
PostgreSQL comes back (scripts/env.sh start pg, same port) and, without any restart:
- every message is applied exactly once (one ACCEPTED reply per message); an undecodable
  message published during the outage, whose dead letter cannot be recorded in the ledger
  either, is held on its own offset and dead-lettered once when the database is back;
- the outage does not count as waiting for a prerequisite: the chunks of partition 0007, whose
  claim is only published after the database is back, wait for it (deferred) and are applied,
  instead of being dead-lettered at once for a "prerequisite_wait" spent in the outage;
- the run reaches EXTRACTED_VALIDATED with one dispatch and one command.
"""
import time

import pytest

from conftest import new_run
from llsim.drills import Isolated, RawReader, committed, env_sh, events, log_lines, pg_ready, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.stack import SERVICES

OUTAGE_S = 16
LOOP = {"kafka.max.poll.interval.ms": 10000, "kafka.session.timeout.ms": 10000, "loop.retry_backoff_max": "PT2S"}


@pytest.fixture(scope="module")
def iso():
    i = Isolated("outage")
    yield i
    if not pg_ready(i.stack):
        env_sh(i.stack, "start", "pg")
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


def since(path, t0, name):
    """Log lines of an event written after t0 (epoch seconds)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t0))
    return [e for e in events(path, name) if e["ts"] >= stamp]


def test_database_outage_commits_nothing_and_loses_nothing(iso):
    st = iso.stack
    for s in ("registrar", "claimer"):
        st.start(s, settings=LOOP)
    st.start("completion", settings=dict(LOOP, **{"loop.prerequisite_wait": "PT10S"}))
    st.start("dispatcher")
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    dlq = RawReader(st.bootstrap, iso.topic("dead-letters"), from_beginning=True)
    topics = [iso.topic(t) for t in iso.topics]
    try:
        run = new_run()
        flow.create(run)
        flow.register(run)
        before_outage = ["0000", "0001", "0002", "0003", "0004"]
        for pid in before_outage:
            nifi.send("partition-claims", run.claim(pid))
        nifi.flush()
        flow.reply("claim-decisions", run.run_id, count=len(before_outage))
        for pid in ("0000", "0001", "0002"):
            for c in run.chunks(pid):
                nifi.send("chunks", c)
        nifi.flush()
        flow.reply("chunk-outcomes", run.run_id, count=9)
        offsets = {g: committed(st.bootstrap, g, topics) for g in iso.groups.values()}

        # the outage: claims and chunks published while PostgreSQL is down
        t_stop = time.time()
        env_sh(st, "stop", "pg")
        assert not pg_ready(st)
        # first in the run's chunk partition: 0007's chunks, whose claim is not published yet;
        # they are the messages the outage holds, and the ones deferred once it is over
        # first of all an undecodable message: its dead letter cannot be recorded either, so it
        # is held like the others, on its own offset
        nifi.send("chunks", None, key=run.run_id, raw=b"\xff\xff\xff\xff")
        token7 = run.claim("0007")["claimToken"]
        nifi.send("partition-claims", run.claim("0006"))
        during = run.chunks("0007", token=token7) + run.chunks("0003") + run.chunks("0004") + run.chunks("0006")
        for c in during:
            nifi.send("chunks", c)
        nifi.flush()
        logs = {s: st.log_path(s + "-0") for s in ("registrar", "claimer", "completion")}
        wait_until(lambda: since(logs["completion"], t_stop, "db_unavailable"), 30,
                   "completion meeting the outage")
        wait_until(lambda: since(logs["claimer"], t_stop, "db_unavailable"), 30, "claimer meeting the outage")
        while time.time() < t_stop + OUTAGE_S:  # the outage lasts: nothing may move meanwhile
            for t in ("chunk-outcomes", "claim-decisions"):
                flow.r[t].drain(0.5)
            assert all(st.alive(i) for i in list(st.procs)), "a service died during the outage"
        assert len([r for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id]) == 9
        assert len([r for r in flow.r["claim-decisions"].records if r["value"]["runId"] == run.run_id]) == 5
        assert {g: committed(st.bootstrap, g, topics) for g in iso.groups.values()} == offsets, \
            "an offset was committed while the database was down"
        for s, path in logs.items():
            assert not since(path, t_stop, "partitions_revoked"), "%s lost its partitions during the outage" % s
        outage_s = time.time() - t_stop

        # back: everything is applied by itself, exactly once
        env_sh(st, "start", "pg")
        t_back = time.time()
        flow.reply("claim-decisions", run.run_id, count=6, timeout=60)
        # 0007's chunks wait for their claim, which comes now: the outage (longer than
        # prerequisite_wait) did not use up their wait
        wait_until(lambda: [e for e in since(logs["completion"], t_back, "message_deferred")
                            if e.get("partitionId") == "0007"], 30, "0007's first chunk deferred")
        nifi.send("partition-claims", run.claim("0007"))
        nifi.flush()
        flow.reply("chunk-outcomes", run.run_id, count=21, timeout=60)
        flow.validate_commands(run)
        for r in flow.r.values():
            r.drain(1)
        dlq.drain(1)

        chunk_replies = [r["value"] for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id]
        keys = sorted((v["partitionId"], v["chunkIndex"]) for v in chunk_replies)
        assert keys == sorted((pid, i) for pid in run.nonempty() for i in range(3)), keys
        assert {v["outcome"] for v in chunk_replies} == {"ACCEPTED"}
        claims = [r["value"] for r in flow.r["claim-decisions"].records if r["value"]["runId"] == run.run_id]
        assert sorted(v["partitionId"] for v in claims) == run.nonempty()
        assert all(v["outcome"] == "ACCEPTED" and v["claimed"] for v in claims)
        [dead] = dlq.records  # the undecodable message, once; nothing else
        assert dead["raw"] == b"\xff\xff\xff\xff" and dead["headers"]["ll.error.code"] == b"DECODE_FAILED"
        cmds = [r["value"] for r in flow.r["validate-run-commands"].records if r["value"]["runId"] == run.run_id]
        assert len(cmds) == 1

        db = st.db()
        cur = db.cursor()
        cur.execute("SELECT status, extracted_count, version_no FROM nifi_ops.load_run WHERE run_id = %s",
                    (run.run_id,))
        assert cur.fetchone() == ("EXTRACTED_VALIDATED", 105000, 2)
        cur.execute("SELECT count(*), count(DISTINCT (partition_id, chunk_index)) FROM nifi_ops.load_file"
                    " WHERE run_id = %s", (run.run_id,))
        assert cur.fetchone() == (21, 21)
        cur.execute("SELECT partition_id, attempt_count FROM nifi_ops.load_partition WHERE run_id = %s"
                    " AND expected_row_count > 0 ORDER BY 1", (run.run_id,))
        assert cur.fetchall() == [(pid, 1) for pid in run.nonempty()]
        cur.execute("SELECT event_name, count(*) FROM nifi_ops.load_event WHERE run_id = %s GROUP BY 1",
                    (run.run_id,))
        assert dict(cur.fetchall()) == {"RUN_STARTED": 1, "MANIFEST_CREATED": 1, "PARTITION_STARTED": 7,
                                        "PARTITION_SUCCESS": 7, "EXTRACT_VALIDATED": 1, "DEAD_LETTER": 1}
        cur.execute("SELECT dispatch_id::text, status FROM nifi_ops.load_dispatch WHERE run_id = %s", (run.run_id,))
        assert cur.fetchall() == [(cmds[0]["dispatchId"], "SENT")]
        db.close()
        assert all(st.alive(i) for i in list(st.procs))
        assert outage_s >= OUTAGE_S
        # no member was evicted at any time, before or after the outage
        for s, path in logs.items():
            assert len(events(path, "partitions_assigned")) == 1, s
        assert len([e for e in log_lines(logs["completion"]) if e.get("event") == "dead_letter"]) == 1
    finally:
        if not pg_ready(st):
            env_sh(st, "start", "pg")
        flow.close()
        dlq.close()
