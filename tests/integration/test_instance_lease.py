"""One instance id, one process (issue 41, item 6; docs/design.md §3, "One process per instance
id"; common/src/core/instance.c, schemas/sql/0015_service_instance.sql).

Two processes of a consuming service with the same consumer group and service.instance_id derive
the same transactional.id and used to fence each other in a restart loop. Now each process takes
the lease of its (group, instance id) in nifi_ops.service_instance before it makes its producer,
renews it every third of service.instance_lease, and deletes it at a clean exit. Against a real
ll-registrar on the environment's PostgreSQL and Kafka (a short lease, PT3S):

- a second process with the same pair exits 4 at once, before any Kafka client exists, with one
  instance_held line (and a stderr line) naming the holder's host and pid, when it started and
  when it last renewed; the holder goes on, not fenced;
- after kill -9 of the holder, a start on the same machine takes over at once (its process is
  gone, a zombie not yet reaped counts so: reason "dead");
- a holder that crashed on another host (its row rewritten to another host and boot) is refused
  while its lease runs and taken over once it expired (reason "expired");
- a clean stop (SIGTERM, exit 0) deletes the row at once: the next start takes a free lease;
- a holder frozen (SIGSTOP) past its lease is taken over; woken up, it finds its lease gone
  (instance_lease_lost) and exits 2 without having been restarted.
"""
import signal
import socket
import time

import pytest

from llsim.drills import Isolated, events, log_lines, wait_until

LEASE = {"service.instance_lease": "PT3S"}
SAME_ID = "registrar-lease"


@pytest.fixture
def iso():
    i = Isolated("instlock")
    yield i
    i.close()


def start(st, name):
    """ll-registrar as process `name` (its log file), all with service.instance_id SAME_ID."""
    return st.start("registrar", name, settings=LEASE, env={"LOADLEDGER_SERVICE__INSTANCE_ID": SAME_ID})


def ready(st, name):
    """The process holds the lease and made its Kafka clients."""
    wait_until(lambda: events(st.log_path(name), "kafka_ready"), 60, "%s ready" % name)


def lease_row(st):
    with st.db() as c, c.cursor() as cur:
        cur.execute("SELECT holder, host, pid, consumer_group FROM nifi_ops.service_instance WHERE instance_id = %s",
                    (SAME_ID,))
        return cur.fetchall()


def test_one_process_per_instance_id(iso):
    st = iso.stack
    host = socket.gethostname()
    a = start(st, "reg-a")
    ready(st, "reg-a")
    [taken] = events(st.log_path("reg-a"), "instance_lease_taken")
    assert taken["instance_id"] == SAME_ID and taken["group"] == iso.groups["registrar"]
    [(_h, row_host, row_pid, group)] = lease_row(st)
    assert (row_host, row_pid, group) == (host, a.pid, iso.groups["registrar"])

    # a second process with the same group and instance id: refused, naming the holder
    t0 = time.time()
    b = start(st, "reg-b")
    assert st.wait_exit("reg-b", timeout=30) == 4
    assert time.time() - t0 < 20, "the refusal must not wait for the lease"
    blog = log_lines(st.log_path("reg-b"))
    [held] = [e for e in blog if e.get("event") == "instance_held"]
    assert held["level"] == "error"
    assert (held["holder_host"], held["holder_pid"]) == (host, a.pid)
    assert held["holder_since"] and held["holder_renewed_at"] and held["lease_ms"] == 3000
    assert "pid %d" % a.pid in held["msg"] and "service.instance_id" in held["msg"]
    with open(st.log_path("reg-b")) as f:
        text = f.read()
    assert "ll-registrar: service.instance_id '%s'" % SAME_ID in text  # the stderr line
    assert not [e for e in blog if e.get("event") == "kafka_ready"], "no producer may exist"
    # the holder is untouched: still running, never fenced, still renewing
    time.sleep(2.5)
    assert st.alive("reg-a")
    assert not events(st.log_path("reg-a"), "producer_fenced")
    assert not events(st.log_path("reg-a"), "instance_lease_lost")
    assert b.returncode == 4

    # kill -9 of the holder: on the same machine its process is gone, so a start takes over at once,
    # even before its parent reaped it (a zombie counts as gone)
    a_proc, a_log = st.procs.pop("reg-a")
    a_proc.send_signal(signal.SIGKILL)
    wait_until(lambda: open("/proc/%d/stat" % a.pid).read().split(")")[-1].split()[0] == "Z", 10, "reg-a a zombie")
    t0 = time.time()
    start(st, "reg-c")
    ready(st, "reg-c")
    [over] = events(st.log_path("reg-c"), "instance_taken_over")
    assert over["reason"] == "dead" and over["previous_pid"] == a.pid
    assert time.time() - t0 < 30
    a_proc.wait()
    a_log.close()

    # a holder that died on another host: refused while its lease runs, taken over after it
    st.kill("reg-c")
    with st.db() as c, c.cursor() as cur:
        cur.execute("UPDATE nifi_ops.service_instance SET host = 'elsewhere.example', boot_id = 'other-boot',"
                    " renewed_at = now() WHERE instance_id = %s", (SAME_ID,))
    start(st, "reg-d")
    assert st.wait_exit("reg-d", timeout=30) == 4
    [held] = events(st.log_path("reg-d"), "instance_held")
    assert held["holder_host"] == "elsewhere.example"
    time.sleep(3.5)  # the lease (PT3S) runs out: nobody renewed it
    start(st, "reg-e")
    ready(st, "reg-e")
    [over] = events(st.log_path("reg-e"), "instance_taken_over")
    assert over["reason"] == "expired" and over["previous_host"] == "elsewhere.example"
    assert over["lease_age_ms"] > 3000

    # a clean stop releases at once: the row is gone and the next start takes a free lease
    assert st.stop("reg-e") == 0
    assert events(st.log_path("reg-e"), "instance_lease_released")
    assert lease_row(st) == []
    t0 = time.time()
    start(st, "reg-f")
    ready(st, "reg-f")
    assert time.time() - t0 < 30
    assert not events(st.log_path("reg-f"), "instance_taken_over")
    assert events(st.log_path("reg-f"), "instance_lease_taken")
    assert st.stop("reg-f") == 0


def test_a_frozen_holder_taken_over_stops_when_it_wakes(iso):
    st = iso.stack
    a = start(st, "reg-z")
    ready(st, "reg-z")
    a.send_signal(signal.SIGSTOP)
    try:
        time.sleep(4)  # past its lease (PT3S): frozen, it renewed nothing
        start(st, "reg-n")
        ready(st, "reg-n")
        [over] = events(st.log_path("reg-n"), "instance_taken_over")
        assert over["reason"] == "expired" and over["previous_pid"] == a.pid
    finally:
        a.send_signal(signal.SIGCONT)
    # woken, its renewal finds another live holder: it stops as if fenced
    assert st.wait_exit("reg-z", timeout=60) == 2
    [lost] = events(st.log_path("reg-z"), "instance_lease_lost")
    assert lost["holder_pid"] == st.procs["reg-n"][0].pid
    # the new holder is not disturbed by the old one's exit
    time.sleep(2)
    assert st.alive("reg-n")
    assert not events(st.log_path("reg-n"), "instance_lease_lost")
    assert st.stop("reg-n") == 0
    assert lease_row(st) == []
