"""The shipped NiFi flow definitions (nifi/loadledger-flow.json, nifi/loadledger-flow-embedded.json)
checked with NiFi 2.6.0's own classes (tests/nifi-flow, loadledger.nififlow.FlowCheck; issue 30):

    1. each file read as RegisteredFlowSnapshot the way NiFi 2.6.0's upload reads it, and strictly
    2. tools/nififlow/components-2.6.0.json against NiFi's classes (every entry checked against one)
    3. every processor and record service of the flow whose class is on the class path valid in
       nifi-mock's TestRunner with the flow's properties (stand-ins for the Confluent and cache
       services, which are not served), every connected relationship existing
    4. every ReplaceText template and the Manifest run through the flow's own path to Kafka: the
       UpdateAttribute, the ReplaceText, then either the record-writing PublishKafka's reader and
       writer driven as PublishKafka 2.6.0 drives them (registry flow) or the flow's ConvertRecord
       run in a TestRunner, its content the message and "Kafka Key" the key (embedded flow); the
       bytes decoded by Avro Java against schemas/avro with every JSON value back, the key the
       runId, the framing the one nifi/conf/<variant> gives the topic; after the Manifest's
       publisher, the ConvertRecord back to JSON (embedded) and the SplitJson that hands PG-20 the
       manifest's partitions, run
    0. the finding behind the embedded flow's shape: "Embed Avro Schema" through PublishKafka 2.6.0's
       record path (RecordValueFactory) gives headerless blocks, the first message too

and, because a check that cannot fail is worth nothing, a broken copy of each flow must fail with
exactly what was broken named: the registry flow (a template field renamed, an invalid AvroReader
property value, a key NiFi's model does not know) and the embedded flow (PG-10's SplitJson given
the registry flow's path, a "Kafka Key" that is not the run id, a ConvertRecord writing JSON).
Needs a JDK 21 or later and Maven, no broker, no database.
"""
import json
import os
import re

import pytest

from conftest import built_nifi_project
from llsim import nifijava
from llsim.scenario import Run

REPO = nifijava.REPO
FLOWS = ["nifi/loadledger-flow.json", "nifi/loadledger-flow-embedded.json"]
MAIN = "loadledger.nififlow.FlowCheck"


@pytest.fixture(scope="module")
def flowcheck():
    """The built FlowCheck: (jdk, class path, output folder). Skipped without a JDK 21+ (failed when CI
    is set)."""
    return built_nifi_project("nifi-flow", nifijava.FLOWCHECK_DIR)


def run_check(flowcheck, *args):
    jdk, cp, _ = flowcheck
    r = nifijava.run(jdk, cp, ["--repo", REPO] + list(args), timeout=600, main=MAIN)
    print(r.stdout)
    return r


def groups(g, path=""):
    yield path, g
    for c in g.get("processGroups", []):
        yield from groups(c, c["name"] if not path else path + "/" + c["name"])


def processors(flow, type_suffix):
    """'<group path>/<name>' of the flow's processors of a type, as FlowCheck names them."""
    out = []
    for path, g in groups(flow["flowContents"]):
        for p in g.get("processors", []):
            if p["type"].endswith(type_suffix):
                out.append(p["name"] if not path else path + "/" + p["name"])
    return sorted(out)


def load_flow(name):
    """nifi/<name> as (the document, its processors by name, its controller services by name)."""
    with open(os.path.join(REPO, "nifi", name)) as fh:
        flow = json.load(fh)
    procs = {p["name"]: p for _, g in groups(flow["flowContents"]) for p in g.get("processors", [])}
    services = {s["name"]: s for _, g in groups(flow["flowContents"]) for s in g.get("controllerServices", [])}
    return flow, procs, services


def lines(stdout, tag, flow_file):
    return [ln for ln in stdout.splitlines() if ln.startswith("%s [%s]" % (tag, flow_file))]


FINDING = "PublishKafka 2.6.0 record path"


def test_shipped_flows_pass_with_nifis_classes(flowcheck, tmp_path):
    dump = os.path.join(flowcheck[2], "values")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(Run().manifest()))
    args = []
    for f in FLOWS:
        args += ["--flow", f]
    r = run_check(flowcheck, *(args + ["--dump", dump, "--manifest", str(manifest)]))
    assert r.returncode == 0, "FlowCheck failed (rc %d):\n%s\n%s" % (
        r.returncode, "\n".join(ln for ln in r.stdout.splitlines() if ln.startswith("FAIL")), r.stderr[-3000:])
    assert re.search(r"^RESULT flowcheck: \d+ ok, 0 failed", r.stdout, re.M), r.stdout[-2000:]
    # the finding stays true: PublishKafka's record path drops the header the writer wrote at creation
    finding = lines(r.stdout, "OK  ", FINDING)
    assert len(finding) == 1 and "every message is a headerless block" in finding[0], finding
    for f in FLOWS:
        name = os.path.basename(f)
        embedded = "embedded" in name
        with open(os.path.join(REPO, f)) as fh:
            flow = json.load(fh)
        ok = lines(r.stdout, "OK  ", name)
        # no template may be skipped silently: every ReplaceText of the flow has its OK line(s),
        # in the framing and with the key of the flow's path to Kafka
        templates = processors(flow, ".ReplaceText")
        assert len(templates) == 12, templates
        assert len(processors(flow, ".PublishKafka")) == 13, name
        via = ", container, " if embedded else ", confluent id "
        key = "key from Kafka Key '${ll.run.id}'" if embedded else "key from Message Key Field 'runId'"
        for t in templates:
            mine = [ln for ln in ok if ln.startswith("OK   [%s] template '%s'" % (name, t))]
            assert mine, "%s: no OK line for %s" % (name, t)
            assert all(via in ln and key in ln for ln in mine), mine
        manifest_ok = [ln for ln in ok if "as-is 'PG-10 Run coordinator/Publish Manifest': topic loadledger.manifests,"
                       " schema Manifest" in ln]
        assert len(manifest_ok) == 1 and via in manifest_ok[0] and key in manifest_ok[0], (name, manifest_ok)
        # PG-20 gets the manifest's partitions: the FlowFile after the publisher, through the SplitJson
        parts = [ln for ln in ok if "the partitions after 'Publish Manifest'" in ln]
        want = ("'Manifest as JSON again' (ConvertRecord)", "(SplitJson $[0].partitions) 8 split(s)") if embedded \
            else ("(SplitJson $.partitions) 8 split(s)",)
        assert len(parts) == 1 and all(w in parts[0] for w in want), (name, parts)
        # every ConvertRecord (the embedded flow's 13 "as Avro" and its "Manifest as JSON again") validated
        converts = processors(flow, ".ConvertRecord")
        assert len(converts) == (14 if embedded else 0), converts
        for c in converts:
            assert any(ln.startswith("OK   [%s] processor '%s' (ConvertRecord): valid" % (name, c)) for ln in ok), c
        # every record service and every processor whose class is on the class path was validated
        for kind in ("AvroReader", "AvroRecordSetWriter", "JsonTreeReader", "JsonRecordSetWriter"):
            assert any(("(%s): valid and enabled" % kind) in ln for ln in ok), "%s: %s not validated" % (name, kind)
        assert sum(1 for ln in ok if ln.startswith("OK   [%s] processor '" % name)) == \
            sum(1 for _, g in groups(flow["flowContents"]) for p in g.get("processors", [])
                if not p["type"].startswith("org.apache.nifi.kafka.")), name
    with open(os.path.join(dump, "index.json")) as fh:
        index = json.load(fh)
    published = {(e["flow"], e["logicalTopic"]) for e in index}
    assert len(published) == 2 * 12, sorted(published)  # 11 template topics + manifests, per flow
    for e in index:
        with open(os.path.join(dump, e["file"]), "rb") as fh:
            value = fh.read()
        if "embedded" in e["flow"]:
            # one Avro container file per message, the schema in its header
            assert e["framing"] == "container" and value.startswith(b"Obj\x01"), e
        else:
            assert e["framing"] == "confluent" and value[:1] == b"\x00" and len(value) > 5, e


def test_a_broken_flow_fails_naming_what_is_broken(flowcheck, tmp_path):
    flow, procs, services = load_flow("loadledger-flow.json")
    # a template field renamed: the Avro writer finds no claimToken (and would drop claimTokn)
    rt = procs["PartitionClaim as JSON"]["properties"]
    assert '"claimToken"' in rt["Replacement Value"]
    rt["Replacement Value"] = rt["Replacement Value"].replace('"claimToken"', '"claimTokn"')
    # an AvroReader property value NiFi does not allow
    services["Reply Avro reader"]["properties"]["schema-access-strategy"] = "schema-reference-readr"
    # a misspelt key, which NiFi's upload would drop without a word
    procs["Prepare Manifest"]["autoTerminatedRelationship"] = []
    broken = tmp_path / "broken-flow.json"
    broken.write_text(json.dumps(flow, indent=1))

    r = run_check(flowcheck, "--flow", str(broken))
    assert r.returncode == 1, "FlowCheck passed a broken flow (rc %d)" % r.returncode
    fails = lines(r.stdout, "FAIL", broken.name)
    assert any(ln.startswith("FAIL [broken-flow.json] template 'PG-20 Partition worker/PartitionClaim as JSON'")
               and "claimToken" in ln for ln in fails), fails
    assert any(ln.startswith("FAIL [broken-flow.json] service 'Reply Avro reader' (AvroReader)")
               and "schema-reference-readr" in ln for ln in fails), fails
    assert any("a key NiFi's model does not know" in ln and "autoTerminatedRelationship" in ln for ln in fails), fails
    assert len(fails) == 3, "other failures than the three made:\n" + "\n".join(fails)


def test_a_broken_embedded_flow_fails_naming_what_is_broken(flowcheck, tmp_path):
    flow, procs, services = load_flow("loadledger-flow-embedded.json")
    # PG-10's SplitJson given the registry flow's path: the JSON after "Manifest as JSON again" is an
    # array, so PG-20 would get no partition
    split = procs["One FlowFile per partition"]["properties"]
    assert split["JsonPath Expression"] == "$[0].partitions"
    split["JsonPath Expression"] = "$.partitions"
    # a Kafka key that is not the run id
    procs["Publish PartitionClaim"]["properties"]["Kafka Key"] = "${ll.partition.id}"
    # a ConvertRecord writing JSON: the message would not be an Avro container
    procs["StageValidated as Avro"]["properties"]["Record Writer"] = services["Reply JSON writer"]["identifier"]
    broken = tmp_path / "broken-embedded-flow.json"
    broken.write_text(json.dumps(flow, indent=1))

    r = run_check(flowcheck, "--flow", str(broken))
    assert r.returncode == 1, "FlowCheck passed a broken flow (rc %d)" % r.returncode
    fails = lines(r.stdout, "FAIL", broken.name)
    assert any("the partitions after 'Publish Manifest'" in ln and "0 split(s), the manifest has 8 partitions" in ln
               for ln in fails), fails
    assert any(ln.startswith("FAIL [%s] template 'PG-20 Partition worker/PartitionClaim as JSON'" % broken.name)
               and "Kafka key (Kafka Key '${ll.partition.id}') is 0000, expected the runId" in ln for ln in fails), fails
    assert any(ln.startswith("FAIL [%s] template 'PG-40 Staging validation/StageValidated as JSON'" % broken.name)
               and "not an AvroRecordSetWriter" in ln for ln in fails), fails
    assert len(fails) == 3, "other failures than the three made:\n" + "\n".join(fails)
