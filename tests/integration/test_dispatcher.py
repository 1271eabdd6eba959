"""The dispatcher with its Kafka sink (docs/contract.md §6, §3.4): lease, SENT, backoff, DEAD, several
dispatchers at once, LISTEN/NOTIFY wake-up.

The outbox rows are written directly with SQL as postgres (runs in EXTRACTED_VALIDATED and their
VALIDATE_RUN rows, as the completion CAS writes them), on a database and topics of this module
only, so every command on the topic is one of these rows'. Times are compared on the database
clock (the row's own next_attempt_at values), not on the test's.
"""
import time
import uuid

import psycopg2
import pytest

from llsim.drills import Isolated, RawReader, events, wait_until

LEASE_S = 60


@pytest.fixture(scope="module")
def iso():
    i = Isolated("dispatcher")
    yield i
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


@pytest.fixture
def cur(iso):
    c = iso.stack.db()
    yield c.cursor()
    c.close()
    # every test stops the dispatchers it started, also when it fails (a leftover one would
    # deliver the next test's rows): each must stop cleanly
    codes = {i: iso.stack.stop(i) for i in list(iso.stack.procs)}
    assert all(v == 0 for v in codes.values()), codes


@pytest.fixture
def commands(iso):
    r = RawReader(iso.bootstrap, iso.topic("validate-run-commands"), "validate-run-commands", from_beginning=False)
    yield r
    r.close()


def add_dispatches(iso, n, notify=True):
    """n runs in EXTRACTED_VALIDATED, each with a PENDING VALIDATE_RUN row, in one transaction;
    then (optionally) one NOTIFY, as the completion CAS does. Returns {dispatch_id: run_id}."""
    rows = {}
    conn = psycopg2.connect(host=iso.stack.pg["host"], port=iso.stack.pg["port"], dbname=iso.dbname, user="postgres")
    with conn, conn.cursor() as c:
        for _ in range(n):
            run_id, dispatch_id = str(uuid.uuid4()), str(uuid.uuid4())
            c.execute("INSERT INTO nifi_ops.load_run (run_id, job_key, business_key, status, expected_partition_count,"
                      " source_count) VALUES (%s, 'DISPATCH_DRILL', %s, 'EXTRACTED_VALIDATED', 1, 1)",
                      (run_id, "bk-" + run_id[:8]))
            c.execute("INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, status,"
                      " next_attempt_at, created_at) VALUES (%s, %s, 'VALIDATE_RUN', 'PENDING', clock_timestamp(),"
                      " clock_timestamp())", (dispatch_id, run_id))
            rows[dispatch_id] = run_id
        if notify:
            c.execute("SELECT pg_notify('load_dispatch', %s)", (next(iter(rows.values())),))
    conn.close()
    return rows


def notify(cur, payload="test"):
    cur.execute("SELECT pg_notify('load_dispatch', %s)", (payload,))


def row(cur, dispatch_id):
    cur.execute("SELECT status, attempt_count, next_attempt_at, sent_at, last_error, last_http_status,"
                " clock_timestamp() FROM nifi_ops.load_dispatch WHERE dispatch_id = %s", (dispatch_id,))
    return dict(zip(("status", "attempt", "next", "sent_at", "error", "http", "now"), cur.fetchone()))


def listening(iso, instance):
    """Waits until a dispatcher has its LISTEN connection (and has drained once after it)."""
    path = iso.stack.log_path(instance)
    wait_until(lambda: events(path, "listen_connected"), 30, instance + " listening")


def test_lease_then_sent_and_an_ackless_sent_row_stays_sent(iso, cur, commands):
    # db.conninfo may be a URI as well as key=value pairs (libpq takes both); the service still
    # names its connections after itself
    pg = iso.stack.pg
    uri = "postgresql://ll_dispatcher@%s:%d/%s" % (pg["host"], pg["port"], iso.dbname)
    iso.stack.start("dispatcher", "dispatcher-a", settings={"db.conninfo": uri})
    listening(iso, "dispatcher-a")
    cur.execute("SELECT DISTINCT application_name FROM pg_stat_activity WHERE datname = %s AND usename = 'll_dispatcher'",
                (iso.dbname,))
    assert set(r[0] for r in cur.fetchall()) == {"dispatcher", "dispatcher-listen"}
    [(dispatch_id, run_id)] = add_dispatches(iso, 1).items()
    [cmd] = commands.wait_for(lambda r: r["value"]["dispatchId"] == dispatch_id, timeout=15)
    v = cmd["value"]
    assert (v["runId"], v["jobKey"], v["dispatchType"], v["attempt"]) == (run_id, "DISPATCH_DRILL", "VALIDATE_RUN", 1)
    assert cmd["key"] == run_id.encode()
    assert cmd["headers"] == {"jobKey": b"DISPATCH_DRILL", "runId": run_id.encode(),
                              "dispatchId": dispatch_id.encode(), "dispatchType": b"VALIDATE_RUN"}
    r = wait_until(lambda: (lambda x: x["status"] == "SENT" and x)(row(cur, dispatch_id)), 10, "SENT")
    assert (r["attempt"], r["error"], r["http"]) == (1, None, None) and r["sent_at"] is not None
    # SENT is not ACKED: nothing but the sweeper or an ACK moves it; the dispatcher leaves it alone
    # (five poll intervals of the dispatcher, each of which would have re-leased a PENDING row)
    commands.drain(5)
    assert row(cur, dispatch_id)["status"] == "SENT" and row(cur, dispatch_id)["attempt"] == 1
    assert [c for c in commands.records if c["value"]["dispatchId"] == dispatch_id] == [cmd]


def test_two_dispatchers_never_publish_a_leased_row_twice(iso, cur, commands):
    n = 200
    # log.level debug: each row sent is a dispatch_sent line (at info only dispatch_summary counts them)
    slow = {"dispatch.poll_interval": "PT30S", "dispatch.batch": 5, "log.level": "debug"}
    for d in ("dispatcher-1", "dispatcher-2"):
        iso.stack.start("dispatcher", d, settings=slow)
    for d in ("dispatcher-1", "dispatcher-2"):
        listening(iso, d)
    rows = add_dispatches(iso, n)  # one NOTIFY wakes both at once
    commands.wait_for(lambda r: r["value"]["dispatchId"] in rows, count=n, timeout=60)
    commands.drain(3)
    ids = [c["value"]["dispatchId"] for c in commands.records if c["value"]["dispatchId"] in rows]
    assert len(ids) == n and set(ids) == set(rows), "%d commands for %d rows" % (len(ids), len(set(ids)))
    cur.execute("SELECT status, attempt_count, count(*) FROM nifi_ops.load_dispatch WHERE dispatch_id = ANY(%s::uuid[])"
                " GROUP BY 1, 2", (list(rows),))
    assert cur.fetchall() == [("SENT", 1, n)]
    per = {d: len(events(iso.stack.log_path(d), "dispatch_sent")) for d in ("dispatcher-1", "dispatcher-2")}
    assert sum(per.values()) == n and all(per.values()), "both dispatchers delivered: %s" % per


def test_notify_wakes_the_dispatcher_long_before_its_poll_interval(iso, cur, commands):
    iso.stack.start("dispatcher", "dispatcher-n", settings={"dispatch.poll_interval": "PT30S"})
    listening(iso, "dispatcher-n")
    commands.drain(1)  # its start-up drains are over
    # a row without a NOTIFY waits for the poll interval (30 s): still PENDING 3 s later
    [(quiet, _)] = add_dispatches(iso, 1, notify=False).items()
    commands.drain(3)
    assert row(cur, quiet)["status"] == "PENDING" and row(cur, quiet)["attempt"] == 0
    # a NOTIFY (any payload) wakes it at once
    notify(cur)
    commands.wait_for(lambda r: r["value"]["dispatchId"] == quiet, timeout=5)
    [(loud, _)] = add_dispatches(iso, 1, notify=True).items()
    commands.wait_for(lambda r: r["value"]["dispatchId"] == loud, timeout=5)
    wait_until(lambda: row(cur, loud)["status"] == "SENT", 5, "SENT")


def test_a_notify_sends_many_pending_rows_in_batches_each_once(iso, cur, commands):
    # 300 rows pending, a lease of 100, the poll interval 30 s: one NOTIFY sends them all at once,
    # each command once, in three leases of one statement each, each lease's rows marked SENT by
    # one statement (issue 8 §5)
    n, batch, poll_s = 300, 100, 30
    iso.stack.start("dispatcher", "dispatcher-b", settings={"dispatch.poll_interval": "PT%dS" % poll_s,
                                                           "dispatch.batch": batch})
    listening(iso, "dispatcher-b")
    commands.drain(1)  # its start-up drains are over
    rows = add_dispatches(iso, n, notify=False)
    commands.drain(2)
    cur.execute("SELECT status, attempt_count, count(*) FROM nifi_ops.load_dispatch WHERE dispatch_id = ANY(%s::uuid[])"
                " GROUP BY 1, 2", (list(rows),))
    assert cur.fetchall() == [("PENDING", 0, n)], "nothing moves before the NOTIFY (poll interval %d s)" % poll_s
    t0 = time.monotonic()
    notify(cur)
    commands.wait_for(lambda r: r["value"]["dispatchId"] in rows, timeout=poll_s - 5)
    first_s = time.monotonic() - t0
    commands.wait_for(lambda r: r["value"]["dispatchId"] in rows, count=n, timeout=poll_s - 5)
    all_s = time.monotonic() - t0
    # well before the poll interval: woken by the NOTIFY, not by the timer
    assert first_s < 3 and all_s < 10, (first_s, all_s)
    commands.drain(2)
    ids = [c["value"]["dispatchId"] for c in commands.records if c["value"]["dispatchId"] in rows]
    assert len(ids) == n and set(ids) == set(rows), "%d commands for %d rows" % (len(ids), len(set(ids)))
    assert all(c["value"]["attempt"] == 1 for c in commands.records if c["value"]["dispatchId"] in rows)

    def settled():
        cur.execute("SELECT status, attempt_count, count(*), count(DISTINCT next_attempt_at),"
                    " count(DISTINCT sent_at) FROM nifi_ops.load_dispatch WHERE dispatch_id = ANY(%s::uuid[])"
                    " GROUP BY 1, 2", (list(rows),))
        got = cur.fetchall()
        return got if got and got[0][:3] == ("SENT", 1, n) else None
    got = wait_until(settled, 10, "every row SENT")
    # a lease's rows share its statement's next_attempt_at, a marking statement's sent_at
    assert got == [("SENT", 1, n, n // batch, n // batch)], "leased and marked in %d batches" % (n // batch)


def test_dead_after_max_attempts_with_backoff_from_next_attempt_at(iso, cur, commands):
    backoff = {1: 1.0, 2: 2.0}  # backoff_min 1 s x 2^(attempt-1), capped at backoff_max 2 s
    iso.stack.start("dispatcher", "dispatcher-x", settings={
        "topic.validate-run-commands.name": iso.prefix + "no-such-topic",  # the broker does not auto-create
        "dispatch.max_attempts": 3, "dispatch.backoff_min": "PT1S", "dispatch.backoff_max": "PT2S",
        "dispatch.delivery_timeout": "PT2S", "dispatch.poll_interval": "PT30S"})
    listening(iso, "dispatcher-x")
    [(dispatch_id, run_id)] = add_dispatches(iso, 1).items()
    seen = []  # every distinct state of the row, polled every 50 ms

    def watch():
        r = row(cur, dispatch_id)
        if not seen or (r["status"], r["attempt"], r["next"]) != (seen[-1]["status"], seen[-1]["attempt"], seen[-1]["next"]):
            seen.append(r)
        return r["status"] == "DEAD"
    wait_until(watch, 40, "DEAD", interval=0.05)

    # a leased row is due again after the lease (60 s); a settled one after its backoff (<= 2 s)
    in_lease = lambda r: (r["next"] - r["now"]).total_seconds() > LEASE_S / 2  # noqa: E731
    leased = {r["attempt"]: r for r in seen if r["status"] == "PENDING" and r["attempt"] and in_lease(r)}
    settled = {r["attempt"]: r for r in seen if r["status"] == "PENDING" and r["error"] and not in_lease(r)}
    dead = seen[-1]
    assert sorted(leased) == [1, 2, 3] and sorted(settled) == [1, 2], seen
    for k, r in leased.items():  # a lease: attempt + 1, due again only when the lease runs out
        assert LEASE_S - 2 < (r["next"] - r["now"]).total_seconds() <= LEASE_S, r
    lease_at = {k: r["next"].timestamp() - LEASE_S for k, r in leased.items()}
    for k, r in settled.items():
        assert r["error"].startswith("kafka delivery failed") or "not confirmed" in r["error"], r
        # the failure is recorded as next_attempt_at = failure + backoff(attempt); the failure
        # comes at most the delivery timeout (2 s) after the lease
        spent = r["next"].timestamp() - lease_at[k] - backoff[k]
        assert 0 <= spent <= 3.5, (k, spent, r)
        # the next lease comes when the row is due: not before, and promptly (the dispatcher
        # wakes at the due time although its poll interval is 30 s)
        late = lease_at[k + 1] - r["next"].timestamp()
        assert 0 <= late < 2.0, (k, late)
    assert dead["attempt"] == 3 and dead["error"].startswith("max attempts reached: "), dead
    cur.execute("SELECT event_level, run_id::text, job_key, message, details FROM nifi_ops.load_event"
                " WHERE event_name = 'DISPATCH_DEAD' AND run_id = %s", (run_id,))
    [(level, ev_run, job, message, details)] = cur.fetchall()
    assert (level, ev_run, job, message) == ("ERROR", run_id, "DISPATCH_DRILL", dead["error"])
    assert details == {"dispatchId": dispatch_id, "type": "VALIDATE_RUN", "httpStatus": None, "attempt": 3}
    # DEAD is final: no further attempt
    notify(cur)
    commands.drain(2)
    assert row(cur, dispatch_id)["status"] == "DEAD" and row(cur, dispatch_id)["attempt"] == 3
    assert [c for c in commands.records if c["value"]["dispatchId"] == dispatch_id] == []


def test_a_dead_dispatchers_lease_runs_out_then_another_delivers(iso, cur, commands):
    # dispatcher-k leases the row and hangs in the delivery (no such topic, long timeout): kill -9
    iso.stack.start("dispatcher", "dispatcher-k", settings={
        "topic.validate-run-commands.name": iso.prefix + "no-such-topic", "dispatch.lease": "PT4S",
        "dispatch.delivery_timeout": "PT30S"})
    listening(iso, "dispatcher-k")
    [(dispatch_id, _)] = add_dispatches(iso, 1).items()
    leased = wait_until(lambda: (lambda r: r["attempt"] == 1 and r)(row(cur, dispatch_id)), 10, "leased", interval=0.05)
    assert leased["status"] == "PENDING" and 2 < (leased["next"] - leased["now"]).total_seconds() <= 4
    assert iso.stack.kill("dispatcher-k") == -9
    # another dispatcher does not touch the row before the lease runs out, and delivers it after
    iso.stack.start("dispatcher", "dispatcher-l")
    [cmd] = commands.wait_for(lambda r: r["value"]["dispatchId"] == dispatch_id, timeout=20)
    after = wait_until(lambda: (lambda r: r["status"] == "SENT" and r)(row(cur, dispatch_id)), 5, "SENT")
    assert after["attempt"] == 2 == cmd["value"]["attempt"]
    assert after["sent_at"] >= leased["next"], (after, leased)


def test_reissue_command_and_a_command_that_cannot_be_built(iso, cur):
    reissues = RawReader(iso.bootstrap, iso.topic("reissue-partition-commands"), "reissue-partition-commands",
                         from_beginning=False)
    try:
        iso.stack.start("dispatcher", "dispatcher-r")
        listening(iso, "dispatcher-r")
        run_id, ok_id, bad_id = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
        path = "/data/stage/DISPATCH_DRILL/run_id=" + run_id
        conn = psycopg2.connect(host=iso.stack.pg["host"], port=iso.stack.pg["port"], dbname=iso.dbname,
                                user="postgres")
        with conn, conn.cursor() as c:
            c.execute("INSERT INTO nifi_ops.load_run (run_id, job_key, business_key, status, snapshot_scn,"
                      " hdfs_run_path, expected_partition_count, source_count) VALUES (%s, 'DISPATCH_DRILL',"
                      " 'bk-reissue', 'EXTRACTING', 48151623420000000042, %s, 8, 105000)", (run_id, path))
            c.execute("INSERT INTO nifi_ops.load_partition (run_id, partition_id, lower_bound, upper_bound,"
                      " upper_inclusive, status, expected_row_count, attempt_count) VALUES"
                      " (%s, '0003', 45001, 60001, false, 'RETRY', 15000, 1)", (run_id,))
            for dispatch_id, pid in ((ok_id, "0003"), (bad_id, "0009")):
                c.execute("INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, partition_id)"
                          " VALUES (%s, %s, 'REISSUE_PARTITION', %s)", (dispatch_id, run_id, pid))
            c.execute("SELECT pg_notify('load_dispatch', %s)", (run_id,))
        conn.close()
        [cmd] = reissues.wait_for(lambda r: r["value"]["dispatchId"] == ok_id, timeout=15)
        v = cmd["value"]
        assert {k: v[k] for k in ("runId", "jobKey", "businessKey", "partitionId", "snapshotScn", "hdfsRunPath",
                                  "lowerBound", "upperBound", "upperInclusive", "isNullPartition",
                                  "expectedRowCount", "dispatchType", "attempt")} == {
            "runId": run_id, "jobKey": "DISPATCH_DRILL", "businessKey": "bk-reissue", "partitionId": "0003",
            "snapshotScn": "48151623420000000042", "hdfsRunPath": path, "lowerBound": "45001",
            "upperBound": "60001", "upperInclusive": False, "isNullPartition": False, "expectedRowCount": 15000,
            "dispatchType": "REISSUE_PARTITION", "attempt": 1}
        assert cmd["headers"]["dispatchType"] == b"REISSUE_PARTITION" and cmd["headers"]["jobKey"] == b"DISPATCH_DRILL"
        wait_until(lambda: row(cur, ok_id)["status"] == "SENT", 5, "SENT")
        # a partition that does not exist: the command cannot be built, DEAD at once (no retry)
        bad = wait_until(lambda: (lambda r: r["status"] == "DEAD" and r)(row(cur, bad_id)), 10, "DEAD")
        assert bad["attempt"] == 1 and bad["error"] == "build failed: partition 0009 of run %s not found" % run_id
        cur.execute("SELECT partition_id, message, details->>'type' FROM nifi_ops.load_event"
                    " WHERE event_name = 'DISPATCH_DEAD' AND run_id = %s", (run_id,))
        assert cur.fetchall() == [("0009", bad["error"], "REISSUE_PARTITION")]
        reissues.drain(1)
        assert [r["value"]["dispatchId"] for r in reissues.records] == [ok_id]
    finally:
        reissues.close()
