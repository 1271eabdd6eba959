#!/usr/bin/python3
"""Kafka helper for scripts/env.sh: wait for the broker, create the project's topics, warm up.

Runs with Debian's /usr/bin/python3 and python3-confluent-kafka (1.7.0 on librdkafka 2.0.2).
Messages go to stderr, prefixed "ll_kafka_admin:". Exit codes: 0 ok, 1 failure, 2 usage.

  wait     --bootstrap B [--timeout S] [--pid PID] [--brokers N]
                                                     until the broker answers metadata (N brokers)
  topics   --bootstrap B --file topics.conf [--prefix P] [--reset]
  warmup   --bootstrap B                             create __consumer_offsets/__transaction_state
  check    --bootstrap B                             transactional produce + read_committed consume
"""

import argparse
import os
import sys
import time
import uuid

try:
    from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic
except ImportError as exc:  # pragma: no cover - environment problem
    print("ll_kafka_admin: cannot import confluent_kafka (%s): install python3-confluent-kafka "
          "(scripts/env.sh install) and run with /usr/bin/python3" % exc, file=sys.stderr)
    sys.exit(1)


def log(msg):
    print("ll_kafka_admin: " + msg, file=sys.stderr, flush=True)


def client_conf(conf):
    """conf plus the settings of $LL_KAFKA_CLIENT_CONFIG (a librdkafka properties file: the secure
    mode's SASL_SSL user, scripts/env_secure.sh), if set."""
    path = os.environ.get("LL_KAFKA_CLIENT_CONFIG")
    if path:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    k, v = line.split("=", 1)
                    conf[k.strip()] = v.strip()
    return conf


def admin(bootstrap):
    return AdminClient(client_conf({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000,
                                    "log_level": 0}))


def read_topics_conf(path):
    """Lines '<logical-name> <partitions> [<config>=<value> ...]', '#' starts a comment, blank
    lines ignored. Returns [(name, partitions, {config: value})]."""
    topics = []
    with open(path, encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            configs = dict(c.split("=", 1) for c in parts[2:] if "=" in c.strip("="))
            if (len(parts) < 2 or not parts[1].isdigit() or int(parts[1]) < 1
                    or len(configs) != len(parts) - 2):
                raise ValueError("%s:%d: expected '<logical-name> <partitions> [<config>=<value> ...]',"
                                 " got %r" % (path, lineno, raw.rstrip("\n")))
            topics.append((parts[0], int(parts[1]), configs))
    return topics


def topic_configs(a, names):
    """{topic: {config: ConfigEntry}} of the named topics as the broker describes them."""
    res = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in names]
    return {r.name: fut.result() for r, fut in a.describe_configs(res, request_timeout=30).items()}


def correct_configs(a, wanted_configs, names):
    """Sets the topic configs of topics.conf on existing topics whose values differ (a topic made
    before the line had them). Returns the names corrected."""
    todo = {n: c for n, c in wanted_configs.items() if c and n in names}
    if not todo:
        return []
    have = topic_configs(a, list(todo))
    fix = [n for n, c in todo.items()
           if any(k not in have[n] or have[n][k].value != v for k, v in c.items())]
    for n in fix:
        # AlterConfigs replaces every dynamic config of the topic: keep the others it has.
        merged = {k: e.value for k, e in have[n].items()
                  if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
        merged.update(todo[n])
        res = ConfigResource(ConfigResource.Type.TOPIC, n, set_config=merged)
        for _, fut in a.alter_configs([res], request_timeout=30).items():
            fut.result()
        log("%s: set %s" % (n, ", ".join("%s=%s" % kv for kv in sorted(todo[n].items()))))
    return fix


def cmd_wait(args):
    deadline = time.monotonic() + args.timeout
    last = "no answer yet"
    a = None
    while time.monotonic() < deadline:
        if args.pid:
            try:
                os.kill(args.pid, 0)
            except ProcessLookupError:
                log("broker process %d exited while starting" % args.pid)
                return 1
            except PermissionError:
                pass
        try:
            if a is None:
                a = admin(args.bootstrap)
            md = a.list_topics(timeout=3)
            if len(md.brokers) >= args.brokers:
                return 0
            last = "metadata with %d of %d brokers" % (len(md.brokers), args.brokers)
        except KafkaException as exc:
            last = str(exc)
        time.sleep(0.5)
    log("broker %s did not answer within %ds (%s)" % (args.bootstrap, args.timeout, last))
    return 1


def existing_topics(a):
    return a.list_topics(timeout=10).topics


def offsets_answer(consumer, name, meta):
    """True when every partition of the topic answers a watermark-offsets request."""
    from confluent_kafka import TopicPartition
    try:
        for p in meta.partitions:
            consumer.get_watermark_offsets(TopicPartition(name, p), timeout=5)
        return True
    except KafkaException:
        return False


def cmd_topics(args):
    try:
        conf = read_topics_conf(args.file)
    except (OSError, ValueError) as exc:
        log(str(exc))
        return 1
    wanted = [(args.prefix + name, parts) for name, parts, _ in conf]
    wanted_configs = {args.prefix + name: configs for name, _, configs in conf}
    a = admin(args.bootstrap)
    names = [n for n, _ in wanted]

    if args.reset:
        present = [n for n in names if n in existing_topics(a)]
        if present:
            for name, fut in a.delete_topics(present, operation_timeout=30).items():
                try:
                    fut.result()
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                        log("delete %s: %s" % (name, exc))
                        return 1
            deadline = time.monotonic() + 60
            while any(n in existing_topics(a) for n in present):
                if time.monotonic() > deadline:
                    log("deleted topics still listed after 60 s")
                    return 1
                time.sleep(0.3)
            log("deleted %d topic(s)" % len(present))

    created, kept = [], []
    deadline = time.monotonic() + 60
    todo = dict(wanted)
    while todo:
        present = existing_topics(a)
        for name in [n for n in todo if n in present]:
            kept.append((name, todo.pop(name), len(present[name].partitions)))
        # replication -1: the broker's default.replication.factor (1 for the single broker, 3 for
        # the LL_KAFKA_BROKERS=3 cluster: scripts/kafka/*.properties.in)
        new = [NewTopic(n, num_partitions=p, replication_factor=-1, config=wanted_configs[n])
               for n, p in todo.items()]
        if new:
            for name, fut in a.create_topics(new, operation_timeout=30).items():
                try:
                    fut.result()
                    created.append(name)
                    del todo[name]
                except KafkaException as exc:
                    err = exc.args[0]
                    # Already there: created concurrently (seen on the next pass) or still
                    # being deleted after a reset (retry until it is gone).
                    if err.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        log("create %s: %s" % (name, err))
                        return 1
        if todo:
            if time.monotonic() > deadline:
                log("could not create %s within 60 s" % ", ".join(todo))
                return 1
            time.sleep(0.5)

    # Metadata may lag a little behind CreateTopics, and a leader in the metadata may not answer
    # offset requests yet: wait until every partition of every topic does (a loaded machine may
    # need a while; the wait ends as soon as they answer).
    from confluent_kafka import Consumer
    probe = Consumer(client_conf({"bootstrap.servers": args.bootstrap, "group.id": "ll-env-ready"}))
    deadline = time.monotonic() + 180
    ready = set()
    while True:
        present = existing_topics(a)
        for n in names:
            if n in ready or n not in present or any(p.leader < 0 for p in present[n].partitions.values()):
                continue
            if offsets_answer(probe, n, present[n]):
                ready.add(n)
        missing = [n for n in names if n not in ready]
        if not missing:
            probe.close()
            break
        if time.monotonic() > deadline:
            probe.close()
            log("topics without answering leaders after 180 s: %s" % ", ".join(missing))
            return 1
        time.sleep(0.2)

    try:
        correct_configs(a, wanted_configs, [n for n, _, _ in kept])
    except KafkaException as exc:
        log("topic configs: %s" % exc)
        return 1
    for name, want, have in kept:
        if want != have:
            log("warning: %s has %d partitions, topics.conf says %d (recreate it with "
                "'scripts/env.sh topics --reset')" % (name, have, want))
    log("topics ready (prefix %r): %d created, %d already there" %
        (args.prefix, len(created), len(kept)))
    return 0


def roundtrip(bootstrap, topic, transactional, quiet=False):
    """Produce one message (in a committed transaction if asked) and read it back."""
    pconf = {"bootstrap.servers": bootstrap, "enable.idempotence": True}
    if quiet:  # warm-up: the retries while coordinators load are expected, not news
        pconf["log_level"] = 3
    if transactional:
        pconf["transactional.id"] = "ll-env-check-" + uuid.uuid4().hex
    p = Producer(client_conf(pconf))
    value = uuid.uuid4().hex.encode()
    if transactional:
        p.init_transactions(60)
        p.begin_transaction()
        p.produce(topic, key=b"k", value=b"aborted")
        p.flush(30)
        p.abort_transaction(30)
        p.begin_transaction()
        p.produce(topic, key=b"k", value=value)
        p.commit_transaction(30)
    else:
        p.produce(topic, key=b"k", value=value)
        if p.flush(30):
            raise RuntimeError("produce to %s not delivered" % topic)
    cconf = {"bootstrap.servers": bootstrap, "group.id": "ll-env-check-" + uuid.uuid4().hex,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed",
                  "partition.assignment.strategy": "range"}
    if quiet:
        cconf["log_level"] = 3
    c = Consumer(client_conf(cconf))
    try:
        c.subscribe([topic])
        seen = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(m.error())
            seen.append(m.value())
            c.commit(message=m, asynchronous=False)
            if m.value() == value:
                if b"aborted" in seen:
                    raise RuntimeError("read_committed consumer saw an aborted message")
                return
        raise RuntimeError("message not consumed back from %s within 60 s" % topic)
    finally:
        c.close()


def cmd_warmup(args):
    """Create the transaction and offsets topics now, so the first test does not wait for it."""
    topic = "__ll_env_warmup"
    a = admin(args.bootstrap)
    try:
        for _, fut in a.create_topics([NewTopic(topic, 1, 1)], operation_timeout=30).items():
            try:
                fut.result()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise
        roundtrip(args.bootstrap, topic, transactional=True, quiet=True)
    except Exception as exc:  # noqa: BLE001 - report and fail
        log("warm-up failed: %s" % exc)
        return 1
    finally:
        try:
            for _, fut in a.delete_topics([topic], operation_timeout=30).items():
                fut.result()
        except Exception:  # noqa: BLE001 - best effort
            pass
    return 0


def cmd_check(args):
    topic = "__ll_env_check_" + uuid.uuid4().hex[:8]
    a = admin(args.bootstrap)
    try:
        for _, fut in a.create_topics([NewTopic(topic, 3, 1)], operation_timeout=30).items():
            fut.result()
        t0 = time.monotonic()
        roundtrip(args.bootstrap, topic, transactional=False)
        roundtrip(args.bootstrap, topic, transactional=True)
        log("kafka ok: topic created, plain and transactional produce, read_committed consume "
            "(%.1f s)" % (time.monotonic() - t0))
        return 0
    except Exception as exc:  # noqa: BLE001
        log("kafka check failed: %s" % exc)
        return 1
    finally:
        try:
            for _, fut in a.delete_topics([topic], operation_timeout=30).items():
                fut.result()
        except Exception:  # noqa: BLE001
            pass


def main(argv):
    ap = argparse.ArgumentParser(prog="ll_kafka_admin")
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("wait")
    w.add_argument("--bootstrap", required=True)
    w.add_argument("--timeout", type=int, default=90)
    w.add_argument("--pid", type=int, default=0)
    w.add_argument("--brokers", type=int, default=1, help="wait until this many brokers are registered")
    t = sub.add_parser("topics")
    t.add_argument("--bootstrap", required=True)
    t.add_argument("--file", required=True)
    t.add_argument("--prefix", default="loadledger.")
    t.add_argument("--reset", action="store_true")
    for name in ("warmup", "check"):
        s = sub.add_parser(name)
        s.add_argument("--bootstrap", required=True)
    args = ap.parse_args(argv)
    return {"wait": cmd_wait, "topics": cmd_topics, "warmup": cmd_warmup,
            "check": cmd_check}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
