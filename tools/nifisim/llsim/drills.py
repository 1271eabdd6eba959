"""Failure and concurrency drills: what the crash, replay, outage, concurrency and dispatcher
tests need beyond the main path.

- Isolated: a ledger database and a topic set of its own (every topic of config/topics.conf
  under a fresh prefix), consumer groups of its own, on the broker and PostgreSQL cluster of
  scripts/env.sh. A drill can then snapshot whole tables, replay whole topics and reset whole
  groups without meeting another test's rows or messages.
- Ledger snapshots (every table of nifi_ops, chosen columns left out) and their differences.
- Consumer-group offsets: committed, lag, reset to the earliest offsets.
- Raw readers with either isolation level, and producing to a chosen Kafka partition.
- The services' JSON log lines (assignments, events).
"""
import json
import os
import subprocess
import time
import uuid

import psycopg2
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from . import avroframe
from .avroframe import REPO
from .kafkaio import SCHEMAS
from .probe import topic_configs
from .stack import Stack

TOPICS_CONF = os.path.join(REPO, "config", "topics.conf")
CONSUMING = ("registrar", "claimer", "completion")


def wait_until(fn, timeout=60, what="condition", interval=0.2):
    """Calls fn until it returns something truthy; returns that, or raises TimeoutError."""
    end = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > end:
            raise TimeoutError("%s not reached after %ss" % (what, timeout))
        time.sleep(interval)


def read_topics_conf(path=TOPICS_CONF):
    """[(logical name, partitions)] of config/topics.conf (topic configs: probe.topic_configs())."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                out.append((line[0], int(line[1])))
    return out


class Isolated:
    """A ledger database, a topic prefix and consumer groups of one drill.

    stack is an llsim Stack whose services use them (kafka.group.id = <prefix><service>, so the
    transactional ids are <prefix><service>.<instance>); logs and configs go to
    $LL_RUN_DIR/drills/<name>_<random>/. close() stops what still runs and drops the database
    and the topics. pg: {"host", "port"} of another PostgreSQL cluster than the environment's
    (llsim.pitr.Cluster; it has a database named as the environment's, LL_PG_DB, to connect to).
    """

    def __init__(self, name, extra_topics=(), pg=None, stack_cls=Stack):
        self.tag = "%s_%s" % (name, uuid.uuid4().hex[:8])
        self.prefix = "drill.%s." % self.tag
        self.groups = {s: self.prefix + s for s in CONSUMING}
        extra = {s: {"kafka.group.id": g} for s, g in self.groups.items()}
        self.stack = stack_cls(prefix=self.prefix, extra=extra, **({"pg": pg} if pg else {}))
        self.bootstrap = self.stack.bootstrap
        self.dbname = "ll_" + self.tag.lower()
        base = self.stack.db()
        with base.cursor() as c:
            c.execute('CREATE DATABASE "%s"' % self.dbname)
        base.close()
        self.stack.pg["dbname"] = self.dbname
        d = os.path.join(self.stack.run_dir, "drills", self.tag)
        self.stack.conf_dir = os.path.join(d, "conf")
        self.stack.log_dir = os.path.join(d, "logs")
        os.makedirs(self.stack.conf_dir, exist_ok=True)
        os.makedirs(self.stack.log_dir, exist_ok=True)
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.topics = {logical: parts for logical, parts in read_topics_conf()}
        self.topics.update(dict(extra_topics))
        self._create_topics(self.topics)
        self.stack.migrate()

    def topic(self, logical):
        return self.prefix + logical

    def _create_topics(self, topics):
        conf = topic_configs()
        # replication -1: the broker's default.replication.factor (3 on the LL_KAFKA_BROKERS=3 cluster)
        new = [NewTopic(self.topic(t), num_partitions=n, replication_factor=-1, config=conf.get(t, {}))
               for t, n in topics.items()]
        for t, f in self.admin.create_topics(new, operation_timeout=30).items():
            f.result()
        # a new topic's partitions get their leader (and clients their metadata) a little later
        wait_until(lambda: all(self._ready(self.topic(t)) for t in topics), 30, "topics created")

    def _ready(self, topic):
        md = self.admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None or not md.partitions:
            return False
        if any(p.leader < 0 or p.error is not None for p in md.partitions.values()):
            return False
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "llsim-ready"})
        try:
            for p in md.partitions:
                c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            return True
        except Exception:  # noqa: BLE001 - not led yet
            return False
        finally:
            c.close()

    def close(self, drop=True):
        """Stops what still runs (returns their exit codes), drops the database and topics."""
        codes = self.stack.stop_all()
        if drop:
            # the stack's own conninfo (a multi-host one of the failover drill too), on "postgres"
            base = psycopg2.connect(self.stack.conninfo(), dbname="postgres")
            base.autocommit = True
            with base.cursor() as c:
                c.execute('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % self.dbname)
            base.close()
            fs = self.admin.delete_topics([self.topic(t) for t in self.topics], operation_timeout=30)
            for f in fs.values():
                try:
                    f.result()
                except Exception:  # noqa: BLE001 - best effort cleanup
                    pass
        return codes


# -- the ledger --------------------------------------------------------------------------------

def ledger_tables(cur):
    """The nifi_ops tables of the business ledger: not the migrations' bookkeeping, nor the
    consumer groups' read positions and the ranges they read again (consumer_position,
    position_rewind, issue 27: where each service is in its topics, which differs between two
    ledgers of the same business history), nor the sweepers' tick tokens (sweeper_instance, issue
    39), nor the refusals recorded by input offset for a replay to restate (input_refusal, issue 39:
    recorded again, later, when a restored ledger answers again), nor the consuming processes'
    instance leases (service_instance, issue 41: which process runs an instance, renewed while it
    runs)."""
    cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'nifi_ops'"
                " AND table_type = 'BASE TABLE' AND table_name NOT IN ('schema_migrations', 'alembic_version',"
                " 'consumer_position', 'position_rewind', 'sweeper_instance', 'input_refusal',"
                " 'service_instance')"
                " ORDER BY table_name")
    return [r[0] for r in cur.fetchall()]


def snapshot(cur, exclude=None, where=None):
    """{table: sorted [row dict]} of every nifi_ops table, without the columns in exclude
    ({table: {column}}); where ({table: (sql, args)}) restricts a table's rows."""
    exclude = exclude or {}
    out = {}
    for t in ledger_tables(cur):
        cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = 'nifi_ops'"
                    " AND table_name = %s ORDER BY ordinal_position", (t,))
        cols = [r[0] for r in cur.fetchall() if r[0] not in exclude.get(t, ())]
        sql, args = (where or {}).get(t, ("TRUE", ()))
        cur.execute("SELECT %s FROM nifi_ops.%s WHERE %s" % (", ".join('"%s"' % c for c in cols), t, sql), args)
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
        out[t] = sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
    return out


def primary_key(cur, table):
    """The primary-key columns of a nifi_ops table, in key order."""
    cur.execute("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid"
                " AND a.attnum = ANY(i.indkey) WHERE i.indrelid = ('nifi_ops.' || %s)::regclass"
                " AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)", (table,))
    return [r[0] for r in cur.fetchall()]


def ledger_digest(cur):
    """{table: SHA-256 hex} of every nifi_ops table: every row, every column (as PostgreSQL's text
    of the whole row), ordered by the primary key (every column when a table has none)."""
    out = {}
    for t in ledger_tables(cur):
        key = primary_key(cur, t) or ["t::text"]
        cur.execute("SELECT encode(sha256(convert_to(coalesce(string_agg(t::text, E'\\n' ORDER BY %s), ''),"
                    " 'UTF8')), 'hex') FROM nifi_ops.%s AS t" % (", ".join('t."%s"' % c if c != "t::text" else c
                                                                           for c in key), t))
        out[t] = cur.fetchone()[0]
    return out


def snapshot_diff(before, after):
    """Human-readable differences of two snapshots: [] when equal."""
    diffs = []
    for t in sorted(set(before) | set(after)):
        b = {json.dumps(r, sort_keys=True, default=str) for r in before.get(t, [])}
        a = {json.dumps(r, sort_keys=True, default=str) for r in after.get(t, [])}
        for r in sorted(b - a):
            diffs.append("%s: gone or changed: %s" % (t, r))
        for r in sorted(a - b):
            diffs.append("%s: new or changed: %s" % (t, r))
    return diffs


# -- Kafka -------------------------------------------------------------------------------------

def partitions_of(bootstrap, topic):
    a = AdminClient({"bootstrap.servers": bootstrap})
    return sorted(a.list_topics(topic, timeout=10).topics[topic].partitions)


def watermarks(bootstrap, topic):
    """{partition: (low, high)}."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "llsim-wm-" + uuid.uuid4().hex})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                for p in partitions_of(bootstrap, topic)}
    finally:
        c.close()


def committed(bootstrap, group, topics):
    """{(topic, partition): committed offset (negative: none)} of a consumer group. Reads only:
    the consumer never subscribes, so it does not join the group."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(t, p) for t in topics for p in partitions_of(bootstrap, t)]
        return {(tp.topic, tp.partition): tp.offset for tp in c.committed(tps, timeout=20)}
    finally:
        c.close()


def lag(bootstrap, group, topics):
    """Messages of the topics the group has not committed yet (a missing offset counts from the
    low watermark)."""
    com = committed(bootstrap, group, topics)
    total = 0
    for t in topics:
        for p, (lo, hi) in watermarks(bootstrap, t).items():
            off = com[(t, p)]
            total += hi - (off if off >= 0 else lo)
    return total


def reset_group(bootstrap, group, topics):
    """Commits the earliest offset of every partition of the topics for the group, as
    kafka-consumer-groups --reset-offsets --to-earliest does. The group must have no member (its
    services stopped): the broker refuses commits from outside a live generation otherwise."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = []
        for t in topics:
            for p, (lo, _hi) in watermarks(bootstrap, t).items():
                tps.append(TopicPartition(t, p, lo))
        c.commit(offsets=tps, asynchronous=False)
    finally:
        c.close()
    after = committed(bootstrap, group, topics)
    want = {(tp.topic, tp.partition): tp.offset for tp in tps}
    assert after == want, "reset of %s did not take: %s != %s" % (group, after, want)


class RawReader:
    """Every record of one topic from a given point, read with the chosen isolation level
    (kafkaio.Reader is read_committed only). Records as kafkaio.Reader keeps them."""

    def __init__(self, bootstrap, topic, logical=None, isolation="read_committed", from_beginning=True):
        self.topic = topic
        self.schema = SCHEMAS.get(logical) if logical else None
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "llsim-raw-" + uuid.uuid4().hex,
                                  "enable.auto.commit": False, "isolation.level": isolation})
        parts = []
        for p, (lo, hi) in watermarks(bootstrap, topic).items():
            parts.append(TopicPartition(topic, p, lo if from_beginning else hi))
        self.consumer.assign(parts)
        self.records = []

    def poll(self, timeout):
        m = self.consumer.poll(timeout)
        if m is None or m.error():
            return None
        rec = avroframe.decode(m.value(), self.schema) if self.schema and m.value() else None
        e = {"value": rec, "key": m.key(), "headers": dict(m.headers() or []), "raw": m.value(),
             "partition": m.partition(), "offset": m.offset()}
        self.records.append(e)
        return e

    def drain(self, seconds=1.0):
        end = time.time() + seconds
        while time.time() < end:
            self.poll(0.2)
        return self.records

    def wait_for(self, pred, count=1, timeout=60):
        end = time.time() + timeout
        while True:
            hits = [r for r in self.records if pred(r)]
            if len(hits) >= count:
                return hits
            if time.time() > end:
                raise TimeoutError("%s: %d of %d records after %ss" % (self.topic, len(hits), count, timeout))
            self.poll(0.3)

    def close(self):
        self.consumer.close()


def hold_run_row(stack, run_id, seconds, locked):
    """Holds the load_run row of run_id locked (SELECT ... FOR UPDATE in an open transaction, as
    an operator's psql session would) for `seconds`; sets the threading.Event `locked` once held."""
    c = stack.db()
    c.autocommit = False
    cur = c.cursor()
    cur.execute("SELECT 1 FROM nifi_ops.load_run WHERE run_id = %s FOR UPDATE", (run_id,))
    locked.set()
    time.sleep(seconds)
    c.rollback()
    c.close()


def send_to(nifi, logical, record, partition, key=None, framing="bare"):
    """Publishes one record to a chosen Kafka partition of a topic (key: the run id unless given)."""
    value = avroframe.encode(record, SCHEMAS[logical], framing)
    k = key if key is not None else record["runId"]
    nifi.producer.produce(nifi.topic(logical), value=value, key=k.encode(), partition=partition)
    nifi.producer.poll(0)


# -- the services' logs --------------------------------------------------------------------------

def log_lines(path):
    """The JSON lines of a service log (librdkafka's own lines are skipped)."""
    out = []
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("{"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except FileNotFoundError:
        pass
    return out


def assignment(path, topic=None):
    """The current assignment a consuming service last logged: {topic: [partitions]} (empty after
    a revocation), or None before its first assignment."""
    current = None
    for e in log_lines(path):
        if e.get("event") == "partitions_assigned":
            current = {t: sorted(ps) for t, ps in e.get("partitions", {}).items()}
        elif e.get("event") == "partitions_revoked":
            current = {}
    if current is not None and topic is not None:
        return current.get(topic, [])
    return current


def events(path, name):
    return [e for e in log_lines(path) if e.get("event") == name]


# -- the environment -----------------------------------------------------------------------------

def env_sh(stack, *args):
    """Runs scripts/env.sh for the stack's run folder (e.g. "stop", "pg"); returns its stderr."""
    env = dict(os.environ, LL_RUN_DIR=stack.run_dir)
    p = subprocess.run([os.path.join(REPO, "scripts", "env.sh")] + list(args), env=env, capture_output=True,
                       text=True, timeout=180)
    assert p.returncode == 0, "env.sh %s failed: %s" % (" ".join(args), p.stderr)
    return p.stderr


def pg_ready(stack):
    try:
        psycopg2.connect(host=stack.pg["host"], port=stack.pg["port"], dbname="postgres", user="postgres",
                         connect_timeout=3).close()
        return True
    except psycopg2.OperationalError:
        return False


# -- loadctl verify ------------------------------------------------------------------------------

def loadctl_verify(iso, *extra):
    """Runs `loadctl verify --topics --json` on a drill's database and topics; returns (exit code,
    {check name: check object}). 0 all hold, 5 a violation; a run that could not check at all
    (exit 1, 3 or 4) fails at once."""
    conf = os.path.join(iso.stack.conf_dir, "verify.conf")
    with open(conf, "w") as f:
        f.write("kafka.bootstrap.servers = %s\ntopic.prefix = %s\n" % (iso.bootstrap, iso.prefix))
    p = iso.stack.loadctl("verify", "--topics", "--config", conf, "--timeout", "PT60S", "--json", *extra,
                          check=False)
    assert p.returncode in (0, 5), "verify failed to run: rc %d, %s %s" % (p.returncode, p.stdout, p.stderr)
    assert p.stdout.strip(), "verify printed nothing: rc %d, stderr %s" % (p.returncode, p.stderr)
    doc = json.loads(p.stdout)
    assert doc["ok"] == (p.returncode == 0)
    return p.returncode, {c["name"]: c for c in doc["checks"]}


def loadctl_topics(iso, *args, check_rc=None):
    """Runs a loadctl command that reads the topics (dead-letters, redrive) against a drill's
    broker and prefix with --json; returns (exit code, parsed JSON object). check_rc: the exit
    code expected (asserted with the output in the message)."""
    conf = os.path.join(iso.stack.conf_dir, "topics.conf")
    with open(conf, "w") as f:
        f.write("kafka.bootstrap.servers = %s\ntopic.prefix = %s\n" % (iso.bootstrap, iso.prefix))
    p = iso.stack.loadctl(*args, "--config", conf, "--json", check=False)
    if check_rc is not None:
        assert p.returncode == check_rc, "loadctl %s: rc %d, %s %s" % (args, p.returncode, p.stdout, p.stderr)
    assert p.stdout.strip(), "loadctl %s printed nothing: rc %d, stderr %s" % (args, p.returncode, p.stderr)
    return p.returncode, json.loads(p.stdout)
