#!/usr/bin/env python3
"""Writes the NiFi 2.x flow definitions that drive loadledger (nifi/README.md):

    nifi/loadledger-flow.json           schemas from a Confluent-compatible registry, Confluent framing
    nifi/loadledger-flow-embedded.json  no registry: the schemas are parameters, every event carries its
                                        schema ("Embed Avro Schema"), every reply is a container file
    nifi/conf/<variant>/<service>.conf  the lines each service's configuration needs for that flow

Both are "Download flow definition" files of NiFi 2.6 (a RegisteredFlowSnapshot): one process group
"loadledger" with its Parameter Context, its controller services and one child group per step of the
contract (PG-00 replies ... PG-90 failures), plus empty "SITE" groups where a team puts its own Oracle,
HDFS and Hive work. Every component's properties are checked here against
tools/nififlow/components-2.6.0.json (NiFi 2.6.0's descriptors) before anything is written.

    tools/nififlow/flowgen.py            rewrite both files
    tools/nififlow/flowgen.py --check    exit 1 when a committed file differs from what this writes

Identifiers are name-based UUIDs of each component's path, so the output is the same at every run.
"""
import argparse
import json
import os
import re
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SCHEMA_DIR = os.path.join(REPO, "schemas", "avro")
OUT_DIR = os.path.join(REPO, "nifi")
NIFI_VERSION = "2.6.0"
NAMESPACE = uuid.UUID("6f1d3c2e-8a4b-5d7e-9f10-2b3c4d5e6f70")

with open(os.path.join(HERE, "components-2.6.0.json")) as _f:
    COMPONENTS = json.load(_f)["components"]

API_ARTIFACT = {
    "org.apache.nifi.kafka.service.api.KafkaConnectionService": "nifi-kafka-service-api-nar",
}
STANDARD_API_NAR = "nifi-standard-services-api-nar"


def uid(*parts):
    return str(uuid.uuid5(NAMESPACE, "/".join(parts)))


def schema_topics():
    """Maps each topic (logical name) to its record schema, from the schemas' own doc ("Topic x ...")."""
    out = {}
    for name in sorted(os.listdir(SCHEMA_DIR)):
        if not name.endswith(".avsc"):
            continue
        with open(os.path.join(SCHEMA_DIR, name)) as f:
            s = json.load(f)
        m = re.match(r"Topic ([a-z-]+) ", s.get("doc", ""))
        if not m:
            raise SystemExit("flowgen: %s has no 'Topic <name>' doc" % name)
        out[m.group(1)] = s["name"]
    return out


TOPIC_SCHEMA = schema_topics()
# each request topic the flow publishes, and the topic of its reply (docs/contract.md K§4)
REPLY_OF = {
    "run-requests": "run-decisions",
    "manifests": "manifest-decisions",
    "partition-claims": "claim-decisions",
    "chunks": "chunk-outcomes",
    "partition-failures": "partition-failure-outcomes",
    "validation-starts": "validation-start-decisions",
    "validation-metrics": "validation-metrics-outcomes",
    "stage-validations": "stage-validation-outcomes",
    "publish-claims": "publish-claim-decisions",
    "publish-results": "publish-result-outcomes",
    "run-successes": "run-success-outcomes",
    "run-failures": "run-failure-outcomes",
}
REPLY_TOPICS = [REPLY_OF[t] for t in REPLY_OF]
COMMAND_TOPICS = ["validate-run-commands", "reissue-partition-commands"]
COMMAND_HEADERS = ["jobKey", "runId", "dispatchId", "dispatchType"]
# The correlation of a reply with its request: PG-00's Notify signals
# <broker topic>|runId|partitionId|claimToken|chunkIndex|publishToken|dispatchId|stage of the reply, and
# each Wait the same slots from its request (a slot the request does not have stays empty).
SIGNAL_FIELDS = ["runId", "partitionId", "claimToken", "chunkIndex", "publishToken", "dispatchId", "stage"]
# replies a waiting FlowFile is released by (the others go straight to the group that acts on them)
WAITED = ["run-decisions", "manifest-decisions", "claim-decisions", "validation-metrics-outcomes",
          "stage-validation-outcomes", "publish-claim-decisions", "publish-result-outcomes", "run-success-outcomes",
          "run-failure-outcomes"]
DIRECT = {"validation-start-decisions": "validation start decisions", "chunk-outcomes": "chunk outcomes",
          "partition-failure-outcomes": "partition failure outcomes"}


def reply_fields():
    """Every top-level field of the reply schemas PG-00 copies into ll.reply.* attributes (maps and arrays
    of strings as JSON text): all but the arrays of records (dispatchPartitions can hold 10,000
    partitions; the flow sends the partitions from the manifest it wrote)."""
    fields = []
    for t in REPLY_TOPICS:
        with open(os.path.join(SCHEMA_DIR, TOPIC_SCHEMA[t] + ".avsc")) as f:
            s = json.load(f)
        for fld in s["fields"]:
            typ = fld["type"]
            if isinstance(typ, dict) and typ.get("type") == "array" and isinstance(typ["items"], dict):
                continue
            if fld["name"] not in fields:
                fields.append(fld["name"])
    return fields


def schema_text(name):
    with open(os.path.join(SCHEMA_DIR, name + ".avsc")) as f:
        return json.dumps(json.load(f), separators=(",", ":"))


# ---- expression language helpers (NiFi EL), for the JSON the flow writes -------------------------------

def s(attr):
    """A required JSON string from an attribute."""
    return '"${%s:escapeJson()}"' % attr


def s_or(attr, default):
    return '"${%s:replaceEmpty(\'%s\'):escapeJson()}"' % (attr, default)


def opt_s(attr):
    """A nullable JSON string: null when the attribute is missing or empty."""
    return "${%s:isEmpty():ifElse('null', ${%s:escapeJson():prepend('\"'):append('\"')})}" % (attr, attr)


def num(attr):
    return "${%s}" % attr


def opt_num(attr):
    return "${%s:isEmpty():ifElse('null', ${%s})}" % (attr, attr)


def boolean(attr):
    return "${%s:equalsIgnoreCase('true')}" % attr


def obj(pairs):
    return "{" + ",".join('"%s":%s' % (k, v) for k, v in pairs) + "}"


# ---- the flow model ------------------------------------------------------------------------------------

class Flow:
    """One flow definition being built."""

    def __init__(self, variant):
        self.variant = variant
        self.parameters = []

    def param(self, name, value, description, sensitive=False):
        self.parameters.append({"name": name, "description": description, "sensitive": sensitive,
                                "provided": False, "value": None if sensitive else value})
        return "#{%s}" % name


class Group:
    """A process group: its components are kept in plain dicts in NiFi's versioned-flow shape."""

    def __init__(self, flow, name, parent=None, comments="", pos=(0, 0)):
        self.flow = flow
        self.name = name
        self.parent = parent
        self.path = (parent.path + "/" if parent else "") + name
        self.id = uid("group", self.path)
        self.comments = comments
        self.pos = pos
        self.processors, self.inputs, self.outputs, self.connections = [], [], [], []
        self.labels, self.services, self.groups = [], [], []
        self.row = 0

    def child(self, name, comments="", pos=(0, 0)):
        g = Group(self.flow, name, self, comments, pos)
        self.groups.append(g)
        return g

    def _find_service(self, ref):
        g = self
        while g:
            for sv in g.services:
                if sv is ref:
                    return sv
            g = g.parent
        raise SystemExit("flowgen: %s: service %s is not in scope" % (self.path, ref["name"]))

    def _props(self, where, cls, props):
        spec = COMPONENTS[cls]
        known = spec["properties"]
        out, descs = {}, {}
        for k, v in props.items():
            d = known.get(k)
            if d is None and not spec.get("dynamicProperties"):
                raise SystemExit("flowgen: %s: %s has no property %r" % (where, cls, k))
            if isinstance(v, dict):  # a controller service
                if d is None or "service" not in d:
                    raise SystemExit("flowgen: %s: %r does not reference a service" % (where, k))
                sv = self._find_service(v)
                if d["service"] not in sv["_apis"]:
                    raise SystemExit("flowgen: %s: %r needs a %s, %s is not one" % (where, k, d["service"], sv["name"]))
                v = sv["identifier"]
            elif d and "allowableValues" in d and not v.startswith("#{") and v not in d["allowableValues"]:
                raise SystemExit("flowgen: %s: %r=%r not in %s" % (where, k, v, d["allowableValues"]))
            out[k] = v
            descs[k] = {"name": k, "displayName": d["displayName"] if d else k,
                        "identifiesControllerService": bool(d and "service" in d),
                        "sensitive": bool(d and d["sensitive"]), "dynamic": d is None}
        return out, descs

    def service(self, name, cls, props, comments=""):
        spec = COMPONENTS[cls]
        sv = {"identifier": uid("service", self.path, name), "name": name, "comments": comments,
              "componentType": "CONTROLLER_SERVICE", "groupIdentifier": self.id, "type": cls,
              "bundle": bundle(spec["artifact"]), "_apis": spec.get("apis", []), "_cls": cls, "_props": props}
        self.services.append(sv)
        return sv

    def _resolve_services(self):
        for sv in self.services:
            props, descs = self._props(self.path + "/" + sv["name"], sv["_cls"], sv["_props"])
            sv["properties"], sv["propertyDescriptors"] = props, descs
            sv["controllerServiceApis"] = [{"type": a, "bundle": bundle(API_ARTIFACT.get(a, STANDARD_API_NAR))}
                                           for a in sv["_apis"]]
            sv["scheduledState"] = "ENABLED"
            sv["bulletinLevel"] = "WARN"
        for g in self.groups:
            g._resolve_services()

    def processor(self, name, cls, props, auto=(), retry=(), comments="", col=0, state="ENABLED",
                  schedule=("TIMER_DRIVEN", "0 sec"), tasks=1, all_nodes=True):
        where = self.path + "/" + name
        if any(p["name"] == name for p in self.processors):
            raise SystemExit("flowgen: %s: two processors of that name" % where)
        spec = COMPONENTS[cls]
        p = {"identifier": uid("processor", where), "name": name, "comments": comments,
             "componentType": "PROCESSOR", "groupIdentifier": self.id, "type": cls,
             "bundle": bundle(spec["artifact"]), "_cls": cls, "_props": props,
             "position": {"x": 80.0 + col * 480.0, "y": 80.0 + self.row * 200.0},
             "style": {}, "schedulingStrategy": schedule[0], "schedulingPeriod": schedule[1],
             "executionNode": "ALL" if all_nodes else "PRIMARY", "penaltyDuration": "30 sec",
             "yieldDuration": "1 sec", "bulletinLevel": "WARN", "runDurationMillis": 0,
             "concurrentlySchedulableTaskCount": tasks, "autoTerminatedRelationships": sorted(auto),
             "scheduledState": state, "retryCount": 10, "retriedRelationships": sorted(retry),
             "backoffMechanism": "PENALIZE_FLOWFILE", "maxBackoffPeriod": "10 mins"}
        self.row += 1
        self.processors.append(p)
        return p

    def _resolve_processors(self):
        for p in self.processors:
            p["properties"], p["propertyDescriptors"] = self._props(self.path + "/" + p["name"], p["_cls"],
                                                                    p["_props"])
        for g in self.groups:
            g._resolve_processors()

    def port(self, kind, name, comments=""):
        lst = self.inputs if kind == "INPUT_PORT" else self.outputs
        for existing in lst:
            if existing["name"] == name:
                return existing
        n = len(lst)
        p = {"identifier": uid(kind, self.path, name), "name": name, "comments": comments,
             "componentType": kind, "groupIdentifier": self.id, "type": kind,
             "position": {"x": -400.0 if kind == "INPUT_PORT" else 1600.0, "y": 80.0 + n * 160.0},
             "concurrentlySchedulableTaskCount": 1, "scheduledState": "ENABLED", "allowRemoteAccess": False,
             "portFunction": "STANDARD"}
        lst.append(p)
        return p

    def input(self, name, comments=""):
        return self.port("INPUT_PORT", name, comments)

    def output(self, name, comments=""):
        return self.port("OUTPUT_PORT", name, comments)

    def connect(self, src, dst, rels=(), load_balance=None):
        """src and dst: components of this group, or ports of its child groups."""
        def end(c):
            return {"id": c["identifier"], "type": c["componentType"], "groupId": c["groupIdentifier"],
                    "name": c["name"], "comments": ""}
        rels = sorted(rels) if src["componentType"] == "PROCESSOR" else [""]
        c = {"identifier": uid("connection", self.path, src["identifier"], dst["identifier"], *rels),
             "name": "", "componentType": "CONNECTION", "groupIdentifier": self.id,
             "source": end(src), "destination": end(dst), "selectedRelationships": rels, "bends": [],
             "labelIndex": 1, "zIndex": 0, "backPressureObjectThreshold": 10000,
             "backPressureDataSizeThreshold": "1 GB", "flowFileExpiration": "0 sec", "prioritizers": [],
             "loadBalanceStrategy": load_balance or "DO_NOT_LOAD_BALANCE", "partitioningAttribute": "",
             "loadBalanceCompression": "DO_NOT_COMPRESS"}
        if src["componentType"] == "PROCESSOR" and src is dst:
            c["bends"] = [{"x": src["position"]["x"] + 380.0, "y": src["position"]["y"] - 40.0},
                          {"x": src["position"]["x"] + 380.0, "y": src["position"]["y"] + 40.0}]
        self.connections.append(c)
        return c

    def label(self, text, pos=(-400.0, -260.0), width=900.0, height=200.0):
        self.labels.append({"identifier": uid("label", self.path, str(len(self.labels))), "label": text,
                            "componentType": "LABEL", "groupIdentifier": self.id,
                            "position": {"x": pos[0], "y": pos[1]}, "width": width, "height": height,
                            "zIndex": 0, "style": {"font-size": "14px"}})

    def to_json(self):
        def clean(items):
            return [{k: v for k, v in it.items() if not k.startswith("_")} for it in items]

        return {
            "identifier": self.id, "name": self.name, "comments": self.comments,
            "componentType": "PROCESS_GROUP", "groupIdentifier": self.parent.id if self.parent else None,
            "position": {"x": float(self.pos[0]), "y": float(self.pos[1])},
            "processGroups": [g.to_json() for g in self.groups], "remoteProcessGroups": [],
            "processors": clean(self.processors), "inputPorts": clean(self.inputs),
            "outputPorts": clean(self.outputs), "connections": self.connections, "labels": self.labels,
            "funnels": [], "controllerServices": clean(self.services),
            "flowFileConcurrency": "UNBOUNDED", "flowFileOutboundPolicy": "STREAM_WHEN_AVAILABLE",
            "defaultFlowFileExpiration": "0 sec", "defaultBackPressureObjectThreshold": 10000,
            "defaultBackPressureDataSizeThreshold": "1 GB", "executionEngine": "INHERITED",
            "scheduledState": "ENABLED", "maxConcurrentTasks": 1, "statelessFlowTimeout": "1 min",
            **({"parameterContextName": "loadledger"} if self.parent is None else {}),
        }


def bundle(artifact):
    return {"group": "org.apache.nifi", "artifact": artifact, "version": NIFI_VERSION}


CONSUME = "org.apache.nifi.kafka.processors.ConsumeKafka"
PUBLISH = "org.apache.nifi.kafka.processors.PublishKafka"
UPDATE = "org.apache.nifi.processors.attributes.UpdateAttribute"
REPLACE = "org.apache.nifi.processors.standard.ReplaceText"
ROUTE = "org.apache.nifi.processors.standard.RouteOnAttribute"
EVAL = "org.apache.nifi.processors.standard.EvaluateJsonPath"
SPLIT = "org.apache.nifi.processors.standard.SplitJson"
WAIT = "org.apache.nifi.processors.standard.Wait"
NOTIFY = "org.apache.nifi.processors.standard.Notify"
DEDUP = "org.apache.nifi.processors.standard.DetectDuplicate"
LOG = "org.apache.nifi.processors.standard.LogAttribute"
GENERATE = "org.apache.nifi.processors.standard.GenerateFlowFile"


class Builder:
    """The loadledger flow of one variant ("registry" or "embedded")."""

    def __init__(self, variant):
        self.variant = variant
        self.flow = Flow(variant)
        f = self.flow
        self.P = {
            "bootstrap": f.param("kafka.bootstrap.servers", "127.0.0.1:9092",
                                 "Kafka3ConnectionService Bootstrap Servers: the brokers loadledger's services use."),
            "protocol": f.param("kafka.security.protocol", "PLAINTEXT",
                                "PLAINTEXT, or SASL_SSL in loadledger's secure mode (then add an SSL Context "
                                "Service to 'Kafka (loadledger)', nifi/README.md)."),
            "mechanism": f.param("kafka.sasl.mechanism", "SCRAM-SHA-512", "SASL mechanism (secure mode)."),
            "user": f.param("kafka.sasl.username", "nifi",
                            "SASL user (secure mode): 'nifi', whose ACLs are config/kafka-acls.conf."),
            "password": f.param("kafka.sasl.password", None, "SASL password of that user (secure mode).",
                                sensitive=True),
            "prefix": f.param("topic.prefix", "loadledger.",
                              "The services' topic.prefix: every topic is <prefix><logical name>; the "
                              "transactional ids and consumer groups start with <prefix>nifi."),
            "cache_host": f.param("cache.server.host", "localhost",
                                  "Host of the Map Cache Server the Wait/Notify pairs share: one node of the "
                                  "cluster (every node runs the server; all clients use this one)."),
            "cache_port": f.param("cache.server.port", "4557", "Its port."),
            "timeout": f.param("reply.timeout", "30 min",
                               "How long a request waits for loadledger's reply before it goes to the alerts."),
            "hdfs_root": f.param("hdfs.root", "/data/stage",
                                 "HDFS root of the runs, when the run trigger gives no ll.hdfs.root."),
            "table_prefix": f.param("stage.table.prefix", "stg_",
                                    "Stage table prefix, when the run trigger gives no ll.stage.table.prefix."),
            "query_version": f.param("metrics.query.version", "v1", "queryVersion of the validation metrics."),
            "dedup_age": f.param("dispatch.dedup.age", "30 min",
                                 "DetectDuplicate age-off of a validate-run command's dispatchId: longer than "
                                 "the dispatcher's dispatch.lease plus the sweeper's dispatch.ack_timeout."),
        }
        if variant == "registry":
            self.P["registry_url"] = f.param("schema.registry.url", "http://127.0.0.1:8081",
                                             "The Confluent-compatible schema registry (the services' "
                                             "schema.registry.url); several URLs separated by commas.")
            self.P["registry_auth"] = f.param("schema.registry.auth", "NONE", "NONE or BASIC.")
            self.P["registry_user"] = f.param("schema.registry.username", "", "Registry user (BASIC).")
            self.P["registry_password"] = f.param("schema.registry.password", None, "Registry password (BASIC).",
                                                  sensitive=True)
        else:
            for topic in sorted(REPLY_OF):
                name = TOPIC_SCHEMA[topic]
                f.param("schema." + name, schema_text(name),
                        "schemas/avro/%s.avsc, the schema of %s: the JSON reader reads the event with it and the "
                        "Avro writer embeds it." % (name, topic))
        self.root = Group(f, "loadledger", comments="loadledger's side of a NiFi load: nifi/README.md")
        self.alert_sinks = {}

    # -- shared pieces --------------------------------------------------------------------------------

    def topic(self, logical):
        if logical not in TOPIC_SCHEMA and logical not in ("dead-letters",):
            raise SystemExit("flowgen: unknown topic %s" % logical)
        return self.P["prefix"] + logical

    def services(self):
        r, P = self.root, self.P
        self.kafka = r.service("Kafka (loadledger)", "org.apache.nifi.kafka.service.Kafka3ConnectionService", {
            "bootstrap.servers": P["bootstrap"], "security.protocol": P["protocol"],
            "sasl.mechanism": P["mechanism"], "sasl.username": P["user"], "sasl.password": P["password"],
            "isolation.level": "read_committed"},
            comments="Read Committed: a reply or command loadledger aborted is never seen (README).")
        if self.variant == "registry":
            self.registry = r.service("Schema registry", "org.apache.nifi.confluent.schemaregistry.ConfluentSchemaRegistry", {
                "url": P["registry_url"], "authentication-type": P["registry_auth"],
                "username": P["registry_user"], "password": P["registry_password"]},
                comments="The registry loadledger's services use: subjects <topic>-value (TopicNameStrategy).")
            ref_writer = r.service("Confluent schema reference writer",
                                   "org.apache.nifi.confluent.schemaregistry.ConfluentEncodedSchemaReferenceWriter", {})
            ref_reader = r.service("Confluent schema reference reader",
                                   "org.apache.nifi.confluent.schemaregistry.ConfluentEncodedSchemaReferenceReader", {})
            self.json_reader = r.service("Event JSON reader", "org.apache.nifi.json.JsonTreeReader", {
                "schema-access-strategy": "schema-name", "schema-registry": self.registry,
                "schema-name": "${schema.name}"},
                comments="Reads the JSON an event step built with its topic's schema (schema.name = <topic>-value).")
            self.avro_writer = r.service("Event Avro writer", "org.apache.nifi.avro.AvroRecordSetWriter", {
                "Schema Write Strategy": "schema-reference-writer", "Schema Reference Writer": ref_writer,
                "schema-access-strategy": "schema-name", "schema-registry": self.registry,
                "schema-name": "${schema.name}", "compression-format": "NONE"},
                comments="Confluent framing (0x00, schema id, datum): the services' topic.<t>.framing = confluent. "
                         "Compression NONE: the services read uncompressed Avro only.")
            self.avro_reader = r.service("Reply Avro reader", "org.apache.nifi.avro.AvroReader", {
                "schema-access-strategy": "schema-reference-reader", "schema-reference-reader": ref_reader,
                "schema-registry": self.registry},
                comments="Replies and commands in Confluent framing: the writer's id is looked up in the registry.")
        else:
            self.json_reader = r.service("Event JSON reader", "org.apache.nifi.json.JsonTreeReader", {
                "schema-access-strategy": "schema-text-property", "schema-text": "${avro.schema}"},
                comments="Reads the JSON an event step built with its topic's schema (avro.schema = #{schema.<Name>}).")
            self.avro_writer = r.service("Event Avro writer", "org.apache.nifi.avro.AvroRecordSetWriter", {
                "Schema Write Strategy": "avro-embedded", "schema-access-strategy": "schema-text-property",
                "schema-text": "${avro.schema}", "compression-format": "NONE"},
                comments="Embed Avro Schema: a container file per FlowFile (the services' topic.<t>.framing = block). "
                         "Compression NONE: the services read uncompressed Avro only.")
            self.avro_reader = r.service("Reply Avro reader", "org.apache.nifi.avro.AvroReader", {
                "schema-access-strategy": "embedded-avro-schema"},
                comments="Replies and commands as container files (the services' reply framing = container).")
        self.json_writer = r.service("Reply JSON writer", "org.apache.nifi.json.JsonRecordSetWriter", {
            "Schema Write Strategy": "no-schema", "schema-access-strategy": "inherit-record-schema",
            "output-grouping": "output-array", "suppress-nulls": "never-suppress", "Pretty Print JSON": "false",
            "compression-format": "none"})
        self.cache = r.service("Reply signals (Map Cache client)", "org.apache.nifi.distributed.cache.client.MapCacheClientService", {
            "Server Hostname": P["cache_host"], "Server Port": P["cache_port"]},
            comments="Wait/Notify signals and DetectDuplicate entries, shared by every node.")
        r.service("Reply signals (Map Cache server)", "org.apache.nifi.distributed.cache.server.map.MapCacheServer", {
            "Port": P["cache_port"], "Maximum Cache Entries": "100000", "Eviction Strategy": "Least Recently Used"},
            comments="Runs on every node; the clients use the one on #{cache.server.host}. Signals nobody waits "
                     "for (a replayed reply) are evicted oldest first.")

    def schema_attr(self, topic):
        """The attribute that tells the JSON reader and the Avro writer the topic's schema."""
        if self.variant == "registry":
            return {"schema.name": self.topic(topic) + "-value"}
        return {"avro.schema": "#{schema.%s}" % TOPIC_SCHEMA[topic]}

    def publisher(self, g, topic, template=None, attrs=None, col=0, wrap=None, comments=""):
        """UpdateAttribute (schema, attrs) -> ReplaceText (the record as JSON) -> PublishKafka (Avro).
        Returns (first, publish). template: the JSON as an EL expression; wrap: a ReplaceText regex
        replacement of the whole content instead; neither: the content is the record already."""
        name = TOPIC_SCHEMA[topic]
        props = dict(attrs or {})
        props.update(self.schema_attr(topic))
        first = g.processor("Prepare %s" % name, UPDATE, props, col=col,
                            comments="Sets the schema attribute (and what the step mints) for %s." % topic)
        prev = first
        if template is not None or wrap is not None:
            rt = {"Replacement Strategy": "Always Replace", "Replacement Value": template,
                  "Evaluation Mode": "Entire text"} if template is not None else {
                "Replacement Strategy": "Regex Replace", "Regular Expression": "(?s)^(.*)$",
                "Replacement Value": wrap, "Evaluation Mode": "Entire text"}
            text = g.processor("%s as JSON" % name, REPLACE, rt, col=col,
                               comments="The %s record, field by field (schemas/avro/%s.avsc)." % (name, name))
            g.connect(prev, text, ["success"])
            g.connect(text, self.alerts(g), ["failure"])
            prev = text
        pub = g.processor("Publish %s" % name, PUBLISH, {
            "Kafka Connection Service": self.kafka, "Topic Name": self.topic(topic),
            "Failure Strategy": "Route to Failure", "acks": "all", "compression.type": "none",
            "Transactions Enabled": "true", "Transactional ID Prefix": self.P["prefix"] + "nifi.",
            "Record Reader": self.json_reader, "Record Writer": self.avro_writer,
            "Publish Strategy": "USE_VALUE", "Message Key Field": "runId"},
            retry=["failure"], col=col,
            comments="Transactional, acks=all, keyed by runId (README, 'Plugging in a NiFi flow'). " + comments)
        g.connect(prev, pub, ["success"])
        g.connect(pub, self.alerts(g), ["failure"])
        return first, pub

    def signal(self, reply_topic, **slots):
        for k in slots:
            if k not in SIGNAL_FIELDS:
                raise SystemExit("flowgen: %s is not a signal field" % k)
        return "|".join([self.topic(reply_topic)] + [slots.get(k, "") for k in SIGNAL_FIELDS])

    def wait(self, g, reply_topic, name, col=0, **slots):
        w = g.processor(name, WAIT, {
            "release-signal-id": self.signal(reply_topic, **slots), "target-signal-count": "1",
            "expiration-duration": self.P["timeout"], "distributed-cache-service": self.cache,
            "attribute-copy-mode": "replace", "wait-mode": "wait"}, col=col,
            comments="Released by PG-00's Notify when the %s reply of this request arrives; its fields come as "
                     "ll.reply.* attributes." % reply_topic)
        g.connect(w, w, ["wait"])
        g.connect(w, self.alerts(g), ["expired", "failure"])
        return w

    def alerts(self, g):
        """Where a group sends what needs a person: its "alerts" output port (PG-90's own alert log)."""
        sink = self.alert_sinks.get(g.path)
        if sink is not None:
            return sink
        return g.output("alerts", "Anything loadledger refused, no reply within #{reply.timeout}, a failure.")

    def route(self, g, name, routes, col=0, comments=""):
        return g.processor(name, ROUTE, dict({"Routing Strategy": "Route to Property name"}, **routes), col=col,
                           comments=comments)

    def fail_run(self, g, src, rels, expected, fail, stage, code, col=0):
        """A run failure (one of docs/contract.md §5.6's five pairs), handed to PG-90."""
        u = g.processor("Fail the run (%s)" % fail, UPDATE, {
            "ll.fail.expected": expected, "ll.fail.status": fail,
            "ll.error.stage": "${ll.error.stage:replaceEmpty('%s')}" % stage,
            "ll.error.code": "${ll.error.code:replaceEmpty('%s')}" % code,
            "ll.error.message": "${ll.error.message:replaceEmpty(${ll.reply.message}):replaceEmpty(${ll.reply.reasons})"
                                ":replaceEmpty('%s')}" % code}, col=col)
        g.connect(src, u, rels)
        g.connect(u, g.output("run failed", "To PG-90: a run failure report."), ["success"])
        return u

    # -- the groups ----------------------------------------------------------------------------------------

    def pg00_replies(self):
        g = self.root.child("PG-00 Replies", pos=(0, 0), comments=(
            "Every reply of loadledger, read once for the cluster: the waiting request is signalled (Wait/Notify), "
            "or the reply goes to the group that acts on it."))
        g.label("PG-00: one ConsumeKafka for the %d reply topics (one consumer group for the cluster: any node may "
                "read any reply), one FlowFile per reply, its fields as ll.reply.* attributes, then a Notify whose "
                "signal is <topic>|runId|partitionId|claimToken|chunkIndex|publishToken|dispatchId|stage of the "
                "reply: the Wait of the request that asked computes the same from its own attributes."
                % len(REPLY_TOPICS))
        consume = g.processor("Consume replies", CONSUME, {
            "Kafka Connection Service": self.kafka, "Group ID": self.P["prefix"] + "nifi.replies",
            "Topic Format": "names", "Topics": ",".join(self.topic(t) for t in REPLY_TOPICS),
            "auto.offset.reset": "earliest", "Commit Offsets": "true", "Processing Strategy": "RECORD",
            "Record Reader": self.avro_reader, "Record Writer": self.json_writer, "Output Strategy": "USE_VALUE"},
            comments="Auto Offset Reset earliest, Commit Offsets true, read_committed (the connection service).")
        split = g.processor("One reply per FlowFile", SPLIT, {"JsonPath Expression": "$.*"}, auto=["original"])
        g.connect(consume, split, ["success"])
        g.connect(consume, self.alerts(g), ["parse failure"])
        paths = {"ll.reply." + f: "$." + f for f in reply_fields()}
        ev = g.processor("Reply fields to attributes", EVAL, dict({
            "Destination": "flowfile-attribute", "Return Type": "auto-detect", "Path Not Found Behavior": "ignore",
            "Null Value Representation": "empty string"}, **paths),
            comments="Every scalar field of every reply schema (a field a reply lacks is an empty attribute); "
                     "maps as JSON text.")
        g.connect(split, ev, ["split"])
        g.connect(split, self.alerts(g), ["failure"])
        routes = {"waited": "${kafka.topic:in(%s)}" % ",".join("'%s'" % self.topic(t) for t in WAITED)}
        for t in DIRECT:
            routes[t] = "${kafka.topic:equals('%s')}" % self.topic(t)
        rt = self.route(g, "Route by reply topic", routes)
        g.connect(ev, rt, ["matched"])
        g.connect(ev, self.alerts(g), ["unmatched", "failure"])
        notify = g.processor("Signal the waiting request", NOTIFY, {
            "release-signal-id": "${kafka.topic}|" + "|".join("${ll.reply.%s}" % f for f in SIGNAL_FIELDS),
            "signal-counter-name": "default", "signal-counter-delta": "1", "signal-buffer-count": "1",
            "distributed-cache-service": self.cache, "attribute-cache-regex": r"ll\.reply\..*"},
            auto=["success"], retry=["failure"], col=1)
        g.connect(rt, notify, ["waited"])
        g.connect(notify, self.alerts(g), ["failure"])
        for t, port in DIRECT.items():
            g.connect(rt, g.output(port), [t])
        g.connect(rt, self.alerts(g), ["unmatched"])
        return g

    def pg05_commands(self):
        g = self.root.child("PG-05 Commands", pos=(0, 500), comments=(
            "The dispatcher's validate-run and reissue-partition commands."))
        g.label("PG-05: a command can arrive twice with the same dispatchId (README): DetectDuplicate drops the "
                "copies seen within #{dispatch.dedup.age}; the completion service's CAS is the guarantee that only "
                "one ValidationStart wins (validation-start-decisions, PG-40).")
        consume = g.processor("Consume commands", CONSUME, {
            "Kafka Connection Service": self.kafka, "Group ID": self.P["prefix"] + "nifi.commands",
            "Topic Format": "names", "Topics": ",".join(self.topic(t) for t in COMMAND_TOPICS),
            "auto.offset.reset": "earliest", "Commit Offsets": "true",
            "Header Name Pattern": "|".join(COMMAND_HEADERS), "Processing Strategy": "RECORD",
            "Record Reader": self.avro_reader, "Record Writer": self.json_writer, "Output Strategy": "USE_VALUE"},
            comments="The headers jobKey, runId, dispatchId, dispatchType become attributes (schemas/README.md, "
                     "'Commands').")
        split = g.processor("One command per FlowFile", SPLIT, {"JsonPath Expression": "$.*"}, auto=["original"])
        g.connect(consume, split, ["success"])
        g.connect(consume, self.alerts(g), ["parse failure"])
        ev = g.processor("Command fields to attributes", EVAL, {
            "Destination": "flowfile-attribute", "Return Type": "auto-detect", "Path Not Found Behavior": "ignore",
            "Null Value Representation": "empty string", "ll.cmd.dispatchId": "$.dispatchId",
            "ll.cmd.dispatchType": "$.dispatchType", "ll.cmd.runId": "$.runId", "ll.cmd.jobKey": "$.jobKey",
            "ll.cmd.partitionId": "$.partitionId", "ll.cmd.attempt": "$.attempt"})
        g.connect(split, ev, ["split"])
        g.connect(split, self.alerts(g), ["failure"])
        rt = self.route(g, "Route by dispatch type", {
            "validate": "${ll.cmd.dispatchType:equals('VALIDATE_RUN')}",
            "reissue": "${ll.cmd.dispatchType:equals('REISSUE_PARTITION')}"})
        g.connect(ev, rt, ["matched"])
        g.connect(ev, self.alerts(g), ["unmatched", "failure"])
        g.connect(rt, self.alerts(g), ["unmatched"])
        dedup = g.processor("Drop copies of a dispatch", DEDUP, {
            "Cache Entry Identifier": "${ll.cmd.dispatchId}", "FlowFile Description": "${ll.cmd.runId}",
            "Age Off Duration": self.P["dedup_age"], "Distributed Cache Service": self.cache},
            auto=["duplicate"], retry=["failure"])
        g.connect(rt, dedup, ["validate"])
        g.connect(dedup, self.alerts(g), ["failure"])
        first, pub = self.publisher(g, "validation-starts", template=obj([
            ("runId", s("ll.run.id")), ("dispatchId", s("ll.dispatch.id")), ("node", s("ll.node"))]),
            attrs={"ll.run.id": "${ll.cmd.runId}", "ll.dispatch.id": "${ll.cmd.dispatchId}",
                   "ll.node": "${hostname(true)}/${uuid}"},
            comments="The ACK of the command; its decision comes back to PG-40 through PG-00.")
        g.connect(dedup, first, ["non-duplicate"])
        pub["autoTerminatedRelationships"] = ["success"]
        reissue = g.processor("Reissued partition", UPDATE, {
            "ll.run.id": "${ll.cmd.runId}", "ll.partition.id": "${ll.cmd.partitionId}"}, col=1,
            comments="The command carries the work order; PG-20 claims the partition again with a new token.")
        g.connect(rt, reissue, ["reissue"])
        g.connect(reissue, g.output("reissued partitions"), ["success"])
        return g

    def pg10_coordinator(self):
        g = self.root.child("PG-10 Run coordinator", pos=(700, 0), comments="Run request and manifest.")
        g.label("PG-10: a FlowFile with ll.job.key and ll.business.key (optional: ll.hdfs.root, "
                "ll.stage.table.prefix, ll.allow.empty.source, ll.run.id to resend a request) starts a run. "
                "The run request is sent, its decision awaited; the SITE group plans the manifest from Oracle; the "
                "manifest is sent and, once registered, its partitions go to PG-20.")
        start = g.input("start run", "ll.job.key, ll.business.key (and the optional attributes of the label).")
        example = g.processor("Start a run (example)", GENERATE, {
            "File Size": "0B", "ll.job.key": "ORACLE_INSP_DTL_DAILY",
            "ll.business.key": "${now():minus(86400000):format('yyyy-MM-dd')}"},
            state="DISABLED", schedule=("CRON_DRIVEN", "0 0 2 * * ?"), all_nodes=False,
            comments="Disabled: an example trigger (yesterday's load at 02:00 on the primary node).")
        P = self.P
        first, pub = self.publisher(g, "run-requests", template=obj([
            ("runId", s("ll.run.id")), ("jobKey", s("ll.job.key")), ("businessKey", s("ll.business.key")),
            ("hdfsRoot", s("ll.hdfs.root")), ("stageTablePrefix", s("ll.stage.table.prefix")),
            ("allowEmptySource", boolean("ll.allow.empty.source")),
            ("parameters", obj([("flow", '"PG-10"'), ("node", '"${hostname(true):escapeJson()}"')])),
            ("requestedAt", '"${now():format("yyyy-MM-dd\'T\'HH:mm:ss.SSS\'Z\'", "GMT")}"')]),
            attrs={"ll.run.id": "${ll.run.id:isEmpty():ifElse(${UUID()}, ${ll.run.id})}",
                   "ll.hdfs.root": "${ll.hdfs.root:replaceEmpty('%s')}" % P["hdfs_root"],
                   "ll.stage.table.prefix": "${ll.stage.table.prefix:replaceEmpty('%s')}" % P["table_prefix"],
                   "ll.allow.empty.source": "${ll.allow.empty.source:replaceEmpty('false')}"},
            comments="The run id is minted here, once (docs/contract.md §5.1).")
        g.connect(start, first)
        g.connect(example, first, ["success"])
        w = self.wait(g, "run-decisions", "Wait for the run decision", runId="${ll.run.id}")
        g.connect(pub, w, ["success"])
        rt = self.route(g, "Run admitted?", {"admitted": "${ll.reply.outcome:in('ACCEPTED','REPLAY')}"},
                        comments="REJECTED (DUPLICATE_ACTIVE_RUN, RUN_ID_CONFLICT, ...) goes to the alerts.")
        g.connect(w, rt, ["success"])
        g.connect(rt, g.output("plan manifest", "To the SITE group: ll.run.id, ll.job.key, ll.business.key, "
                                                "ll.reply.hdfsRunPath, ll.reply.stageTable."), ["admitted"])
        g.connect(rt, self.alerts(g), ["unmatched"])
        manifest = g.input("manifest", "From the SITE group: the Manifest record as JSON (schemas/avro/Manifest.avsc) "
                                       "with the FlowFile's attributes kept.")
        first, pub = self.publisher(g, "manifests", col=1, comments="The content is the Manifest already.")
        g.connect(manifest, first)
        w = self.wait(g, "manifest-decisions", "Wait for the manifest decision", col=1, runId="${ll.run.id}")
        g.connect(pub, w, ["success"])
        rt = self.route(g, "Manifest registered?", {"registered": "${ll.reply.outcome:in('ACCEPTED','REPLAY')}"},
                        col=1, comments="MANIFEST_INVALID: the ledger failed the run already (FAILED_MANIFEST).")
        g.connect(w, rt, ["success"])
        g.connect(rt, self.alerts(g), ["unmatched"])
        split = g.processor("One FlowFile per partition", SPLIT, {"JsonPath Expression": "$.partitions"},
                            auto=["original"], col=1,
                            comments="The partitions of the manifest it sent; PG-20 claims those with rows.")
        g.connect(rt, split, ["registered"])
        g.connect(split, self.alerts(g), ["failure"])
        g.connect(split, g.output("partitions"), ["split"])
        failed = g.input("manifest failed", "From the SITE group: the manifest could not be planned "
                                            "(ll.error.code, ll.error.message).")
        self.fail_run(g, failed, [], "CREATED", "FAILED_MANIFEST", "MANIFEST", "MANIFEST_PLANNING_FAILED", col=2)
        return g

    def pg20_worker(self):
        g = self.root.child("PG-20 Partition worker", pos=(700, 500),
                            comments="Claim, work order, chunk reports, failure report.")
        g.label("PG-20: a partition is claimed with a fresh claimToken minted on this node; only a granted "
                "ClaimDecision (claimed = true, the whole work order in ll.reply.*) goes on to the SITE extraction. "
                "Chunk reports and the failure report reuse the token (docs/contract.md §5.3-5.5).")
        parts = g.input("partitions", "A partition as JSON (from the manifest or a reissue command), ll.run.id.")
        ev = g.processor("Partition fields", EVAL, {
            "Destination": "flowfile-attribute", "Return Type": "auto-detect", "Path Not Found Behavior": "ignore",
            "Null Value Representation": "empty string", "ll.partition.id": "$.partitionId",
            "ll.expected.rows": "$.expectedRowCount"})
        g.connect(parts, ev)
        g.connect(ev, self.alerts(g), ["unmatched", "failure"])
        rt = self.route(g, "Has rows?", {"rows": "${ll.expected.rows:gt(0)}"},
                        comments="An empty partition was SUCCESS at registration: nothing to claim.")
        g.connect(ev, rt, ["matched"])
        rt["autoTerminatedRelationships"] = ["unmatched"]
        first, pub = self.publisher(g, "partition-claims", template=obj([
            ("runId", s("ll.run.id")), ("partitionId", s("ll.partition.id")), ("claimToken", s("ll.claim.token")),
            ("workerNode", s("ll.worker.node"))]),
            attrs={"ll.claim.token": "${UUID()}", "ll.worker.node": "${hostname(true)}"},
            comments="A new token per claim; a retry of this FlowFile keeps it.")
        g.connect(rt, first, ["rows"], load_balance="ROUND_ROBIN")
        w = self.wait(g, "claim-decisions", "Wait for the claim decision", runId="${ll.run.id}",
                      partitionId="${ll.partition.id}", claimToken="${ll.claim.token}")
        g.connect(pub, w, ["success"])
        claimed = self.route(g, "Claimed?", {"claimed": "${ll.reply.claimed:equals('true')}"},
                             comments="Not claimed is a normal race (docs/contract.md §5.3): never query Oracle then.")
        g.connect(w, claimed, ["success"])
        g.connect(claimed, g.output("extract partition", "To the SITE group: the work order in ll.reply.* "
                                                         "(snapshotScn, lowerBound, upperBound, upperInclusive, "
                                                         "isNullPartition, expectedRowCount, hdfsRunPath) and "
                                                         "ll.run.id, ll.partition.id, ll.claim.token."), ["claimed"])
        log = g.processor("Not claimed", LOG, {"Log Level": "info", "Log prefix": "loadledger: not claimed "},
                          auto=["success"])
        g.connect(claimed, log, ["unmatched"])
        chunk = g.input("chunk written", "From the SITE group, one per Parquet file: ll.run.id, ll.partition.id, "
                                         "ll.claim.token, ll.chunk.index (0-based), ll.chunk.count, ll.fragment.id, "
                                         "ll.hdfs.path, ll.record.count, ll.byte.count.")
        first, pub = self.publisher(g, "chunks", col=1, template=obj([
            ("runId", s("ll.run.id")), ("partitionId", s("ll.partition.id")), ("claimToken", s("ll.claim.token")),
            ("chunkIndex", num("ll.chunk.index")), ("chunkCount", num("ll.chunk.count")),
            ("fragmentIdentifier", opt_s("ll.fragment.id")), ("hdfsPath", s("ll.hdfs.path")),
            ("recordCount", num("ll.record.count")), ("byteCount", opt_num("ll.byte.count"))]),
            comments="Its outcome comes back through PG-00 (chunk outcomes).")
        g.connect(chunk, first)
        pub["autoTerminatedRelationships"] = ["success"]
        failed = g.input("extraction failed", "From the SITE group: ll.run.id, ll.partition.id, ll.claim.token, "
                                              "ll.error.stage, ll.error.class, ll.error.code, ll.error.message.")
        first, pub = self.publisher(g, "partition-failures", col=1, template=obj([
            ("runId", s("ll.run.id")), ("partitionId", s("ll.partition.id")), ("claimToken", s("ll.claim.token")),
            ("errorStage", s_or("ll.error.stage", "EXTRACT")), ("errorClass", s_or("ll.error.class", "UNKNOWN")),
            ("errorCode", s_or("ll.error.code", "UNKNOWN")), ("message", s_or("ll.error.message", "failed")),
            ("attempt", opt_num("ll.reply.attempt"))]))
        g.connect(failed, first)
        pub["autoTerminatedRelationships"] = ["success"]
        for port, what in (("chunk outcomes", "chunk"), ("partition failure outcomes", "failure report")):
            src = g.input(port, "From PG-00.")
            r = self.route(g, "Refused %s?" % what, {"refused": "${ll.reply.outcome:equals('REJECTED')}"}, col=2,
                           comments="CLAIM_MISMATCH (a zombie after a reissue), CHUNK_CONFLICT, ... go to the alerts.")
            g.connect(src, r)
            g.connect(r, self.alerts(g), ["refused"])
            r["autoTerminatedRelationships"] = ["unmatched"]
        return g

    def pg40_staging(self):
        g = self.root.child("PG-40 Staging validation", pos=(1400, 0), comments="Validation start to STAGING_VALIDATED.")
        g.label("PG-40: only the winning ValidationStartDecision (started = true) goes on, carrying the run context. "
                "STAGING metrics, then stage-validated: the run is STAGING_VALIDATED and goes to PG-50.")
        src = g.input("validation start decisions", "From PG-00.")
        won = self.route(g, "Won the start?", {"started": "${ll.reply.started:equals('true')}"},
                         comments="A copy that lost the CAS answers started = false (docs/contract.md §5.7).")
        g.connect(src, won)
        won["autoTerminatedRelationships"] = ["unmatched"]
        ctx = g.processor("Run context", UPDATE, {
            "ll.run.id": "${ll.reply.runId}", "ll.dispatch.id": "${ll.reply.dispatchId}",
            "ll.job.key": "${ll.reply.jobKey}", "ll.business.key": "${ll.reply.businessKey}",
            "ll.snapshot.scn": "${ll.reply.snapshotScn}", "ll.hdfs.run.path": "${ll.reply.hdfsRunPath}",
            "ll.stage.table": "${ll.reply.stageTable}", "ll.source.count": "${ll.reply.sourceCount}",
            "ll.extracted.count": "${ll.reply.extractedCount}", "ll.source.metrics": "${ll.reply.sourceMetrics}"},
            comments="The context of the run, kept on this FlowFile through PG-40, PG-50 and PG-60.")
        g.connect(won, ctx, ["started"])
        g.connect(ctx, g.output("validate staging", "To the SITE group: ll.run.id and the ll.* run context."),
                  ["success"])
        metrics = g.input("staging metrics", "From the SITE group: a JSON array of Metric records "
                                             "(schemas/avro/ValidationMetrics.avsc), the attributes kept.")
        first, pub = self.publisher(g, "validation-metrics", col=1, wrap=obj([
            ("runId", s("ll.run.id")), ("stage", '"STAGING"'), ("queryVersion", '"%s"' % self.P["query_version"]),
            ("metrics", "$1")]))
        g.connect(metrics, first)
        w = self.wait(g, "validation-metrics-outcomes", "Wait for the STAGING metrics outcome", col=1,
                      runId="${ll.run.id}", stage="STAGING")
        g.connect(pub, w, ["success"])
        passed = self.route(g, "STAGING metrics passed?", {
            "passed": "${ll.reply.outcome:in('ACCEPTED','REPLAY'):and(${ll.reply.failCount:equals('0')})}"}, col=1)
        g.connect(w, passed, ["success"])
        first, pub = self.publisher(g, "stage-validations", col=1, template=obj([("runId", s("ll.run.id"))]))
        g.connect(passed, first, ["passed"])
        w = self.wait(g, "stage-validation-outcomes", "Wait for the stage-validated outcome", col=1,
                      runId="${ll.run.id}")
        g.connect(pub, w, ["success"])
        ok = self.route(g, "Staging validated?", {"validated": "${ll.reply.stageValidated:equals('true')}"}, col=1)
        g.connect(w, ok, ["success"])
        g.connect(ok, g.output("staging validated", "To PG-50."), ["validated"])
        f = self.fail_run(g, passed, ["unmatched"], "STAGE_VALIDATING", "FAILED_STAGE_VALIDATION", "PG-40",
                          "STAGING_VALIDATION_FAILED", col=2)
        g.connect(ok, f, ["unmatched"])
        failed = g.input("staging validation failed", "From the SITE group: ll.error.code, ll.error.message.")
        g.connect(failed, f)
        return g

    def pg50_publish(self):
        g = self.root.child("PG-50 Publish", pos=(1400, 500), comments="Publish claim and result.")
        g.label("PG-50: only a claimed publishToken may run the INSERT OVERWRITE (docs/contract.md §5.13). The "
                "SITE group reports published, failed or unknown (any failure it cannot classify, §5.14).")
        src = g.input("staging validated", "From PG-40.")
        first, pub = self.publisher(g, "publish-claims", template=obj([
            ("runId", s("ll.run.id")), ("publishToken", s("ll.publish.token"))]),
            attrs={"ll.publish.token": "${UUID()}"})
        g.connect(src, first)
        w = self.wait(g, "publish-claim-decisions", "Wait for the publish claim decision", runId="${ll.run.id}",
                      publishToken="${ll.publish.token}")
        g.connect(pub, w, ["success"])
        claimed = self.route(g, "Publish claimed?", {"claimed": "${ll.reply.claimed:equals('true')}"},
                             comments="Not claimed: another token publishes (a second copy of this run's chain) "
                                      "or the run is no longer STAGING_VALIDATED.")
        g.connect(w, claimed, ["success"])
        g.connect(claimed, g.output("publish", "To the SITE group: ll.publish.token and the run context."),
                  ["claimed"])
        log = g.processor("Publish not claimed", LOG, {"Log Level": "info",
                                                       "Log prefix": "loadledger: publish not claimed "},
                          auto=["success"])
        g.connect(claimed, log, ["unmatched"])
        outcome = g.processor("Publish outcome", UPDATE, {
            "ll.publish.outcome": "${ll.publish.outcome:replaceEmpty('PUBLISH_UNKNOWN')}"}, col=1,
            comments="ll.publish.outcome from the port it came in by.")
        for port, value in (("published", "PUBLISHED"), ("publish failed", "FAILED_PUBLISH"),
                            ("publish outcome unknown", "PUBLISH_UNKNOWN")):
            p = g.input(port, "From the SITE group (ll.error.code, ll.error.message when not published).")
            set_ = g.processor("Outcome %s" % value, UPDATE, {"ll.publish.outcome": value}, col=2)
            g.connect(p, set_)
            g.connect(set_, outcome, ["success"])
        first, pub = self.publisher(g, "publish-results", col=1, template=obj([
            ("runId", s("ll.run.id")), ("publishToken", s("ll.publish.token")),
            ("outcome", s("ll.publish.outcome")), ("errorCode", opt_s("ll.error.code")),
            ("message", s_or("ll.error.message", ""))]))
        g.connect(outcome, first, ["success"])
        w = self.wait(g, "publish-result-outcomes", "Wait for the publish result outcome", col=1,
                      runId="${ll.run.id}", publishToken="${ll.publish.token}")
        g.connect(pub, w, ["success"])
        done = self.route(g, "Published?", {"published": "${ll.reply.runStatus:equals('PUBLISHED')}"}, col=1,
                          comments="FAILED_PUBLISH and PUBLISH_UNKNOWN (an operator resolves it: runbooks) "
                                   "go to the alerts.")
        g.connect(w, done, ["success"])
        g.connect(done, g.output("published", "To PG-60."), ["published"])
        g.connect(done, self.alerts(g), ["unmatched"])
        return g

    def pg60_target(self):
        g = self.root.child("PG-60 Target validation", pos=(2100, 0), comments="TARGET metrics and success.")
        g.label("PG-60: TARGET metrics, then the success request: the run is SUCCESS. ll.target.count, when the "
                "SITE group sets it, is the target count; else the ledger takes the TARGET_COUNT metric.")
        src = g.input("published", "From PG-50.")
        g.connect(src, g.output("validate target", "To the SITE group: the run context."))
        metrics = g.input("target metrics", "From the SITE group: a JSON array of Metric records.")
        first, pub = self.publisher(g, "validation-metrics", wrap=obj([
            ("runId", s("ll.run.id")), ("stage", '"TARGET"'), ("queryVersion", '"%s"' % self.P["query_version"]),
            ("metrics", "$1")]))
        g.connect(metrics, first)
        w = self.wait(g, "validation-metrics-outcomes", "Wait for the TARGET metrics outcome", runId="${ll.run.id}",
                      stage="TARGET")
        g.connect(pub, w, ["success"])
        passed = self.route(g, "TARGET metrics passed?", {
            "passed": "${ll.reply.outcome:in('ACCEPTED','REPLAY'):and(${ll.reply.failCount:equals('0')})}"})
        g.connect(w, passed, ["success"])
        first, pub = self.publisher(g, "run-successes", template=obj([
            ("runId", s("ll.run.id")), ("targetCount", opt_num("ll.target.count"))]))
        g.connect(passed, first, ["passed"])
        w = self.wait(g, "run-success-outcomes", "Wait for the success outcome", runId="${ll.run.id}")
        g.connect(pub, w, ["success"])
        ok = self.route(g, "Run SUCCESS?", {"success": "${ll.reply.success:equals('true')}"})
        g.connect(w, ok, ["success"])
        log = g.processor("Run SUCCESS", LOG, {"Log Level": "info", "Log prefix": "loadledger: SUCCESS "}, col=1)
        g.connect(ok, log, ["success"])
        g.connect(log, g.output("run succeeded", "The run is SUCCESS: to the SITE group that tells people."),
                  ["success"])
        f = self.fail_run(g, passed, ["unmatched"], "PUBLISHED", "FAILED_TARGET_VALIDATION", "PG-60",
                          "TARGET_VALIDATION_FAILED", col=2)
        g.connect(ok, f, ["unmatched"])
        failed = g.input("target validation failed", "From the SITE group: ll.error.code, ll.error.message.")
        g.connect(failed, f)
        return g

    def pg90_failures(self):
        g = self.root.child("PG-90 Failures and alerts", pos=(2100, 500), comments="Run failures and alerts.")
        g.label("PG-90: a run failure (one of the five allowed expected/fail pairs, docs/contract.md §5.6) is "
                "reported and its outcome logged; everything else that needs a person goes out of 'to operators'.")
        out = g.output("to operators", "Every alert, with its attributes: route it to mail, chat or tickets.")
        alog = g.processor("Alert", LOG, {"Log Level": "warn", "Log prefix": "loadledger: alert "}, col=1)
        g.connect(alog, out, ["success"])
        self.alert_sinks[g.path] = alog
        src = g.input("run failed", "ll.run.id, ll.fail.expected, ll.fail.status, ll.error.stage, ll.error.code, "
                                    "ll.error.message.")
        first, pub = self.publisher(g, "run-failures", template=obj([
            ("runId", s("ll.run.id")), ("expectedStatus", s("ll.fail.expected")), ("failStatus", s("ll.fail.status")),
            ("errorStage", s("ll.error.stage")), ("errorCode", s("ll.error.code")),
            ("message", s("ll.error.message"))]))
        g.connect(src, first)
        w = self.wait(g, "run-failure-outcomes", "Wait for the run failure outcome", runId="${ll.run.id}")
        g.connect(pub, w, ["success"])
        log = g.processor("Run failure recorded", LOG, {"Log Level": "warn", "Log prefix": "loadledger: run failed "})
        g.connect(w, log, ["success"])
        g.connect(log, out, ["success"])
        g.connect(g.input("alerts", "From every group."), alog)
        return g

    def site(self, name, pos, text, inputs, outputs):
        g = self.root.child("SITE " + name, pos=pos, comments="Your own processors go here: " + text)
        g.label("SITE: " + text + "".join([" In: " + "; ".join(inputs) + "." if inputs else "",
                                            " Out: " + "; ".join(outputs) + "." if outputs else ""]), height=260.0)
        for p in inputs:
            g.input(p.split(":")[0])
        for p in outputs:
            g.output(p.split(":")[0])
        return g

    def build(self):
        self.services()
        r = self.root
        pg00, pg05, pg10 = self.pg00_replies(), self.pg05_commands(), self.pg10_coordinator()
        pg20, pg40, pg50 = self.pg20_worker(), self.pg40_staging(), self.pg50_publish()
        pg60, pg90 = self.pg60_target(), self.pg90_failures()
        plan = self.site("Plan manifest (Oracle)", (700, 1000),
                         "read the SCN, count the source and its split column, cut the partitions, and build the "
                         "Manifest record as JSON (runId = ll.run.id).",
                         ["plan manifest: ll.run.id, ll.job.key, ll.business.key, ll.reply.hdfsRunPath, "
                          "ll.reply.stageTable"],
                         ["manifest: the Manifest JSON as content", "manifest failed: ll.error.code, ll.error.message"])
        extract = self.site("Extract partition (Oracle to Parquet on HDFS)", (700, 1500),
                            "extract the partition AS OF SCN ll.reply.snapshotScn between its bounds into Parquet "
                            "files under ll.reply.hdfsRunPath, one FlowFile per file written.",
                            ["extract partition: the work order (ll.reply.*) and ll.run.id, ll.partition.id, "
                             "ll.claim.token"],
                            ["chunk written: ll.chunk.index (0-based), ll.chunk.count, ll.fragment.id, ll.hdfs.path, "
                             "ll.record.count, ll.byte.count, the input's attributes kept",
                             "extraction failed: ll.error.stage, ll.error.class, ll.error.code (ORA-01555 for an "
                             "expired snapshot), ll.error.message"])
        vstage = self.site("Validate staging (Hive)", (1400, 1000),
                           "load the stage table ll.stage.table from ll.hdfs.run.path and measure it.",
                           ["validate staging: the run context ll.*"],
                           ["staging metrics: a JSON array of Metric records (STAGE_COUNT first)",
                            "staging validation failed: ll.error.code, ll.error.message"])
        publish = self.site("Publish (Hive INSERT OVERWRITE)", (1400, 1500),
                            "INSERT OVERWRITE the target partition from ll.stage.table; a failure you cannot "
                            "classify is 'outcome unknown'.",
                            ["publish: the run context and ll.publish.token"],
                            ["published", "publish failed: ll.error.code, ll.error.message",
                             "publish outcome unknown: ll.error.code, ll.error.message"])
        vtarget = self.site("Validate target (Hive)", (2100, 1000), "measure the published target partition.",
                            ["validate target: the run context"],
                            ["target metrics: a JSON array of Metric records (TARGET_COUNT first); ll.target.count",
                             "target validation failed: ll.error.code, ll.error.message"])
        trigger = self.site("Start runs", (0, 1000),
                            "start a run when its data is due (a schedule, a ListenHTTP, a file that lands): one "
                            "FlowFile per run.",
                            [], ["start run: ll.job.key, ll.business.key; optional ll.hdfs.root, "
                                 "ll.stage.table.prefix, ll.allow.empty.source, ll.run.id (to resend a request)"])
        notify = self.site("Notify operators", (2100, 1500), "send the alerts where your operators look.",
                           ["alerts: every attribute of the alert", "run succeeded: the run context"], [])

        def link(a, out, b, inp):
            r.connect(a.output(out), b.input(inp))

        link(pg00, "validation start decisions", pg40, "validation start decisions")
        link(pg00, "chunk outcomes", pg20, "chunk outcomes")
        link(pg00, "partition failure outcomes", pg20, "partition failure outcomes")
        link(pg05, "reissued partitions", pg20, "partitions")
        link(trigger, "start run", pg10, "start run")
        link(pg10, "plan manifest", plan, "plan manifest")
        link(plan, "manifest", pg10, "manifest")
        link(plan, "manifest failed", pg10, "manifest failed")
        link(pg10, "partitions", pg20, "partitions")
        link(pg20, "extract partition", extract, "extract partition")
        link(extract, "chunk written", pg20, "chunk written")
        link(extract, "extraction failed", pg20, "extraction failed")
        link(pg40, "validate staging", vstage, "validate staging")
        link(vstage, "staging metrics", pg40, "staging metrics")
        link(vstage, "staging validation failed", pg40, "staging validation failed")
        link(pg40, "staging validated", pg50, "staging validated")
        link(pg50, "publish", publish, "publish")
        for p in ("published", "publish failed", "publish outcome unknown"):
            link(publish, p, pg50, p)
        link(pg50, "published", pg60, "published")
        link(pg60, "validate target", vtarget, "validate target")
        link(vtarget, "target metrics", pg60, "target metrics")
        link(vtarget, "target validation failed", pg60, "target validation failed")
        link(pg90, "to operators", notify, "alerts")
        link(pg60, "run succeeded", notify, "run succeeded")
        for g in (pg10, pg40, pg60):
            link(g, "run failed", pg90, "run failed")
        for g in (pg00, pg05, pg10, pg20, pg40, pg50, pg60):
            link(g, "alerts", pg90, "alerts")
        r.label("loadledger (%s): the PG groups speak to loadledger through Kafka exactly as the README's 'Plugging "
                "in a NiFi flow' says; the SITE groups are empty: put your Oracle, HDFS and Hive processors there, "
                "keeping the attributes their labels name. Set the Parameter Context 'loadledger', enable the "
                "controller services, then start. nifi/README.md has the details."
                % ("schema registry" if self.variant == "registry" else "embedded schemas"),
                pos=(0.0, -300.0), width=2600.0, height=120.0)
        r._resolve_services()
        r._resolve_processors()
        params = sorted(self.flow.parameters, key=lambda p: p["name"])
        return {
            "flowContents": r.to_json(),
            "externalControllerServices": {},
            "parameterContexts": {"loadledger": {
                "identifier": uid("parameter-context", "loadledger"), "name": "loadledger",
                "componentType": "PARAMETER_CONTEXT", "parameters": params, "inheritedParameterContexts": [],
                "description": "loadledger's flow (%s): nifi/README.md says what to set." % self.variant}},
            "parameterProviders": {},
            "flowEncodingVersion": "1.0",
            "latest": False,
        }


VARIANTS = {"registry": "loadledger-flow.json", "embedded": "loadledger-flow-embedded.json"}
# the topics each service reads (and replies on) or, for the dispatcher, writes
SERVICE_TOPICS = {
    "registrar": ["run-requests", "manifests"],
    "claimer": ["partition-claims", "publish-claims"],
    "completion": ["chunks", "partition-failures", "validation-starts", "validation-metrics", "stage-validations",
                   "publish-results", "run-successes", "run-failures"],
    "dispatcher": COMMAND_TOPICS,
}


def service_conf(variant, service):
    """The lines a service's configuration needs for the flow of this variant (nifi/conf/...)."""
    lines = ["# The keys ll-%s needs for nifi/%s (generated by tools/nififlow/flowgen.py):" % (service, VARIANTS[variant]),
             "# add them to its configuration (/etc/loadledger/%s.conf), beside db.conninfo and" % service,
             "# kafka.bootstrap.servers. topic.prefix must be the flow's #{topic.prefix} parameter."]
    if variant == "registry":
        lines += ["# The registry the flow's 'Schema registry' service names (#{schema.registry.url}):",
                  "schema.registry.url = http://127.0.0.1:8081"]
    for t in SERVICE_TOPICS[service]:
        if t in COMMAND_TOPICS:
            lines.append("topic.%s.framing = %s" % (t, "confluent" if variant == "registry" else "container"))
        else:
            lines.append("topic.%s.framing = %s" % (t, "confluent" if variant == "registry" else "block"))
            lines.append("topic.%s.framing = %s" % (REPLY_OF[t], "confluent" if variant == "registry" else "container"))
    return "\n".join(lines) + "\n"


def outputs():
    """Every file this writes: path (relative to nifi/) -> text."""
    out = {}
    for variant, name in VARIANTS.items():
        out[name] = render(variant)
        for service in SERVICE_TOPICS:
            out["conf/%s/%s.conf" % (variant, service)] = service_conf(variant, service)
    return out


def render(variant):
    return json.dumps(Builder(variant).build(), indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    ap.add_argument("--out", default=OUT_DIR, help="folder to write to (default nifi/)")
    a = ap.parse_args()
    bad = 0
    for name, text in outputs().items():
        path = os.path.join(a.out, name)
        if a.check:
            try:
                with open(path) as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                print("flowgen: %s is not what tools/nififlow/flowgen.py writes: run it and commit" % path)
                bad = 1
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
            print("wrote %s" % path)
    return bad


if __name__ == "__main__":
    sys.exit(main())
