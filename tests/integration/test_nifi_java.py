"""NiFi's own record code as a client (issue 10 item 2): the reference scenario to SUCCESS with
every event written by NiFi 2.6.0's AvroRecordSetWriter writers (tests/nifi, Java), published
transactionally with the run id as key, and every reply and command read read_committed with
Avro Java against the project's schemas.

The services run on topics of their own (prefix loadledger.t-nifi.), each input topic in the
framing that its NiFi schema write strategy produces:

    embedded ("Embed Avro Schema" as          one writer per FlowFile, PublishKafka's buffer reset
      PublishKafka's Record Writer)           before each record (RecordValueFactory): every
                                              message a headerless block, the first one too
                                              (framing block)
    embedded-file (ConvertRecord with that    what nifi/loadledger-flow-embedded.json does: one
      writer, then PublishKafka sending       FlowFile per event, its content one container file
      the content whole)                      with the schema, sent whole (framing container)
    no schema ("Do Not Write Schema")         bare datum (framing bare)
    schema reference (Confluent encoded)      0x00, 4-byte id, datum (framing confluent, ids file)

and some replies in other framings (container, confluent) so that Avro Java reads each.
"""
import os
import shutil
import uuid

import pytest

from conftest import built_nifi_project, one, rows
from llsim import nifijava
from llsim.avroframe import SCHEMA_DIR
from llsim.probe import ensure_topics, start_sides, stop_checked, write_ids_file
from llsim.stack import Stack

PREFIX = "loadledger.t-nifi."
TAG = "nifi"
# logical input topic -> (NiFi schema write strategy for the harness, the service's framing)
INPUTS = {
    "run-requests": ("embedded-file", "container"),
    "manifests": ("reference:31", "confluent"),
    "partition-claims": ("embedded", "block"),  # one FlowFile of 7 claims: 7 headerless blocks
    "chunks": ("embedded-file", "container"),  # 3 chunk reports per partition, one FlowFile (container) each
    "validation-starts": ("reference:32", "confluent"),
    "validation-metrics": ("none", "bare"),
    "stage-validations": ("embedded", "block"),  # a FlowFile of one record: a headerless block too
    "publish-claims": ("none", "bare"),
    "publish-results": ("reference:33", "confluent"),
    "run-successes": ("embedded-file", "container"),
}
IDS = {31: "Manifest", 32: "ValidationStart", 33: "PublishResult"}
REPLIES = {"run-decisions": "container", "manifest-decisions": "confluent:41", "validate-run-commands": "container",
           "publish-claim-decisions": "confluent:42", "run-success-outcomes": "container"}


@pytest.fixture(scope="module")
def harness():
    """The built harness: (jdk, class path). Skipped without a JDK 21+ (failed when CI is set)."""
    jdk, cp, _ = built_nifi_project("nifi")
    return jdk, cp


@pytest.fixture(scope="module")
def nstack():
    s = Stack(prefix=PREFIX)
    s.migrate()
    ensure_topics(s.bootstrap, PREFIX)
    ids = write_ids_file(os.path.join(s.run_dir, "t-nifi", "schema-ids.json"), IDS)
    conf = {"topic.%s.framing" % t: f for t, (_, f) in INPUTS.items()}
    for t, f in REPLIES.items():
        conf["topic.%s.framing" % t] = f.split(":")[0]
        if ":" in f:
            conf["topic.%s.schema_id" % t] = f.split(":")[1]
    conf["schema.ids_file"] = ids
    try:
        start_sides(s, ("registrar", "claimer", "completion"), TAG, conf)
        start_sides(s, ("dispatcher",), TAG, {"topic.validate-run-commands.framing": "container"})
    except Exception:
        stop_checked(s)
        raise
    yield s
    bad = stop_checked(s)
    assert not bad, "services did not exit cleanly (sanitizer report or crash): %s; logs in %s" % (bad, s.log_dir)


def harness_args(stack, business_key, dump=None):
    args = ["--bootstrap", stack.bootstrap, "--prefix", PREFIX, "--schemas", SCHEMA_DIR, "--business-key",
            business_key, "--timeout-ms", "60000"]
    for t, (strategy, _) in INPUTS.items():
        args += ["--strategy", "%s=%s" % (t, strategy)]
    for t, f in REPLIES.items():
        args += ["--reply", "%s=%s" % (t, f)]
    if dump:
        args += ["--dump", dump]
    return args


def test_reference_scenario_written_by_nifi_reaches_success(harness, nstack):
    jdk, cp = harness
    key = "2026-09-28.j" + uuid.uuid4().hex[:10]
    dump = os.path.join(nstack.run_dir, "t-nifi", "values")
    shutil.rmtree(dump, ignore_errors=True)
    r = nifijava.run(jdk, cp, harness_args(nstack, key, dump))
    print(r.stdout)
    assert r.returncode == 0, "harness failed (rc %d):\n%s\n%s\nservice logs in %s" % (
        r.returncode, r.stdout, r.stderr[-4000:], nstack.log_dir)
    result = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT nifi-java reference: OK run=")]
    assert len(result) == 1, r.stdout
    run_id = result[0].split("run=")[1].split()[0]
    # 1 request + 1 manifest + 7 claims + 21 chunks + 7 after extraction
    assert "messages=37" in result[0], result[0]
    # the bytes each strategy sent: embedded-file a container file, embedded (PublishKafka's record
    # path) never one, not even a FlowFile's first message
    values = sorted(os.listdir(dump))
    assert len(values) == 37, values
    for name in values:
        logical = name.split("-", 1)[1][:-len(".bin")]
        with open(os.path.join(dump, name), "rb") as fh:
            head = fh.read(4)
        strategy = INPUTS[logical][0]
        if strategy == "embedded-file":
            assert head == b"Obj\x01", name
        elif strategy == "embedded":
            assert head[:1] == b"\x02" and head != b"Obj\x01", name  # a block of one record
    c = nstack.db()
    try:
        db = c.cursor()
        db.execute("SELECT status, job_key, business_key, extracted_count, success_partition_count, staging_count,"
                   " target_count FROM nifi_ops.load_run WHERE run_id = %s", (run_id,))
        assert db.fetchone() == ("SUCCESS", "ORACLE_INSP_DTL_DAILY", key, 105000, 8, 105000, 105000)
        assert one(db, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id = %s", run_id) == 21
        assert rows(db, "SELECT dispatch_type, status FROM nifi_ops.load_dispatch WHERE run_id = %s", run_id) == [
            ("VALIDATE_RUN", "ACKED")]
        assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'DEAD_LETTER'",
                   run_id) == 0
    finally:
        c.close()
