"""The dispatcher's HTTP sink (docs/contract.md §6, dispatch.sink = http): POSTs to a NiFi
ListenHTTP / HandleHttpRequest receiver, here an HTTP server this test starts on loopback that
answers each case: 2xx -> SENT; 408, 425, 429, 5xx, a dropped connection and a timeout -> backoff
and retry, DEAD after dispatch.max_attempts; other 4xx -> DEAD at once; headers X-Run-Id and
X-Dispatch-Id; the JSON payloads of docs/contract.md §6."""
import http.server
import json
import socket
import threading
import time
import uuid

import pytest

from conftest import one

# job key -> the answers the receiver gives, one per request (the last one repeats)
BEHAVIOUR = {
    "HTTP_OK_JOB": [202],
    "HTTP_FLAKY_JOB": [503, 429, 200],
    "HTTP_408_JOB": [408],
    "HTTP_425_JOB": [425],
    "HTTP_404_JOB": [404],
    "HTTP_400_JOB": [400],
    "HTTP_SLOW_JOB": ["sleep"],
    "HTTP_DROP_JOB": ["drop"],
}


class Receiver(http.server.BaseHTTPRequestHandler):
    requests = []
    counts = {}

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        kind, job = self.path.strip("/").split("/", 1)
        Receiver.requests.append({"kind": kind, "job": job, "runId": self.headers.get("X-Run-Id"),
                                  "dispatchId": self.headers.get("X-Dispatch-Id"),
                                  "contentType": self.headers.get("Content-Type"), "body": json.loads(body)})
        n = Receiver.counts.get(job, 0)
        Receiver.counts[job] = n + 1
        answers = BEHAVIOUR.get(job, [500])
        answer = answers[min(n, len(answers) - 1)]
        if answer == "sleep":
            time.sleep(3)
            answer = 200
        if answer == "drop":
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(answer)
        text = ("answer %d for %s" % (answer, job)).encode()
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)


@pytest.fixture(scope="module")
def receiver():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield "http://127.0.0.1:%d/" % server.server_address[1]
    server.shutdown()


@pytest.fixture(scope="module")
def http_dispatcher(stack, receiver):
    """The Kafka-sink dispatcher of the stack stopped; an HTTP-sink one in its place."""
    stack.stop("dispatcher-0")
    stack.start("dispatcher", instance="dispatcher-http", settings={
        "dispatch.sink": "http", "nifi.receiver_url": receiver, "nifi.timeout": "PT1S",
        "dispatch.max_attempts": "3", "dispatch.backoff_min": "PT0.5S", "dispatch.backoff_max": "PT1S",
        "dispatch.poll_interval": "PT0.5S"})
    yield "dispatcher-http"
    assert stack.stop("dispatcher-http") == 0
    stack.start("dispatcher")


def pending_dispatch(db, job, dtype="VALIDATE_RUN"):
    """A run of `job` with one PENDING dispatch, written directly (as the outbox would)."""
    run_id, dispatch_id = str(uuid.uuid4()), str(uuid.uuid4())
    db.execute("INSERT INTO nifi_ops.load_run (run_id, job_key, business_key, status, hdfs_run_path,"
               " stage_table_name, snapshot_scn, source_count, expected_partition_count)"
               " VALUES (%s, %s, %s, %s, %s, 'stg_x', 77, 10, 1)",
               (run_id, job, "bk-" + run_id[:8], "EXTRACTED_VALIDATED" if dtype == "VALIDATE_RUN" else "EXTRACTING",
                "/data/stage/%s/run_id=%s" % (job, run_id)))
    if dtype == "REISSUE_PARTITION":
        db.execute("INSERT INTO nifi_ops.load_partition (run_id, partition_id, lower_bound, upper_bound,"
                   " upper_inclusive, status, expected_row_count) VALUES (%s, '0003', 10, 20, true, 'RETRY', 10)",
                   (run_id,))
    db.execute("INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, partition_id)"
               " VALUES (%s, %s, %s, %s)", (dispatch_id, run_id, dtype, "0003" if dtype != "VALIDATE_RUN" else None))
    db.execute("SELECT pg_notify('load_dispatch', %s)", (run_id,))
    return run_id, dispatch_id


def settled(db, dispatch_id, statuses=("SENT", "DEAD"), timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        db.execute("SELECT status, attempt_count, last_http_status, last_error FROM nifi_ops.load_dispatch"
                   " WHERE dispatch_id = %s", (dispatch_id,))
        row = db.fetchone()
        if row[0] in statuses:
            return row
        time.sleep(0.3)
    raise AssertionError("dispatch %s still %s" % (dispatch_id, row))


def test_2xx_is_sent_with_headers_and_payload(http_dispatcher, db):
    run_id, dispatch_id = pending_dispatch(db, "HTTP_OK_JOB")
    assert settled(db, dispatch_id)[:3] == ("SENT", 1, 202)
    req = [r for r in Receiver.requests if r["dispatchId"] == dispatch_id][0]
    assert (req["kind"], req["job"], req["runId"], req["contentType"]) == (
        "validate", "HTTP_OK_JOB", run_id, "application/json")
    assert req["body"] == {"runId": run_id, "dispatchId": dispatch_id}


def test_reissue_payload_is_the_work_order(http_dispatcher, db):
    run_id, dispatch_id = pending_dispatch(db, "HTTP_OK_JOB", "REISSUE_PARTITION")
    assert settled(db, dispatch_id)[0] == "SENT"
    req = [r for r in Receiver.requests if r["dispatchId"] == dispatch_id][0]
    assert req["kind"] == "reissue"
    assert req["body"] == {"runId": run_id, "dispatchId": dispatch_id, "partitionId": "0003",
                           "businessKey": "bk-" + run_id[:8], "snapshotScn": "77",
                           "hdfsRunPath": "/data/stage/HTTP_OK_JOB/run_id=%s" % run_id, "lowerBound": "10",
                           "upperBound": "20", "upperInclusive": True, "isNullPartition": False,
                           "expectedRowCount": 10}


def test_transient_answers_are_retried_until_sent(http_dispatcher, db):
    _, dispatch_id = pending_dispatch(db, "HTTP_FLAKY_JOB")
    assert settled(db, dispatch_id)[:3] == ("SENT", 3, 200)


@pytest.mark.parametrize("job,status", [("HTTP_408_JOB", 408), ("HTTP_425_JOB", 425)])
def test_retryable_4xx_end_dead_after_max_attempts(http_dispatcher, db, job, status):
    run_id, dispatch_id = pending_dispatch(db, job)
    row = settled(db, dispatch_id, ("DEAD",))
    assert row[:3] == ("DEAD", 3, status)
    assert row[3].startswith("max attempts reached: HTTP %d" % status)
    assert one(db, "SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'DISPATCH_DEAD'",
               run_id) == 1


@pytest.mark.parametrize("job,status", [("HTTP_404_JOB", 404), ("HTTP_400_JOB", 400)])
def test_permanent_4xx_is_dead_at_once(http_dispatcher, db, job, status):
    _, dispatch_id = pending_dispatch(db, job)
    row = settled(db, dispatch_id, ("DEAD",))
    assert row[:3] == ("DEAD", 1, status)
    assert "answer %d for %s" % (status, job) in row[3]


@pytest.mark.parametrize("job", ["HTTP_SLOW_JOB", "HTTP_DROP_JOB"])
def test_timeouts_and_dropped_connections_are_retried(http_dispatcher, db, job):
    _, dispatch_id = pending_dispatch(db, job)
    row = settled(db, dispatch_id, ("DEAD",), timeout=60)
    assert row[0] == "DEAD" and row[1] == 3 and row[2] is None
    assert row[3].startswith("max attempts reached: ")
