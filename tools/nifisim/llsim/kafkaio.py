"""Producing NiFi's events and reading loadledger's replies on the real broker."""
import os
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from . import avroframe
from .stack import read_env


def client_conf(conf):
    """conf plus the librdkafka settings in $LL_KAFKA_CLIENT_CONFIG, else in the one the env file of
    $LL_RUN_DIR names (a properties file: the secure environment's SASL_SSL user `nifi`,
    scripts/env_secure.sh); conf alone when neither is set."""
    path = os.environ.get("LL_KAFKA_CLIENT_CONFIG")
    if not path:
        try:
            path = read_env().get("LL_KAFKA_CLIENT_CONFIG")
        except OSError:
            path = None
    if path:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    k, v = line.split("=", 1)
                    conf[k.strip()] = v.strip()
    return conf

# logical topic -> (schema of its records)
SCHEMAS = {
    "run-requests": "RunRequest",
    "manifests": "Manifest",
    "partition-claims": "PartitionClaim",
    "chunks": "ChunkWritten",
    "partition-failures": "PartitionFailure",
    "run-decisions": "RunDecision",
    "manifest-decisions": "ManifestDecision",
    "claim-decisions": "ClaimDecision",
    "chunk-outcomes": "ChunkOutcome",
    "partition-failure-outcomes": "PartitionFailureOutcome",
    "validate-run-commands": "ValidateRunCommand",
    "reissue-partition-commands": "ReissuePartitionCommand",
}


class Nifi:
    """PublishKafka / ConsumeKafka as a NiFi flow would use them."""

    def __init__(self, bootstrap, prefix="loadledger."):
        self.bootstrap = bootstrap
        self.prefix = prefix
        self.producer = Producer(client_conf({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                              "linger.ms": 5}))

    def topic(self, logical):
        return self.prefix + logical

    def send(self, logical, record, key=None, framing="bare", schema=None, headers=None, raw=None):
        """Publishes one record (or raw bytes) keyed by its run id."""
        value = raw if raw is not None else avroframe.encode(record, schema or SCHEMAS[logical], framing)
        k = key if key is not None else (record or {}).get("runId")
        self.producer.produce(self.topic(logical), value=value, key=k.encode() if isinstance(k, str) else k,
                              headers=headers)
        self.producer.poll(0)

    def flush(self):
        assert self.producer.flush(30) == 0, "messages not delivered to the broker"

    def reader(self, logical, from_beginning=False):
        return Reader(self.bootstrap, self.topic(logical), SCHEMAS.get(logical), from_beginning)


class Reader:
    """A read_committed consumer of every partition of one topic, from its current end (or start)."""

    def __init__(self, bootstrap, topic, schema, from_beginning=False):
        self.topic = topic
        self.schema = schema
        self.consumer = Consumer(client_conf({"bootstrap.servers": bootstrap, "group.id": "llsim-" + str(uuid.uuid4()),
                                              "enable.auto.commit": False, "isolation.level": "read_committed"}))
        md = self.consumer.list_topics(topic, timeout=10)
        parts = []
        for p in md.topics[topic].partitions:
            lo, hi = self._watermarks(topic, p)
            parts.append(TopicPartition(topic, p, lo if from_beginning else hi))
        self.consumer.assign(parts)
        self.records = []

    def _watermarks(self, topic, p, attempts=40):
        """Low and high watermark; retried while a just-started broker is not yet leader."""
        for i in range(attempts):
            try:
                return self.consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            except KafkaException:
                if i == attempts - 1:
                    raise
                time.sleep(0.25)

    def _poll(self, timeout):
        m = self.consumer.poll(timeout)
        if m is None or m.error():
            return None
        rec = avroframe.decode(m.value(), self.schema) if self.schema else None
        entry = {"value": rec, "key": m.key(), "headers": dict(m.headers() or []), "raw": m.value(),
                 "partition": m.partition(), "offset": m.offset()}
        self.records.append(entry)
        return entry

    def drain(self, seconds=1.0):
        end = time.time() + seconds
        while time.time() < end:
            self._poll(0.2)
        return self.records

    def wait_for(self, pred, count=1, timeout=60):
        """Waits until `count` records satisfy pred; returns them."""
        end = time.time() + timeout
        while True:
            hits = [r for r in self.records if pred(r)]
            if len(hits) >= count:
                return hits
            if time.time() > end:
                raise TimeoutError("%s: %d of %d records after %ss" % (self.topic, len(hits), count, timeout))
            self._poll(0.5)

    def close(self):
        self.consumer.close()


def topic_offsets(bootstrap, topic):
    """High watermark of every partition of a topic."""
    c = Consumer(client_conf({"bootstrap.servers": bootstrap, "group.id": "llsim-offsets"}))
    md = c.list_topics(topic, timeout=10)
    out = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in md.topics[topic].partitions}
    c.close()
    return out
