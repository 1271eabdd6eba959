"""A dispatcher settles only the lease it holds (issue 39, item 6; services/dispatcher/outbox.c).

Two HTTP-sink dispatchers on a database of their own, dispatch.lease PT1S, dispatch.max_attempts 1.
Dispatcher A leases a validate-run row and POSTs it; the receiver holds A's request 4 s and answers
500. A's lease runs out meanwhile; dispatcher B leases the row again (attempt 2) and POSTs it; the
receiver holds B's request 6 s and answers 200. A's 500 comes first: with max_attempts 1 that is a
DEAD, but the row is B's now: A must not mark it DEAD (nor back it off). The row ends SENT (by A's
next lease, answered at once, or by B), never DEAD. (A lease shorter than a delivery is a
misconfiguration, docs/operations.md: here it only makes the stale lessee.)
Before issue 39 A marked the delivered row DEAD and B's SENT found it DEAD: a command NiFi received,
recorded as never delivered.
"""
import http.server
import threading
import time
import uuid

from conftest import close_clean
from llsim.drills import Isolated, wait_until


class Holding(http.server.BaseHTTPRequestHandler):
    """The first request: held 4 s, then 500; the second: held 6 s, then 200; later ones: 200 at once."""
    seen = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        n = len(Holding.seen)
        Holding.seen.append((time.time(), self.headers.get("X-Dispatch-Id")))
        time.sleep(4 if n == 0 else 6 if n == 1 else 0)
        code = 500 if n == 0 else 200
        self.send_response(code)
        text = b"held"
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)


def test_a_stale_lessee_does_not_settle_the_row_another_lessee_delivered():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Holding)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/" % server.server_address[1]
    iso = Isolated("dispatchlease")
    st = iso.stack
    conf = {"dispatch.sink": "http", "nifi.receiver_url": url, "nifi.timeout": "PT10S", "dispatch.lease": "PT1S",
            "dispatch.max_attempts": "1", "dispatch.poll_interval": "PT0.3S", "db.listen_conninfo": "none"}
    c = st.db()
    cur = c.cursor()
    try:
        run_id, dispatch_id = str(uuid.uuid4()), str(uuid.uuid4())
        cur.execute("INSERT INTO nifi_ops.load_run (run_id, job_key, business_key, status, hdfs_run_path,"
                    " stage_table_name, snapshot_scn, source_count, expected_partition_count)"
                    " VALUES (%s, 'LEASE_JOB', 'bk-lease', 'EXTRACTED_VALIDATED', %s, 'stg_x', 77, 10, 1)",
                    (run_id, "/data/stage/LEASE_JOB/run_id=%s" % run_id))
        st.start("dispatcher", "dispatcher-a", conf)
        cur.execute("INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type)"
                    " VALUES (%s, %s, 'VALIDATE_RUN')", (dispatch_id, run_id))
        wait_until(lambda: len(Holding.seen) >= 1, 30, "dispatcher A's request")
        st.start("dispatcher", "dispatcher-b", conf)
        wait_until(lambda: len(Holding.seen) >= 2, 30, "dispatcher B's request after A's lease ran out")
        assert Holding.seen[0][1] == Holding.seen[1][1] == dispatch_id

        def status():
            cur.execute("SELECT status, attempt_count FROM nifi_ops.load_dispatch WHERE dispatch_id = %s",
                        (dispatch_id,))
            return cur.fetchone()
        # A's 500 (4 s after its request) comes while B's request is still held: the row is not
        # A's to settle any more (A then leases it afresh, attempt 3, and delivers it at once)
        time.sleep(max(0.0, Holding.seen[0][0] + 4.5 - time.time()))
        assert status()[0] in ("PENDING", "SENT") and status()[1] >= 2, \
            "the stale lessee settled the row: %s" % (status(),)
        wait_until(lambda: status()[0] != "PENDING", 30, "the settlement")
        assert status()[0] == "SENT", status()
        cur.execute("SELECT count(*) FROM nifi_ops.load_event WHERE run_id = %s AND event_name = 'DISPATCH_DEAD'",
                    (run_id,))
        assert cur.fetchone()[0] == 0
    finally:
        c.close()
        server.shutdown()
        close_clean(iso)
