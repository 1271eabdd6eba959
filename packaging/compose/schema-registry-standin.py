#!/usr/bin/python3
"""A STAND-IN for confluentinc/cp-schema-registry where no image registry is reachable
(packaging/compose/schema-registry.Dockerfile, scripts/compose-check.sh): NOT Confluent's Schema
Registry, but the documented Confluent REST endpoints the services and NiFi's
ConfluentSchemaRegistry use (those of tests/registry_standin.py, without its fault injection),
configured from the official image's variables and, like it, keeping its schemas in Kafka, so
that they outlive the container as the topics do:

    SCHEMA_REGISTRY_HOST_NAME                      required (the official image refuses to start without it)
    SCHEMA_REGISTRY_LISTENERS                      http://0.0.0.0:8081
    SCHEMA_REGISTRY_KAFKASTORE_BOOTSTRAP_SERVERS   required; PLAINTEXT://host:port[,...] or host:port
    SCHEMA_REGISTRY_KAFKASTORE_TOPIC               _schemas (one partition, cleanup.policy=compact)
    SCHEMA_REGISTRY_KAFKASTORE_TOPIC_REPLICATION_FACTOR  3, lowered to the brokers there are
    SCHEMA_REGISTRY_SCHEMA_COMPATIBILITY_LEVEL     backward (reported by GET /config; not enforced)

Each registration is a record of the store topic written (acks=all) before it is answered, with
the registry's own key and value layout ({"keytype": "SCHEMA", "subject", "version", "magic": 1}
-> {"subject", "version", "id", "schema", "deleted": false}); at start the topic is read to its
end. Endpoints: GET /schemas/ids/{id}, POST /subjects/{s}/versions, POST /subjects/{s} (lookup),
GET /subjects, GET /subjects/{s}/versions[/{n}|/latest], GET /config.
"""
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def env(name, default=None):
    v = os.environ.get("SCHEMA_REGISTRY_" + name, default)
    if v is None:
        sys.exit("schema-registry stand-in: SCHEMA_REGISTRY_%s is required" % name)
    return v


HOST = env("HOST_NAME")
BOOTSTRAP = ",".join(re.sub(r"^[A-Za-z_]+://", "", b.strip()) for b in env("KAFKASTORE_BOOTSTRAP_SERVERS").split(","))
TOPIC = env("KAFKASTORE_TOPIC", "_schemas")
RF = int(env("KAFKASTORE_TOPIC_REPLICATION_FACTOR", "3"))
COMPAT = env("SCHEMA_COMPATIBILITY_LEVEL", "backward").upper()
LISTEN = urlparse(env("LISTENERS", "http://0.0.0.0:8081").split(",")[0])


def canon(text):
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return None


class Store:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_id, self.subjects, self.next_id = {}, {}, 1
        self.producer = None

    def apply(self, value):
        v = json.loads(value)
        if v.get("deleted"):
            return
        self.by_id[v["id"]] = v["schema"]
        versions = self.subjects.setdefault(v["subject"], [])
        if v["id"] not in versions:
            versions.append(v["id"])
        self.next_id = max(self.next_id, v["id"] + 1)

    def start(self):
        admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
        deadline = time.time() + 120
        while True:  # the broker may still be starting
            try:
                md = admin.list_topics(timeout=10)
                break
            except KafkaException as e:
                if time.time() > deadline:
                    raise
                print("schema-registry stand-in: waiting for Kafka: %s" % e, file=sys.stderr, flush=True)
                time.sleep(2)
        if TOPIC not in md.topics:
            rf = max(1, min(RF, len(md.brokers)))
            fut = admin.create_topics([NewTopic(TOPIC, 1, rf, config={"cleanup.policy": "compact"})])[TOPIC]
            try:
                fut.result(30)
            except KafkaException as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e):
                    raise
        cons = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "schema-registry-" + HOST,
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
        tp = TopicPartition(TOPIC, 0, 0)
        deadline = time.time() + 60
        while True:  # a topic just created may not be known to the broker's metadata yet
            try:
                end = cons.get_watermark_offsets(tp, timeout=10)[1]
                break
            except KafkaException:
                if time.time() > deadline:
                    raise
                time.sleep(1)
        cons.assign([tp])
        n = 0
        while n < end:
            for msg in cons.consume(500, 2):
                if msg.error():
                    raise KafkaException(msg.error())
                if msg.value():
                    self.apply(msg.value())
                n = msg.offset() + 1
        cons.close()
        self.producer = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "enable.idempotence": True})
        print("schema-registry stand-in: %d schemas, %d subjects read from %s (%d records)"
              % (len(self.by_id), len(self.subjects), TOPIC, end), file=sys.stderr, flush=True)

    def register(self, subject, text):
        c = canon(text)
        if c is None:
            return None
        with self.lock:
            versions = self.subjects.get(subject, [])
            if any(canon(self.by_id[i]) == c for i in versions):
                return next(i for i in versions if canon(self.by_id[i]) == c)
            sid = next((i for i, t in self.by_id.items() if canon(t) == c), None) or self.next_id
            version = len(versions) + 1
            key = {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}
            value = {"subject": subject, "version": version, "id": sid, "schema": text, "deleted": False}
            err = []
            self.producer.produce(TOPIC, json.dumps(value).encode(), json.dumps(key).encode(), partition=0,
                                  on_delivery=lambda e, m: e and err.append(e))
            if self.producer.flush(30) or err:
                raise KafkaException(err[0] if err else "store write not acknowledged")
            self.apply(json.dumps(value))
            return sid


STORE = Store()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, code, message):
        self.reply(status, {"error_code": code, "message": message})

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/") or "/"
        if path == "/":
            return self.reply(200, {})
        if path == "/config":
            return self.reply(200, {"compatibilityLevel": COMPAT})
        m = re.fullmatch(r"/schemas/ids/(\d+)", path)
        if m:
            text = STORE.by_id.get(int(m.group(1)))
            if text is None:
                return self.error(404, 40403, "Schema %s not found" % m.group(1))
            return self.reply(200, {"schema": text})
        if path == "/subjects":
            return self.reply(200, sorted(STORE.subjects))
        m = re.fullmatch(r"/subjects/([^/]+)/versions(?:/(latest|\d+))?", path)
        if m:
            versions = STORE.subjects.get(m.group(1))
            if versions is None:
                return self.error(404, 40401, "Subject '%s' not found." % m.group(1))
            if m.group(2) is None:
                return self.reply(200, list(range(1, len(versions) + 1)))
            v = len(versions) if m.group(2) == "latest" else int(m.group(2))
            if not 1 <= v <= len(versions):
                return self.error(404, 40402, "Version %s not found." % m.group(2))
            sid = versions[v - 1]
            return self.reply(200, {"subject": m.group(1), "version": v, "id": sid, "schema": STORE.by_id[sid]})
        return self.error(404, 404, "HTTP 404 Not Found")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        try:
            req = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            return self.error(422, 42201, "Invalid JSON")
        path = self.path.split("?")[0]
        m = re.fullmatch(r"/subjects/([^/]+)(/versions)?", path)
        if not m:
            return self.error(404, 404, "HTTP 404 Not Found")
        if req.get("schemaType", "AVRO") != "AVRO" or not isinstance(req.get("schema"), str):
            return self.error(422, 42201, "Invalid schema")
        subject = m.group(1)
        if m.group(2):
            try:
                sid = STORE.register(subject, req["schema"])
            except KafkaException as e:
                return self.error(500, 50001, "Error while registering schema: %s" % e)
            if sid is None:
                return self.error(422, 42201, "Invalid schema")
            return self.reply(200, {"id": sid})
        c = canon(req["schema"])
        for v, sid in enumerate(STORE.subjects.get(subject, []), 1):
            if canon(STORE.by_id[sid]) == c:
                return self.reply(200, {"subject": subject, "version": v, "id": sid, "schema": STORE.by_id[sid]})
        return self.error(404, 40403, "Schema not found")


def main():
    STORE.start()
    srv = ThreadingHTTPServer((LISTEN.hostname or "0.0.0.0", LISTEN.port or 8081), Handler)
    srv.daemon_threads = True
    print("schema-registry stand-in %s listening on %s" % (HOST, LISTEN.geturl()), file=sys.stderr, flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
