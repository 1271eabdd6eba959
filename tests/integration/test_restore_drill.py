"""Restore drill (issue 9 §5, docs/operations.md "Restore from a backup"). In each drill, on a
database and topics of its own:

1. a workload of runs goes through the services; in its middle (some runs EXTRACTED_VALIDATED,
   others with chunks still in flight) the input groups' committed offsets are recorded and a base
   backup taken (pg_dump -Fc, services running);
2. the workload ends (every run EXTRACTED_VALIDATED, its command sent, every group caught up); the
   ledger's business digest is taken (llsim.restore: every table as a multiset of rows, without
   timestamps, random event ids and the outbox's delivery bookkeeping);
3. the services stop, the database is lost (DROP DATABASE) and restored from the backup, the input
   groups are reset to the offsets recorded with the backup (`loadctl offsets save` before the
   dump, `loadctl offsets restore` now; earliest where none was), and the services start again
   and replay;
4. once the groups have caught up and the outbox is empty, the digest is the same, table by table,
   and `loadctl verify --topics --restored-from` the offsets file holds: every replayed input's
   answers agree (a REPLAY, or the same fresh answer where the backup missed the input); the
   groups reset to the recorded offsets once more and replayed, every input of the range gets a
   further REPLAY answer, the ledger is unchanged and verify still holds.

CI runs LL_RESTORE_DRILLS drills (1, about 20 s); the long mode runs 10 (LL_RESTORE_DRILLS=10,
~3 minutes; docs/operations.md).
"""
import json
import os
import time

from conftest import new_run
from llsim.drills import Isolated, committed, events, loadctl_topics, loadctl_verify, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.restore import (RUNS, backup, count_validated, digest, digest_diff, group_topics, ledger_value, restore,
                           settled, start_drill, start_services, stop_services, workload)

DRILLS = int(os.environ.get("LL_RESTORE_DRILLS", "1"))
SWEEPER_FIRST = {"recovery.mode": "FAIL", "recovery.extract_query_timeout": "PT1S", "recovery.stale": "PT2S",
                 "recovery.run_timeout": "PT3S", "recovery.sweeper_interval": "PT0.5S", "recovery.start_grace": "PT2M"}


def one_drill(n, dump_dir):
    iso = Isolated("restore")
    st = iso.stack
    start_drill(iso)
    flow = Flow(Nifi(iso.bootstrap, iso.prefix))
    all_topics = [iso.topic(t) for t in iso.topics]
    try:
        # the backup, mid-workload: offsets first, then the dump (never ahead of the offsets)
        dump = os.path.join(dump_dir, "drill%d.dump" % n)
        offsets = os.path.join(dump_dir, "drill%d.offsets.json" % n)
        saved = {}

        def take_backup():
            before_backup = {g: committed(iso.bootstrap, g, all_topics) for g in iso.groups.values()}
            backup(st, dump, lambda: loadctl_topics(iso, "offsets", "save", "--out", offsets, check_rc=0))
            with open(offsets) as f:
                saved.update({g["group"]: {(o["topic"], o["partition"]): o["offset"] for o in g["offsets"]}
                              for g in json.load(f)["groups"]})
            # what loadctl recorded is what the groups had committed (at or after the look just before)
            for g in iso.groups.values():
                assert set(saved[g]) >= {tp for tp, off in before_backup[g].items() if off >= 0}, (g, saved[g])
                assert all(saved[g][tp] >= before_backup[g][tp] for tp in saved[g]), (g, saved[g], before_backup[g])

        groups = workload(iso, flow, [new_run() for _ in range(RUNS)], take_backup)
        before = digest(iso)
        assert count_validated(iso) == RUNS

        # while the services run, their groups have members: the reset is refused, nothing moves
        at_end = {g: committed(iso.bootstrap, g, all_topics) for g in iso.groups.values()}
        rc, out = loadctl_topics(iso, "offsets", "restore", "--from", offsets, check_rc=2)
        assert out["code"] == "OFFSETS_REFUSED" and "active members" in out["message"], out
        assert {g: committed(iso.bootstrap, g, all_topics) for g in iso.groups.values()} == at_end

        stop_services(st)
        t0 = time.time()
        restore(st, dump)
        rc, out = loadctl_topics(iso, "offsets", "restore", "--from", offsets, check_rc=0)
        assert sorted(x["group"] for x in out["groups"]) == sorted(iso.groups.values()), out
        for g in iso.groups.values():  # the groups are back at the recorded offsets
            now = committed(iso.bootstrap, g, all_topics)
            assert {tp: off for tp, off in now.items() if tp in saved[g]} == saved[g], (g, now, saved[g])
        assert digest(iso) != before, "the backup already held the end of the workload: not mid-workload"
        # the sweeper first (against docs/operations.md's order: the adverse case), in FAIL mode on a
        # clock shorter than the distance restored; its start grace (recovery.start_grace, PT2M by
        # default) outlasts the replay, so it acts on none of the runs being read again (issue 39)
        st.start("sweeper", settings=SWEEPER_FIRST)
        start_services(st)
        wait_until(lambda: settled(iso, groups), 180, "replay after the restore")
        took = time.time() - t0
        diff = digest_diff(before, digest(iso))
        assert not diff, "drill %d: the restored and replayed ledger differs in %s (logs in %s)" % (
            n, diff, st.log_dir)
        assert events(st.log_path("sweeper-0"), "sweeper_waits")
        assert not events(st.log_path("sweeper-0"), "sweeper_actions"), "drill %d: the sweeper acted" % n
        # the ledger's and the topics' invariants (docs/operations.md "Restore from a backup",
        # step 5): an input replayed after the restore has the lost ledger's answer and the
        # restored one's (REPLAY where the backup held it, the same fresh answer where it did not)
        rc, checks = loadctl_verify(iso, "--restored-from", offsets)
        bad = {k: c for k, c in checks.items() if c["violations"] or c.get("incomplete")}
        assert rc == 0 and not bad, "drill %d: verify --topics after the restore: %s" % (n, bad)
        # without the offsets file a second fresh answer is a duplicate: every one names an input
        # at or above the offset the backup recorded, i.e. one the restored ledger applied again
        rc, plain = loadctl_verify(iso)
        for sample in plain["one_reply"]["samples"]:
            where = sample.split(":")[0]
            topic, rest = where.split("[")
            part, off = rest.split("]@")
            recorded = [o for g in saved.values() for (t, pp), o in g.items() if t == topic and pp == int(part)]
            assert recorded and int(off) >= recorded[0], (sample, saved)
            assert "replies, 0 dead letters" in sample, sample
        # the operator's replay of the same range once more (the groups reset to the recorded
        # offsets again): every input of it is answered REPLAY a further time, which agrees
        stop_services(st)
        loadctl_topics(iso, "offsets", "restore", "--from", offsets, check_rc=0)
        start_services(st)
        wait_until(lambda: settled(iso, groups), 180, "second replay")
        assert digest(iso) == before, "drill %d: a second replay changed the ledger" % n
        rc, again = loadctl_verify(iso, "--restored-from", offsets)
        bad = {k: c for k, c in again.items() if c["violations"] or c.get("incomplete")}
        assert rc == 0 and not bad, "drill %d: verify --topics after a second replay: %s" % (n, bad)
        # the REPLAYs are there: without the offsets file the same inputs as before are named,
        # each now with a third answer, a REPLAY
        rc, plain2 = loadctl_verify(iso)
        assert plain2["one_reply"]["violations"] == plain["one_reply"]["violations"] > 0, plain2
        for sample in plain2["one_reply"]["samples"]:
            answers = sorted(sample.rsplit("(", 1)[1].rstrip(")").split(", "))
            assert answers == ["ACCEPTED", "ACCEPTED", "REPLAY"], sample
        stop_services(st)
        print("restore drill %d: same digest, restore + replay %.1f s, verify --topics holds (%d inputs"
              " answered afresh by both ledgers)" % (n, took, plain["one_reply"]["violations"]), flush=True)
    finally:
        flow.close()
        codes = iso.close()
        assert not [c for c in codes.values() if c != 0], codes


def test_restore_from_backup_gives_the_same_ledger(tmp_path):
    for n in range(DRILLS):
        one_drill(n, str(tmp_path))


def test_restore_with_no_offsets_step_converges(tmp_path):
    """Issue 27 §1: the ledger keeps each group's read position in the same transaction as the
    effects, so a restore needs no operator step. A backup mid-workload (pg_dump, services
    running), the workload finished, the database lost and restored, the services started again
    with Kafka's committed offsets left at the end of the workload: each partition starts at the
    ledger's lower position, the inputs the backup missed are applied again, and the ledger's
    business digest equals the one before the loss (ad15e70, which reads Kafka's offsets only,
    skips them: the digest differs and the late runs never reach EXTRACTED_VALIDATED)."""
    iso = Isolated("restorepos")
    st = iso.stack
    start_drill(iso)
    flow = Flow(Nifi(iso.bootstrap, iso.prefix))
    try:
        dump = os.path.join(str(tmp_path), "positions.dump")
        workload(iso, flow, [new_run() for _ in range(RUNS)], lambda: backup(st, dump, lambda: None))
        before = digest(iso)
        stop_services(st)
        restore(st, dump)
        assert digest(iso) != before, "the backup already held the end of the workload: not mid-workload"
        start_services(st)
        try:
            wait_until(lambda: digest(iso) == before, 120, "the restored ledger caught up with the lost one")
        finally:
            diff = digest_diff(before, digest(iso))
            assert not diff, "the restored ledger differs in %s (logs in %s)" % (diff, st.log_dir)
        behind = [e for s in ("claimer", "completion") for e in events(st.log_path(s + "-0"), "ledger_behind_kafka")]
        assert behind, "no service logged that the ledger was behind Kafka's offsets"
        assert count_validated(iso) == RUNS
        db = st.db()
        with db.cursor() as c:
            c.execute("SELECT consumer_group, sum(offsets) FROM nifi_ops.position_rewind GROUP BY 1")
            rewound = dict(c.fetchall())
        db.close()
        assert rewound.get(iso.groups["completion"], 0) > 0, rewound
        # the inputs read again are applied again without a second answer (NiFi has the lost
        # ledger's): one answer per input, with no offsets file and no operator step
        rc, checks = loadctl_verify(iso)
        bad = {k: c for k, c in checks.items() if c["violations"] or c.get("incomplete")}
        assert rc == 0 and not bad, "verify --topics after the restore: %s" % bad
        stop_services(st)
    finally:
        flow.close()
        codes = iso.close()
        assert not [c for c in codes.values() if c != 0], codes


def test_an_answer_given_before_the_loss_is_not_given_again(tmp_path):
    """Issue 27 §2: after the database went back in time, the inputs Kafka's commit holds come
    again and are applied again, in their partition's order; but their answers were visible (a
    reply commits with its offset), and NiFi gets exactly one per input. Across topics the order
    of the second application is not the first's: here the chunk reports that finished the
    partitions are applied again before the duplicate claims that were answered REPLAY while the
    partitions ran. Answering those claims again would tell the worker something else (REJECTED,
    PARTITION_STATUS_MISMATCH or RUN_STATUS_MISMATCH) after its REPLAY; 87bc1b3 did, and answered
    every other input read again a second time too."""
    iso = Isolated("reanswer")
    st = iso.stack
    start_drill(iso)
    flow = Flow(Nifi(iso.bootstrap, iso.prefix))
    nifi = flow.nifi
    try:
        run = new_run()
        flow.create(run)
        flow.register(run)
        first = flow.claim_all(run)
        assert {c["outcome"] for c in first} == {"ACCEPTED"}, first
        n = len(run.nonempty())
        dump = os.path.join(str(tmp_path), "reanswer.dump")
        backup(st, dump, lambda: None)
        # after the backup: the duplicate claims (REPLAY while the partitions run), then the chunks
        for pid in run.nonempty():
            nifi.send("partition-claims", run.claim(pid))
        nifi.flush()
        dup = flow.reply("claim-decisions", run.run_id, count=2 * n)[n:]
        assert {c["outcome"] for c in dup} == {"REPLAY"}, dup
        chunks = flow.extract_all(run)
        flow.validate_commands(run)
        groups = group_topics(iso)
        wait_until(lambda: settled(iso, groups), 120, "workload consumed")
        before = digest(iso)
        stop_services(st)
        restore(st, dump)
        # the ledger lost the duplicate claims' positions and every chunk; the chunks come first
        for s in ("registrar", "completion", "dispatcher"):
            st.start(s, settings={"loop.retry_backoff_max": "PT2S"} if s != "dispatcher" else {})
        wait_until(lambda: ledger_value(iso, "SELECT count(*) FROM nifi_ops.load_partition WHERE run_id = '%s'"
                                        " AND status = 'SUCCESS'" % run.run_id) == len(run.parts),
                   120, "the chunks applied again")
        st.start("claimer", settings={"loop.retry_backoff_max": "PT2S"})
        wait_until(lambda: settled(iso, groups), 120, "the claims read again")
        assert digest(iso) == before, digest_diff(before, digest(iso))
        behind = events(st.log_path("claimer-0"), "ledger_behind_kafka")
        assert behind, "the claimer did not find the ledger behind Kafka's commit"
        flow.r["claim-decisions"].drain(2)
        flow.r["chunk-outcomes"].drain(1)
        claims = [r["value"] for r in flow.r["claim-decisions"].records if r["value"]["runId"] == run.run_id]
        assert claims == first + dup, "claims answered again after the loss: %s" % claims[2 * n:]
        outcomes = [r["value"] for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == run.run_id]
        assert len(outcomes) == len(chunks), "%d chunk reports, %d answers" % (len(chunks), len(outcomes))
        rc, checks = loadctl_verify(iso)
        bad = {k: c for k, c in checks.items() if c["violations"] or c.get("incomplete")}
        assert rc == 0 and not bad, "verify --topics after the loss: %s" % bad
        stop_services(st)
    finally:
        flow.close()
        codes = iso.close()
        assert not [c for c in codes.values() if c != 0], codes


def test_an_answer_held_across_two_losses_is_given_once(tmp_path):
    """docs/design.md §5: Kafka's commit must keep every input whose answer it carried. After a
    first loss the chunks of a run the ledger lost are read again and held (the run's request is
    not applied again yet); meanwhile another run's chunk on the same Kafka partition is applied
    and committed. ddd0e4f committed the partition's tracker, at the first held chunk: Kafka's
    commit forgot that the held chunks were answered, and after a second loss they were answered
    again (the long failover drill: 20 inputs answered twice in 30 failovers)."""
    from llsim.drills import send_to
    iso = Isolated("twoloss")
    st = iso.stack
    start_drill(iso)
    flow = Flow(Nifi(iso.bootstrap, iso.prefix))
    nifi = flow.nifi
    try:
        early, late = new_run(partitions=2, empty=()), new_run(partitions=2, empty=())
        flow.create(early)
        flow.register(early)
        flow.claim_all(early)
        dump = os.path.join(str(tmp_path), "twoloss.dump")
        backup(st, dump, lambda: None)
        # the run the ledger will lose: requested, registered, claimed, its chunks answered
        flow.create(late)
        flow.register(late)
        flow.claim_all(late)
        chunks = [c for pid in late.nonempty() for c in late.chunks(pid)]
        for c in chunks:
            send_to(nifi, "chunks", c, 0)
        nifi.flush()
        assert len(flow.reply("chunk-outcomes", late.run_id, count=len(chunks))) == len(chunks)
        groups = group_topics(iso)
        wait_until(lambda: settled(iso, groups), 60, "the late run's chunks consumed")
        stop_services(st)

        # loss 1; only the completion service comes back: the late run's chunks are held
        restore(st, dump)
        st.start("completion", settings={"loop.retry_backoff_max": "PT1S", "loop.prerequisite_wait": "PT120S"})
        wait_until(lambda: any("message_deferred" in line for line in open(st.log_path("completion-0"))), 60,
                   "the late run's chunks held")
        # the early run's chunk on the same partition: applied, its offset committed to Kafka
        first = early.chunks(early.nonempty()[0])[0]
        send_to(nifi, "chunks", first, 0)
        nifi.flush()
        assert flow.reply("chunk-outcomes", early.run_id)[0]["outcome"] == "ACCEPTED"
        time.sleep(1.0)  # its Kafka commit
        stop_services(st)

        # loss 2, and every service back: the late run is applied again, each chunk answered once
        restore(st, dump)
        start_services(st)
        wait_until(lambda: ledger_value(iso, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id = '%s'"
                                        % late.run_id) == len(chunks), 120, "the late run's chunks applied again")
        wait_until(lambda: settled(iso, groups), 60, "every group caught up")
        flow.r["chunk-outcomes"].drain(2)
        got = [r["value"] for r in flow.r["chunk-outcomes"].records if r["value"]["runId"] == late.run_id]
        assert len(got) == len(chunks), "%d chunk reports, %d answers: %s" % (
            len(chunks), len(got), sorted((v["partitionId"], v["chunkIndex"], v["outcome"]) for v in got))
        rc, checks = loadctl_verify(iso)
        bad = {k: c for k, c in checks.items() if c["violations"] or c.get("incomplete")}
        assert rc == 0 and not bad, "verify --topics after two losses: %s" % bad
        stop_services(st)
    finally:
        flow.close()
        codes = iso.close()
        assert not [c for c in codes.values() if c != 0], codes
