"""The shared pieces of the loadledger flow: parameters, controller services, the event publisher
(UpdateAttribute -> ReplaceText -> PublishKafka), the Wait of a request, the alerts, a run failure."""
from contract import REPLY_OF, SIGNAL_FIELDS, TOPIC_SCHEMA, schema_text
from model import Flow, Group

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
CONVERT = "org.apache.nifi.processors.standard.ConvertRecord"


class BuilderBase:
    """The loadledger flow of one variant ("registry" or "embedded"): its parameters, its controller
    services and the pieces every step is made of (an event publisher, a Wait, a run failure)."""

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
                comments="Embed Avro Schema: a container file per FlowFile, by ConvertRecord (the services' "
                         "topic.<t>.framing = container). "
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
        """UpdateAttribute (schema, attrs) -> ReplaceText (the record as JSON) -> PublishKafka (Avro; the
        embedded variant converts to an Avro container file with ConvertRecord first).
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
        common = {"Kafka Connection Service": self.kafka, "Topic Name": self.topic(topic),
                  "Failure Strategy": "Route to Failure", "acks": "all", "compression.type": "none",
                  "Transactions Enabled": "true", "Transactional ID Prefix": self.P["prefix"] + "nifi."}
        doc = "Transactional, acks=all, keyed by runId (README, 'Plugging in a NiFi flow'). "
        if self.variant == "registry":
            # one message per record, each with the Confluent header (the writer writes it per record)
            pub = g.processor("Publish %s" % name, PUBLISH, dict(common, **{
                "Record Reader": self.json_reader, "Record Writer": self.avro_writer,
                "Publish Strategy": "USE_VALUE", "Message Key Field": "runId"}),
                retry=["failure"], col=col, comments=doc + comments)
        else:
            # PublishKafka's record path would send headerless blocks (it clears its buffer after the
            # writer wrote the container header): the record becomes a whole container file first,
            # and the FlowFile's content is the message
            avro = g.processor("%s as Avro" % name, CONVERT, {
                "Record Reader": self.json_reader, "Record Writer": self.avro_writer,
                "Include Zero Record FlowFiles": "false"}, col=col,
                comments="One Avro container file with the schema embedded (the services' framing container).")
            g.connect(prev, avro, ["success"])
            g.connect(avro, self.alerts(g), ["failure"])
            prev = avro
            pub = g.processor("Publish %s" % name, PUBLISH, dict(common, **{"Kafka Key": "${ll.run.id}"}),
                              retry=["failure"], col=col, comments=doc + "The content is the message. " + comments)
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

