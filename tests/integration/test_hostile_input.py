"""Hostile input on the real broker and database (issue 7, items 2 and 3): one test per malformed
class. Each asserts that the message is dead-lettered (or, for a decimal, accepted with the exact
value) within a time bound, that the next message of the same Kafka partition is answered (the
partition moves on), that the service process is still the same live process, and that its RSS
grew by less than a bound across the hostile messages.

A side stack of its own (topics loadledger.t-hostile.*, group loadledger.registrar.hostile):
run-requests in the bare framing, manifests in the container framing (the writer schema travels
with every message, as NiFi's "Embed Avro Schema" writes it). The hostile containers are built
by hand: python3-avro would itself expand the fan-out while writing it.
"""
import decimal
import io
import json
import time

import avro.datafile
import avro.io
import pytest

from conftest import new_run, one, rows
from llsim import avroframe
from llsim.kafkaio import Nifi
from llsim.probe import (FramedFlow, answer, dead_letter, dead_letters_of, ensure_topics, header, parse_schema,
                         post_many, replies_to, start_sides, stop_checked, zigzag)
from llsim.stack import Stack

PREFIX = "loadledger.t-hostile."
TAG = "hostile"
INSTANCE = "registrar-" + TAG
# Seconds within which the message after the hostile ones is answered (the codec refuses each
# in milliseconds; this covers the poll, the transaction and a loaded machine running ASan).
BOUND = 20
# The services run with ASan in the tests: their RSS at rest is already large (shadow memory,
# quarantine), so the bound is on the growth across the hostile messages, not on the total.
RSS_GROWTH_KIB = 64 * 1024


@pytest.fixture(scope="module")
def hstack():
    s = Stack(prefix=PREFIX)
    s.migrate()
    ensure_topics(s.bootstrap, PREFIX)
    try:
        start_sides(s, ("registrar",), TAG, {"topic.manifests.framing": "container"})
    except Exception:
        stop_checked(s)
        raise
    yield s
    bad = stop_checked(s)
    assert not bad, "services did not exit cleanly (sanitizer report or crash): %s; logs in %s" % (bad, s.log_dir)


@pytest.fixture
def hflow(hstack):
    f = FramedFlow(Nifi(hstack.bootstrap, PREFIX))
    yield f
    f.close()


@pytest.fixture
def hdb(hstack):
    c = hstack.db()
    yield c.cursor()
    c.close()


# -- helpers ----------------------------------------------------------------------------------------
def rss_kib(stack):
    with open("/proc/%d/status" % stack.procs[INSTANCE][0].pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Guard:
    """The service's pid and RSS before the hostile messages; check() afterwards."""

    def __init__(self, stack):
        self.stack, self.pid, self.rss, self.t0 = stack, stack.procs[INSTANCE][0].pid, rss_kib(stack), time.time()

    def check(self):
        assert self.stack.alive(INSTANCE), "the registrar exited; log %s" % self.stack.log_path(INSTANCE)
        assert self.stack.procs[INSTANCE][0].pid == self.pid
        grown = rss_kib(self.stack) - self.rss
        assert grown < RSS_GROWTH_KIB, "RSS grew by %d KiB (bound %d KiB)" % (grown, RSS_GROWTH_KIB)
        return time.time() - self.t0


def container(schema_text, datum, sync=b"H" * 16):
    """An object container file around one datum, the schema text embedded as given."""
    s = schema_text.encode() if isinstance(schema_text, str) else schema_text
    meta = zigzag(1) + zigzag(11) + b"avro.schema" + zigzag(len(s)) + s + zigzag(0)
    return b"Obj\x01" + meta + sync + zigzag(1) + zigzag(len(datum)) + datum + sync


def fanout(depth, width=10, defaults=False):
    """Record R<depth>: `width` fields of R<depth-1> (the first defines it), R0 `width` nulls;
    defaults: "default": {} (null in R0) on every field."""
    fields = []
    for i in range(width):
        if depth == 0:
            t = "null"
        elif i == 0:
            t = fanout(depth - 1, width, defaults)
        else:
            t = "R%d" % (depth - 1)
        f = {"name": "f%d" % i, "type": t}
        if defaults:
            f["default"] = None if depth == 0 else {}
        fields.append(f)
    return {"type": "record", "name": "R%d" % depth, "fields": fields}


def manifest_with(extra_field):
    s = avroframe.schema_json("Manifest")
    s["fields"].append(extra_field)
    return json.dumps(s, separators=(",", ":"))


def admitted(hflow, run):
    """A run admitted through the side stack (bare run request)."""
    [s] = post_many(hflow.nifi, [dict(logical="run-requests", record=run.run_request())])
    d = answer(hflow, s)
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d
    return run


def good_manifest(run, **over):
    return dict(logical="manifests", raw=avroframe.container(run.manifest(**over), avroframe.schema("Manifest")),
                key=run.run_id)


def check_dead(db, dlq, sent, part):
    """The dead letter of `sent`: DECODE_FAILED, the reason containing `part`, one ledger event."""
    d = dead_letter(dlq, sent, timeout=BOUND)
    assert d["raw"] == sent.value
    assert header(d, "ll.error.code") == "DECODE_FAILED", header(d, "ll.error.message")
    assert part in header(d, "ll.error.message"), header(d, "ll.error.message")
    assert len(dead_letters_of(dlq, sent)) == 1
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE event_name = 'DEAD_LETTER'"
               " AND details->>'sourceTopic' = %s AND details->>'sourcePartition' = %s"
               " AND details->>'sourceOffset' = %s", sent.topic, str(sent.partition), str(sent.offset)) == 1
    return header(d, "ll.error.message")


def hostile_then_good(hstack, hflow, hdb, hostile, follow):
    """Produces the hostile (value, reason part) items and then `follow` on the same key; checks
    the dead letters, that `follow` is answered within BOUND, the process and its RSS. Returns
    the answer to `follow`."""
    dlq = hflow.nifi.reader("dead-letters")
    guard = Guard(hstack)
    sent = post_many(hflow.nifi, [it for it, _ in hostile] + [follow])
    assert len({s.partition for s in sent}) == 1, "one key, one Kafka partition"
    reply = answer(hflow, sent[-1], timeout=BOUND)
    for (_, part), s in zip(hostile, sent):
        check_dead(hdb, dlq, s, part)
        assert replies_to(hflow, s) == []
    took = guard.check()
    assert took < BOUND, took
    dlq.close()
    return reply


# -- one test per malformed class ------------------------------------------------------------------
def test_fan_out_schema_is_a_dead_letter(hstack, hflow, hdb):
    """A 4 KB container whose writer schema is Manifest plus a field of R9 (10^10 nulls)."""
    run = admitted(hflow, new_run())
    text = manifest_with({"name": "fan", "type": fanout(9)})
    assert len(text) < 6000
    value = container(text, avroframe.datum(run.manifest(), avroframe.schema("Manifest")))
    m = hostile_then_good(hstack, hflow, hdb,
                          [(dict(logical="manifests", raw=value, key=run.run_id),
                            "over 100000 (budget codec.max_schema_expansions)")],
                          good_manifest(run))
    assert (m["outcome"], m["runStatus"]) == ("ACCEPTED", "EXTRACTING"), m


def test_default_bomb_is_a_dead_letter(hstack, hflow, hdb):
    """The same shape with "default": {} on every field, at depth 9 (about 5 KB), and a smaller
    one whose defaults alone are over their budget."""
    run = admitted(hflow, new_run())
    datum = avroframe.datum(run.manifest(), avroframe.schema("Manifest"))
    bomb9 = container(manifest_with({"name": "fan", "type": fanout(9, defaults=True), "default": {}}), datum)
    # an array default of 200 {} over R2 (111 types each): few types, 22,200 default values
    r2 = fanout(2, defaults=True)
    arr = container(manifest_with({"name": "fan", "type": {"type": "array", "items": r2},
                                   "default": [{}] * 200}), datum)
    m = hostile_then_good(hstack, hflow, hdb,
                          [(dict(logical="manifests", raw=bomb9, key=run.run_id), "(budget codec.max_"),
                           (dict(logical="manifests", raw=arr, key=run.run_id),
                            "default values built over 10000 (budget codec.max_default_values)")],
                          good_manifest(run))
    assert (m["outcome"], m["runStatus"]) == ("ACCEPTED", "EXTRACTING"), m


def test_decimal_bytes_are_stored_as_exact_decimal_text(hstack, hflow, hdb):
    """A manifest whose writer declares sourceMetrics values as bytes decimal(38,2): AMOUNT_SUM
    bytes 31 32 (unscaled 12594) is stored as "125.94"; 04 D2 as "12.34", FF as "-0.01". A
    decimal read as a type it cannot be (an int metric version) is a dead letter naming the
    field and both types."""
    run = admitted(hflow, new_run())
    sch = avroframe.schema_json("Manifest")
    for f in sch["fields"]:
        if f["name"] == "sourceMetrics":
            f["type"] = {"type": "map", "values": {"type": "bytes", "logicalType": "decimal", "precision": 38,
                                                   "scale": 2}}
    metrics = {"AMOUNT_SUM": decimal.Decimal("125.94"), "AMOUNT_AVG": decimal.Decimal("12.34"),
               "AMOUNT_MIN": decimal.Decimal("-0.01")}
    buf = io.BytesIO()
    w = avro.datafile.DataFileWriter(buf, avro.io.DatumWriter(), parse_schema(sch), codec="null")
    w.append(run.manifest(sourceMetrics=metrics))
    w.flush()
    value = buf.getvalue()
    w.close()
    assert zigzag(2) + b"\x31\x32" in value, "python3-avro wrote the unscaled 12594 as 31 32"
    # a decimal where the reader has an int (plannedPartitionCount) cannot be read: refused
    bad = avroframe.schema_json("Manifest")
    for f in bad["fields"]:
        if f["name"] == "plannedPartitionCount":
            f["type"] = {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 0}
    datum = avroframe.datum(dict(run.manifest(), plannedPartitionCount=decimal.Decimal(8)), parse_schema(bad))
    wrong = container(json.dumps(bad), datum)
    m = hostile_then_good(hstack, hflow, hdb,
                          [(dict(logical="manifests", raw=wrong, key=run.run_id),
                            "plannedPartitionCount: writer bytes(decimal(10,0)) cannot be read as int")],
                          dict(logical="manifests", raw=value, key=run.run_id))
    assert (m["outcome"], m["runStatus"]) == ("ACCEPTED", "EXTRACTING"), m
    got = dict(rows(hdb, "SELECT metric_name, actual_value FROM nifi_ops.load_validation"
                         " WHERE run_id = %s AND stage = 'SOURCE'", run.run_id))
    assert (got["AMOUNT_SUM"], got["AMOUNT_AVG"], got["AMOUNT_MIN"]) == ("125.94", "12.34", "-0.01"), got


def test_string_with_nul_is_a_dead_letter(hstack, hflow, hdb):
    """A run request whose businessKey holds a NUL (once cut there silently), and a manifest
    whose sourceMetrics map key holds one."""
    run = new_run()
    evil = dict(run.run_request(), businessKey=run.business_key + "\x00; DROP")
    value = avroframe.datum(evil, avroframe.schema("RunRequest"))
    d = hostile_then_good(hstack, hflow, hdb,
                          [(dict(logical="run-requests", raw=value, key=run.run_id),
                            "businessKey: string contains a NUL byte")],
                          dict(logical="run-requests", record=run.run_request()))
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d
    assert one(hdb, "SELECT business_key FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == run.business_key
    m = dict(run.manifest(), sourceMetrics={"AMOUNT\x00SUM": "1"})
    value = avroframe.container(m, avroframe.schema("Manifest"))
    r = hostile_then_good(hstack, hflow, hdb, [(dict(logical="manifests", raw=value, key=run.run_id), "NUL")],
                          good_manifest(run))
    assert (r["outcome"], r["runStatus"]) == ("ACCEPTED", "EXTRACTING"), r


def test_tombstone_is_a_dead_letter(hstack, hflow, hdb):
    run = new_run()
    d = hostile_then_good(hstack, hflow, hdb, [(dict(logical="run-requests", raw=None, key=run.run_id), "empty")],
                          dict(logical="run-requests", record=run.run_request()))
    assert d["outcome"] == "ACCEPTED", d


def test_empty_value_is_a_dead_letter(hstack, hflow, hdb):
    run = admitted(hflow, new_run())
    hostile = [(dict(logical="run-requests", raw=b"", key=run.run_id), "truncated"),
               (dict(logical="manifests", raw=b"", key=run.run_id), "bad container magic")]
    # the same key on two topics: each topic's partition moves on
    dlq = hflow.nifi.reader("dead-letters")
    guard = Guard(hstack)
    sent = post_many(hflow.nifi, [it for it, _ in hostile] + [good_manifest(run)])
    m = answer(hflow, sent[-1], timeout=BOUND)
    assert (m["outcome"], m["runStatus"]) == ("ACCEPTED", "EXTRACTING"), m
    for (_, part), s in zip(hostile, sent):
        check_dead(hdb, dlq, s, part)
    guard.check()
    dlq.close()
    other = new_run()
    d = hostile_then_good(hstack, hflow, hdb, [(dict(logical="run-requests", raw=b"", key=other.run_id), "")],
                          dict(logical="run-requests", record=other.run_request()))
    assert d["outcome"] == "ACCEPTED", d


def test_negative_and_huge_lengths_are_dead_letters(hstack, hflow, hdb):
    """Lengths below zero or far beyond the message, in the datum (bare) and in the container's
    own framing (schema length, block count and size)."""
    run = new_run()
    good = avroframe.datum(run.run_request(), avroframe.schema("RunRequest"))
    rid = zigzag(len(run.run_id)) + run.run_id.encode()
    bare = [
        (zigzag(-1) + good[1:], "negative string length -1"),
        (zigzag(-(1 << 62)) + good[1:], "negative string length"),
        (zigzag((1 << 62)) + b"abc", "beyond buffer"),
        (zigzag(3 << 30) + b"0123456789", "beyond buffer"),
        (rid + zigzag(-40) + good[len(rid) + 1:], "negative"),
        (rid + zigzag(1 << 40) + good[len(rid) + 1:], "beyond buffer"),
    ]
    d = hostile_then_good(hstack, hflow, hdb,
                          [(dict(logical="run-requests", raw=v, key=run.run_id), part) for v, part in bare],
                          dict(logical="run-requests", record=run.run_request()))
    assert (d["outcome"], d["runStatus"]) == ("ACCEPTED", "CREATED"), d

    text = json.dumps(avroframe.schema_json("Manifest"))
    datum = avroframe.datum(run.manifest(), avroframe.schema("Manifest"))
    sync = b"H" * 16
    head = b"Obj\x01" + zigzag(1) + zigzag(11) + b"avro.schema"
    framed = [
        (head + zigzag(-7) + text.encode(), "container metadata value length -7"),
        (head + zigzag(1 << 60) + text.encode(), "beyond buffer"),
        (b"Obj\x01" + zigzag(1 << 61) + b"\x00" * 32, "beyond buffer"),
        (head + zigzag(len(text)) + text.encode() + zigzag(0) + sync + zigzag(1) + zigzag(-5) + datum + sync,
         "container block length -5"),
        (head + zigzag(len(text)) + text.encode() + zigzag(0) + sync + zigzag(1) + zigzag(1 << 55) + datum + sync,
         "beyond buffer"),
        (head + zigzag(len(text)) + text.encode() + zigzag(0) + sync + zigzag(-3) + zigzag(len(datum)) + datum
         + sync, "exactly 1"),
    ]
    m = hostile_then_good(hstack, hflow, hdb,
                          [(dict(logical="manifests", raw=v, key=run.run_id), part) for v, part in framed],
                          good_manifest(run))
    assert (m["outcome"], m["runStatus"]) == ("ACCEPTED", "EXTRACTING"), m
