"""The dispatcher dies after the broker acknowledged its command and before it marked the row
SENT (fault.crash_after_publish, a kill -9): restarted, it publishes the command again with the
same dispatchId and key; of two validation starts carrying that dispatchId exactly one wins
(docs/contract.md §5.7), the run still ends in SUCCESS, and `loadctl verify` finds every invariant held."""
import pytest

from conftest import close_clean, new_run, one
from llsim.drills import Isolated, RawReader, events, loadctl_verify, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.lifecycle import Lifecycle, staging_metrics, target_metrics


@pytest.fixture(scope="module")
def iso():
    i = Isolated("dispatch_crash")
    yield i
    close_clean(i)


def test_a_command_published_twice_starts_validation_once(iso):
    st = iso.stack
    for s in ("registrar", "claimer", "completion"):
        st.start(s)
    # the first acknowledged batch kills it; a short lease brings the row back soon after
    st.start("dispatcher", settings={"fault.crash_after_publish": "1", "dispatch.lease": "PT3S"})
    commands = RawReader(iso.bootstrap, iso.topic("validate-run-commands"), "validate-run-commands")
    nifi = Nifi(iso.bootstrap, iso.prefix)
    flow = Flow(nifi)
    life = Lifecycle(flow)
    db = st.db().cursor()
    try:
        run = new_run()
        flow.create(run)
        flow.register(run)
        flow.claim_all(run)
        flow.extract_all(run)
        first = commands.wait_for(lambda r: r["key"] == run.run_id.encode(), timeout=60)[0]
        assert st.wait_exit("dispatcher-0", timeout=30) == -9
        assert events(st.log_path("dispatcher-0"), "fault_injected")
        dispatch_id = first["headers"]["dispatchId"].decode()
        assert first["value"]["dispatchId"] == dispatch_id
        # committed to Kafka, not marked: the row is still PENDING
        assert one(db, "SELECT status FROM nifi_ops.load_dispatch WHERE dispatch_id = %s", dispatch_id) == "PENDING"

        st.start("dispatcher")
        copies = commands.wait_for(lambda r: r["key"] == run.run_id.encode(), count=2, timeout=60)
        assert len(copies) == 2
        second = copies[1]
        assert second["key"] == first["key"]
        assert second["headers"]["dispatchId"] == first["headers"]["dispatchId"]
        # the same command; only its attempt number tells the copies apart
        assert {k: v for k, v in second["value"].items() if k != "attempt"} == \
            {k: v for k, v in first["value"].items() if k != "attempt"}
        assert (first["value"]["attempt"], second["value"]["attempt"]) == (1, 2)
        for h in ("dispatchId", "dispatchType", "runId", "jobKey"):
            assert second["headers"][h] == first["headers"][h]
        wait_until(lambda: one(db, "SELECT status FROM nifi_ops.load_dispatch WHERE dispatch_id = %s",
                               dispatch_id) == "SENT", 30, "the second copy marked SENT")

        # each copy reached a NiFi node, and each node asks to start: one wins
        a = life.start_validation(run, dispatch_id, node="nifi-node-1")
        b = life.start_validation(run, dispatch_id, node="nifi-node-2")
        assert sorted([a["started"], b["started"]]) == [False, True]
        assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s"
                       " AND event_name = 'STAGE_VALIDATION_STARTED'", run.run_id) == 1
        assert one(db, "SELECT dispatch_id::text FROM nifi_ops.load_validation_start WHERE run_id = %s",
                   run.run_id) == dispatch_id
        assert one(db, "SELECT status FROM nifi_ops.load_dispatch WHERE dispatch_id = %s", dispatch_id) == "ACKED"

        life.metrics(run, "STAGING", staging_metrics(run))
        life.stage_validated(run)
        token, _ = life.claim_publish(run)
        life.publish_result(run, token)
        life.metrics(run, "TARGET", target_metrics(run))
        assert life.success(run)["runStatus"] == "SUCCESS"

        rc, checks = loadctl_verify(iso)
        assert {n: c["violations"] for n, c in checks.items()} == {n: 0 for n in checks}
        assert rc == 0
    finally:
        commands.close()
        flow.close()
