"""Helpers of the integration tests: exact request/reply correlation, dead letters, raw Avro
bytes, older schema versions, and side stacks of services on topics of their own (other value
framings, another consumer group) so that they never touch the shared default topics.

Correlation: every reply carries sourceTopic / sourcePartition / sourceOffset of the request it
answers (kafka-edition.md section 4), and every dead letter carries ll.source.* headers, so a
test waits for the answer to exactly the message it produced, never for "some reply of the run".
"""
import json
import os
import time

import avro.io
import avro.schema
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from . import avroframe
from .avroframe import REPO
from .kafkaio import SCHEMAS

# input topic -> its reply topic
REPLY_OF = {
    "run-requests": "run-decisions",
    "manifests": "manifest-decisions",
    "partition-claims": "claim-decisions",
    "chunks": "chunk-outcomes",
    "partition-failures": "partition-failure-outcomes",
}

DEAD_LETTER_HEADERS = ("ll.error.code", "ll.error.message", "ll.source.topic", "ll.source.partition",
                       "ll.source.offset", "ll.service", "ll.dead_at")


class Sent:
    """One produced message and where the broker put it."""

    def __init__(self, logical, topic, key, value, partition=None, offset=None, record=None):
        self.logical, self.topic, self.key, self.value = logical, topic, key, value
        self.partition, self.offset, self.record = partition, offset, record

    def __repr__(self):
        return "Sent(%s[%s]@%s key=%s)" % (self.topic, self.partition, self.offset, self.key)


# -- schemas and raw bytes ------------------------------------------------------------------------
def parse_schema(obj):
    """An avro schema from a JSON-able dict (for older / newer versions built in a test)."""
    return avro.schema.parse(json.dumps(obj))


def schema_without(name, *fields):
    """schemas/avro/<name>.avsc as JSON with the named fields removed (an older writer version)."""
    s = avroframe.schema_json(name)
    s["fields"] = [f for f in s["fields"] if f["name"] not in fields]
    return s


def schema_with(name, *extra_fields):
    """schemas/avro/<name>.avsc as JSON with extra fields appended (a newer writer version)."""
    s = avroframe.schema_json(name)
    s["fields"] = s["fields"] + list(extra_fields)
    return s


def zigzag(n):
    """Avro's zig-zag varint of a (possibly negative, possibly huge) long."""
    return avroframe._zigzag(n)


def avro_string(s):
    b = s.encode() if isinstance(s, str) else s
    return zigzag(len(b)) + b


def write_ids_file(path, table):
    """A local id -> .avsc table for the Confluent framing: table maps id to a schema path or a
    schema dict (written next to the table as <id>.avsc). Returns the table's path."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    out = {}
    for sid, sch in table.items():
        if isinstance(sch, dict):
            p = os.path.join(os.path.dirname(path), "schema-%s.avsc" % sid)
            with open(p, "w") as f:
                json.dump(sch, f, indent=1)
            sch = p
        elif not sch.endswith(".avsc"):
            sch = os.path.join(avroframe.SCHEMA_DIR, sch + ".avsc")
        out[str(sid)] = os.path.abspath(sch)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    return path


def encode(record, sch, framing="bare", schema_id=1):
    """avroframe.encode, accepting a schema dict as well."""
    if isinstance(sch, dict):
        sch = parse_schema(sch)
    return avroframe.encode(record, sch, framing, schema_id)


# -- producing with coordinates ------------------------------------------------------------------
def post_many(nifi, items):
    """Produces several messages and waits for the broker's acknowledgement of each.

    items: dicts with logical, and record (+ framing, schema, schema_id) or raw; optional key,
    headers. Returns one Sent per item, in order, with partition and offset filled."""
    sent = []
    for it in items:
        logical = it["logical"]
        record = it.get("record")
        if "raw" in it:
            value = it["raw"]
        else:
            value = encode(record, it.get("schema") or SCHEMAS[logical], it.get("framing", "bare"),
                           it.get("schema_id", 1))
        key = it.get("key", (record or {}).get("runId"))
        s = Sent(logical, nifi.topic(logical), key, value, record=record)

        def cb(err, msg, s=s):
            if err is None:
                s.partition, s.offset = msg.partition(), msg.offset()

        nifi.producer.produce(s.topic, value=value, key=key.encode() if isinstance(key, str) else key,
                              headers=it.get("headers"), on_delivery=cb)
        nifi.producer.poll(0)
        sent.append(s)
    assert nifi.producer.flush(30) == 0, "messages not delivered to the broker"
    assert all(s.offset is not None for s in sent), "a message was not acknowledged: %s" % sent
    return sent


def post(nifi, logical, record=None, **kw):
    """Produces one message (see post_many); returns its Sent."""
    return post_many(nifi, [dict(kw, logical=logical, record=record)])[0]


# -- answers ---------------------------------------------------------------------------------------
def answer(flow, sent, timeout=45):
    """The reply to exactly this message (matched on its source coordinates)."""
    reader = flow.r[REPLY_OF[sent.logical]]
    hit = reader.wait_for(lambda r: r["value"]["sourceTopic"] == sent.topic and
                          r["value"]["sourcePartition"] == sent.partition and
                          r["value"]["sourceOffset"] == sent.offset, timeout=timeout)
    return hit[0]["value"]


def answers(flow, sent_list, timeout=45):
    return [answer(flow, s, timeout) for s in sent_list]


def ask(flow, logical, record=None, **kw):
    """Produces one message and returns its reply."""
    return answer(flow, post(flow.nifi, logical, record, **kw))


def ask_many(flow, logical, records, **kw):
    """Produces several messages of one topic (in order) and returns their replies in order."""
    sent = post_many(flow.nifi, [dict(kw, logical=logical, record=r) for r in records])
    return answers(flow, sent)


def replies_to(flow, sent):
    """Every reply already read for this message (to prove there was exactly one, or none)."""
    reader = flow.r[REPLY_OF[sent.logical]]
    return [r["value"] for r in reader.records
            if r["value"]["sourceTopic"] == sent.topic and r["value"]["sourcePartition"] == sent.partition
            and r["value"]["sourceOffset"] == sent.offset]


def header(rec, name):
    v = rec["headers"].get(name)
    return v.decode() if isinstance(v, bytes) else v


def dead_letter(reader, sent, timeout=45):
    """The dead-letter record of exactly this message (matched on its ll.source.* headers)."""
    hit = reader.wait_for(lambda r: header(r, "ll.source.topic") == sent.topic and
                          header(r, "ll.source.partition") == str(sent.partition) and
                          header(r, "ll.source.offset") == str(sent.offset), timeout=timeout)
    return hit[0]


def dead_letters_of(reader, sent):
    return [r for r in reader.records
            if header(r, "ll.source.topic") == sent.topic and header(r, "ll.source.partition") == str(sent.partition)
            and header(r, "ll.source.offset") == str(sent.offset)]


# -- logs ------------------------------------------------------------------------------------------
def log_size(stack, instance):
    p = stack.log_path(instance)
    return os.path.getsize(p) if os.path.exists(p) else 0


def wait_log(stack, instance, event, since=0, timeout=60, pred=None):
    """Waits for a JSON log line of `event` (after byte offset `since`); returns it parsed."""
    end = time.time() + timeout
    path = stack.log_path(instance)
    while True:
        if os.path.exists(path):
            with open(path, "rb") as f:
                f.seek(since)
                for line in f.read().decode(errors="replace").splitlines():
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        continue
                    if rec.get("event") == event and (pred is None or pred(rec)):
                        return rec
        if instance in stack.procs and not stack.alive(instance):
            raise AssertionError("%s exited while waiting for %s; log %s" % (instance, event, path))
        if time.time() > end:
            raise TimeoutError("%s: no '%s' log line within %ss (%s)" % (instance, event, timeout, path))
        time.sleep(0.1)


def log_events(stack, instance, event, since=0):
    """Every JSON log line of `event` after byte offset `since`."""
    out = []
    path = stack.log_path(instance)
    if not os.path.exists(path):
        return out
    with open(path, "rb") as f:
        f.seek(since)
        for line in f.read().decode(errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("event") == event:
                out.append(rec)
    return out


# -- side stacks: services on topics of their own --------------------------------------------------
def logical_topics():
    """The logical topic names and partition counts of config/topics.conf."""
    out = []
    with open(os.path.join(REPO, "config", "topics.conf")) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if len(line) >= 2:
                out.append((line[0], int(line[1])))
    return out


def topic_configs():
    """{logical name: {topic config: value}} of config/topics.conf (e.g. the dead-letter topic's
    max.message.bytes), for topics created outside scripts/env.sh."""
    out = {}
    with open(os.path.join(REPO, "config", "topics.conf")) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if len(line) > 2:
                out[line[0]] = dict(c.split("=", 1) for c in line[2:])
    return out


def ensure_topics(bootstrap, prefix, timeout=30):
    """Creates <prefix><logical> for every topic of config/topics.conf that does not exist yet."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=10).topics
    conf = topic_configs()  # e.g. the dead-letter topic's max.message.bytes
    new = [NewTopic(prefix + t, num_partitions=n, replication_factor=1, config=conf.get(t, {}))
           for t, n in logical_topics() if prefix + t not in existing]
    if new:
        for name, fut in admin.create_topics(new).items():
            try:
                fut.result(timeout)
            except KafkaException as e:
                if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
                    raise
    end = time.time() + timeout
    want = {prefix + t: n for t, n in logical_topics()}
    while True:
        md = admin.list_topics(timeout=10).topics
        if all(t in md and len(md[t].partitions) == n and all(p.leader >= 0 for p in md[t].partitions.values())
               for t, n in want.items()) and _watermarks_ready(bootstrap, want):
            return
        if time.time() > end:
            raise TimeoutError("topics with prefix %s not ready" % prefix)
        time.sleep(0.2)


def _watermarks_ready(bootstrap, topics):
    """Every partition of the topics answers a watermark query (its leader is serving)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "llsim-topics"})
    try:
        for t, n in topics.items():
            for p in range(n):
                c.get_watermark_offsets(TopicPartition(t, p), timeout=5)
        return True
    except KafkaException:
        return False
    finally:
        c.close()


def start_sides(stack, services, tag, settings=None):
    """Starts services of a side stack: instance <service>-<tag>, consumer group
    loadledger.<service>.<tag>, all at once, then waits until each group has assigned its member
    its partitions (so nothing produced afterwards can be missed). Returns the instance names."""
    started = []
    for service in services:
        instance = "%s-%s" % (service, tag)
        conf = {"kafka.group.id": "loadledger.%s.%s" % (service, tag)}
        conf.update(settings or {})
        since = log_size(stack, instance)
        stack.start(service, instance=instance, settings=conf)
        started.append((service, instance, since))
    for service, instance, since in started:
        if service != "dispatcher":
            wait_log(stack, instance, "partitions_assigned", since=since,
                     pred=lambda r: not r.get("msg", "").startswith("assigned 0 "))
    return [i for _, i, _ in started]


def start_side(stack, service, tag, settings=None):
    """start_sides for one service."""
    return start_sides(stack, [service], tag, settings)[0]


def stop_checked(stack):
    """Stops every service of a stack; returns the non-zero exit codes (sanitizer reports...)."""
    codes = stack.stop_all()
    return {k: v for k, v in codes.items() if v != 0}


# -- scenario steps --------------------------------------------------------------------------------
def admit_many(flow, runs, claims=None, manifest_over=None):
    """Run request, manifest and (optionally) claims for several runs at once, each step sent for
    every run before waiting. claims: run -> partition ids to claim (default none). Asserts every
    step was accepted; returns {run_id: {"run": ..., "manifest": ..., "claims": {pid: reply}}}."""
    out = {r.run_id: {"claims": {}} for r in runs}
    sent = post_many(flow.nifi, [dict(logical="run-requests", record=r.run_request()) for r in runs])
    for r, a in zip(runs, answers(flow, sent)):
        assert a["outcome"] == "ACCEPTED" and a["runStatus"] == "CREATED", a
        out[r.run_id]["run"] = a
    over = manifest_over or {}
    sent = post_many(flow.nifi, [dict(logical="manifests", record=r.manifest(**over.get(r.run_id, {})))
                                 for r in runs])
    for r, a in zip(runs, answers(flow, sent)):
        assert a["outcome"] == "ACCEPTED", a
        out[r.run_id]["manifest"] = a
    todo = [(r, pid) for r in runs for pid in (claims or {}).get(r.run_id, ())]
    if todo:
        sent = post_many(flow.nifi, [dict(logical="partition-claims", record=r.claim(pid)) for r, pid in todo])
        for (r, pid), a in zip(todo, answers(flow, sent)):
            assert a["outcome"] == "ACCEPTED" and a["claimed"], a
            out[r.run_id]["claims"][pid] = a
    return out


def admit(flow, run, claim=(), **manifest_over):
    """admit_many for one run: returns {"run", "manifest", "claims"}."""
    return admit_many(flow, [run], {run.run_id: claim}, {run.run_id: manifest_over})[run.run_id]


# -- replies written in other framings ---------------------------------------------------------------
class FramedReader:
    """kafkaio.Reader for a reply topic written in another framing (topic.<logical>.framing);
    each entry also keeps the Confluent schema id when there is one."""

    def __init__(self, bootstrap, topic, schema, framing="bare"):
        from .kafkaio import Reader

        class _R(Reader):
            def _poll(inner, timeout):
                m = inner.consumer.poll(timeout)
                if m is None or m.error():
                    return None
                v = m.value()
                rec = avroframe.decode(v, inner.schema, framing) if inner.schema else None
                entry = {"value": rec, "key": m.key(), "headers": dict(m.headers() or []), "raw": v,
                         "partition": m.partition(), "offset": m.offset(),
                         "schema_id": int.from_bytes(v[1:5], "big") if framing == "confluent" and v else None}
                inner.records.append(entry)
                return entry

        self._r = _R(bootstrap, topic, schema)

    def __getattr__(self, name):
        return getattr(self._r, name)


class FramedFlow:
    """The reply readers of a side stack (same shape as flow.Flow for answer()/ask())."""

    def __init__(self, nifi, framings=None, topics=tuple(REPLY_OF.values()) + ("validate-run-commands",)):
        self.nifi = nifi
        self.r = {t: FramedReader(nifi.bootstrap, nifi.topic(t), SCHEMAS[t], (framings or {}).get(t, "bare"))
                  for t in topics}

    def close(self):
        for r in self.r.values():
            r.close()
