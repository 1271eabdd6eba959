"""Value framings and schema evolution (docs/contract.md K§5) on the real broker and database.

The services of this module run on topics of their own (prefix loadledger.t-framing., created
here), in consumer groups of their own (loadledger.<service>.framing), each input topic in
another framing, as NiFi 2.x writes them (python3-avro):

    run-requests        container (schema embedded; written with an older and a newer schema)
    manifests           confluent (schema ids from schema.ids_file; an older schema under id 2)
    partition-claims    block     (NiFi's headerless container block)
    chunks              bare
    partition-failures  confluent (an older PartitionFailure under id 4)

and some replies in other framings too (run-decisions container, manifest-decisions and
claim-decisions confluent with their schema ids, partition-failure-outcomes container).
The shared default topics and consumer groups are never touched.
"""
import os

import pytest

from conftest import new_run, one, rows
from llsim.kafkaio import Nifi
from llsim.probe import (FramedFlow, answers, ensure_topics, post_many, schema_with, schema_without,
                         start_sides, stop_checked, write_ids_file)
from llsim.stack import Stack

PREFIX = "loadledger.t-framing."
TAG = "framing"
INPUT_FRAMING = {"run-requests": "container", "manifests": "confluent", "partition-claims": "block",
                 "chunks": "bare", "partition-failures": "confluent"}
REPLY_FRAMING = {"run-decisions": "container", "manifest-decisions": "confluent", "claim-decisions": "confluent",
                 "chunk-outcomes": "bare", "partition-failure-outcomes": "container"}
REPLY_SCHEMA_ID = {"manifest-decisions": 21, "claim-decisions": 22}

# older writers: fields with defaults missing (nested too: ManifestPartition without isNullPartition)
OLD_RUN_REQUEST = schema_without("RunRequest", "allowEmptySource", "parameters", "requestedAt")
NEW_RUN_REQUEST = schema_with("RunRequest", {"name": "requestedBy", "type": "string", "default": ""},
                              {"name": "priority", "type": ["null", "int"], "default": None})
OLD_MANIFEST = schema_without("Manifest", "sourceNullSplitCount", "sourceMetrics", "sourceMetricsVersion")
_items = OLD_MANIFEST["fields"][-1]["type"]["items"]
_items["fields"] = [f for f in _items["fields"] if f["name"] != "isNullPartition"]
OLD_PARTITION_FAILURE = schema_without("PartitionFailure", "message", "attempt")


def project(record, schema):
    """The record as an older writer holds it: only the fields its schema has (recursively for
    the manifest's partitions)."""
    names = [f["name"] for f in schema["fields"]]
    out = {k: record[k] for k in names if k in record}
    if "partitions" in out and isinstance(schema["fields"][-1]["type"], dict):
        inner = [f["name"] for f in schema["fields"][-1]["type"]["items"]["fields"]]
        out["partitions"] = [{k: p[k] for k in inner} for p in out["partitions"]]
    return out


@pytest.fixture(scope="module")
def fstack():
    s = Stack(prefix=PREFIX)
    s.migrate()
    ensure_topics(s.bootstrap, PREFIX)
    ids = write_ids_file(os.path.join(s.run_dir, "t-framing", "schema-ids.json"), {
        1: "Manifest", 2: OLD_MANIFEST, 3: "PartitionFailure", 4: OLD_PARTITION_FAILURE})
    framing = {"topic.%s.framing" % t: f for t, f in list(INPUT_FRAMING.items()) + list(REPLY_FRAMING.items())}
    framing.update({"topic.%s.schema_id" % t: str(i) for t, i in REPLY_SCHEMA_ID.items()})
    framing["schema.ids_file"] = ids
    try:
        start_sides(s, ("registrar", "claimer", "completion"), TAG, framing)
    except Exception:
        stop_checked(s)
        raise
    yield s
    bad = stop_checked(s)
    assert not bad, "services did not exit cleanly (sanitizer report or crash): %s; logs in %s" % (bad, s.log_dir)


@pytest.fixture
def fflow(fstack):
    f = FramedFlow(Nifi(fstack.bootstrap, PREFIX), REPLY_FRAMING)
    yield f
    f.close()


@pytest.fixture
def fdb(fstack):
    c = fstack.db()
    yield c.cursor()
    c.close()


def item(logical, record, **kw):
    d = dict(logical=logical, record=record, framing=INPUT_FRAMING[logical])
    d.update(kw)
    return d


def test_reference_scenario_in_four_framings_reaches_extracted_validated(fstack, fflow, fdb):
    run = new_run()
    nifi = fflow.nifi
    # run request: container, written by an older RunRequest without allowEmptySource/parameters
    [d] = answers(fflow, post_many(nifi, [item("run-requests", project(run.run_request(), OLD_RUN_REQUEST),
                                               schema=OLD_RUN_REQUEST)]))
    assert (d["outcome"], d["runStatus"], d["hdfsRunPath"]) == ("ACCEPTED", "CREATED", run.hdfs_run_path), d
    assert one(fdb, "SELECT parameters::text FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == \
        '{"allowEmptySource": false}'
    # manifest: confluent, schema id 1 (the current Manifest)
    [m] = answers(fflow, post_many(nifi, [item("manifests", run.manifest(), schema_id=1)]))
    assert (m["outcome"], m["runStatus"], m["emptyPartitionCount"]) == ("ACCEPTED", "EXTRACTING", 1), m
    assert [p["partitionId"] for p in m["dispatchPartitions"]] == run.nonempty()
    assert fflow.r["manifest-decisions"].records[-1]["schema_id"] == 21
    # claims: NiFi's headerless blocks
    claims = answers(fflow, post_many(nifi, [item("partition-claims", run.claim(p)) for p in run.nonempty()]))
    assert all((c["outcome"], c["claimed"], c["attempt"], c["snapshotScn"]) ==
               ("ACCEPTED", True, 1, "48151623420000000042") for c in claims), claims
    assert {r["schema_id"] for r in fflow.r["claim-decisions"].records} == {22}
    # chunks: bare
    chunks = [c for p in run.nonempty() for c in run.chunks(p)]
    outcomes = answers(fflow, post_many(nifi, [item("chunks", c) for c in chunks]))
    assert all(o["outcome"] == "ACCEPTED" and o["recorded"] for o in outcomes)
    assert sum(1 for o in outcomes if o["validationScheduled"]) == 1
    assert [o["runStatus"] for o in outcomes if o["validationScheduled"]] == ["EXTRACTED_VALIDATED"]

    fdb.execute("SELECT status, extracted_count, success_partition_count FROM nifi_ops.load_run WHERE run_id = %s",
                (run.run_id,))
    assert fdb.fetchone() == ("EXTRACTED_VALIDATED", 105000, 8)
    assert rows(fdb, "SELECT status, count(*), sum(actual_row_count) FROM nifi_ops.load_partition WHERE run_id = %s"
                " GROUP BY status", run.run_id) == [("SUCCESS", 8, 105000)]
    assert one(fdb, "SELECT count(*) FROM nifi_ops.load_file WHERE run_id = %s", run.run_id) == 21
    assert rows(fdb, "SELECT dispatch_type FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id) == [
        ("VALIDATE_RUN",)]
    assert one(fdb, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'DEAD_LETTER'",
               run.run_id) == 0


def test_older_and_newer_writer_schemas_take_the_reader_defaults(fstack, fflow, fdb):
    run = new_run(allow_empty_source=True)
    nifi = fflow.nifi
    # a newer writer (two extra fields, dropped) through the container framing
    req = dict(run.run_request(parameters={"flow": "PG-10", "site": "b"}), requestedBy="coordinator-7", priority=3)
    # an older manifest: no sourceNullSplitCount / sourceMetrics / sourceMetricsVersion, partitions
    # without isNullPartition
    man = project(run.manifest(), OLD_MANIFEST)
    d, m = answers(fflow, post_many(nifi, [item("run-requests", req, schema=NEW_RUN_REQUEST),
                                           item("manifests", man, schema=OLD_MANIFEST, schema_id=2)]))
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d
    assert (m["outcome"], m["runStatus"], m["emptyPartitionCount"]) == ("ACCEPTED", "EXTRACTING", 1), m
    assert all(p["isNullPartition"] is False for p in m["dispatchPartitions"])
    assert one(fdb, "SELECT parameters::text FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == \
        '{"flow": "PG-10", "site": "b", "allowEmptySource": true}'
    fdb.execute("SELECT source_null_split_count, source_count FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
    assert fdb.fetchone() == (0, 105000)
    assert rows(fdb, "SELECT metric_name, actual_value, query_version FROM nifi_ops.load_validation"
                " WHERE run_id = %s AND stage = 'SOURCE'", run.run_id) == [("SOURCE_COUNT", "105000", "v1")]
    assert one(fdb, "SELECT count(*) FROM nifi_ops.load_partition WHERE run_id = %s AND is_null_partition",
               run.run_id) == 0

    [c] = answers(fflow, post_many(nifi, [item("partition-claims", run.claim("0003"))]))
    assert c["claimed"] is True
    # an older failure report (no message, no attempt): message "" (stored as null), attempt null
    fail = project(run.partition_failure("0003", code="ORA-01555"), OLD_PARTITION_FAILURE)
    current = run.partition_failure("0003", code="ORA-01555")
    f, again = answers(fflow, post_many(nifi, [item("partition-failures", fail, schema=OLD_PARTITION_FAILURE,
                                                    schema_id=4),
                                               item("partition-failures", current, schema_id=3)]))
    assert (f["outcome"], f["changed"], f["partitionStatus"], f["runStatus"]) == (
        "ACCEPTED", True, "FAILED", "FAILED_SNAPSHOT_EXPIRED"), f
    assert (again["outcome"], again["changed"]) == ("REPLAY", False)
    fdb.execute("SELECT status, error_code, error_message FROM nifi_ops.load_partition WHERE run_id = %s"
                " AND partition_id = '0003'", (run.run_id,))
    assert fdb.fetchone() == ("FAILED", "ORA-01555", None)
    assert rows(fdb, "SELECT message, details->'attempt' FROM nifi_ops.load_event WHERE run_id = %s"
                " AND event_name = 'PARTITION_FAILED'", run.run_id) == [(None, None)]
    fdb.execute("SELECT status, error_message FROM nifi_ops.load_run WHERE run_id = %s", (run.run_id,))
    assert fdb.fetchone() == ("FAILED_SNAPSHOT_EXPIRED", None)
