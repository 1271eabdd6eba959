"""scripts/env.sh itself (docs/environment.md): a failed `up` leaves nothing running, a fresh
broker is formatted whatever its random KRaft cluster id looks like, and the topics it creates
carry the topic configs of config/topics.conf (the dead-letter topic takes 2 MiB records).

One `up` in a run dir of its own (beside $LL_RUN_DIR, never the suite's environment), made to
fail right after the broker was formatted and launched (LL_KAFKA_START_TIMEOUT=0: no time to
answer), with a cluster id that starts with '-' (LL_KAFKA_CLUSTER_ID; a random id does once in
64 starts, and `kafka-storage format -t -x…` reads it as an option). About 10 s: PostgreSQL is
initialised and started, the broker formatted, launched and stopped again.
"""
import os
import shutil
import socket
import subprocess
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from llsim.stack import read_env  # tools/nifisim is on sys.path (conftest.py)

HERE = os.path.dirname(os.path.abspath(__file__))
ENV_SH = os.path.join(HERE, "..", "..", "scripts", "env.sh")
DASH_ID = "-ygKWRAGQFCsnHNA-X6MIA"  # a valid 16-byte base64url id, as uuid4 gives them


def processes_mentioning(text):
    """(pid, command line) of every live process whose command line contains text."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open("/proc/%s/stat" % pid) as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmd and state not in ("Z", "X"):
            found.append((int(pid), cmd))
    return found


def port_answers(port):
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def run_dir():
    """A run dir of its own; whatever happens, `env.sh down` on it and its lock file removed."""
    base = os.environ.get("LL_RUN_DIR", "/tmp/loadledger-run").rstrip("/")
    path = base + "-envtest"
    env = dict(os.environ, LL_RUN_DIR=path)
    subprocess.run([ENV_SH, "down"], env=env, capture_output=True, timeout=120)
    yield path
    subprocess.run([ENV_SH, "down"], env=env, capture_output=True, timeout=120)
    shutil.rmtree(path, ignore_errors=True)
    try:
        os.unlink(path + ".lock")
    except FileNotFoundError:
        pass


def test_failed_up_leaves_nothing_running_and_dash_cluster_id_formats(run_dir):
    # the broker's data in a folder of its own (LL_KAFKA_DATA_DIR, as scripts/bench.sh puts it on a
    # tmpfs): linked into the run dir, and removed by `down`
    kdata = run_dir + "-kafka-data"
    shutil.rmtree(kdata, ignore_errors=True)
    env = dict(os.environ, LL_RUN_DIR=run_dir, LL_KAFKA_START_TIMEOUT="0", LL_KAFKA_CLUSTER_ID=DASH_ID,
               LL_KAFKA_DATA_DIR=kdata)
    env.pop("LL_TOPIC_PREFIX", None)
    p = subprocess.run([ENV_SH, "up"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0, p.stderr
    assert p.stdout == ""  # no env printed for an environment that is not up

    # The id starting with '-' was taken as the cluster id, not as an option.
    assert "kafka-storage format failed" not in p.stderr, p.stderr
    with open(os.path.join(run_dir, "kafka", "data", "meta.properties")) as fh:
        assert "cluster.id=%s\n" % DASH_ID in fh.read()
    assert os.path.realpath(os.path.join(run_dir, "kafka", "data")) == os.path.join(kdata, "data")
    assert os.path.exists(os.path.join(kdata, "data", "meta.properties"))
    # It failed where it was made to: the broker did not answer in time.
    assert "Kafka did not answer within 0s" in p.stderr, p.stderr
    assert "up failed" in p.stderr, p.stderr

    # Nothing of this run dir runs any more: no PostgreSQL, no broker, no listening port.
    assert processes_mentioning(run_dir) == []
    with open(os.path.join(run_dir, "pg", "port")) as fh:
        pg_port = int(fh.read())
    with open(os.path.join(run_dir, "kafka", "ports")) as fh:
        k_ports = [int(x) for x in fh.read().split()]
    assert not os.path.exists(os.path.join(run_dir, "pg", "data", "postmaster.pid"))
    for port in [pg_port] + k_ports:
        assert not port_answers(port), port
    st = subprocess.run([ENV_SH, "status"], env=env, capture_output=True, text=True, timeout=60)
    assert st.returncode == 3
    assert "PostgreSQL: not running" in st.stderr and "Kafka: not running" in st.stderr, st.stderr
    down = subprocess.run([ENV_SH, "down"], env=env, capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    assert not os.path.exists(kdata) and not os.path.exists(run_dir), down.stderr


def test_dead_letter_topic_takes_two_mib_records_other_topics_one():
    """`env.sh topics` creates <prefix>dead-letters with max.message.bytes=2097152: a dead letter
    of a 1 MiB input value plus its headers fits, while an input topic keeps the broker's 1 MiB."""
    env = read_env()
    bootstrap = env["LL_KAFKA_BOOTSTRAP"]
    prefix = "envtest.%s." % uuid.uuid4().hex[:8]
    p = subprocess.run([ENV_SH, "topics"], env=dict(os.environ, LL_TOPIC_PREFIX=prefix), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        res = [ConfigResource(ConfigResource.Type.TOPIC, prefix + t) for t in ("dead-letters", "run-requests")]
        got = {r.name: fut.result()["max.message.bytes"].value for r, fut in admin.describe_configs(res).items()}
        assert got == {prefix + "dead-letters": "2097152", prefix + "run-requests": "1048588"}

        # 1 MiB of value (loop.max_message_bytes) plus 64 KiB of headers: taken by the dead-letter
        # topic, refused by the broker on an input topic (the producer's own limit is set above).
        value = os.urandom(1048576)
        headers = [("ll.error.message", b"x" * 65536)]
        results = {}

        def done(err, msg):
            results[msg.topic()] = err

        prod = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 4194304, "retries": 0,
                         "enable.idempotence": False, "compression.type": "none"})
        for t in ("dead-letters", "run-requests"):
            prod.produce(prefix + t, key=b"k", value=value, headers=headers, on_delivery=done)
        assert prod.flush(60) == 0
        assert results[prefix + "dead-letters"] is None
        assert results[prefix + "run-requests"].code() == KafkaError.MSG_SIZE_TOO_LARGE
    finally:
        names = [prefix + line.split()[0] for line in open(os.path.join(HERE, "..", "..", "config", "topics.conf"))
                 if line.split("#", 1)[0].strip()]
        for fut in admin.delete_topics(names, operation_timeout=30).values():
            try:
                fut.result()
            except Exception:  # noqa: BLE001 - best effort: a test prefix of its own
                pass
