"""Replay drill (docs/contract.md K§1: "replaying any topic from any offset must never change a
correct ledger, and must never double an effect").

After a scenario with the main path to SUCCESS and its usual detours (a refused duplicate run,
a zombie's claim, a resent and a conflicting chunk, an invalid manifest, a failed partition, a
dead letter, a failed stage validation), every service is stopped, every
consumer group is reset to the earliest offsets (as kafka-consumer-groups --reset-offsets
--to-earliest does: offsets committed for the group while it has no member), and the services
run again over every topic from the start, until the groups have caught up (committed offset =
high watermark on every partition). Then:

- no ledger row is added, removed or changed, in any nifi_ops table (load_run, load_partition,
  load_file, load_dispatch, load_validation, load_claim_token, load_publish_token,
  load_run_rejection, ...), in any column: a digest of every table (every row, every column,
  ordered by primary key) is identical before and after. Not even the activity stamps the
  reference refreshes on an identical re-report (heartbeat_at of run and partition, §5.3 step 3
  and §5.4 step 7; load_file.updated_at, §3.3) move: a replay is not progress, and a heartbeat
  refreshed by a replay would make the sweeper take a dead worker's partition for alive (issue 7
  item 4, docs/design.md §5);
- load_event gains no row at all (a replay writes no event; a dead letter's event has a
  name-based id, so its replay is absorbed);
- no second validate-run command is published;
- every replayed input is answered again, and no answer is ACCEPTED (nothing was applied);
- every replayed input restates its first answer (docs/contract.md K§1, docs/design.md §5, "A replay
  restates"): REPLAY, or the same refusal with the same code, nothing granted that was refused;
  `loadctl verify --topics` passes; the refusals recorded for that (input_refusal) are not written
  again. The scenario has an ending of each kind for it: runs that ended SUCCESS, FAILED_EXTRACT
  (with a rival's refused claim and a CLAIM_MISMATCH chunk), FAILED_STAGE_VALIDATION (a
  gate-blocked stage validation), FAILED_PUBLISH (PUBLISH_UNKNOWN resolved by the operator), a run
  request refused DUPLICATE_ACTIVE_RUN, a partition the sweeper reissued. On 0a54c2f 42 of 145
  replayed inputs were answered otherwise (REJECTED RUN_STATUS_MISMATCH after ACCEPTED, mostly).

The drill runs on a database and topics of its own (llsim.drills.Isolated), so "every table" and
"every topic" mean exactly this scenario.
"""
import time
import uuid

import pytest

from conftest import new_run
from llsim.drills import (Isolated, RawReader, committed, lag, ledger_digest, loadctl_verify, reset_group, snapshot,
                          snapshot_diff, wait_until, watermarks)
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.lifecycle import Lifecycle, staging_metrics
from llsim.stack import SERVICES



@pytest.fixture(scope="module")
def iso():
    i = Isolated("replay")
    yield i
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


def scenario(flow, life, stack):
    """The main path plus the detours a replay must reproduce without effect. Returns the runs."""
    nifi = flow.nifi
    r0 = reissued(flow, stack)
    # R1: the reference run to EXTRACTED_VALIDATED and its one command, then to SUCCESS through
    # validation and publish; a validation start sent twice, a second publish claim refused
    r1 = new_run()
    steps = flow.to_extracted(r1)
    assert steps["run"]["outcome"] == "ACCEPTED" and len(steps["commands"]) == 1
    dispatch_id = steps["commands"][0]["dispatchId"]
    # a resent run request (same run id): REPLAY; a second run for the same key: refused
    nifi.send("run-requests", r1.run_request())
    dup = new_run(business_key=r1.business_key)
    nifi.send("run-requests", dup.run_request())
    nifi.flush()
    assert [d["outcome"] for d in flow.reply("run-decisions", r1.run_id, count=2)] == ["ACCEPTED", "REPLAY"]
    assert flow.reply("run-decisions", dup.run_id)[0]["code"] == "DUPLICATE_ACTIVE_RUN"
    # a zombie's claim (another token), a resent chunk, a conflicting chunk after SUCCESS
    nifi.send("partition-claims", r1.claim("0000", token="00000000-0000-4000-8000-000000000001"))
    nifi.send("chunks", r1.chunks("0001")[0])
    nifi.send("chunks", r1.chunk("0002", 0, 3, 4999))
    nifi.flush()
    zombie = flow.reply("claim-decisions", r1.run_id, pred=lambda v: v["claimToken"].endswith("0001"))[0]
    assert not zombie["claimed"]
    outs = flow.reply("chunk-outcomes", r1.run_id, count=23)[-2:]
    assert [(o["outcome"], o["code"]) for o in outs] == [("REPLAY", None), ("REJECTED", "CHUNK_CONFLICT")]
    # R1 on to SUCCESS (the refused run id stays refused after R1 left the active statuses)
    assert life.start_validation(r1, dispatch_id)["outcome"] == "ACCEPTED"
    assert life.start_validation(r1, dispatch_id)["outcome"] == "REPLAY"
    done = life.to_success(r1, dispatch_id)
    assert done["success"]["runStatus"] == "SUCCESS", done
    _token, refused = life.claim_publish(r1)
    assert not refused["claimed"]
    # R2: a manifest that breaks an invariant (FAILED_MANIFEST)
    r2 = new_run()
    flow.create(r2)
    assert flow.register(r2, plannedPartitionCount=9)["code"] == "MANIFEST_INVALID"
    # R3: extraction fails on a partition (FAILED_EXTRACT); a request refused while R3 was
    # active must stay refused on replay although the key is free by then
    r3 = new_run()
    flow.create(r3)
    dup3 = new_run(business_key=r3.business_key)
    nifi.send("run-requests", dup3.run_request())
    nifi.flush()
    assert flow.reply("run-decisions", dup3.run_id)[0]["code"] == "DUPLICATE_ACTIVE_RUN"
    flow.register(r3)
    flow.claim_all(r3)
    # on the way: a rival's claim of a running partition (refused) and a chunk under a token that
    # does not hold its partition (CLAIM_MISMATCH)
    rival = str(uuid.uuid4())
    nifi.send("partition-claims", r3.claim("0001", token=rival, worker="nifi-node-7"))
    nifi.send("chunks", r3.chunk("0002", 0, 3, 5000, token=rival))
    nifi.flush()
    refused = flow.reply("claim-decisions", r3.run_id, pred=lambda v: v["claimToken"] == rival)[0]
    assert (refused["outcome"], refused["claimed"]) == ("REJECTED", False), refused
    mismatch = flow.reply("chunk-outcomes", r3.run_id, pred=lambda v: v["claimToken"] == rival)[0]
    assert (mismatch["outcome"], mismatch["code"]) == ("REJECTED", "CLAIM_MISMATCH"), mismatch
    nifi.send("chunks", r3.chunks("0000")[0])
    nifi.send("partition-failures", r3.partition_failure("0000"))
    nifi.send("partition-failures", r3.partition_failure("0000"))
    nifi.flush()
    fails = flow.reply("partition-failure-outcomes", r3.run_id, count=2)
    assert [(f["outcome"], f["runStatus"]) for f in fails] == [("ACCEPTED", "FAILED_EXTRACT"), ("REPLAY", "FAILED_EXTRACT")]
    # an undecodable message: a dead letter, recorded once as an event
    nifi.send("chunks", None, key=r3.run_id, raw=b"\xff\xff\xff\xff")
    nifi.flush()
    # R4: extracted, validation started, a failing STAGING metric blocks stage-validated, and the
    # validation flow fails the run
    r4 = new_run()
    d4 = flow.to_extracted(r4)["commands"][0]["dispatchId"]
    life.start_validation(r4, d4)
    assert life.metrics(r4, "STAGING", staging_metrics(r4, fail=("AMOUNT_SUM",)))["failCount"] == 1
    assert life.stage_validated(r4)["outcome"] == "REJECTED"
    assert life.fail(r4, "STAGE_VALIDATING", "FAILED_STAGE_VALIDATION")["runStatus"] == "FAILED_STAGE_VALIDATION"
    # R5: the publish's answer lost (PUBLISH_UNKNOWN), resolved by the operator (§5.15); a second
    # publish claim while it was unknown is refused
    r5 = new_run()
    d5 = flow.to_extracted(r5)["commands"][0]["dispatchId"]
    life.start_validation(r5, d5)
    life.metrics(r5, "STAGING", staging_metrics(r5))
    assert life.stage_validated(r5)["outcome"] == "ACCEPTED"
    token, granted = life.claim_publish(r5)
    assert granted["claimed"], granted
    assert life.publish_result(r5, token, "PUBLISH_UNKNOWN", message="hive session lost")["runStatus"] == \
        "PUBLISH_UNKNOWN"
    _t, second = life.claim_publish(r5)
    assert not second["claimed"], second
    done = stack.loadctl("resolve-publish-unknown", r5.run_id, "--as", "FAILED_PUBLISH",
                         "--reason", "hive history shows the query was never submitted", check=False)
    assert done.returncode == 0, done.stderr
    return [r0, r1, dup, r2, r3, dup3, r4, r5]


def reissued(flow, stack):
    """R0: a partition whose worker stalled, reissued by the sweeper (REISSUE mode, a short
    recovery.stale), claimed by a new token; the stalled worker's late chunk is refused; the run
    extracts. The sweeper runs only here (the other runs would go stale in the replay's pauses)."""
    nifi = flow.nifi
    r0 = new_run(partitions=2, empty=())
    flow.create(r0)
    flow.register(r0)
    flow.claim_all(r0)
    stale = r0.nonempty()[-1]
    nifi.send("chunks", r0.chunks(r0.nonempty()[0])[0])
    for c in r0.chunks(r0.nonempty()[0])[1:]:
        nifi.send("chunks", c)
    nifi.send("chunks", r0.chunks(stale)[0])
    nifi.flush()
    flow.reply("chunk-outcomes", r0.run_id, count=4)
    stack.start("sweeper", settings={"recovery.mode": "REISSUE", "recovery.max_attempts": "3",
                                     "recovery.extract_query_timeout": "PT1S", "recovery.stale": "PT3S",
                                     "recovery.sweeper_interval": "PT0.5S"})
    db = stack.db()
    try:
        wait_until(lambda: _partition_status(db, r0, stale) == "RETRY", 30, "the sweeper's reissue")
    finally:
        db.close()
    assert stack.stop("sweeper-0") == 0
    zombie = r0.tokens[stale]
    fresh = str(uuid.uuid4())
    r0.tokens[stale] = fresh
    nifi.send("partition-claims", r0.claim(stale, token=fresh, worker="nifi-node-9"))
    nifi.flush()
    c = flow.reply("claim-decisions", r0.run_id, lambda v: v["claimToken"] == fresh)[0]
    assert (c["outcome"], c["claimed"], c["attempt"]) == ("ACCEPTED", True, 2), c
    nifi.send("chunks", r0.chunks(stale, token=zombie)[1])
    nifi.flush()
    late = flow.reply("chunk-outcomes", r0.run_id, lambda v: v["claimToken"] == zombie and v["chunkIndex"] == 1)
    assert late[0]["outcome"] == "REJECTED", late
    for ch in r0.chunks(stale, token=fresh):
        nifi.send("chunks", ch)
    nifi.flush()
    assert len(flow.validate_commands(r0)) == 1
    return r0


def _partition_status(db, run, pid):
    with db.cursor() as c:
        c.execute("SELECT status FROM nifi_ops.load_partition WHERE run_id = %s AND partition_id = %s",
                  (run.run_id, pid))
        return c.fetchone()[0]


def group_topics(iso):
    """{group: [topics it committed offsets for]}: the input topics of each consuming service."""
    out = {}
    topics = [iso.topic(t) for t in iso.topics]
    for g in iso.groups.values():
        com = committed(iso.bootstrap, g, topics)
        out[g] = sorted({t for (t, _p), off in com.items() if off >= 0})
    return out


def caught_up(iso, groups):
    return all(lag(iso.bootstrap, g, ts) == 0 for g, ts in groups.items())


def test_replay_from_earliest_changes_nothing(iso):
    st = iso.stack
    for s in SERVICES:
        st.start(s)
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    life = Lifecycle(flow)
    db = st.db()
    cur = db.cursor()
    try:
        runs = scenario(flow, life, st)
        groups = group_topics(iso)
        assert iso.topic("chunks") in groups[iso.groups["completion"]], groups
        assert iso.topic("run-requests") in groups[iso.groups["registrar"]], groups
        wait_until(lambda: caught_up(iso, groups), 60, "the scenario consumed")
        wait_until(lambda: pending_dispatches(cur) == 0, 30, "the outbox delivered")
        codes = st.stop_all()
        assert codes == {s + "-0": 0 for s in SERVICES}, codes

        for r in flow.r.values():
            r.drain(0.5)
        first = answers(flow.r)
        before, digest_before = snapshot(cur), ledger_digest(cur)
        refusals_before = refusals(cur)
        assert len(refusals_before) >= 10, refusals_before  # the scenario's refusals and its dead letter
        assert len(before["load_run"]) == 6 and len(before["load_run_rejection"]) == 2
        assert len(before["load_file"]) == 70 and len(before["load_dispatch"]) == 5
        assert [e["event_name"] for e in before["load_event"]].count("DEAD_LETTER") == 1
        inputs = {t: sum(hi - lo for lo, hi in _wm(iso, t).values())
                  for ts in groups.values() for t in ts}

        for g, ts in groups.items():
            reset_group(iso.bootstrap, g, ts)
        assert not caught_up(iso, groups)
        replies = Flow(nifi)
        Lifecycle(replies)  # the readers of the validation and publish replies too
        dead_letters = RawReader(iso.bootstrap, iso.topic("dead-letters"), from_beginning=False)
        t0 = time.time()
        for s in SERVICES:
            st.start(s)
        wait_until(lambda: caught_up(iso, groups), 120, "the replay consumed")
        replay_s = time.time() - t0
        replies.r["validate-run-commands"].drain(3)
        for r in replies.r.values():
            r.drain(0.5)

        after = snapshot(cur)
        assert refusals(cur) == refusals_before, "the replay recorded a refusal again"
        assert snapshot_diff(before, after) == [], "the replay changed the ledger"
        assert ledger_digest(cur) == digest_before
        assert set(digest_before) >= {"load_run", "load_partition", "load_file", "load_validation", "load_dispatch",
                                      "load_event", "load_claim_token", "load_publish_token", "load_run_rejection",
                                      "load_validation_start"}, digest_before

        assert [c for c in replies.r["validate-run-commands"].records] == [], "a second command was published"
        # every replayed input answered once more, and nothing answered as applied
        answered = sum(len(r.records) for t, r in replies.r.items() if t != "validate-run-commands")
        dead = len(dead_letters.drain(1))
        dead_letters.close()
        assert dead == 1, "the undecodable message is dead-lettered again (its event is not)"
        assert answered + dead == sum(inputs.values()), (answered, dead, inputs)
        outcomes = {}
        for t, r in replies.r.items():
            for rec in r.records:
                outcomes.setdefault(rec["value"].get("outcome"), []).append((t, rec["value"]))
        assert "ACCEPTED" not in outcomes, outcomes.get("ACCEPTED")
        # every replayed input restates its first answer (docs/design.md §5, "A replay restates"):
        # REPLAY, with the first answer's code when that was a refusal, or the same refusal again
        second = answers(replies.r)
        assert set(second) == set(first), (set(first) ^ set(second))
        differ = ["%s[%d]@%d: %s -> %s" % (k[0].rsplit(".", 1)[-1], k[1], k[2], brief(first[k][0]), brief(second[k][0]))
                  for k in sorted(first) if not restates(first[k][0], second[k][0])]
        assert not differ, "%d of %d replayed inputs answered otherwise than the first time: %s" % (
            len(differ), len(first), differ)
        replies.close()
        rc, checks = loadctl_verify(iso)
        bad = {n: c for n, c in checks.items() if c["violations"] or c.get("incomplete")}
        assert rc == 0 and not bad, "verify --topics after the replay: %s" % bad
        print("replay of %d inputs took %.1fs; %d answers, each restating the first" % (sum(inputs.values()), replay_s, len(second)))
        r0, r1, dup, r2, r3, dup3, r4, r5 = runs
        status = {r["run_id"]: r["status"] for r in after["load_run"]}
        assert status == {r0.run_id: "EXTRACTED_VALIDATED", r1.run_id: "SUCCESS", r2.run_id: "FAILED_MANIFEST",
                          r3.run_id: "FAILED_EXTRACT", r4.run_id: "FAILED_STAGE_VALIDATION",
                          r5.run_id: "FAILED_PUBLISH"}
        assert {r["run_id"]: r["code"] for r in after["load_run_rejection"]} == {
            dup.run_id: "DUPLICATE_ACTIVE_RUN", dup3.run_id: "DUPLICATE_ACTIVE_RUN"}
    finally:
        flow.close()
        db.close()


def answers(readers):
    """{(sourceTopic, sourcePartition, sourceOffset): [reply values]} of the reply readers."""
    out = {}
    for t, r in readers.items():
        if t == "validate-run-commands":
            continue
        for rec in r.records:
            v = rec["value"]
            out.setdefault((v["sourceTopic"], v["sourcePartition"], v["sourceOffset"]), []).append(v)
    return out


GRANTS = ("claimed", "started")


def restates(orig, again):
    """A replayed input's answer restates its first: REPLAY, or REJECTED as the first was; a
    refusal keeps its code; nothing refused at first is granted now."""
    if again["outcome"] not in ("REPLAY", orig["outcome"]) or again["outcome"] == "ACCEPTED":
        return False
    if orig["outcome"] == "REJECTED" and again.get("code") != orig.get("code"):
        return False
    return not any(orig.get(g) is False and again.get(g) is True for g in GRANTS)


def refusals(cur):
    """The recorded refusals and dead letters (nifi_ops.input_refusal), every column."""
    cur.execute("SELECT * FROM nifi_ops.input_refusal ORDER BY topic, kafka_partition, kafka_offset")
    return cur.fetchall()


def brief(v):
    """outcome/code (runStatus) of a reply, for a failure message."""
    return "%s/%s (%s)" % (v["outcome"], v.get("code"), v.get("runStatus"))


def _wm(iso, topic):
    return watermarks(iso.bootstrap, topic)


def pending_dispatches(cur):
    cur.execute("SELECT count(*) FROM nifi_ops.load_dispatch WHERE status = 'PENDING'")
    return cur.fetchone()[0]
