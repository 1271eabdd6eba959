#!/usr/bin/env python3
"""Checks the NiFi flow definitions users import (nifi/*.json, nifi/README.md) against the project.

Usage: check_nifi_flow.py REPO_ROOT [--mutations]. Exit 0 when every check holds; otherwise one line
per problem naming the file and the component, and exit 1. Reads the source tree only (well under a
second). --mutations breaks the flow in each of MUTATIONS' ways instead and exits 1 unless every one
is reported (ctest style.nifi_flow_mutations).

What it checks, from the project's own sources rather than from the generator's tables:
- the committed files are what tools/nififlow/flowgen.py writes (no hand edit drifts);
- the model holds together: every component's type and NAR in tools/nififlow/components-2.6.0.json
  (NiFi 2.6.0's descriptors), every property one the component has (or a dynamic one where it takes
  them), allowable values, every controller-service reference to a service in scope implementing the
  API, every parameter reference to a parameter of the context, sensitive properties to sensitive
  parameters only; every relationship of every processor connected or auto-terminated, every
  connection between existing components, every port connected on both sides (except inside the
  SITE groups, which are for the user to fill);
- Kafka as nifi/README.md ("Plugging in a NiFi flow") says: each PublishKafka transactional with acks=all, keyed by runId, the
  transactional id prefix <topic.prefix>nifi., an Avro writer without compression; each ConsumeKafka
  in a group <topic.prefix>nifi.*, earliest, committing; the connection service read_committed;
- every topic named exists in config/topics.conf; every topic NiFi produces or consumes is covered;
  the headers named are those the dispatcher writes (services/dispatcher/sink_kafka.c);
- every schema named exists in schemas/avro and is the schema of the topic it is used for (the
  schemas' own "Topic <name>" doc); embedded schema parameters equal the .avsc files; every JSON
  template has exactly the fields of its schema (all those without a default);
- every ll.reply.* attribute used is a field PG-00 extracts and a reply schema has; every Wait's
  signal names the reply of the request before it and carries the request's correlation fields,
  from the same attributes the request's JSON was written from, in the slots of PG-00's Notify.
"""
import json
import os
import re
import subprocess
import sys

ROOT = ([a for a in sys.argv[1:] if not a.startswith("--")] or [os.path.join(os.path.dirname(__file__), "..", "..")])[0]
FLOWS = ["nifi/loadledger-flow.json", "nifi/loadledger-flow-embedded.json"]
SIGNAL_FIELDS = ["runId", "partitionId", "claimToken", "chunkIndex", "publishToken", "dispatchId", "stage"]
problems = []


def bad(where, msg):
    problems.append("%s: %s" % (where, msg))


def read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def load_topics():
    out = set()
    for line in read("config/topics.conf").splitlines():
        line = line.split("#")[0].strip()
        if line:
            out.add(line.split()[0])
    return out


def load_schemas():
    """name -> parsed schema; topic -> schema name; reply schema -> request schema name."""
    schemas, topic_schema, reply_of = {}, {}, {}
    d = os.path.join(ROOT, "schemas", "avro")
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".avsc"):
            with open(os.path.join(d, fn)) as f:
                s = json.load(f)
            schemas[s["name"]] = s
            m = re.match(r"Topic ([a-z-]+) ", s.get("doc", ""))
            if m:
                topic_schema[m.group(1)] = s["name"]
            m = re.search(r"answer to one (\w+)", s.get("doc", ""))
            if m:
                reply_of[s["name"]] = m.group(1)
    return schemas, topic_schema, reply_of


def dispatcher_headers():
    src = read("services/dispatcher/sink_kafka.c")
    return set(re.findall(r'rd_kafka_header_add\(h, "([A-Za-z]+)"', src))


TOPICS = load_topics()
SCHEMAS, TOPIC_SCHEMA, REQUEST_OF_REPLY = load_schemas()
SCHEMA_TOPIC = {v: k for k, v in TOPIC_SCHEMA.items()}
HEADERS = dispatcher_headers()
with open(os.path.join(ROOT, "tools", "nififlow", "components-2.6.0.json")) as _f:
    COMPONENTS = json.load(_f)["components"]
REQUEST_TOPICS = {SCHEMA_TOPIC[r] for r in REQUEST_OF_REPLY.values()}
REPLY_TOPICS = {SCHEMA_TOPIC[r] for r in REQUEST_OF_REPLY}
COMMAND_TOPICS = {t for t, s in TOPIC_SCHEMA.items() if s.endswith("Command")}

PARAM_RE = re.compile(r"#\{([^}]+)\}")
ATTR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.]*)")


def fields(schema_name):
    return SCHEMAS[schema_name]["fields"]


def el_blocks(text):
    """The top-level ${...} expressions of a string, as (start, end) spans (braces balanced)."""
    spans, i = [], 0
    while True:
        i = text.find("${", i)
        if i < 0:
            return spans
        depth, j = 0, i + 1
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        spans.append((i, j + 1))
        i = j + 1


def template_fields(where, template):
    """The JSON of a ReplaceText template with each EL expression replaced by a sample value: its
    top-level field -> the attribute the value is written from (None for a literal), else None."""
    out, pos = [], 0
    attr_of = {}
    for a, b in el_blocks(template):
        out.append(template[pos:a])
        expr = template[a:b]
        quoted = a > 0 and template[a - 1] == '"'
        out.append("x" if quoted else "1")
        m = ATTR_RE.match(expr)
        key = re.findall(r'"([A-Za-z]+)":"?$', template[max(0, a - 60):a])
        if m and key:
            attr_of[key[-1]] = m.group(1)
        pos = b
    out.append(template[pos:])
    text = PARAM_RE.sub("p", "".join(out)).replace("$1", "[]")
    try:
        doc = json.loads(text)
    except ValueError as e:
        bad(where, "the template is not JSON once its expressions are filled in (%s): %s" % (e, text[:200]))
        return None, {}
    return doc, attr_of


class Model:
    """One flow file: its groups, components and parameters, indexed."""

    def __init__(self, rel, doc=None):
        self.rel = rel
        if doc is None:
            with open(os.path.join(ROOT, rel)) as f:
                doc = json.load(f)
        self.doc = doc
        ctx = self.doc.get("parameterContexts", {}).get("loadledger")
        self.params = {p["name"]: p for p in (ctx or {}).get("parameters", [])}
        if ctx is None:
            bad(rel, "no parameter context 'loadledger'")
        self.groups, self.by_id, self.parent = [], {}, {}
        self._walk(self.doc["flowContents"], None)

    def _walk(self, g, parent):
        self.groups.append(g)
        self.parent[g["identifier"]] = parent
        for kind in ("processors", "inputPorts", "outputPorts", "controllerServices", "labels"):
            for c in g.get(kind, []):
                if c["identifier"] in self.by_id:
                    bad(self.rel, "identifier %s used twice" % c["identifier"])
                self.by_id[c["identifier"]] = (c, g)
        for c in g.get("processGroups", []):
            self._walk(c, g)

    def where(self, c, g):
        names, gid = [c.get("name", "")], g["identifier"]
        while gid:
            grp = next(x for x in self.groups if x["identifier"] == gid)
            names.append(grp["name"])
            p = self.parent[gid]
            gid = p["identifier"] if p else None
        return "%s: %s" % (self.rel, "/".join(reversed(names)))

    def services_in_scope(self, g):
        out = []
        while g is not None:
            out += g.get("controllerServices", [])
            g = self.parent[g["identifier"]]
        return out

    def processors(self):
        for g in self.groups:
            for p in g.get("processors", []):
                yield p, g

    def configurables(self):
        for g in self.groups:
            for c in g.get("processors", []) + g.get("controllerServices", []):
                yield c, g


def relationships(p):
    spec = COMPONENTS[p["type"]]
    short = p["type"].rsplit(".", 1)[1]
    if short == "RouteOnAttribute":
        return {k for k in p["properties"] if k != "Routing Strategy"} | {"unmatched"}
    return set(spec.get("relationships", []))


def check_components(m):
    for c, g in m.configurables():
        w = m.where(c, g)
        spec = COMPONENTS.get(c["type"])
        if spec is None:
            bad(w, "type %s is not in tools/nififlow/components-2.6.0.json" % c["type"])
            continue
        b = c.get("bundle", {})
        if (b.get("group"), b.get("artifact"), b.get("version")) != ("org.apache.nifi", spec["artifact"], "2.6.0"):
            bad(w, "bundle %s, NiFi 2.6.0 has %s in org.apache.nifi:%s" % (b, c["type"], spec["artifact"]))
        if c["componentType"] == "CONTROLLER_SERVICE":
            apis = sorted(a["type"] for a in c.get("controllerServiceApis", []))
            if apis != sorted(spec.get("apis", [])):
                bad(w, "controllerServiceApis %s, the class implements %s" % (apis, spec.get("apis")))
        for k, v in c.get("properties", {}).items():
            d = spec["properties"].get(k)
            desc = c.get("propertyDescriptors", {}).get(k)
            if d is None:
                if not spec.get("dynamicProperties"):
                    bad(w, "property %r is not one of %s's" % (k, c["type"]))
                elif desc and not desc.get("dynamic"):
                    bad(w, "dynamic property %r not marked dynamic" % k)
            else:
                if desc is None or desc.get("displayName") != d["displayName"] or desc.get("sensitive") != d[
                        "sensitive"] or desc.get("identifiesControllerService") != ("service" in d):
                    bad(w, "propertyDescriptors[%r] disagrees with NiFi's descriptor %s" % (k, d))
                if "allowableValues" in d and not v.startswith("#{") and v not in d["allowableValues"]:
                    bad(w, "%r = %r is not one of %s" % (k, v, d["allowableValues"]))
                if "service" in d:
                    svc = [s for s in m.services_in_scope(g) if s["identifier"] == v]
                    if not svc:
                        bad(w, "%r names no controller service in scope (%s)" % (k, v))
                    elif d["service"] not in COMPONENTS[svc[0]["type"]].get("apis", []):
                        bad(w, "%r needs a %s; %s is not one" % (k, d["service"], svc[0]["name"]))
            for name in PARAM_RE.findall(v or ""):
                prm = m.params.get(name)
                if prm is None:
                    bad(w, "%r references parameter #{%s}, which the context lacks" % (k, name))
                    continue
                sensitive_prop = bool(d and d["sensitive"])
                if prm["sensitive"] != sensitive_prop:
                    bad(w, "%r (%s) references the %s parameter #{%s}" % (
                        k, "sensitive" if sensitive_prop else "not sensitive",
                        "sensitive" if prm["sensitive"] else "plain", name))
                if prm["sensitive"] and v != "#{%s}" % name:
                    bad(w, "%r: a sensitive parameter must be the whole value" % k)
        if c["componentType"] == "PROCESSOR":
            rels = relationships(c)
            auto = set(c.get("autoTerminatedRelationships", []))
            for r in auto - rels:
                bad(w, "auto-terminates %r, which it does not have" % r)
            for r in set(c.get("retriedRelationships", [])) - rels:
                bad(w, "retries %r, which it does not have" % r)


def check_connections(m):
    for g in m.groups:
        site = g["name"].startswith("SITE ")
        local = {c["identifier"]: c for c in g.get("processors", []) + g.get("inputPorts", []) + g.get("outputPorts", [])}
        child_ports = {}
        for cg in g.get("processGroups", []):
            for p in cg.get("inputPorts", []) + cg.get("outputPorts", []):
                child_ports[p["identifier"]] = (p, cg)
        used = {}
        incoming, outgoing = set(), set()
        for c in g.get("connections", []):
            src, dst = c["source"], c["destination"]
            for end, ok_child in ((src, "OUTPUT_PORT"), (dst, "INPUT_PORT")):
                if end["id"] in local:
                    if end["groupId"] != g["identifier"]:
                        bad(m.rel, "connection %s: end %s has the wrong groupId" % (c["identifier"], end["name"]))
                elif end["id"] in child_ports:
                    if end["type"] != ok_child or end["groupId"] != child_ports[end["id"]][1]["identifier"]:
                        bad(m.rel, "connection %s: %s is not a usable port of a child group" % (
                            c["identifier"], end["name"]))
                else:
                    bad(m.rel, "connection %s in %s: no component %s" % (c["identifier"], g["name"], end["name"]))
            outgoing.add(src["id"])
            incoming.add(dst["id"])
            if src["id"] in local and local[src["id"]]["componentType"] == "PROCESSOR":
                p = local[src["id"]]
                for r in c["selectedRelationships"]:
                    if r not in relationships(p):
                        bad(m.where(p, g), "a connection takes relationship %r, which it does not have" % r)
                    used.setdefault(src["id"], set()).add(r)
        for p in g.get("processors", []):
            rels, auto = relationships(p), set(p.get("autoTerminatedRelationships", []))
            for r in rels:
                n = (r in used.get(p["identifier"], set())) + (r in auto)
                if n == 0:
                    bad(m.where(p, g), "relationship %r neither connected nor auto-terminated (NiFi: invalid)" % r)
                if n == 2:
                    bad(m.where(p, g), "relationship %r both connected and auto-terminated" % r)
            if p["identifier"] not in incoming and p["type"].rsplit(".", 1)[1] not in ("ConsumeKafka", "GenerateFlowFile"):
                bad(m.where(p, g), "nothing leads to it")
        if not site:
            for p in g.get("inputPorts", []):
                if p["identifier"] not in outgoing:
                    bad(m.where(p, g), "input port leads nowhere inside its group")
            for p in g.get("outputPorts", []):
                if p["identifier"] not in incoming:
                    bad(m.where(p, g), "output port is fed by nothing inside its group")
        for pid, (p, cg) in child_ports.items():
            if p["componentType"] == "INPUT_PORT" and pid not in incoming:
                bad(m.where(p, cg), "input port is fed by nothing in %s" % g["name"])
            if p["componentType"] == "OUTPUT_PORT" and pid not in outgoing:
                bad(m.where(p, cg), "output port leads nowhere in %s: FlowFiles would pile up" % g["name"])


def topics_in(value, where):
    """The logical topics a property value names as #{topic.prefix}<topic>."""
    out = re.findall(r"#\{topic\.prefix\}([a-z-]+?)(?=-value\b|[,|'\"]|$)", value)
    for t in out:
        if t not in TOPICS:
            bad(where, "topic %s is not in config/topics.conf" % t)
    return out


def service(m, ident):
    return m.by_id[ident][0]


def check_kafka(m):
    produced, consumed = set(), set()
    for c, g in m.configurables():
        w, props, short = m.where(c, g), c.get("properties", {}), c["type"].rsplit(".", 1)[1]
        for k, v in props.items():
            topics_in(v, w)
        if short == "Kafka3ConnectionService" and props.get("isolation.level") != "read_committed":
            bad(w, "Transaction Isolation Level must be Read Committed (nifi/README.md)")
        if short == "PublishKafka":
            want = {"Transactions Enabled": "true", "acks": "all", "Transactional ID Prefix": "#{topic.prefix}nifi."}
            if "Record Reader" in props:  # one message per record, written by the Record Writer
                want.update({"Publish Strategy": "USE_VALUE", "Message Key Field": "runId"})
                writer = service(m, props.get("Record Writer", "")) if props.get("Record Writer") in m.by_id else None
                if writer is None or writer["properties"].get("Schema Write Strategy") == "avro-embedded":
                    bad(w, "a record-writing PublishKafka must not Embed Avro Schema: it clears its buffer after the "
                           "writer wrote the container header, so every message is a headerless block")
            else:  # the content is the message: an Avro container file ConvertRecord made
                want["Kafka Key"] = "${ll.run.id}"
                conv = chain_back(m, g, c["identifier"], lambda x: x["type"].endswith("ConvertRecord"))
                writer = service(m, conv["properties"]["Record Writer"]) if conv else None
                if writer is None or writer["properties"].get("Schema Write Strategy") != "avro-embedded":
                    bad(w, "publishes its content: a ConvertRecord with an Embed Avro Schema writer must come before")
            for k, v in want.items():
                if props.get(k) != v:
                    bad(w, "%s must be %r (nifi/README.md, 'Plugging in a NiFi flow'), is %r" % (k, v, props.get(k)))
            t = topics_in(props.get("Topic Name", ""), w)
            if len(t) != 1 or props["Topic Name"] != "#{topic.prefix}" + t[0]:
                bad(w, "Topic Name must be #{topic.prefix}<topic>")
            else:
                produced.add(t[0])
            if writer is not None and (writer["type"] != "org.apache.nifi.avro.AvroRecordSetWriter" or writer[
                    "properties"].get("compression-format") != "NONE"):
                bad(w, "the Avro writer must be an AvroRecordSetWriter with Compression Format NONE")
        if short == "ConsumeKafka":
            if not props.get("Group ID", "").startswith("#{topic.prefix}nifi."):
                bad(w, "Group ID must start with #{topic.prefix}nifi. (the nifi user's READ ACL)")
            for k, v in (("auto.offset.reset", "earliest"), ("Commit Offsets", "true"), ("Processing Strategy", "RECORD")):
                if props.get(k) != v:
                    bad(w, "%s must be %r" % (k, v))
            ts = topics_in(props.get("Topics", ""), w)
            if ",".join("#{topic.prefix}" + t for t in ts) != props.get("Topics"):
                bad(w, "Topics must be a comma-separated list of #{topic.prefix}<topic>")
            consumed |= set(ts)
            pattern = props.get("Header Name Pattern")
            if pattern:
                names = set(pattern.split("|"))
                if not names <= HEADERS:
                    bad(w, "headers %s are not written by the dispatcher (%s)" % (sorted(names - HEADERS), sorted(HEADERS)))
                if not set(ts) <= COMMAND_TOPICS:
                    bad(w, "Header Name Pattern on topics without headers")
    for t in sorted(REQUEST_TOPICS - produced):
        bad(m.rel, "no PublishKafka writes %s" % t)
    for t in sorted((REPLY_TOPICS | COMMAND_TOPICS) - consumed):
        bad(m.rel, "no ConsumeKafka reads %s" % t)
    for t in sorted(produced - REQUEST_TOPICS):
        bad(m.rel, "publishes to %s, which no service reads" % t)


def predecessors(m, g, comp_id):
    return [c["source"]["id"] for c in g.get("connections", []) if c["destination"]["id"] == comp_id]


def chain_back(m, g, comp_id, stop):
    """Walks back from a component through single predecessors until stop(component) is true."""
    seen = set()
    todo = predecessors(m, g, comp_id)
    while todo:
        cid = todo.pop()
        if cid in seen or cid not in m.by_id:
            continue
        seen.add(cid)
        comp = m.by_id[cid][0]
        if stop(comp):
            return comp
        todo += predecessors(m, g, cid)
    return None


def check_schemas(m, embedded):
    for p, g in m.processors():
        if not p["type"].endswith("PublishKafka"):
            continue
        w = m.where(p, g)
        topic = p["properties"]["Topic Name"].replace("#{topic.prefix}", "")
        name = TOPIC_SCHEMA.get(topic)
        if name is None:
            bad(w, "no schema in schemas/avro for topic %s" % topic)
            continue
        attr = "avro.schema" if embedded else "schema.name"
        prep = chain_back(m, g, p["identifier"], lambda c: attr in c.get("properties", {}))
        want = "#{schema.%s}" % name if embedded else "#{topic.prefix}%s-value" % topic
        if prep is None or prep["properties"][attr] != want:
            bad(w, "the step before it must set %s = %s" % (attr, want))
        text = chain_back(m, g, p["identifier"], lambda c: c["type"].endswith("ReplaceText"))
        if text is None:
            continue  # the content is the record already (the manifest)
        doc, _ = template_fields(m.where(text, g), text["properties"]["Replacement Value"])
        if doc is None:
            continue
        have = set(doc)
        names = {f["name"] for f in fields(name)}
        required = {f["name"] for f in fields(name) if "default" not in f}
        if have - names:
            bad(m.where(text, g), "fields %s are not in %s.avsc" % (sorted(have - names), name))
        if required - have:
            bad(m.where(text, g), "fields %s of %s.avsc (no default) are missing" % (sorted(required - have), name))
    if embedded:
        for pname, prm in m.params.items():
            if pname.startswith("schema."):
                sname = pname[len("schema."):]
                if sname not in SCHEMAS:
                    bad(m.rel, "parameter %s names no schema in schemas/avro" % pname)
                elif json.loads(prm["value"]) != SCHEMAS[sname]:
                    bad(m.rel, "parameter %s differs from schemas/avro/%s.avsc" % (pname, sname))


def check_replies(m):
    reply_fields = set()
    for t in REPLY_TOPICS:
        reply_fields |= {f["name"] for f in fields(TOPIC_SCHEMA[t])}
    extracted, notify = set(), None
    for p, g in m.processors():
        short = p["type"].rsplit(".", 1)[1]
        if short == "EvaluateJsonPath":
            for k, v in p["properties"].items():
                if k.startswith("ll.reply."):
                    if v != "$." + k[len("ll.reply."):]:
                        bad(m.where(p, g), "%s must be $.%s" % (k, k[len("ll.reply."):]))
                    extracted.add(k[len("ll.reply."):])
        if short == "Notify":
            notify = (p, g)
    for f in sorted(extracted - reply_fields):
        bad(m.rel, "PG-00 extracts ll.reply.%s, a field no reply schema has" % f)
    for c, g in m.configurables():
        for v in c.get("properties", {}).values():
            for a in ATTR_RE.findall(v or ""):
                if a.startswith("ll.reply.") and a[len("ll.reply."):] not in extracted:
                    bad(m.where(c, g), "uses %s, which PG-00 does not extract" % a)
    if notify is None:
        bad(m.rel, "no Notify for the replies")
        return
    want = "${kafka.topic}|" + "|".join("${ll.reply.%s}" % f for f in SIGNAL_FIELDS)
    if notify[0]["properties"].get("release-signal-id") != want:
        bad(m.where(*notify), "release-signal-id must be %s" % want)
    for f in SIGNAL_FIELDS:
        if f not in extracted:
            bad(m.where(*notify), "the signal uses %s, which PG-00 does not extract" % f)
    waited = set()
    for p, g in m.processors():
        if not p["type"].endswith(".Wait"):
            continue
        w = m.where(p, g)
        parts = p["properties"].get("release-signal-id", "").split("|")
        if len(parts) != 1 + len(SIGNAL_FIELDS) or not parts[0].startswith("#{topic.prefix}"):
            bad(w, "release-signal-id must be #{topic.prefix}<reply topic> and %d slots" % len(SIGNAL_FIELDS))
            continue
        rtopic = parts[0][len("#{topic.prefix}"):]
        waited.add(rtopic)
        pub = chain_back(m, g, p["identifier"], lambda c: c["type"].endswith("PublishKafka"))
        if pub is None:
            bad(w, "no PublishKafka before it")
            continue
        qtopic = pub["properties"]["Topic Name"].replace("#{topic.prefix}", "")
        rschema, qschema = TOPIC_SCHEMA.get(rtopic), TOPIC_SCHEMA.get(qtopic)
        if rschema is None or REQUEST_OF_REPLY.get(rschema) != qschema:
            bad(w, "waits on %s, which is not the reply to %s" % (rtopic, qtopic))
            continue
        text = chain_back(m, g, pub["identifier"], lambda c: c["type"].endswith("ReplaceText"))
        doc, attr_of = template_fields(m.where(text, g), text["properties"]["Replacement Value"]) if text else (None, {})
        qfields = {f["name"] for f in fields(qschema)}
        rfields = {f["name"] for f in fields(rschema)}
        for f, slot in zip(SIGNAL_FIELDS, parts[1:]):
            if f in qfields and f in rfields:
                if not slot:
                    bad(w, "slot %s is empty: the reply echoes the request's %s" % (f, f))
                elif doc is not None:
                    a = ATTR_RE.match(slot)
                    if a and attr_of.get(f) != a.group(1):
                        bad(w, "slot %s is ${%s}, the request's %s was written from ${%s}" % (
                            f, a.group(1), f, attr_of.get(f)))
                    if not a and json.dumps(doc.get(f)) != json.dumps(slot):
                        bad(w, "slot %s is %r, the request's %s is %r" % (f, slot, f, doc.get(f)))
            elif slot:
                bad(w, "slot %s must be empty: %s or %s lacks it" % (f, qschema, rschema))
    routes = None
    for p, g in m.processors():
        if p["name"] == "Route by reply topic":
            routes = p["properties"]
    if routes is None:
        bad(m.rel, "no 'Route by reply topic' in PG-00")
        return
    notified = set(topics_in(routes.get("waited", ""), m.rel))
    if notified != waited:
        bad(m.rel, "PG-00 notifies %s, the Waits wait on %s" % (sorted(notified), sorted(waited)))


def check_readme():
    text = read("nifi/README.md")
    for rel in FLOWS:
        if os.path.basename(rel) not in text:
            bad("nifi/README.md", "does not name %s" % rel)


def check_model(rel, doc=None):
    m = Model(rel, doc)
    check_components(m)
    check_connections(m)
    check_kafka(m)
    check_schemas(m, embedded=rel.endswith("-embedded.json"))
    check_replies(m)


def find(doc, pred):
    """Every component dict of the flow (any depth) that pred accepts."""
    out = []

    def walk(g):
        for kind in ("processors", "controllerServices", "inputPorts", "outputPorts", "connections"):
            out.extend(c for c in g.get(kind, []) if pred(c))
        for c in g.get("processGroups", []):
            walk(c)
    walk(doc["flowContents"])
    return out


def named(name):
    return lambda c: c.get("name") == name


def prop(name, key, value):
    def f(doc):
        find(doc, named(name))[0]["properties"][key] = value
    return f


def edit(name, key, old, new):
    def f(doc):
        c = find(doc, named(name))[0]
        assert old in c["properties"][key], (name, key, old)
        c["properties"][key] = c["properties"][key].replace(old, new)
    return f


def drop_auto(name, rel):
    def f(doc):
        find(doc, named(name))[0]["autoTerminatedRelationships"].remove(rel)
    return f


def drop_root_connection(src_name):
    def f(doc):
        root = doc["flowContents"]
        root["connections"] = [c for c in root["connections"] if c["source"]["name"] != src_name]
    return f


def param(name, value):
    def f(doc):
        for p in doc["parameterContexts"]["loadledger"]["parameters"]:
            if p["name"] == name:
                p["value"] = value
    return f


# (flow file, what is broken, how, a text the check must print): each must be found (--mutations)
MUTATIONS = [
    (0, "a PublishKafka without transactions", prop("Publish ChunkWritten", "Transactions Enabled", "false"),
     "Transactions Enabled must be"),
    (0, "a misspelt field in a JSON template", edit("PartitionClaim as JSON", "Replacement Value", '"claimToken":',
                                                  '"claimTokn":'), "not in PartitionClaim.avsc"),
    (0, "a Wait slot from another attribute", edit("Wait for the claim decision", "release-signal-id",
                                                 "|${ll.claim.token}|", "|${ll.partition.id}|"),
     "was written from"),
    (0, "a relationship left dangling", drop_auto("Drop copies of a dispatch", "duplicate"),
     "neither connected nor auto-terminated"),
    (0, "a topic that does not exist", prop("Publish ChunkWritten", "Topic Name", "#{topic.prefix}chunk"),
     "not in config/topics.conf"),
    (0, "a consumer group outside the nifi prefix", prop("Consume replies", "Group ID", "loadledger-replies"),
     "Group ID must start"),
    (0, "an unknown property", prop("Event Avro writer", "Schema Writer Strategy", "no-schema"), "is not one of"),
    (1, "an embedded schema that is not the file", param("schema.ChunkWritten", '{"type":"record","name":"X","fields":[]}'),
     "differs from schemas/avro/ChunkWritten.avsc"),
    (0, "a header the dispatcher does not write", edit("Consume commands", "Header Name Pattern", "jobKey",
                                                     "jobKey|tenant"), "not written by the dispatcher"),
    (0, "the Notify's slots in another order", edit("Signal the waiting request", "release-signal-id",
                                                  "${ll.reply.runId}|${ll.reply.partitionId}",
                                                  "${ll.reply.partitionId}|${ll.reply.runId}"),
     "release-signal-id must be"),
    (0, "a reply field PG-00 does not extract", edit("Claimed?", "claimed", "ll.reply.claimed", "ll.reply.granted"),
     "which PG-00 does not extract"),
    (0, "a group's output left unconnected", drop_root_connection("extract partition"), "leads nowhere"),
    (0, "a sensitive property on a plain parameter", prop("Kafka (loadledger)", "sasl.password",
                                                          "#{kafka.sasl.username}"), "references the plain parameter"),
    (0, "read_uncommitted", prop("Kafka (loadledger)", "isolation.level", "read_uncommitted"), "Read Committed"),
    (0, "a Wait on another reply topic", edit("Wait for the claim decision", "release-signal-id",
                                            "claim-decisions", "chunk-outcomes"), "not the reply to"),
    (0, "a value NiFi does not allow", prop("Publish ChunkWritten", "acks", "everyone"), "is not one of"),
    (0, "a record-writing PublishKafka embedding the schema", prop("Event Avro writer", "Schema Write Strategy",
                                                                   "avro-embedded"), "headerless block"),
    (1, "a content PublishKafka without its key", prop("Publish ChunkWritten", "Kafka Key", "${ll.partition.id}"),
     "Kafka Key must be"),
    (0, "a schema attribute for another topic", edit("Prepare ChunkWritten", "schema.name", "chunks-value",
                                                   "chunk-outcomes-value"), "must set schema.name"),
]


def mutations():
    """Breaks the flow in each of MUTATIONS' ways and requires the check to say so: a check that
    cannot fail is not a check."""
    missed = 0
    for idx, what, how, text in MUTATIONS:
        rel = FLOWS[idx]
        with open(os.path.join(ROOT, rel)) as f:
            doc = json.load(f)
        how(doc)
        del problems[:]
        check_model(rel, doc)
        hit = [p for p in problems if text in p]
        print("%-45s %s" % (what, "found: " + hit[0][:110] if hit else "MISSED (%d other problem(s))" % len(problems)))
        missed += not hit
    del problems[:]
    print("check_nifi_flow --mutations: %d of %d found" % (len(MUTATIONS) - missed, len(MUTATIONS)))
    return 1 if missed else 0


def main():
    if "--mutations" in sys.argv:
        return mutations()
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "nififlow", "flowgen.py"), "--check"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        bad("tools/nififlow/flowgen.py --check", (r.stdout + r.stderr).strip())
    for rel in FLOWS:
        check_model(rel)
    check_readme()
    for p in problems:
        print(p)
    print("check_nifi_flow: %d problem(s) in %s" % (len(problems), ", ".join(FLOWS)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
