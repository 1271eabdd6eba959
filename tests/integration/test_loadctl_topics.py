"""`loadctl topics create` on the real broker (docker-compose's `kafka-topics` runs it on every
`up`): every topic of the file in one request with its partitions and topic configs; a second
run creates nothing and leaves the existing topics as they are; a bad file is refused before any
request (exit 1, nothing created)."""
import json
import os
import subprocess
import time
import uuid

from confluent_kafka.admin import AdminClient, ConfigResource

from llsim.stack import read_env

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TOPICS_CONF = os.path.join(REPO, "config", "topics.conf")


def logical_topics():
    out = []
    with open(TOPICS_CONF) as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if words:
                out.append((words[0], int(words[1]), dict(w.split("=", 1) for w in words[2:])))
    return out


def loadctl(prefix, *args):
    env = dict(os.environ, LOADLEDGER_KAFKA__BOOTSTRAP__SERVERS=read_env()["LL_KAFKA_BOOTSTRAP"],
               LOADLEDGER_TOPIC__PREFIX=prefix)
    exe = os.path.join(os.environ.get("LL_BUILD_DIR", os.path.join(REPO, "build")), "tools", "loadctl")
    return subprocess.run([exe, "--json", "topics", "create"] + list(args), env=env, capture_output=True,
                          text=True, timeout=120)


def broker_topics(admin, prefix, expect=None, wait_s=15):
    """The broker's topics under prefix, {name: partitions}. With expect, asked again (at most
    wait_s) until the answer is expect: a metadata answer right after a CreateTopics can come from
    a broker whose metadata has not caught up yet (KRaft propagates it asynchronously)."""
    deadline = time.monotonic() + wait_s
    while True:
        md = admin.list_topics(timeout=10).topics
        got = {name[len(prefix):]: len(t.partitions) for name, t in md.items() if name.startswith(prefix)}
        if expect is None or got == expect or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


def test_create_all_then_keep_existing():
    prefix = "lltopics%s." % uuid.uuid4().hex[:8]
    admin = AdminClient({"bootstrap.servers": read_env()["LL_KAFKA_BOOTSTRAP"]})
    want = logical_topics()
    try:
        r = loadctl(prefix, "--file", TOPICS_CONF)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert sorted(out["created"]) == sorted(prefix + n for n, _, _ in want) and out["existing"] == []
        expect = {n: p for n, p, _ in want}
        assert broker_topics(admin, prefix, expect) == expect
        dl = ConfigResource(ConfigResource.Type.TOPIC, prefix + "dead-letters")
        cfg = admin.describe_configs([dl])[dl].result(timeout=10)
        assert cfg["max.message.bytes"].value == "2097152"

        again = loadctl(prefix, "--file", TOPICS_CONF)
        assert again.returncode == 0, again.stderr
        out = json.loads(again.stdout)
        assert out["created"] == [] and len(out["existing"]) == len(want)
    finally:
        names = [t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)]
        if names:
            for f in admin.delete_topics(names, operation_timeout=30).values():
                f.result(timeout=60)


def test_bad_file_refused_before_any_request(tmp_path):
    prefix = "lltopics%s." % uuid.uuid4().hex[:8]
    bad = tmp_path / "topics.conf"
    bad.write_text("run-requests 3\nchunks zero\n")
    r = loadctl(prefix, "--file", str(bad))
    assert r.returncode == 1
    assert json.loads(r.stdout)["code"] == "TOPICS_FILE_INVALID" and ":2:" in r.stderr
    bad.write_text("run-requests 3\nno-such-topic 3\n")
    r = loadctl(prefix, "--file", str(bad))
    assert r.returncode == 1 and "unknown topic 'no-such-topic'" in r.stderr
    admin = AdminClient({"bootstrap.servers": read_env()["LL_KAFKA_BOOTSTRAP"]})
    assert broker_topics(admin, prefix) == {}
