"""The shipped NiFi flow definitions (nifi/loadledger-flow.json, nifi/loadledger-flow-embedded.json)
checked with NiFi 2.6.0's own classes (tests/nifi-flow, loadledger.nififlow.FlowCheck; issue 30):

    1. each file read as RegisteredFlowSnapshot the way NiFi 2.6.0's upload reads it, and strictly
    2. tools/nififlow/components-2.6.0.json against NiFi's classes (every entry checked against one)
    3. every processor and record service of the flow whose class is on the class path valid in
       nifi-mock's TestRunner with the flow's properties (stand-ins for the Confluent and cache
       services, which are not served), every connected relationship existing
    4. every ReplaceText template and the Manifest run through the flow's own UpdateAttribute,
       ReplaceText, JSON reader and Avro writer, the bytes decoded by Avro Java against
       schemas/avro with every JSON value back

and, because a check that cannot fail is worth nothing, a broken copy of the registry flow (a
template field renamed, an invalid AvroReader property value, a key NiFi's model does not know)
must fail with exactly those three named. Needs a JDK 21 or later and Maven, no broker, no database.
"""
import json
import os
import re

import pytest

from llsim import nifijava
from llsim.scenario import Run

REPO = nifijava.REPO
FLOWS = ["nifi/loadledger-flow.json", "nifi/loadledger-flow-embedded.json"]
MAIN = "loadledger.nififlow.FlowCheck"


@pytest.fixture(scope="module")
def flowcheck():
    """The built FlowCheck: (jdk, class path). Skipped without a JDK 21+ (failed when CI is set)."""
    jdk = nifijava.find_jdk()
    if jdk is None:
        msg = "no JDK %d or later (NiFi 2.6.0's classes need it): set LL_NIFI_JAVA_HOME" % nifijava.MIN_JAVA
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    build_dir = os.environ.get("LL_BUILD_DIR", os.path.join(REPO, "build"))
    out = os.path.join(os.path.abspath(build_dir), "tests", "nifi-flow")
    return jdk, nifijava.build(jdk, out, os.path.join(out, "mvn.log"), project=nifijava.FLOWCHECK_DIR), out


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


def lines(stdout, tag, flow_file):
    return [ln for ln in stdout.splitlines() if ln.startswith("%s [%s]" % (tag, flow_file))]


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
    for f in FLOWS:
        name = os.path.basename(f)
        with open(os.path.join(REPO, f)) as fh:
            flow = json.load(fh)
        ok = lines(r.stdout, "OK  ", name)
        # no template may be skipped silently: every ReplaceText of the flow has its OK line(s)
        templates = processors(flow, ".ReplaceText")
        assert len(templates) == 12, templates
        for t in templates:
            assert any(ln.startswith("OK   [%s] template '%s'" % (name, t)) for ln in ok), "%s: no OK line for %s" % (name, t)
        assert any("as-is 'PG-10 Run coordinator/Publish Manifest': topic loadledger.manifests, schema Manifest" in ln
                   for ln in ok), name
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
        assert os.path.getsize(os.path.join(dump, e["file"])) > 0, e


def test_a_broken_flow_fails_naming_what_is_broken(flowcheck, tmp_path):
    with open(os.path.join(REPO, "nifi", "loadledger-flow.json")) as fh:
        flow = json.load(fh)
    procs = {p["name"]: p for _, g in groups(flow["flowContents"]) for p in g.get("processors", [])}
    services = {s["name"]: s for _, g in groups(flow["flowContents"]) for s in g.get("controllerServices", [])}
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
