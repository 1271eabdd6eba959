"""`loadctl verify` on the real broker and database: after a normal scenario every invariant holds
(exit 0, every count 0); each deliberate break of the ledger or of the topics makes it exit 1 and
name the broken invariant with its count (docs/operations.md, tools/loadctl/README.md)."""
import json
import uuid

import pytest
from confluent_kafka import Consumer, TopicPartition

from conftest import close_clean, new_run, one
from llsim.drills import Isolated, committed, loadctl_verify, partitions_of, send_to, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.lifecycle import Lifecycle

CHECKS = ("run_status", "validate_dispatch", "stage_validating", "partition_rows", "partition_counters",
          "one_reply", "offset_ahead", "chunk_lost")


@pytest.fixture(scope="module")
def iso():
    i = Isolated("verify")
    i.stack.start_all()
    yield i
    close_clean(i)


@pytest.fixture(scope="module")
def scenario(iso):
    """A run taken to SUCCESS, a run left EXTRACTED_VALIDATED, and an undecodable chunk report
    (a dead letter): the topics and the ledger of a normal day."""
    nifi = Nifi(iso.bootstrap, iso.prefix)
    flow = Flow(nifi)
    life = Lifecycle(flow)
    try:
        done, waiting = new_run(), new_run()
        steps = flow.to_extracted(done)
        life.to_success(done, steps["commands"][0]["dispatchId"])
        flow.to_extracted(waiting)
        nifi.send("chunks", None, key=waiting.run_id, raw=b"\x00not avro")
        nifi.flush()
        c = iso.stack.db().cursor()
        wait_until(lambda: one(c, "SELECT count(*) FROM nifi_ops.load_event WHERE event_name = 'DEAD_LETTER'"),
                   60, "the dead letter")
        assert one(c, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", done.run_id) == "SUCCESS"
        wait_until(lambda: lag_zero(iso), 60, "every input committed")
        yield {"done": done, "waiting": waiting, "nifi": nifi}
    finally:
        flow.close()


def lag_zero(iso):
    for service, topics in (("registrar", ("run-requests", "manifests")),
                            ("claimer", ("partition-claims",)),
                            ("completion", ("chunks", "validation-starts", "validation-metrics",
                                            "stage-validations", "publish-results", "run-successes"))):
        com = committed(iso.bootstrap, iso.groups[service], [iso.topic(t) for t in topics])
        c = Consumer({"bootstrap.servers": iso.bootstrap, "group.id": "verify-lag", "enable.auto.commit": False})
        try:
            for (t, p), off in com.items():
                _lo, hi = c.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                if hi > 0 and off < hi:
                    return False
        finally:
            c.close()
    return True


def verify(iso, *extra):
    return loadctl_verify(iso, *extra)


def counts(checks):
    return {name: checks[name]["violations"] for name in CHECKS}


def assert_only(rc, checks, **want):
    """Exit 5 (violated) and exactly the named checks violated with those counts; every other 0."""
    expect = {name: want.get(name, 0) for name in CHECKS}
    assert counts(checks) == expect, json.dumps(checks, indent=1)
    assert rc == 5
    assert not any(c["incomplete"] for c in checks.values())


def test_a_normal_scenario_holds(iso, scenario):
    rc, checks = verify(iso)
    assert counts(checks) == {name: 0 for name in CHECKS}, json.dumps(checks, indent=1)
    assert all(c["checked"] and not c["incomplete"] for c in checks.values())
    assert rc == 0


def test_a_run_status_edited_by_sql(iso, scenario):
    db = iso.stack.db().cursor()
    run = scenario["done"].run_id
    db.execute("UPDATE nifi_ops.load_run SET status = 'PUBLISHED' WHERE run_id = %s", (run,))
    try:
        rc, checks = verify(iso)
        assert_only(rc, checks, run_status=1)
        assert run in checks["run_status"]["samples"][0] and "SUCCESS" in checks["run_status"]["samples"][0]
    finally:
        db.execute("UPDATE nifi_ops.load_run SET status = 'SUCCESS' WHERE run_id = %s", (run,))
    assert verify(iso)[0] == 0


def test_a_file_row_deleted(iso, scenario):
    """A SUCCESS partition's file gone: its rows no longer add up, its counters disagree, and the
    accepted chunk report that wrote it is lost."""
    db = iso.stack.db().cursor()
    run, pid = scenario["done"].run_id, scenario["done"].nonempty()[0]
    db.execute("DELETE FROM nifi_ops.load_file WHERE run_id = %s AND partition_id = %s AND chunk_index = 1"
               " RETURNING *", (run, pid))
    row = db.fetchone()
    cols = [d.name for d in db.description]
    try:
        rc, checks = verify(iso)
        assert_only(rc, checks, partition_rows=1, partition_counters=1, chunk_lost=1)
        assert "%s/%s chunk 1 ACCEPTED" % (run, pid) in checks["chunk_lost"]["samples"][0]
    finally:
        db.execute("INSERT INTO nifi_ops.load_file (%s) VALUES (%s)" % (", ".join(cols), ", ".join(["%s"] * len(cols))),
                   row)
    assert verify(iso)[0] == 0


def test_every_file_of_a_partition_deleted(iso, scenario):
    """A SUCCESS partition left without a WRITTEN file (the page's file aggregate has no row for
    it): its rows and counters are violated against zero files, every chunk it had is lost."""
    db = iso.stack.db().cursor()
    run, pid = scenario["done"].run_id, scenario["done"].nonempty()[0]
    db.execute("DELETE FROM nifi_ops.load_file WHERE run_id = %s AND partition_id = %s RETURNING *", (run, pid))
    rows = db.fetchall()
    cols = [d.name for d in db.description]
    assert rows
    try:
        rc, checks = verify(iso)
        assert_only(rc, checks, partition_rows=1, partition_counters=1, chunk_lost=len(rows))
        assert "the WRITTEN files are 0" in checks["partition_counters"]["samples"][0], checks["partition_counters"]
        assert "its files sum to 0" in checks["partition_rows"]["samples"][0], checks["partition_rows"]
    finally:
        for row in rows:
            db.execute("INSERT INTO nifi_ops.load_file (%s) VALUES (%s)" % (
                ", ".join(cols), ", ".join(["%s"] * len(cols))), row)
    assert verify(iso)[0] == 0


def test_a_second_validate_run_dispatch(iso, scenario):
    """uq_load_dispatch_validate forbids it; with the index dropped (this drill's own database) a
    second VALIDATE_RUN of the run, and a second validation start, are counted."""
    db = iso.stack.db().cursor()
    run = scenario["waiting"].run_id
    extra = str(uuid.uuid4())
    db.execute("DROP INDEX nifi_ops.uq_load_dispatch_validate")
    db.execute("INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, status)"
               " VALUES (%s, %s, 'VALIDATE_RUN', 'ACKED')", (extra, run))
    done = scenario["done"].run_id
    # a second start recorded next to the first (a later one would also change the status its
    # events imply)
    db.execute("INSERT INTO nifi_ops.load_event (event_id, event_time, event_level, event_name, run_id, details)"
               " SELECT %s, event_time, 'INFO', 'STAGE_VALIDATION_STARTED', run_id, '{}'"
               "   FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'STAGE_VALIDATION_STARTED'",
               (str(uuid.uuid4()), done))
    try:
        rc, checks = verify(iso)
        assert_only(rc, checks, validate_dispatch=1, stage_validating=1)
        assert checks["validate_dispatch"]["samples"] == ["%s: EXTRACTED_VALIDATED with 2 VALIDATE_RUN dispatches"
                                                          % run]
        assert checks["stage_validating"]["samples"] == ["%s: 2 validation starts" % done]
    finally:
        db.execute("DELETE FROM nifi_ops.load_dispatch WHERE dispatch_id = %s", (extra,))
        db.execute("DELETE FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'STAGE_VALIDATION_STARTED'"
                   " AND details = '{}'", (done,))
        db.execute("CREATE UNIQUE INDEX uq_load_dispatch_validate ON nifi_ops.load_dispatch (run_id)"
                   " WHERE dispatch_type = 'VALIDATE_RUN'")
    assert verify(iso)[0] == 0


def test_a_group_replayed_by_hand_still_holds(iso, scenario):
    """The operator's replay (docs/operations.md: reset a group and let the service replay it):
    the registrar group set back to the earliest offsets, every run request and manifest is
    consumed again and answered REPLAY a second time. A REPLAY agreeing with the first answer is
    no violation: verify --topics holds (before ll_input_judge_answers, one_reply named each)."""
    st = iso.stack
    assert st.stop("registrar-0") == 0
    topics = [iso.topic(t) for t in ("run-requests", "manifests")]
    c = Consumer({"bootstrap.servers": iso.bootstrap, "group.id": iso.groups["registrar"],
                  "enable.auto.commit": False})
    try:
        back = []
        for t in topics:
            for p in partitions_of(iso.bootstrap, t):
                lo, hi = c.get_watermark_offsets(TopicPartition(t, p), timeout=10)
                if hi > lo:
                    back.append(TopicPartition(t, p, lo))
        assert back, "no registrar input to replay"
        c.commit(offsets=back, asynchronous=False)
    finally:
        c.close()
    st.start("registrar")
    wait_until(lambda: lag_zero(iso), 60, "the registrar's replay")
    rc, checks = verify(iso)
    assert rc == 0 and counts(checks) == {name: 0 for name in CHECKS}, json.dumps(checks, indent=1)


def test_a_reply_missing_under_a_committed_offset(iso, scenario):
    """The completion group's offset committed past a chunk report that was never applied (the
    service stopped, the offset moved with the Python client): no reply, no dead letter, no file
    row. Verify names the input offset under three invariants; the bounded run says so."""
    st = iso.stack
    assert st.stop("completion-0") == 0
    run = scenario["waiting"]
    topic = iso.topic("chunks")
    chunk = run.chunk(run.nonempty()[0], 7, 8, 10)
    part = partitions_of(iso.bootstrap, topic)[0]
    nifi = scenario["nifi"]
    send_to(nifi, "chunks", chunk, part)
    nifi.flush()
    c = Consumer({"bootstrap.servers": iso.bootstrap, "group.id": iso.groups["completion"],
                  "enable.auto.commit": False})
    try:
        _lo, hi = c.get_watermark_offsets(TopicPartition(topic, part), timeout=10)
        c.commit(offsets=[TopicPartition(topic, part, hi)], asynchronous=False)
    finally:
        c.close()
    try:
        rc, checks = verify(iso)
        assert_only(rc, checks, one_reply=1, offset_ahead=1, chunk_lost=1)
        where = "%s[%d]@%d" % (topic, part, hi - 1)
        assert checks["offset_ahead"]["samples"] == ["%s: below the committed offset without its effect" % where]
        assert checks["chunk_lost"]["samples"] == ["%s: %s/%s chunk 7 without reply"
                                                   % (where, run.run_id, run.nonempty()[0])]
        # a bound that stops the reading is reported, and is never a pass
        rc, bounded = verify(iso, "--max-records", "3")
        assert rc == 5 and all(bounded[n]["incomplete"] for n in ("one_reply", "offset_ahead", "chunk_lost"))
    finally:
        st.start("completion")


def test_usage_and_connection_errors_have_loadctls_codes(iso):
    # verify speaks loadctl's one table (loadctl.h): 1 usage or configuration, 3 database
    p = iso.stack.loadctl("verify", "--max-records", "0", check=False)
    assert p.returncode == 1 and "--max-records" in p.stderr
    p = iso.stack.loadctl("verify", "--topics", "--config", "/nonexistent/verify.conf", check=False)
    assert p.returncode == 1
    p = iso.stack.loadctl("verify", "--restored-from", "/nonexistent/offsets.json", check=False)
    assert p.returncode == 1 and "--restored-from needs --topics" in p.stderr
    bad = iso.stack.loadctl("--db", "host=127.0.0.1 port=1 dbname=x user=x connect_timeout=2", "verify", check=False)
    assert bad.returncode == 3
    # --json says the exit code the process has
    p = iso.stack.loadctl("verify", "--max-records", "0", "--json", check=False)
    assert p.returncode == 1 and json.loads(p.stdout)["exitCode"] == 1, (p.returncode, p.stdout)
    bad = iso.stack.loadctl("--db", "host=127.0.0.1 port=1 dbname=x user=x connect_timeout=2", "verify", "--json",
                            check=False)
    assert bad.returncode == 3 and json.loads(bad.stdout)["exitCode"] == 3, bad.stdout
