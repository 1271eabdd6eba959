"""kill -9 of the completion service between its database commit and its Kafka commit
(docs/contract.md K§3.3, the crash point of common/src/loop/loop.c's header comment).

The fault-injection setting fault.crash_after_db_commits = N makes the loop raise SIGKILL right
after its Nth database commit, before that message's reply is produced and before the Kafka
transaction of its batch commits. The drill:

1. The run is registered and claimed; partitions 0000-0003 are extracted normally.
2. completion is stopped; the six chunks of partitions 0004 and 0006 are published while it is
   down, so that the restarted instance reads them in one batch (one Kafka partition, one fetch);
   it is started with crash_after_db_commits = 4: it applies and commits chunks 1-4 in the
   ledger, produces the replies of chunks 1-3 into its open Kafka transaction, and dies.
3. The ledger is snapshot; a marker record is published on the reply partition: a
   read_committed reader cannot see it while the dead instance's transaction is open.
4. The chunks of partition 0007 are published ("the later messages"); completion restarts
   with the same service.instance_id, hence the same transactional.id: its init_transactions
   fences the dead producer and aborts its transaction at once (not after
   transaction.timeout.ms), the group's offsets are where the last committed batch left them,
   and the crashed batch is applied again.

Which outcome is correct for a chunk whose database commit happened but whose reply did not:
REPLAY. The ledger already holds the chunk exactly as reported, so the second apply changes
nothing, and REPLAY is the outcome that says "nothing changed, same answer" (docs/topics.md "Every input
yields exactly one reply"). The aborted ACCEPTED reply never reaches a read_committed reader.
"""
import os
import signal
import time

import pytest

from conftest import new_run
from llsim.drills import (Isolated, RawReader, assignment, events, log_lines, send_to, snapshot, snapshot_diff,
                          wait_until)
from llsim.flow import Flow
from llsim.kafkaio import Nifi

# Columns a re-applied chunk report refreshes by contract (§5.4 step 7 heartbeats, §3.3 updated_at).
TOUCHED = {"load_run": {"heartbeat_at"}, "load_partition": {"heartbeat_at"}, "load_file": {"updated_at"}}
CRASH_AFTER = 4


@pytest.fixture(scope="module")
def iso():
    i = Isolated("crash")
    yield i
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


def send_chunks(nifi, run, pids):
    sent = []
    for pid in pids:
        for c in run.chunks(pid):
            nifi.send("chunks", c)
            sent.append((pid, c["chunkIndex"]))
    nifi.flush()
    return sent


def chunk_key(rec):
    v = rec["value"]
    return (v["partitionId"], v["chunkIndex"])


def test_kill_between_db_commit_and_kafka_commit(iso):
    st = iso.stack
    for s in ("registrar", "claimer", "dispatcher"):
        st.start(s)
    st.start("completion", "completion-0")
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    uncommitted = RawReader(st.bootstrap, iso.topic("chunk-outcomes"), "chunk-outcomes", "read_uncommitted",
                            from_beginning=False)
    db = st.db()
    cur = db.cursor()
    try:
        run = new_run()
        assert flow.create(run)["outcome"] == "ACCEPTED"
        assert flow.register(run)["runStatus"] == "EXTRACTING"
        assert all(c["claimed"] for c in flow.claim_all(run))

        # 1. normal extraction of four partitions
        first = send_chunks(nifi, run, ["0000", "0001", "0002", "0003"])
        replies = flow.reply("chunk-outcomes", run.run_id, count=len(first))
        assert sorted(r["outcome"] for r in replies) == ["ACCEPTED"] * len(first)
        assert st.stop("completion-0") == 0

        # 2. the crashing batch: published while completion is down, then one fetch
        crash_batch = send_chunks(nifi, run, ["0004", "0006"])
        st.start("completion", "completion-0", settings={"fault.crash_after_db_commits": CRASH_AFTER, "loop.db_batch_max": 1})
        rc = st.wait_exit("completion-0", timeout=90)
        assert rc == -9, "completion should have killed itself with SIGKILL, exit %s" % rc

        # 3. what the dead instance left: exactly CRASH_AFTER chunks of the batch in the ledger
        before = snapshot(cur, TOUCHED)
        in_ledger = {(f["partition_id"], f["chunk_index"]) for f in before["load_file"]}
        committed_by_crash = [c for c in crash_batch if c in in_ledger]
        assert committed_by_crash == crash_batch[:CRASH_AFTER], "the loop applies a batch in offset order"
        # ... and no reply of the batch committed: its transaction was open when it died
        flow.r["chunk-outcomes"].drain(2)
        seen = [r for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id]
        assert len(seen) == len(first)
        # the open transaction holds back read_committed readers of its partition: a marker
        # published after it is invisible until the transaction ends
        marker = {"runId": run.run_id, "partitionId": None, "outcome": "MARKER", "code": None, "message": None,
                  "runStatus": None, "partitionStatus": None, "sourceTopic": "test", "sourcePartition": 0,
                  "sourceOffset": 0, "claimToken": run.tokens["0000"], "chunkIndex": 0, "chunkCount": 1,
                  "recorded": False, "receivedChunks": 0, "validationScheduled": False, "details": {}}
        nifi.send("chunk-outcomes", marker)
        nifi.flush()
        is_marker = lambda r: r["value"]["runId"] == run.run_id and r["value"]["outcome"] == "MARKER"  # noqa: E731
        uncommitted.wait_for(is_marker, timeout=10)
        flow.r["chunk-outcomes"].drain(3)
        uncommitted.drain(1)
        assert not [r for r in flow.r["chunk-outcomes"].records if is_marker(r)], \
            "a read_committed reader saw past the dead instance's open transaction: %s" % [
                (r["partition"], r["offset"], r["value"]["outcome"]) for r in uncommitted.records]
        aborted = [chunk_key(r) for r in uncommitted.records
                   if r["value"]["runId"] == run.run_id and not is_marker(r) and chunk_key(r) not in first]
        assert sorted(aborted) == crash_batch[:CRASH_AFTER - 1], \
            "the replies of the chunks applied before the crash are in the open transaction"

        # 4. later messages, then the restart with the same transactional id
        later = send_chunks(nifi, run, ["0007"])
        t0 = time.time()
        st.start("completion", "completion-0")
        flow.r["chunk-outcomes"].wait_for(is_marker, timeout=30)
        abort_s = time.time() - t0
        assert abort_s < 20, "the dead transaction blocked read_committed readers for %.1fs" % abort_s

        pending = crash_batch + later
        flow.reply("chunk-outcomes", run.run_id, pred=lambda v: v["outcome"] != "MARKER", count=len(first) + len(pending),
                   timeout=90)
        cmds = flow.validate_commands(run)
        flow.r["chunk-outcomes"].drain(3)
        flow.r["validate-run-commands"].drain(3)

        # every chunk answered exactly once for a read_committed reader
        mine = [r for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id and not is_marker(r)]
        keys = sorted(chunk_key(r) for r in mine)
        assert keys == sorted(first + pending), "duplicate or missing replies: %s" % keys
        outcome = {chunk_key(r): r["value"] for r in mine}
        for c in pending:
            want = "REPLAY" if c in committed_by_crash else "ACCEPTED"
            assert outcome[c]["outcome"] == want, (c, outcome[c])
            assert outcome[c]["code"] is None and outcome[c]["recorded"] is True
        assert [c for c in pending if outcome[c]["validationScheduled"]] == [later[-1]]
        assert outcome[later[-1]]["runStatus"] == "EXTRACTED_VALIDATED"
        # a read_uncommitted reader also sees the aborted replies: that is what the abort hides
        uncommitted.drain(2)
        again = [chunk_key(r) for r in uncommitted.records
                 if r["value"]["runId"] == run.run_id and not is_marker(r) and chunk_key(r) not in first]
        assert sorted(again) == sorted(crash_batch[:CRASH_AFTER - 1] + pending)

        # the ledger: the snapshot's rows untouched, plus exactly the later messages' effects
        after = snapshot(cur, TOUCHED)
        diff = snapshot_diff(before, after)
        gone = [d for d in diff if ": gone or changed: " in d]
        changed_tables = {d.split(":", 1)[0] for d in gone}
        assert changed_tables <= {"load_run", "load_partition"}, gone
        assert {f["chunk_index"] for f in before["load_file"]} and all(
            f in after["load_file"] for f in before["load_file"])
        files = {(f["partition_id"], f["chunk_index"]) for f in after["load_file"]}
        assert files == set(first + pending)
        parts = {p["partition_id"]: p for p in after["load_partition"]}
        for p in run.parts:
            pid = p["partitionId"]
            assert parts[pid]["status"] == "SUCCESS"
            assert parts[pid]["actual_row_count"] == p["expectedRowCount"]
            assert parts[pid]["file_count"] == (3 if p["expectedRowCount"] else 0)
        # partitions the crash had already completed were not completed a second time
        for pid in ("0000", "0001", "0002", "0003", "0004"):
            assert parts[pid] == {k: v for k, v in next(
                x for x in before["load_partition"] if x["partition_id"] == pid).items()}
        [r] = after["load_run"]
        assert (r["status"], r["extracted_count"], r["success_partition_count"], r["version_no"]) == \
            ("EXTRACTED_VALIDATED", 105000, 8, 2)
        ev = sorted((e["event_name"], e["partition_id"]) for e in after["load_event"])
        assert ev == sorted([("RUN_STARTED", None), ("MANIFEST_CREATED", None), ("EXTRACT_VALIDATED", None)]
                            + [("PARTITION_STARTED", pid) for pid in run.nonempty()]
                            + [("PARTITION_SUCCESS", pid) for pid in run.nonempty()]), ev
        [d] = after["load_dispatch"]
        assert d["dispatch_type"] == "VALIDATE_RUN" and d["status"] == "SENT" and d["attempt_count"] == 1
        assert [c["dispatchId"] for c in cmds] == [str(d["dispatch_id"])]
        assert len([c for c in flow.r["validate-run-commands"].records if c["value"]["runId"] == run.run_id]) == 1
        assert st.stop("completion-0") == 0
    finally:
        flow.close()
        uncommitted.close()
        db.close()


# loop.overlap_commit; a short instance lease (common/src/core/instance.c): the frozen zombie still
# holds it, and its replacement may take it over only once it expired
OVERLAP = {"loop.overlap_commit": "true", "service.instance_lease": "PT2S"}


def test_a_zombie_is_fenced_by_its_restarted_self(iso):
    """The other half of "same service.instance_id": the old process is not dead but frozen (a
    long GC-like pause, SIGSTOP) while its replacement starts. The replacement's
    init_transactions fences it; when the zombie wakes up, rejoins the group and applies what it
    is given, its Kafka transaction fails as fenced, and it exits with 2 (docs/contract.md K§3.4:
    a fatal Kafka error ends the process for the supervisor). The replacement starts only once the
    zombie's instance lease (PT2S here) expired: before, it would be refused (exit 4,
    test_instance_lease.py); the zombie, woken, may also find its lease taken over first
    (instance_lease_lost), which ends it with 2 as well. What it applied in the ledger
    meanwhile is answered once, as REPLAY, by the replacement; nothing is answered twice."""
    st = iso.stack
    for s in ("registrar", "claimer", "dispatcher"):
        if s + "-0" not in st.procs:
            st.start(s)
    chunks = iso.topic("chunks")
    log = st.log_path("completion-z")
    # loop.overlap_commit: the fenced commit fails on the commit thread, and the loop must take
    # that outcome (and exit) although no later batch waits for it
    st.start("completion", "completion-z", settings=OVERLAP)
    wait_until(lambda: assignment(log, chunks) == [0, 1, 2], 60, "completion-z owning the chunks")
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    db = st.db()
    cur = db.cursor()
    zombie = None
    try:
        run = new_run()
        flow.create(run)
        flow.register(run)
        flow.claim_all(run)
        first = send_chunks(nifi, run, ["0000", "0001", "0002"])
        flow.reply("chunk-outcomes", run.run_id, count=len(first))

        zombie, zlog = st.procs.pop("completion-z")
        zombie.send_signal(signal.SIGSTOP)
        os.rename(log, log + ".zombie")  # its descriptor follows the file; the replacement logs anew
        # a live process holds the instance lease: the replacement is refused (exit 4) until the
        # frozen zombie's lease (PT2S) expired, then takes it over
        time.sleep(3)
        st.start("completion", "completion-z", settings=OVERLAP)
        # the zombie's membership expires (session timeout), then the replacement owns everything
        wait_until(lambda: assignment(log, chunks) == [0, 1, 2], 60, "the replacement owning the chunks")
        second = send_chunks(nifi, run, ["0003", "0004"])
        flow.reply("chunk-outcomes", run.run_id, count=len(first) + len(second))

        zombie.send_signal(signal.SIGCONT)
        # Two orders are correct, and which one happens is the broker's timing, not the service's:
        # - the zombie's fetcher still thinks it owns the chunks and hands its loop the records
        #   produced during the pause (0003, 0004) before the coordinator tells it the session has
        #   expired; it applies them (REPLAY in the ledger) and its transaction fails as fenced;
        # - or it notices the expired session first, rejoins, the range assignor gives each member a
        #   share, and the first batch it applies on its new share is fenced.
        # Either way it exits with 2 and nothing it did reaches the outcome topics.
        def last_events(path, n=8):
            return ["%s: %s" % (e.get("event"), e.get("msg", "")[:160]) for e in log_lines(path)[-n:]]

        def rejoined_or_exited():
            if zombie.poll() is not None:
                return "exited"
            if len(events(log + ".zombie", "partitions_assigned")) < 2:
                return False
            z, r = assignment(log + ".zombie", chunks), assignment(log, chunks)
            return "rejoined" if z and r and sorted(z + r) == [0, 1, 2] else False
        # the zombie's session (kafka.session.timeout.ms 10 s) has expired: it rejoins at once, and
        # the replacement follows within a heartbeat (3 s); the rebalance itself is bounded by
        # max.poll.interval.ms (300 s), so 60 s is far more than a healthy rejoin needs
        try:
            how = wait_until(rejoined_or_exited, 60, "the zombie back in the group or fenced")
        except TimeoutError as e:
            raise TimeoutError("%s: zombie assigned %s (%d assignments), replacement %s; the zombie's last events: %s;"
                               " the replacement's: %s" % (e, assignment(log + ".zombie", chunks),
                                                           len(events(log + ".zombie", "partitions_assigned")),
                                                           assignment(log, chunks), last_events(log + ".zombie"),
                                                           last_events(log))) from e
        if how == "rejoined":
            # one chunk of 0006 to a partition of the zombie (one message: its whole last batch),
            # the two others to the replacement's partitions
            zpart = assignment(log + ".zombie", chunks)
            rpart = assignment(log, chunks)
            targets = [zpart[0]] + [rpart[i % len(rpart)] for i in range(2)]
        else:
            # fenced on the records of the pause: all of 0006 goes to the replacement, which owns
            # every chunk partition again once the zombie's membership is gone
            zpart = []
            wait_until(lambda: assignment(log, chunks) == [0, 1, 2], 60, "the replacement owning the chunks again")
            targets = [0, 1, 2]
        last = []
        for c, kpart in zip(run.chunks("0006"), targets):
            send_to(nifi, "chunks", c, partition=kpart, key="%s/%d" % (run.run_id, c["chunkIndex"]))
            last.append(("0006", c["chunkIndex"], kpart))
        nifi.flush()
        assert zombie.wait(timeout=60) == 2, "the fenced zombie must exit with 2"
        zlog.close()
        zombie = None
        zlines = log_lines(log + ".zombie")
        # fenced by the replacement's producer, or stopped first by its own lease's renewal, which
        # finds the replacement holding it (instance_lease_lost): both exit 2, nothing answered twice
        assert any(e.get("event") == "kafka_txn_error" and "fenced" in e.get("msg", "").lower() or
                   e.get("event") == "instance_lease_lost" for e in zlines), \
            [e for e in zlines if e.get("level") == "error"]
        assert not [e for e in zlines if e.get("event") == "fault_injected"]

        rest = send_chunks(nifi, run, ["0007"])
        flow.reply("chunk-outcomes", run.run_id, count=len(first) + len(second) + 3 + len(rest), timeout=90)
        flow.validate_commands(run)
        flow.r["chunk-outcomes"].drain(3)
        mine = [r["value"] for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id]
        keys = sorted((v["partitionId"], v["chunkIndex"]) for v in mine)
        assert keys == sorted(first + second + [(p, i) for p, i, _k in last] + rest), keys
        for p, i, kpart in last:
            [v] = [v for v in mine if (v["partitionId"], v["chunkIndex"]) == (p, i)]
            # the zombie's chunk: REPLAY when the zombie reached its database commit before its
            # Kafka transaction was found fenced, ACCEPTED when the fencing showed first (at begin
            # or produce); either way it is answered exactly once (the keys above)
            expected = ("REPLAY", "ACCEPTED") if kpart in zpart else ("ACCEPTED",)
            assert v["outcome"] in expected, (kpart, zpart, v)
            assert v["sourcePartition"] == kpart
        assert {v["outcome"] for v in mine if (v["partitionId"], v["chunkIndex"]) in first + second + rest} == \
            {"ACCEPTED"}
        cur.execute("SELECT status, extracted_count, version_no FROM nifi_ops.load_run WHERE run_id = %s",
                    (run.run_id,))
        assert cur.fetchone() == ("EXTRACTED_VALIDATED", 105000, 2)
        cur.execute("SELECT event_name, count(*) FROM nifi_ops.load_event WHERE run_id = %s GROUP BY 1",
                    (run.run_id,))
        assert dict(cur.fetchall()) == {"RUN_STARTED": 1, "MANIFEST_CREATED": 1, "PARTITION_STARTED": 7,
                                        "PARTITION_SUCCESS": 7, "EXTRACT_VALIDATED": 1}
        assert st.stop("completion-z") == 0
    finally:
        if zombie is not None:
            zombie.send_signal(signal.SIGCONT)
            zombie.kill()
            zombie.wait()
        flow.close()
        db.close()
