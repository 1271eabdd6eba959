"""Dead letters (docs/contract.md K§4 and K§5) on the real broker and database: a message that
cannot be applied at all goes to dead-letters with its original key, value and headers plus the
ll.* headers, the ledger records a DEAD_LETTER event, and the next message of the same Kafka
partition is still applied. Business rejections are replies, never dead letters.

The default services (bare framing) take the undecodable and out-of-format values; a side stack
of its own (topics loadledger.t-dlq.*, groups loadledger.<service>.dlq) takes what only other
framings can get wrong (bad magic, unknown schema id, bad blocks), oversize values and a
prerequisite that never arrives.
"""
import io
import os
import uuid

import avro.datafile
import avro.io
import pytest

from conftest import new_run, one
from llsim import avroframe
from llsim.kafkaio import Nifi
from llsim.probe import (FramedFlow, admit, answer, answers, avro_string, dead_letter, dead_letters_of,
                         ensure_topics, header, post_many, replies_to, start_sides, stop_checked, write_ids_file,
                         zigzag)
from llsim.stack import Stack

ORIGIN = [("nifi.flowfile.uuid", b"6f1d1c2e-flowfile"), ("nifi.source", b"PG-10")]
SIDE_PREFIX = "loadledger.t-dlq."


def dead_event(db, sent):
    db.execute("SELECT run_id::text, event_level, error_class, error_code, message, processor_name,"
               " details->>'sourceTopic', details->>'sourcePartition', details->>'sourceOffset'"
               " FROM nifi_ops.load_event WHERE event_name = 'DEAD_LETTER' AND details->>'sourceTopic' = %s"
               " AND details->>'sourcePartition' = %s AND details->>'sourceOffset' = %s",
               (sent.topic, str(sent.partition), str(sent.offset)))
    return db.fetchall()


def check_dead(db, dlq, sent, code, service, run_id, message_part=None):
    """The dead letter of `sent`: original key, value and headers, the ll.* headers, one event."""
    d = dead_letter(dlq, sent)
    assert d["key"] == (sent.key.encode() if isinstance(sent.key, str) else sent.key)
    assert d["raw"] == sent.value, "dead letter must carry the original value (also empty vs null)"
    for k, v in ORIGIN:
        assert d["headers"].get(k) == v, "original header %s lost: %s" % (k, d["headers"])
    assert header(d, "ll.error.code") == code, (header(d, "ll.error.code"), header(d, "ll.error.message"))
    msg = header(d, "ll.error.message")
    assert msg, "ll.error.message empty"
    if message_part:
        assert message_part in msg, msg
    assert (header(d, "ll.source.topic"), header(d, "ll.source.partition"), header(d, "ll.source.offset")) == (
        sent.topic, str(sent.partition), str(sent.offset))
    assert header(d, "ll.service") == service and header(d, "ll.dead_at")
    assert len(dead_letters_of(dlq, sent)) == 1
    ev = dead_event(db, sent)
    assert ev == [(run_id, "ERROR", "DEAD_LETTER", code, msg, service, sent.topic, str(sent.partition),
                   str(sent.offset))], ev
    return d


def raw_item(logical, value, key, **kw):
    return dict(logical=logical, raw=value, key=key, headers=ORIGIN, **kw)


# -- default services, bare framing ----------------------------------------------------------------
def test_undecodable_values_are_dead_letters_and_the_partition_moves_on(stack, nifi, flow, db):
    dlq = nifi.reader("dead-letters")
    run = new_run()
    good = avroframe.encode(run.run_request(), "RunRequest")
    k = run.run_id
    bad = [
        ("truncated datum", good[:-7]),
        ("string claiming 3 GiB", zigzag(3 << 30) + b"0123456789"),
        ("string claiming 2^62 bytes", zigzag(1 << 62) + b"abc"),
        ("negative string length", zigzag(-5) + good[1:]),
        ("negative length inside", avro_string(run.run_id) + zigzag(-40) + good[38:]),
        ("leftover bytes", good + b"\x00\x00"),
        ("empty value", b""),
        ("varint without end", b"\xff" * 12),
    ]
    sent = post_many(nifi, [raw_item("run-requests", v, k) for _, v in bad] +
                     [dict(logical="run-requests", record=run.run_request(), headers=ORIGIN)])
    assert len({s.partition for s in sent}) == 1, "one key, one Kafka partition"
    ok = answer(flow, sent[-1])
    assert (ok["outcome"], ok["runStatus"]) == ("ACCEPTED", "CREATED"), ok
    for (name, _), s in zip(bad, sent):
        check_dead(db, dlq, s, "DECODE_FAILED", "registrar", run.run_id)
        assert replies_to(flow, s) == [], name
    assert one(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == "CREATED"
    dlq.close()


def test_null_value_and_non_uuid_key(stack, nifi, flow, db):
    dlq = nifi.reader("dead-letters")
    run = new_run()
    sent = post_many(nifi, [raw_item("chunks", None, run.run_id),
                            raw_item("chunks", b"\x02garbage", "not-a-run-id"),
                            dict(logical="run-requests", record=run.run_request())])
    check_dead(db, dlq, sent[0], "DECODE_FAILED", "completion", run.run_id, "empty")
    # a key that is not a UUID: no run id in the ledger event
    check_dead(db, dlq, sent[1], "DECODE_FAILED", "completion", None)
    assert answer(flow, sent[2])["outcome"] == "ACCEPTED"
    dlq.close()


def test_values_outside_the_contract_formats_are_invalid_field(stack, nifi, flow, db):
    dlq = nifi.reader("dead-letters")
    run = new_run()
    admit(flow, run, claim=["0000"])
    other = new_run()
    bad_id = "run-%s" % uuid.uuid4().hex[:8]
    cases = [  # (logical, record, key, service, ledger run id, reason fragment)
        ("run-requests", other.run_request(jobKey="oracle_insp_dtl_daily"), other.run_id, "registrar", other.run_id,
         "jobKey"),
        ("run-requests", dict(other.run_request(), runId=bad_id), bad_id, "registrar", None, "runId"),
        ("run-requests", other.run_request(businessKey="2026/09/28"), other.run_id, "registrar", other.run_id,
         "businessKey"),
        ("manifests", run.manifest(snapshotScn="4815x"), run.run_id, "registrar", run.run_id, "snapshotScn"),
        ("partition-claims", dict(run.claim("0001"), claimToken="not-a-token"), run.run_id, "claimer", run.run_id, "claimToken"),
        ("partition-claims", dict(run.claim("0001"), partitionId="1"), run.run_id, "claimer", run.run_id,
         "partitionId"),
        ("chunks", dict(run.chunk("0000", 0, 3, 5000), recordCount=-1), run.run_id, "completion", run.run_id,
         "recordCount"),
        ("chunks", run.chunk("0000", 0, 0, 5000), run.run_id, "completion", run.run_id, "chunkCount"),
        ("partition-failures", dict(run.partition_failure("0000"), errorCode=""), run.run_id, "completion",
         run.run_id, "errorCode"),
    ]
    items = [dict(logical=lg, record=rec, key=key, headers=ORIGIN) for lg, rec, key, _, _, _ in cases]
    # after each, a good message of the same topic and key: still applied
    follow = [dict(logical="run-requests", record=other.run_request()),
              dict(logical="manifests", record=run.manifest()),
              dict(logical="partition-claims", record=run.claim("0001")),
              dict(logical="chunks", record=run.chunk("0000", 0, 3, 5000)),
              dict(logical="partition-failures", record=run.partition_failure("0000", token=str(uuid.uuid4())))]
    sent = post_many(nifi, items + follow)
    for (lg, _, _, service, rid, field), s in zip(cases, sent):
        check_dead(db, dlq, s, "INVALID_FIELD", service, rid, field)
        assert replies_to(flow, s) == []
    got = answers(flow, sent[len(items):])
    assert (got[0]["outcome"], got[0]["runStatus"]) == ("ACCEPTED", "CREATED")
    assert (got[1]["outcome"], got[1]["runStatus"]) == ("REPLAY", "EXTRACTING")
    assert (got[2]["outcome"], got[2]["claimed"]) == ("ACCEPTED", True)
    assert (got[3]["outcome"], got[3]["receivedChunks"]) == ("ACCEPTED", 1)
    assert (got[4]["outcome"], got[4]["code"]) == ("REJECTED", "CLAIM_MISMATCH")
    assert one(db, "SELECT job_key FROM nifi_ops.load_run WHERE run_id = %s", other.run_id) == other.job
    assert one(db, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id::text = %s", bad_id) == 0
    dlq.close()


def test_business_rejections_are_replies_not_dead_letters(stack, nifi, flow, db):
    dlq = nifi.reader("dead-letters")
    run = new_run()
    admit(flow, run, claim=["0000"])
    dup = new_run(business_key=run.business_key)
    sent = post_many(nifi, [
        dict(logical="partition-claims", record=run.claim("0000", token=str(uuid.uuid4()))),
        dict(logical="chunks", record=run.chunk("0000", 0, 3, 5000, token=str(uuid.uuid4()))),
        dict(logical="chunks", record=run.chunk("0000", 0, 3, 5000, path="/tmp/x.parquet")),
        dict(logical="run-requests", record=dup.run_request()),
        dict(logical="manifests", record=run.manifest(sourceCount=1)),
    ])
    codes = [a["code"] for a in answers(flow, sent)]
    assert codes == ["CLAIM_MISMATCH", "CLAIM_MISMATCH", "HDFS_PATH_OUTSIDE_RUN", "DUPLICATE_ACTIVE_RUN",
                     "RUN_STATUS_MISMATCH"]
    # a reply commits in the same Kafka transaction a dead letter of that message would have
    dlq.drain(1.0)
    for s in sent:
        assert dead_letters_of(dlq, s) == [] and dead_event(db, s) == []
        assert len(replies_to(flow, s)) == 1
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE event_name = 'DEAD_LETTER' AND run_id IN (%s, %s)",
               run.run_id, dup.run_id) == 0
    dlq.close()


# -- a side stack: container / confluent / block framings, small limits ----------------------------
@pytest.fixture(scope="module")
def side():
    s = Stack(prefix=SIDE_PREFIX)
    s.migrate()
    ensure_topics(s.bootstrap, SIDE_PREFIX)
    ids = write_ids_file(os.path.join(s.run_dir, "t-dlq", "schema-ids.json"), {1: "Manifest"})
    conf = {"topic.run-requests.framing": "container", "topic.manifests.framing": "confluent",
            "topic.partition-claims.framing": "block", "schema.ids_file": ids,
            "loop.max_message_bytes": "8192", "loop.prerequisite_wait": "PT3S",
            "loop.retry_backoff_max": "PT0.5S"}
    try:
        start_sides(s, ("registrar", "claimer"), "dlq", conf)
    except Exception:
        stop_checked(s)
        raise
    yield s
    bad = stop_checked(s)
    assert not bad, "services did not exit cleanly (sanitizer report or crash): %s; logs in %s" % (bad, s.log_dir)


def container_of(records, sch, codec="null"):
    buf = io.BytesIO()
    w = avro.datafile.DataFileWriter(buf, avro.io.DatumWriter(), avroframe.schema(sch), codec=codec)
    for r in records:
        w.append(r)
    w.flush()
    data = buf.getvalue()
    w.close()
    return data


def test_bad_framings_are_dead_letters_and_the_partition_moves_on(stack, side, db):
    snifi = Nifi(side.bootstrap, SIDE_PREFIX)
    sflow = FramedFlow(snifi)
    dlq = snifi.reader("dead-letters")
    run = new_run()
    k = run.run_id
    req = run.run_request()
    good_container = avroframe.encode(req, "RunRequest", "container")
    bare_manifest = avroframe.encode(run.manifest(), "Manifest")
    claim = run.claim("0000")
    block = avroframe.encode(claim, "PartitionClaim", "block")
    datum = avroframe.encode(claim, "PartitionClaim")
    bad_requests = [
        ("bad container magic", b"Obj\x02" + good_container[4:], "bad container magic"),
        ("bare datum on a container topic", avroframe.encode(req, "RunRequest"), "bad container magic"),
        ("deflate container", container_of([req], "RunRequest", "deflate"), "compressed"),
        ("two records", container_of([req, req], "RunRequest"), "exactly 1"),
        ("truncated container", good_container[:-20], None),
        ("oversize", good_container + b"\x00" * 9000, "exceeds the maximum"),
    ]
    bad_manifests = [
        ("confluent magic 1", b"\x01\x00\x00\x00\x01" + bare_manifest, "bad confluent magic"),
        ("bare datum on a confluent topic", bare_manifest, None),
        ("unknown schema id", b"\x00\x00\x00\x00\x63" + bare_manifest, "unknown schema id 99"),
        ("short header", b"\x00\x00\x01", "truncated confluent header"),
    ]
    bad_claims = [
        ("block count 2", zigzag(2) + block[1:], "exactly 1"),
        ("block size beyond buffer", zigzag(1) + zigzag(len(datum) + 50) + datum + b"S" * 16, "beyond buffer"),
        ("block without sync", block[:-16], "sync"),
        ("bare datum on a block topic", datum, None),
    ]
    sent = post_many(snifi, [raw_item("run-requests", v, k) for _, v, _ in bad_requests] +
                     [dict(logical="run-requests", record=req, framing="container")])
    d = answer(sflow, sent[-1])
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d
    for (name, _, part), s in zip(bad_requests, sent):
        check_dead(db, dlq, s, "DECODE_FAILED", "registrar", run.run_id, part)

    sent = post_many(snifi, [raw_item("manifests", v, k) for _, v, _ in bad_manifests] +
                     [dict(logical="manifests", record=run.manifest(), framing="confluent", schema_id=1)])
    m = answer(sflow, sent[-1])
    assert (m["outcome"], m["runStatus"]) == ("ACCEPTED", "EXTRACTING"), m
    for (name, _, part), s in zip(bad_manifests, sent):
        check_dead(db, dlq, s, "DECODE_FAILED", "registrar", run.run_id, part)

    sent = post_many(snifi, [raw_item("partition-claims", v, k) for _, v, _ in bad_claims] +
                     [dict(logical="partition-claims", record=claim, framing="block")])
    c = answer(sflow, sent[-1])
    assert (c["outcome"], c["claimed"]) == ("ACCEPTED", True), c
    for (name, _, part), s in zip(bad_claims, sent):
        check_dead(db, dlq, s, "DECODE_FAILED", "claimer", run.run_id, part)
    sflow.close()
    dlq.close()


def test_prerequisite_that_never_arrives_is_a_dead_letter(stack, side, db):
    snifi = Nifi(side.bootstrap, SIDE_PREFIX)
    sflow = FramedFlow(snifi)
    dlq = snifi.reader("dead-letters")
    orphan, run = new_run(), new_run()
    # the same key: the orphan's manifest holds the partition until prerequisite_wait (3 s) is over
    sent = post_many(snifi, [
        dict(logical="manifests", record=orphan.manifest(), framing="confluent", schema_id=1, key=orphan.run_id,
             headers=ORIGIN),
        dict(logical="manifests", record=dict(run.manifest()), framing="confluent", schema_id=1, key=orphan.run_id),
        dict(logical="run-requests", record=run.run_request(), framing="container")])
    assert answer(sflow, sent[2])["outcome"] == "ACCEPTED"
    check_dead(db, dlq, sent[0], "PREREQUISITE_TIMEOUT", "registrar", orphan.run_id, "not in the ledger")
    m = answer(sflow, sent[1])
    assert (m["outcome"], m["runId"], m["runStatus"]) == ("ACCEPTED", run.run_id, "EXTRACTING"), m
    assert replies_to(sflow, sent[0]) == []
    assert one(db, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", orphan.run_id) == 0
    sflow.close()
    dlq.close()
