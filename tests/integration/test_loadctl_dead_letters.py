"""The dead-letter workflow of loadctl on the real broker and database (docs/contract.md K§4,
tools/loadctl/README.md): `loadctl dead-letters` lists the dead letters with their source
coordinates, service, code, reason and time; `dead-letters show` prints one with its value decoded
when it decodes; `loadctl redrive` republishes a dead letter (here with a corrected value) to its
source topic with the ll.redrive.of link, the service applies it once, a second redrive is
refused, `loadctl verify --topics` still holds, and a replay from the earliest offsets changes
nothing."""
import json
import os
import types

import pytest

from conftest import close_clean, new_run, one
from llsim.drills import (Isolated, RawReader, ledger_digest, loadctl_topics, loadctl_verify, reset_group,
                          snapshot, snapshot_diff, wait_until)
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.probe import answer, post_many, replies_to

BAD_KEY = "2026/09/28"  # a business key outside the contract's format: INVALID_FIELD


@pytest.fixture(scope="module")
def iso():
    i = Isolated("dlqflow")
    i.stack.start_all()
    yield i
    close_clean(i)


@pytest.fixture(scope="module")
def world(iso):
    """Two dead letters of the registrar: an undecodable run request and one with an invalid
    business key (its run has no ledger row yet)."""
    nifi = Nifi(iso.bootstrap, iso.prefix)
    flow = Flow(nifi)
    run = new_run()
    undecodable, invalid = post_many(nifi, [
        dict(logical="run-requests", raw=b"\x00not avro", key=run.run_id, headers=[("nifi.source", b"PG-10")]),
        dict(logical="run-requests", record=run.run_request(businessKey=BAD_KEY), headers=[("nifi.source", b"PG-10")]),
    ])
    db = iso.stack.db().cursor()
    wait_until(lambda: one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE event_name = 'DEAD_LETTER'") == 2,
               60, "the two dead letters")
    assert one(db, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == 0
    # the dead-letter records commit with the Kafka transaction, just after the database's
    wait_until(lambda: listed(iso)["count"] == 2, 60, "the dead letters listed")
    yield types.SimpleNamespace(nifi=nifi, flow=flow, run=run, undecodable=undecodable, invalid=invalid, db=db,
                                redriven=None, forced=None)
    flow.close()


def listed(iso, *args):
    _rc, doc = loadctl_topics(iso, "dead-letters", *args, check_rc=0)
    return doc


def source_of(row):
    return (row["sourceTopic"], row["sourcePartition"], row["sourceOffset"])


def coord(row):
    return "%s:%d:%d" % (row["topic"], row["partition"], row["offset"])


def test_list_names_every_dead_letter(iso, world):
    doc = listed(iso)
    assert doc["ok"] and not doc["incomplete"] and doc["topic"] == iso.topic("dead-letters")
    by_source = {source_of(r): r for r in doc["deadLetters"]}
    u, v = world.undecodable, world.invalid
    assert set(by_source) == {(u.topic, u.partition, u.offset), (v.topic, v.partition, v.offset)}, doc
    bad, inv = by_source[(u.topic, u.partition, u.offset)], by_source[(v.topic, v.partition, v.offset)]
    assert (bad["service"], bad["code"]) == ("registrar", "DECODE_FAILED")
    assert (inv["service"], inv["code"]) == ("registrar", "INVALID_FIELD")
    assert "businessKey" in inv["reason"] and bad["reason"]
    assert inv["deadAt"].endswith("Z") and bad["deadAt"]
    assert inv["runId"] == world.run.run_id and bad["runId"] == world.run.run_id  # value, then key
    # filters
    assert [source_of(r) for r in listed(iso, "--code", "INVALID_FIELD")["deadLetters"]] == [
        (v.topic, v.partition, v.offset)]
    assert listed(iso, "--run", world.run.run_id)["count"] == 2
    assert listed(iso, "--run", new_run().run_id)["count"] == 0
    assert listed(iso, "--service", "claimer")["count"] == 0
    # bounded: a list stopped by --max-records says so
    short = listed(iso, "--max-records", "1")
    assert short["incomplete"] and short["count"] <= 1
    # the text table
    conf = os.path.join(iso.stack.conf_dir, "topics.conf")
    p = iso.stack.loadctl("dead-letters", "--config", conf, check=False)
    assert p.returncode == 0, p.stderr
    assert "INVALID_FIELD" in p.stdout and "DECODE_FAILED" in p.stdout and "2 dead letter(s)" in p.stdout


def test_show_decodes_the_value_when_it_decodes(iso, world):
    inv = listed(iso, "--code", "INVALID_FIELD")["deadLetters"][0]
    _rc, own = loadctl_topics(iso, "dead-letters", "show", coord(inv), check_rc=0)
    assert own["coordinates"] == "dead-letter" and own["decoded"] is True
    assert own["value"]["businessKey"] == BAD_KEY and own["value"]["runId"] == world.run.run_id
    assert own["headers"]["nifi.source"] == "PG-10" and own["headers"]["ll.error.code"] == "INVALID_FIELD"
    assert own["key"] == world.run.run_id
    v = world.invalid
    _rc, src = loadctl_topics(iso, "dead-letters", "show", "%s:%d:%d" % (v.topic, v.partition, v.offset), check_rc=0)
    assert src["coordinates"] == "source" and coord(src) == coord(inv) and src["deadLettersOfSource"] == 1
    bad = listed(iso, "--code", "DECODE_FAILED")["deadLetters"][0]
    _rc, und = loadctl_topics(iso, "dead-letters", "show", coord(bad), check_rc=0)
    assert und["decoded"] is False and und["value"] is None and und["decodeError"], und
    assert und["valueBytes"] == len(b"\x00not avro")
    rc, missing = loadctl_topics(iso, "dead-letters", "show", "%s:0:999999" % iso.topic("dead-letters"))
    assert rc == 2 and missing["code"] == "DEAD_LETTER_NOT_FOUND"
    rc, usage = loadctl_topics(iso, "dead-letters", "show", "no-coordinates")
    assert rc == 1 and usage["code"] == "USAGE"


def test_redrive_of_a_corrected_value_is_applied(iso, world):
    inv = listed(iso, "--code", "INVALID_FIELD")["deadLetters"][0]
    fixed = os.path.join(iso.stack.conf_dir, "corrected.json")
    with open(fixed, "w") as f:
        json.dump(world.run.run_request(), f)
    _rc, doc = loadctl_topics(iso, "redrive", coord(inv), "--value-file", fixed, "--reason", "business key fixed",
                             check_rc=0)
    (r,) = doc["redriven"]
    link = "%s/%d/%d" % (inv["topic"], inv["partition"], inv["offset"])
    assert r["deadLetter"] == link and r["valueFrom"] == "file" and r["topic"] == world.invalid.topic
    assert r["partition"] == world.invalid.partition and r["offset"] > world.invalid.offset
    sent = types.SimpleNamespace(logical="run-requests", topic=r["topic"], partition=r["partition"], offset=r["offset"])
    reply = answer(world.flow, sent)
    assert (reply["outcome"], reply["runStatus"]) == ("ACCEPTED", "CREATED"), reply
    assert one(world.db, "SELECT business_key FROM nifi_ops.load_run WHERE run_id = %s",
               world.run.run_id) == world.run.business_key
    # the new record links to its dead letter and keeps the original key and headers
    raw = RawReader(iso.bootstrap, r["topic"])
    rec = raw.wait_for(lambda m: m["partition"] == r["partition"] and m["offset"] == r["offset"])[0]
    raw.close()
    assert rec["headers"]["ll.redrive.of"] == link.encode()
    assert rec["headers"]["ll.redrive.reason"] == b"business key fixed"
    assert json.loads(rec["headers"]["ll.redrive.by"])["operatorRole"] == "operator"
    assert rec["headers"]["nifi.source"] == b"PG-10" and rec["key"] == world.run.run_id.encode()
    assert not any(h.startswith("ll.error") or h.startswith("ll.source") for h in rec["headers"])
    assert replies_to(world.flow, world.invalid) == []
    world.redriven = sent
    # one reply or dead letter per input: the redriven record is a new input with its own reply
    wait_until(lambda: verify_rc(iso) == 0, 60, "verify --topics holds after the redrive")


def verify_rc(iso):
    return loadctl_verify(iso)[0]


def test_a_second_redrive_is_refused(iso, world):
    assert world.redriven, "needs the redrive of the previous test"
    inv = listed(iso, "--code", "INVALID_FIELD")["deadLetters"][0]
    w = world.invalid
    for c in (coord(inv), "%s:%d:%d" % (w.topic, w.partition, w.offset)):  # own or source coordinates
        rc, doc = loadctl_topics(iso, "redrive", c, "--value-file", os.path.join(iso.stack.conf_dir, "corrected.json"))
        assert rc == 2 and doc["code"] == "ALREADY_REDRIVEN", doc
        assert doc["details"]["redriven"] == "%s:%d:%d" % (world.redriven.topic, world.redriven.partition,
                                                           world.redriven.offset)
    # a redrive of the undecodable one without a fix is allowed once; the service dead-letters it again
    bad = listed(iso, "--code", "DECODE_FAILED")["deadLetters"][0]
    # the search for an earlier redrive is bounded: stopped, it refuses rather than guess
    rc, doc = loadctl_topics(iso, "redrive", coord(bad), "--max-records", "1")
    assert rc == 2 and doc["code"] == "REDRIVE_CHECK_INCOMPLETE", doc
    _rc, doc = loadctl_topics(iso, "redrive", coord(bad), check_rc=0)
    again = doc["redriven"][0]
    assert again["valueFrom"] == "dead letter"
    wait_until(lambda: any(source_of(r) == (again["topic"], again["partition"], again["offset"])
                           for r in listed(iso, "--code", "DECODE_FAILED")["deadLetters"]), 60,
               "the unchanged redrive dead-lettered again")
    rc, doc = loadctl_topics(iso, "redrive", coord(bad))
    assert rc == 2 and doc["code"] == "ALREADY_REDRIVEN"
    # --force publishes it again: the ledger applies the corrected value once (REPLAY, no change)
    digest = ledger_digest(world.db)
    _rc, doc = loadctl_topics(iso, "redrive", coord(inv), "--value-file", os.path.join(iso.stack.conf_dir,
                                                                                         "corrected.json"),
                              "--force", check_rc=0)
    r = doc["redriven"][0]
    forced = types.SimpleNamespace(logical="run-requests", topic=r["topic"], partition=r["partition"],
                                   offset=r["offset"])
    assert answer(world.flow, forced)["outcome"] == "REPLAY"
    assert ledger_digest(world.db) == digest
    world.forced = forced
    assert verify_rc(iso) == 0


def test_a_replay_after_the_redrive_changes_nothing(iso, world):
    """The registrar's group reset to earliest: the redriven inputs are read again, answered as
    REPLAY, and the ledger does not change."""
    assert world.redriven, "needs the redrive of the previous tests"
    st = iso.stack
    db = world.db
    topics = [iso.topic("run-requests"), iso.topic("manifests")]
    codes = st.stop_all()
    assert all(c == 0 for c in codes.values()), codes
    before, digest = snapshot(db), ledger_digest(db)
    reset_group(iso.bootstrap, iso.groups["registrar"], topics)
    decisions = RawReader(iso.bootstrap, iso.topic("run-decisions"), logical="run-decisions", from_beginning=False)
    st.start_all()
    try:
        # (the registrar's lag does not reach 0 here: a redrive's commit marker follows the last
        # record, so the replies to the two redriven offsets say the replay got there)
        for sent in (world.redriven, world.forced):
            got = decisions.wait_for(lambda m: m["value"]["sourceOffset"] == sent.offset
                                     and m["value"]["sourcePartition"] == sent.partition, timeout=90)
            assert [m["value"]["outcome"] for m in got] == ["REPLAY"], got
        decisions.drain(1)
        assert all(m["value"]["outcome"] != "ACCEPTED" for m in decisions.records), decisions.records
        assert snapshot_diff(before, snapshot(db)) == [], "the replay changed the ledger"
        assert ledger_digest(db) == digest
        assert one(db, "SELECT count(*) FROM nifi_ops.load_run WHERE run_id = %s", world.run.run_id) == 1
    finally:
        decisions.close()

