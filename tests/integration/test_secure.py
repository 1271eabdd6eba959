"""The secure environment (issue 9 §7; scripts/env_secure.sh, docs/operations.md "Secure mode"):
a second environment of its own, made by `LL_SECURE=1 scripts/env.sh up` in $LL_RUN_DIR-secure,
PostgreSQL with TLS + scram-sha-256 only and Kafka 3.9 with SASL_SSL (SCRAM-SHA-512 only) and ACLs.
The reference scenario runs to SUCCESS through it; every librdkafka client logs in with
SCRAM-SHA-512 (the listener offers nothing else: a PLAIN login with the right password is
refused); a service's Kafka user is refused another service's topics and transactional ids;
PostgreSQL refuses plain TCP, a wrong password and a missing one; and no password appears in
any log of the run (services, broker, database, env.sh). One module: the environment is brought
up once (about a minute) and taken down at the end."""
import glob
import os
import subprocess
import time
import uuid

import psycopg2
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from conftest import new_run, one
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.lifecycle import Lifecycle
from llsim.stack import Stack, read_env

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ENV_SH = os.path.join(REPO, "scripts", "env.sh")
RUN_DIR = os.environ.get("LL_RUN_DIR", "/tmp/loadledger-run").rstrip("/") + "-secure"
UP_LOG = RUN_DIR + ".env-sh.log"  # env.sh's own messages (outside the run dir, which down removes)


def env_sh(cmd):
    env = dict(os.environ, LL_RUN_DIR=RUN_DIR, LL_SECURE="1")
    env.pop("LL_KAFKA_CLIENT_CONFIG", None)
    env.pop("LL_KAFKA_VERSION", None)  # the secure mode's own broker version (3.9.x: SCRAM)
    with open(UP_LOG, "a") as log:
        return subprocess.run([ENV_SH, cmd], env=env, stdout=subprocess.DEVNULL, stderr=log, timeout=600).returncode


@pytest.fixture(scope="module")
def sec():
    """The secure environment, its Stack (every service, the sweeper too) and its passwords."""
    if os.path.exists(UP_LOG):
        os.unlink(UP_LOG)
    t0 = time.time()
    assert env_sh("up") == 0, open(UP_LOG).read()
    env = read_env(RUN_DIR)
    # NiFi's side (the simulator) as the Kafka user nifi
    old = os.environ.get("LL_KAFKA_CLIENT_CONFIG")
    os.environ["LL_KAFKA_CLIENT_CONFIG"] = env["LL_KAFKA_CLIENT_CONFIG"]
    s = Stack(run_dir=RUN_DIR)
    s.up_seconds = time.time() - t0
    s.migrate()
    s.start_all()
    s.start("sweeper")
    pw_dir = os.path.join(env["LL_SECURE_DIR"], "passwords")
    s.passwords = {n: open(os.path.join(pw_dir, n)).read().strip() for n in os.listdir(pw_dir)}
    yield s
    s.stop_all()
    if old is None:
        os.environ.pop("LL_KAFKA_CLIENT_CONFIG", None)
    else:
        os.environ["LL_KAFKA_CLIENT_CONFIG"] = old
    env_sh("down")


def kafka_conf(sec, user, **extra):
    """librdkafka settings of a Kafka user of the secure environment (its properties file)."""
    conf = {"bootstrap.servers": sec.bootstrap}
    path = os.path.join(sec.env["LL_SECURE_DIR"], "kafka", user + ".librdkafka.properties")
    with open(path) as f:
        conf.update(ln.strip().split("=", 1) for ln in f if "=" in ln)
    conf.update(extra)
    return conf


def produce_error(conf, topic):
    """Produces one record; returns the delivery error (None when delivered)."""
    errs = []
    p = Producer(conf)
    p.produce(topic, b"intruder", on_delivery=lambda err, msg: errs.append(err))
    p.flush(30)
    assert errs, "no delivery report within 30 s"
    return errs[0]


def first_client_error(conf, timeout=15):
    """The first client-level error (error_cb) of a producer made with conf, None within timeout s."""
    errs = []
    p = Producer(dict(conf, error_cb=errs.append, log_level=0))
    t = time.time()
    while not errs and time.time() - t < timeout:
        p.poll(0.2)
    return errs[0] if errs else None


def test_kafka_listener_offers_only_scram(sec):
    """The secure broker (Kafka 3.9, env_secure.sh) offers SCRAM-SHA-512 alone: every service,
    NiFi's side and env.sh's helper are configured for it, and a PLAIN login is refused even with
    the right password, so the scenario below ran over SCRAM."""
    props = open(os.path.join(RUN_DIR, "kafka", "server.properties")).read().splitlines()
    assert [ln for ln in props if ln.startswith("sasl.enabled.mechanisms=")][-1] == "sasl.enabled.mechanisms=SCRAM-SHA-512"
    for name in ("registrar", "claimer", "completion", "dispatcher"):
        # the configuration the running service-0 was started with (llsim's Stack wrote it)
        conf = open(os.path.join(sec.conf_dir, name + "-0.conf")).read()
        assert "kafka.sasl.mechanisms = SCRAM-SHA-512\n" in conf, name
    for user in ("nifi", "admin"):
        assert kafka_conf(sec, user)["sasl.mechanisms"] == "SCRAM-SHA-512"
    err = first_client_error(kafka_conf(sec, "nifi", **{"sasl.mechanisms": "PLAIN"}))
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    assert "Unsupported SASL mechanism" in err.str() and "supported mechanisms: SCRAM-SHA-512" in err.str(), err.str()
    # the control: the same user and password over SCRAM-SHA-512 gets the topics
    errs = []
    p = Producer(dict(kafka_conf(sec, "nifi"), error_cb=errs.append))
    assert sec.prefix + "run-requests" in p.list_topics(timeout=15).topics
    p.poll(0)
    assert errs == []


def test_reference_scenario_reaches_success_in_secure_mode(sec):
    flow = Flow(Nifi(sec.bootstrap, sec.prefix))
    try:
        run = new_run()
        steps = flow.to_extracted(run)
        assert steps["manifest"]["runStatus"] == "EXTRACTING"
        assert sum(1 for c in steps["claims"] if c["claimed"]) == 7
        db = sec.db().cursor()
        assert one(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == "EXTRACTED_VALIDATED"
        assert one(db, "SELECT extracted_count FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == 105000
        dispatch = one(db, "SELECT dispatch_id::text FROM nifi_ops.load_dispatch WHERE run_id = %s", run.run_id)
        assert [c["dispatchId"] for c in steps["commands"]] == [dispatch]
        steps = Lifecycle(flow).to_success(run, dispatch)
        assert steps["success"]["runStatus"] == "SUCCESS"
        assert one(db, "SELECT status FROM nifi_ops.load_run WHERE run_id = %s", run.run_id) == "SUCCESS"
        # every service connected over TLS, with its own role
        db.execute("SELECT a.usename, bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)"
                   " WHERE a.usename LIKE 'll\\_%%' GROUP BY a.usename ORDER BY 1")
        assert db.fetchall() == [("ll_claimer", True), ("ll_completion", True), ("ll_dispatcher", True),
                                 ("ll_registrar", True), ("ll_sweeper", True)]
        # the roles' passwords are SCRAM verifiers
        db.execute("SELECT rolname FROM pg_authid WHERE rolname LIKE 'll\\_%%'"
                   " AND rolpassword LIKE 'SCRAM-SHA-256$%%' ORDER BY 1")
        assert [r[0] for r in db.fetchall()] == ["ll_claimer", "ll_completion", "ll_dispatcher", "ll_operator",
                                                 "ll_registrar", "ll_retention", "ll_sweeper"]
    finally:
        flow.close()


@pytest.mark.parametrize("user,topic", [
    ("ll-registrar", "validate-run-commands"),    # a command topic: the dispatcher's
    ("ll-registrar", "chunk-outcomes"),           # another service's reply topic
    ("ll-claimer", "run-decisions"),
    ("ll-dispatcher", "dead-letters"),
    ("nifi", "validate-run-commands"),            # NiFi reads the commands, never writes them
])
def test_kafka_user_cannot_write_a_topic_outside_its_acls(sec, user, topic):
    err = produce_error(kafka_conf(sec, user), sec.prefix + topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def test_kafka_user_writes_its_own_output_topic(sec):
    # the control of the test above: the same user, its own topic, delivered
    assert produce_error(kafka_conf(sec, "ll-dispatcher"), sec.prefix + "validate-run-commands") is None


def test_kafka_transactional_id_limited_to_the_service(sec):
    ok = Producer(kafka_conf(sec, "ll-registrar", **{"transactional.id": sec.prefix + "registrar.sec-test"}))
    ok.init_transactions(30)
    bad = Producer(kafka_conf(sec, "ll-registrar", **{"transactional.id": sec.prefix + "claimer.sec-test"}))
    with pytest.raises(KafkaException) as e:
        bad.init_transactions(30)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    del ok, bad  # closed now, not when the broker is gone


def test_nifi_publishes_transactionally_and_consumes_in_its_groups(sec):
    """config/kafka-acls.conf gives `nifi` what NiFi 2.x's PublishKafka ("Transactions Enabled",
    "Transactional ID Prefix" <prefix>nifi.) and ConsumeKafka ("Group ID" <prefix>nifi.*) need."""
    p = Producer(kafka_conf(sec, "nifi", **{"transactional.id": sec.prefix + "nifi.pg20-" + uuid.uuid4().hex}))
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(sec.prefix + "run-requests", b"never committed", key=b"sec-test")
    p.flush(30)
    p.abort_transaction(30)  # the partition was added to the transaction: WRITE on topic and id
    # a transactional id outside the prefix is refused (the control)
    bad = Producer(kafka_conf(sec, "nifi", **{"transactional.id": sec.prefix + "registrar.nifi-test"}))
    with pytest.raises(KafkaException) as e:
        bad.init_transactions(30)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    del p, bad
    for group, allowed in ((sec.prefix + "nifi.pg20-claim-decisions", True), (sec.prefix + "registrar", False)):
        errs = []
        c = Consumer(dict(kafka_conf(sec, "nifi"), **{"group.id": group, "enable.auto.commit": False,
                                                       "isolation.level": "read_committed",
                                                       "auto.offset.reset": "earliest",
                                                       "error_cb": errs.append}))
        c.subscribe([sec.prefix + "claim-decisions"])
        got, t = None, time.time()
        while got is None and not errs and time.time() - t < 20 and not (c.assignment() and allowed):
            m = c.poll(0.5)
            if m is not None and m.error():
                got = m.error()
        codes = [e.code() for e in ([got] if got else []) + errs]
        if allowed:
            assert not codes and c.assignment(), (group, got, errs)
        else:
            assert KafkaError.GROUP_AUTHORIZATION_FAILED in codes, (group, got, errs)
        c.close()


def test_kafka_refuses_a_wrong_password(sec):
    conf = kafka_conf(sec, "ll-registrar", **{"sasl.password": "wrong-password"})
    with pytest.raises(KafkaException):
        AdminClient(conf).list_topics(timeout=5)
    err = first_client_error(conf)
    assert err is not None and err.code() == KafkaError._AUTHENTICATION, err
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in err.str(), err.str()


@pytest.mark.parametrize("words,message", [
    ("user=ll_registrar sslmode=disable", "no encryption"),                   # plain TCP: no pg_hba line
    ("user=ll_registrar sslmode=verify-full password=wrong passfile=/nonexistent", "password authentication failed"),
    ("user=postgres sslmode=verify-full passfile=/nonexistent", "no password supplied"),  # no trust, even for admin
])
def test_postgres_refuses_plain_tcp_and_wrong_passwords(sec, words, message):
    conninfo = "host=%s port=%d dbname=%s sslrootcert=%s %s" % (
        sec.pg["host"], sec.pg["port"], sec.pg["dbname"], os.path.join(sec.env["LL_SECURE_DIR"], "ca.crt"), words)
    with pytest.raises(psycopg2.OperationalError) as e:
        psycopg2.connect(conninfo, connect_timeout=5)
    assert message in str(e.value)


def test_no_password_in_any_log(sec):
    """Last: stops the services (their logs complete), then greps every log of the run."""
    codes = sec.stop_all()
    assert all(c == 0 for c in codes.values()), codes
    logs = [UP_LOG] + [p for p in glob.glob(os.path.join(RUN_DIR, "**", "*"), recursive=True)
                       if os.path.isfile(p) and (p.endswith(".log") or p.endswith(".out"))]
    text = {p: open(p, errors="replace").read() for p in logs}
    # the grep looks at real logs: the services, the broker and the database all wrote theirs
    assert '"service_started"' in text[sec.log_path("registrar-0")]
    assert "Kafka Server started" in text[os.path.join(RUN_DIR, "kafka", "server.log")]
    assert "connection authorized: user=ll_completion" in text[os.path.join(RUN_DIR, "pg", "postgres.log")]
    assert len(sec.passwords) >= 12
    leaks = [(name, p) for p in logs for name, pw in sec.passwords.items() if pw in text[p]]
    assert not leaks, "passwords in logs: %s" % leaks
    print("secure environment up in %.0f s; %d log files, %d passwords checked" % (
        sec.up_seconds, len(logs), len(sec.passwords)))
