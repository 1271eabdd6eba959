"""The sweeper's actions when the database forgets them (issue 27 §2, docs/design.md §5 "After the
database went back in time"). The sweeper decides by the clock against stored heartbeats; what a
lost ledger forgot it decides again, and what it derives is the same.

A run's last partition stalls (claimed, one chunk of three); a backup; the sweeper (REISSUE,
thresholds of seconds) reissues the partition and the dispatcher sends the reissue command; a new
worker reacts to it and claims with a fresh token (granted, attempt 2). Then the database is lost
and restored from the backup: the reissue, its dispatch row and the fresh grant are gone, while
the command and the grant's reply are in Kafka (the claim's offset too: the claimer re-reads it
from its ledger position and applies it again without a second answer).

What happens, asserted: the fresh claim, applied again over the restored RUNNING partition, is
refused (another token holds it) and not answered again; the sweeper finds the partition stale
again and reissues it under the same dispatch id (a name-based UUID of run, partition and attempt)
with the same command; the worker's claim sent again with its fresh token after that command is
granted attempt 2, as before; the zombie's token is refused; the run completes.
"""
import os
import uuid

from conftest import new_run
from llsim.drills import Isolated, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.restore import backup, ledger_value, restore, start_services, stop_services

FAST = {"recovery.extract_query_timeout": "PT1S", "recovery.stale": "PT3S", "recovery.sweeper_interval": "PT0.5S",
        "recovery.mode": "REISSUE", "recovery.max_attempts": "3"}


def part_status(iso, run, pid):
    return ledger_value(iso, "SELECT status || '/' || attempt_count FROM nifi_ops.load_partition"
                             " WHERE run_id = '%s' AND partition_id = '%s'" % (run.run_id, pid))


def test_a_reissue_the_ledger_forgot_is_made_again_with_the_same_dispatch(tmp_path):
    iso = Isolated("sweeploss")
    st = iso.stack
    start_services(st)
    flow = Flow(Nifi(iso.bootstrap, iso.prefix))
    reissues = flow.nifi.reader("reissue-partition-commands")
    try:
        run = new_run(partitions=2, empty=())
        flow.create(run)
        flow.register(run)
        flow.claim_all(run)
        stale = run.nonempty()[-1]
        zombie = run.tokens[stale]
        sent = 0
        for pid in run.nonempty():
            for c in run.chunks(pid)[:1] if pid == stale else run.chunks(pid):
                flow.nifi.send("chunks", c)
                sent += 1
        flow.nifi.flush()
        flow.reply("chunk-outcomes", run.run_id, count=sent)
        dump = os.path.join(str(tmp_path), "sweeploss.dump")
        backup(st, dump, lambda: None)

        st.start("sweeper", settings=FAST)
        first = reissues.wait_for(lambda r: r["value"]["runId"] == run.run_id, timeout=30)[0]["value"]
        assert (first["partitionId"], first["attempt"]) == (stale, 1), first
        fresh = str(uuid.uuid4())
        flow.nifi.send("partition-claims", run.claim(stale, token=fresh, worker="nifi-node-9"))
        flow.nifi.flush()
        granted = flow.reply("claim-decisions", run.run_id, lambda v: v["claimToken"] == fresh)[-1]
        assert (granted["outcome"], granted["claimed"], granted["attempt"]) == ("ACCEPTED", True, 2), granted
        st.stop("sweeper-0")
        stop_services(st)

        # the database forgets the reissue and the fresh grant
        restore(st, dump)
        assert part_status(iso, run, stale) == "RUNNING/1"
        start_services(st)
        wait_until(lambda: ledger_value(iso, "SELECT count(*) FROM nifi_ops.position_rewind") > 0, 60,
                   "the claimer found its ledger position behind Kafka's")
        # re-applied over the restored partition (RUNNING, the zombie's token): refused, silently
        flow.r["claim-decisions"].drain(2)
        fresh_answers = [r["value"] for r in flow.r["claim-decisions"].records
                         if r["value"]["runId"] == run.run_id and r["value"]["claimToken"] == fresh]
        assert fresh_answers == [granted], "the fresh claim was answered again: %s" % fresh_answers
        assert part_status(iso, run, stale) == "RUNNING/1"

        # the sweeper decides again: the same reissue, the same dispatch id, the same command
        st.start("sweeper", settings=FAST)
        again = reissues.wait_for(lambda r: r["value"]["runId"] == run.run_id, count=2, timeout=60)[1]["value"]
        same = ("dispatchId", "partitionId", "attempt", "snapshotScn", "lowerBound", "upperBound", "expectedRowCount")
        assert {k: again[k] for k in same} == {k: first[k] for k in same}, (first, again)
        assert part_status(iso, run, stale) == "RETRY/1"

        # the worker, told to reissue again, claims again with its token: granted attempt 2 again
        flow.nifi.send("partition-claims", run.claim(stale, token=fresh, worker="nifi-node-9"))
        flow.nifi.flush()
        regrant = flow.reply("claim-decisions", run.run_id, lambda v: v["claimToken"] == fresh, count=2)[-1]
        assert (regrant["outcome"], regrant["claimed"], regrant["attempt"]) == ("ACCEPTED", True, 2), regrant
        flow.nifi.send("partition-claims", run.claim(stale, token=zombie))
        flow.nifi.flush()
        z = flow.reply("claim-decisions", run.run_id, lambda v: v["claimToken"] == zombie, count=2)[-1]
        assert (z["claimed"], z["code"]) == (False, "CLAIM_MISMATCH"), z
        for c in run.chunks(stale, token=fresh):
            flow.nifi.send("chunks", c)
        flow.nifi.flush()
        flow.validate_commands(run, timeout=60)
        assert ledger_value(iso, "SELECT status FROM nifi_ops.load_run WHERE run_id = '%s'" % run.run_id) == \
            "EXTRACTED_VALIDATED"
        assert part_status(iso, run, stale) == "SUCCESS/2"
        st.stop("sweeper-0")
        stop_services(st)
    finally:
        reissues.close()
        flow.close()
        codes = iso.close()
        assert not [c for c in codes.values() if c != 0], codes
