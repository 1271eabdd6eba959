"""Runs the shipped NiFi flow (nifi/*.json) against the real services, without NiFi: a small
interpreter of the flow's own graph and of the processors it uses, for tests/integration/
test_nifi_flow_run.py. It is NOT NiFi (no NiFi runs here, and its Kafka and registry components are
not on Maven Central): it follows the flow's connections, evaluates its properties with llsim.nifiel
(the EL subset the flow uses; tests/nifi-flow runs the same expressions in NiFi's own classes) and
does what each processor type documents:

    UpdateAttribute   every dynamic property evaluated against the incoming attributes, then set
    ReplaceText       Always Replace, or Regex Replace of the whole text with $1 as the content
    ConvertRecord     JSON read with the avro.schema attribute to one Avro container file (Embed
                      Avro Schema), or such a file back to a JSON array
    PublishKafka      with a Record Reader: the content read as JSON with the registry subject
                      schema.name's latest schema, each record one message (0x00, id, datum) keyed by
                      its runId; without: the content is the message, keyed by "Kafka Key"
    ConsumeKafka      (fed by FlowRunner.pump) a JSON array of the records consumed, kafka.topic set
    SplitJson, EvaluateJsonPath, RouteOnAttribute, DetectDuplicate, LogAttribute
    Wait / Notify     a signal table: Notify stores the attributes its regex selects under the
                      signal; a Wait whose signal is there takes them (Attribute Copy Mode replace)

The SITE groups (a team's own Oracle, HDFS and Hive work) are played by callbacks given to the
runner: site(port name, flowfile) -> [(output port name, flowfile), ...].
"""
import io
import json
import re
import struct
import time
import uuid

import avro.datafile
import avro.io
import avro.schema
from confluent_kafka import Consumer, Producer

from . import avroframe
from .kafkaio import client_conf
from .nifiel import evaluate

STATIC = {  # processor properties that are not EL outputs or routes
    "UpdateAttribute": {"Delete Attributes Expression", "Store State", "Stateful Variables Initial Value",
                        "canonical-value-lookup-cache-size"},
    "RouteOnAttribute": {"Routing Strategy"},
    "EvaluateJsonPath": {"Destination", "Return Type", "Path Not Found Behavior", "Null Value Representation",
                         "Max String Length"},
}


class FlowFile:
    def __init__(self, attrs=None, content=""):
        self.attrs = dict(attrs or {})
        self.attrs.setdefault("uuid", str(uuid.uuid4()))
        self.content = content

    def child(self, content=None):
        f = FlowFile(self.attrs, self.content if content is None else content)
        f.attrs["uuid"] = str(uuid.uuid4())
        return f


class FlowRunner:
    """One flow file, run against a broker (and, for the registry variant, a registry)."""

    def __init__(self, flow_path, params, bootstrap, site, registry=None):
        with open(flow_path) as f:
            self.doc = json.load(f)
        ctx = self.doc["parameterContexts"]["loadledger"]
        self.params = {p["name"]: p.get("value") for p in ctx["parameters"]}
        self.params.update(params)
        self.site, self.registry = site, registry
        self.comp, self.group_of, self.out, self.services = {}, {}, {}, {}
        self.groups = {}
        self._index(self.doc["flowContents"], None)
        self.queue, self.waiting, self.signals, self.seen = [], {}, {}, set()
        self.released, self.notified, self.alerts, self.logs, self.sent = [], [], [], [], []
        self.producer = Producer(client_conf({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                              "linger.ms": 0}))
        self.bootstrap = bootstrap
        self.consumers = []

    # -- the graph -------------------------------------------------------------------------------
    def _index(self, g, parent):
        self.groups[g["identifier"]] = (g, parent)
        for kind in ("processors", "inputPorts", "outputPorts"):
            for c in g.get(kind, []):
                self.comp[c["identifier"]] = c
                self.group_of[c["identifier"]] = g
        for c in g.get("controllerServices", []):
            self.services[c["identifier"]] = c
        for c in g.get("connections", []):
            for r in c["selectedRelationships"]:
                self.out.setdefault((c["source"]["id"], r), []).append(c["destination"]["id"])
        for child in g.get("processGroups", []):
            self._index(child, g)

    def named(self, name, group=None):
        found = [c for cid, c in self.comp.items()
                 if c["name"] == name and (group is None or self.group_of[cid]["name"] == group)]
        if len(found) != 1:
            raise KeyError("%d components named %r in %r" % (len(found), name, group))
        return found[0]

    def ev(self, text, ff):
        return evaluate(text, ff.attrs, self.params)

    def emit(self, cid, rel, ff):
        dests = self.out.get((cid, rel), [])
        c = self.comp[cid]
        if not dests:
            if c["componentType"] == "PROCESSOR" and rel in c.get("autoTerminatedRelationships", []):
                return
            raise AssertionError("%s: relationship %r leads nowhere" % (c["name"], rel))
        for i, d in enumerate(dests):
            self.queue.append((d, ff if i == 0 else ff.child()))

    def inject(self, port_name, group, ff):
        """A FlowFile leaving a SITE group's output port."""
        port = self.named(port_name, group)
        self.emit(port["identifier"], "", ff)

    # -- processors ------------------------------------------------------------------------------
    def run(self, until, timeout):
        """Processes queued FlowFiles and reads replies and commands until until() is true (True)
        or timeout seconds passed (False)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            while self.queue:
                cid, ff = self.queue.pop(0)
                self.step(self.comp[cid], ff)
            if until():
                return True
            self.pump(0.5)
        return False

    def step(self, c, ff):
        kind = c["componentType"]
        if kind in ("INPUT_PORT", "OUTPUT_PORT"):
            g = self.group_of[c["identifier"]]
            if g["name"].startswith("SITE ") and kind == "INPUT_PORT":
                for port, out in self.site(c["name"], ff):
                    self.inject(port, g["name"], out)
                return
            self.emit(c["identifier"], "", ff)
            return
        t = c["type"].rsplit(".", 1)[1]
        getattr(self, "_" + t)(c, ff)

    def _UpdateAttribute(self, c, ff):
        new = {k: self.ev(v, ff) for k, v in c["properties"].items() if k not in STATIC["UpdateAttribute"]}
        ff.attrs.update(new)
        self.emit(c["identifier"], "success", ff)

    def _ReplaceText(self, c, ff):
        pr = c["properties"]
        value = self.ev(pr["Replacement Value"], ff)
        if pr["Replacement Strategy"] == "Always Replace":
            ff.content = value
        elif pr["Replacement Strategy"] == "Regex Replace" and pr["Regular Expression"] == "(?s)^(.*)$":
            ff.content = value.replace("$1", ff.content)
        else:
            raise ValueError("ReplaceText mode not interpreted: %s" % pr)
        self.emit(c["identifier"], "success", ff)

    def _schema_of(self, ff):
        if "avro.schema" in ff.attrs and ff.attrs["avro.schema"]:
            return avro.schema.parse(ff.attrs["avro.schema"]), None
        subject = ff.attrs["schema.name"]
        sid, text = self.registry.latest(subject)
        return avro.schema.parse(text), sid

    def _ConvertRecord(self, c, ff):
        """JSON to one Avro container file with the schema of avro.schema embedded (a JsonTreeReader),
        or Avro with its embedded schema to a JSON array of its records (an AvroReader)."""
        reader = self.services[c["properties"]["Record Reader"]]["type"].rsplit(".", 1)[1]
        if reader == "JsonTreeReader":
            sch, _ = self._schema_of(ff)
            ff.content = avroframe.container(json.loads(ff.content), sch)
        elif reader == "AvroReader":
            recs = list(avro.datafile.DataFileReader(io.BytesIO(ff.content), avro.io.DatumReader()))
            ff.content = json.dumps(recs, separators=(",", ":"))
        else:
            raise ValueError("ConvertRecord with a %s not interpreted" % reader)
        self.emit(c["identifier"], "success", ff)

    def _PublishKafka(self, c, ff):
        pr = c["properties"]
        topic = self.ev(pr["Topic Name"], ff)
        if "Record Reader" in pr:  # one message per record: the Confluent header, then the datum
            sch, sid = self._schema_of(ff)
            record = json.loads(ff.content)
            value = b"\x00" + struct.pack(">i", sid) + avroframe.datum(record, sch)
            key = record[pr["Message Key Field"]]
        else:  # the content is the message
            value = ff.content
            record = next(iter(avro.datafile.DataFileReader(io.BytesIO(value), avro.io.DatumReader())))
            key = self.ev(pr["Kafka Key"], ff)
            assert key == record["runId"], (key, record["runId"])
        self.producer.produce(topic, value=value, key=key.encode())
        assert self.producer.flush(30) == 0, "not delivered to %s" % topic
        self.sent.append((topic, record))
        self.emit(c["identifier"], "success", ff)

    def _SplitJson(self, c, ff):
        path = c["properties"]["JsonPath Expression"]
        doc = json.loads(ff.content)
        m = re.fullmatch(r"\$(?:\[(\d+)\])?(?:\.([A-Za-z]+|\*))", path)
        if not m:
            raise ValueError("JsonPath %s not interpreted" % path)
        if m.group(1) is not None:
            doc = doc[int(m.group(1))]
        if m.group(2) == "*":
            items = doc if isinstance(doc, list) else list(doc.values())
        else:
            items = doc[m.group(2)]
        for i, item in enumerate(items):
            f = ff.child(json.dumps(item, separators=(",", ":")))
            f.attrs.update({"fragment.index": str(i), "fragment.count": str(len(items))})
            self.emit(c["identifier"], "split", f)
        self.emit(c["identifier"], "original", ff)

    def _EvaluateJsonPath(self, c, ff):
        doc = json.loads(ff.content)
        for k, path in c["properties"].items():
            if k in STATIC["EvaluateJsonPath"]:
                continue
            m = re.fullmatch(r"\$\.([A-Za-z]+)", path)
            v = doc.get(m.group(1)) if isinstance(doc, dict) else None
            if v is None:
                v = ""
            elif isinstance(v, bool):
                v = "true" if v else "false"
            elif isinstance(v, (dict, list)):
                v = json.dumps(v, separators=(",", ":"))
            ff.attrs[k] = str(v)
        self.emit(c["identifier"], "matched", ff)

    def _RouteOnAttribute(self, c, ff):
        hits = [k for k, v in c["properties"].items()
                if k not in STATIC["RouteOnAttribute"] and self.ev(v, ff) == "true"]
        for i, rel in enumerate(hits or ["unmatched"]):
            self.emit(c["identifier"], rel, ff if i == 0 else ff.child())

    def _DetectDuplicate(self, c, ff):
        key = self.ev(c["properties"]["Cache Entry Identifier"], ff)
        dup = key in self.seen
        self.seen.add(key)
        self.emit(c["identifier"], "duplicate" if dup else "non-duplicate", ff)

    def _LogAttribute(self, c, ff):
        self.logs.append((c["name"], dict(ff.attrs)))
        if c["name"] == "Alert":
            self.alerts.append(dict(ff.attrs))
        self.emit(c["identifier"], "success", ff)

    def _Notify(self, c, ff):
        sig = self.ev(c["properties"]["release-signal-id"], ff)
        rx = re.compile(c["properties"]["attribute-cache-regex"])
        self.signals[sig] = {k: v for k, v in ff.attrs.items() if rx.fullmatch(k)}
        self.notified.append(sig)
        for w, wff in self.waiting.pop(sig, []):
            self._Wait(w, wff)
        self.emit(c["identifier"], "success", ff)

    def _Wait(self, c, ff):
        sig = self.ev(c["properties"]["release-signal-id"], ff)
        if sig in self.signals:
            ff.attrs.update(self.signals.pop(sig))  # Attribute Copy Mode: replace
            self.released.append((c["name"], sig))
            self.emit(c["identifier"], "success", ff)
        else:
            self.waiting.setdefault(sig, []).append((c, ff))

    # -- Kafka in ----------------------------------------------------------------------------------
    def consume(self, from_end=False):
        """Subscribes each ConsumeKafka of the flow to its topics (its group with a suffix of this run,
        read_committed, its Auto Offset Reset): topics of the test's own prefix, read from the start;
        from_end: from the end offsets at assignment instead (what a NiFi node that already read
        an earlier test's messages on the same topics would go on from)."""

        def at_end(cons, parts):
            for p in parts:
                p.offset = cons.get_watermark_offsets(p, timeout=10)[1]
            cons.assign(parts)

        for cid, c in self.comp.items():
            if c.get("type", "").endswith("ConsumeKafka"):
                pr = c["properties"]
                topics = evaluate(pr["Topics"], {}, self.params).split(",")
                group = evaluate(pr["Group ID"], {}, self.params) + "." + uuid.uuid4().hex[:8]
                cons = Consumer(client_conf({"bootstrap.servers": self.bootstrap, "group.id": group,
                                             "isolation.level": "read_committed",
                                             "auto.offset.reset": pr["auto.offset.reset"],
                                             "enable.auto.commit": False}))
                if from_end:
                    cons.subscribe(topics, on_assign=at_end)
                else:
                    cons.subscribe(topics)
                deadline = time.time() + 30
                while not cons.assignment() and time.time() < deadline:
                    cons.poll(0.2)
                assert cons.assignment(), "no partitions assigned for %s" % topics
                self.consumers.append((cid, cons))

    def _decode(self, value):
        if value[:4] == b"Obj\x01":
            recs = list(avro.datafile.DataFileReader(io.BytesIO(value), avro.io.DatumReader()))
            assert len(recs) == 1
            return recs[0]
        assert value[0] == 0, "neither a container nor the Confluent framing"
        sid = struct.unpack(">i", value[1:5])[0]
        sch = avro.schema.parse(self.registry.schema(sid))
        return avro.io.DatumReader(sch).read(avro.io.BinaryDecoder(io.BytesIO(value[5:])))

    def pump(self, timeout):
        """One poll of every consumer: each message becomes a FlowFile of one record (a JSON array,
        as the flow's JSON writer makes it) on the ConsumeKafka's success relationship."""
        for cid, cons in self.consumers:
            for msg in cons.consume(100, timeout / max(1, len(self.consumers))):
                if msg.error():
                    raise AssertionError("consume: %s" % msg.error())
                rec = self._decode(msg.value())
                ff = FlowFile({"kafka.topic": msg.topic(), "kafka.partition": str(msg.partition()),
                               "kafka.offset": str(msg.offset()), "kafka.key": (msg.key() or b"").decode()},
                              json.dumps([rec], separators=(",", ":")))
                for h, v in msg.headers() or []:
                    ff.attrs[h] = v.decode()
                self.emit(cid, "success", ff)

    def close(self):
        for _, cons in self.consumers:
            cons.close()
        self.producer.flush(10)


class Registry:
    """The registry side NiFi's ConfluentSchemaRegistry reads: a subject's latest schema and a
    schema by id, over the Confluent REST API (base URL as the services' schema.registry.url)."""

    def __init__(self, call):
        self.call = call  # (method, path, body) -> (status, json)

    def latest(self, subject):
        st, body = self.call("GET", "/subjects/%s/versions/latest" % subject, None)
        assert st == 200, (subject, st, body)
        return body["id"], body["schema"]

    def schema(self, sid):
        st, body = self.call("GET", "/schemas/ids/%d" % sid, None)
        assert st == 200, (sid, st, body)
        return body["schema"]

