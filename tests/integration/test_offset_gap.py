"""Offsets the topic no longer holds (issue 39, item 6; docs/design.md §5, "Offsets the topic no
longer holds"; docs/operations.md, runbook #offsets-unreadable).

A consumer group's position below a partition's log start means inputs the broker deleted (the
topic's retention) before the group read them: a service down longer than the retention, a ledger
restored to a position older than it. They must not be marked done without a word. Here the
registrar is stopped, two run requests are sent to the partition it read last and deleted
(DeleteRecords, what retention does to old segments: tests/tools/ll_delete_records.c), a third is
sent after them, and the registrar starts again:

- the partition stops: `offsets_unreadable` (level error) names the range [from, to), the gauge
  loadledger_unreadable_offsets is its size, and the third request is not
  answered (on 0a54c2f, with auto.offset.reset = earliest, it was answered at once and nothing
  was said: the two lost inputs skipped for good);
- `loadctl accept-gap` with a reason too short is refused (exit 2, INVALID_REASON), with one
  recorded (who and why, nifi_ops.offset_gap_acceptance) the partition reads on from the end of
  the range within loop.position_check_interval: the third request is answered, the gauge is 0,
  `offsets_gap_accepted` logged; the lost requests never are;
- after a restart the partition starts past the gap (its position was written in the ledger and
  committed to Kafka): no second `offsets_unreadable`.
"""
import os
import subprocess
import zlib

import pytest

from conftest import new_run
from llsim.drills import Isolated, wait_until
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from llsim.probe import log_size, wait_log
from test_metrics import HTTP, scrape, value


@pytest.fixture(scope="module")
def iso():
    i = Isolated("gap")
    yield i
    codes = i.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    assert not bad, "services did not exit cleanly: %s; logs in %s" % (bad, i.stack.log_dir)


def on_partition(p, n):
    """A run whose id the producer's partitioner (CRC32 of the key, librdkafka's consistent_random)
    puts on partition p of n."""
    while True:
        r = new_run()
        if zlib.crc32(r.run_id.encode()) % n == p:
            return r


def delete_records(iso, topic, partition, below):
    tool = os.path.join(iso.stack.build_dir, "tests", "ll-delete-records")
    p = subprocess.run([tool, iso.bootstrap, topic, str(partition), str(below)], capture_output=True, text=True,
                       timeout=90)
    assert p.returncode == 0, p.stderr
    return int(p.stdout.strip())


def test_a_position_below_the_log_start_stops_its_partition_until_an_operator_accepts_the_gap(iso):
    st = iso.stack
    group, topic = iso.groups["registrar"], iso.topic("run-requests")
    n = iso.topics["run-requests"]
    nifi = Nifi(st.bootstrap, st.prefix)
    flow = Flow(nifi)
    db = st.db()
    cur = db.cursor()
    try:
        st.start("registrar", settings=dict(HTTP))
        first = on_partition(0, n)
        d = flow.create(first)
        assert d["outcome"] == "ACCEPTED" and d["sourcePartition"] == 0, d
        base = d["sourceOffset"] + 1
        assert st.stop("registrar-0") == 0

        lost = [on_partition(0, n), on_partition(0, n)]
        for r in lost:
            nifi.send("run-requests", r.run_request())
        nifi.flush()
        assert delete_records(iso, topic, 0, base + 2) == base + 2
        later = on_partition(0, n)
        nifi.send("run-requests", later.run_request())
        nifi.flush()

        since = log_size(st, "registrar-0")
        st.start("registrar", settings=dict(HTTP))
        gap = wait_log(st, "registrar-0", "offsets_unreadable", since=since, timeout=60)
        assert (gap["level"], gap["topic"], gap["kafkaPartition"]) == ("error", topic, 0), gap
        assert "[%d, %d)" % (base, base + 2) in gap["msg"], gap
        port = wait_log(st, "registrar-0", "http_listening", since=since, timeout=30)["port"]
        wait_until(lambda: value(scrape(port)[0], "loadledger_unreadable_offsets") == 2,
                   30, "the gauge names the gap")
        flow.r["run-decisions"].drain(3)
        assert not [r for r in flow.r["run-decisions"].records if r["value"]["runId"] == later.run_id], \
            "an input after the gap was answered while the gap stood"

        short = st.loadctl("accept-gap", group, topic, "0", "--from", str(base), "--to", str(base + 2),
                           "--reason", "gone", check=False)
        assert short.returncode == 2 and "INVALID_REASON" in short.stderr + short.stdout, short
        reason = "inputs deleted by retention during the registrar outage; runs re-requested by the job owner"
        ok = st.loadctl("accept-gap", group, topic, "0", "--from", str(base), "--to", str(base + 2),
                        "--reason", reason, check=False, user="ll_operator")
        assert ok.returncode == 0, ok.stderr
        assert flow.reply("run-decisions", later.run_id, timeout=60)[0]["outcome"] == "ACCEPTED"
        wait_log(st, "registrar-0", "offsets_gap_accepted", since=since, timeout=30)
        assert value(scrape(port)[0], "loadledger_unreadable_offsets") == 0
        cur.execute("SELECT consumer_group, topic, kafka_partition, from_offset, to_offset, reason, accepted_by"
                    " FROM nifi_ops.offset_gap_acceptance")
        (g, t, p, f, to, why, by), = cur.fetchall()
        assert (g, t, p, f, to, why) == (group, topic, 0, base, base + 2, reason)
        assert '"operatorUser"' in by, by
        cur.execute("SELECT run_id::text FROM nifi_ops.load_run")
        assert {r[0] for r in cur.fetchall()} == {first.run_id, later.run_id}, "a lost input was applied"

        assert st.stop("registrar-0") == 0
        since = log_size(st, "registrar-0")
        st.start("registrar")
        wait_log(st, "registrar-0", "partitions_assigned", since=since, timeout=60)
        again = new_run()
        assert flow.create(again)["outcome"] == "ACCEPTED"
        with open(st.log_path("registrar-0"), "rb") as f:
            f.seek(since)
            tail = f.read().decode(errors="replace")
        assert '"offsets_unreadable"' not in tail, "the gap was found again after the restart"
    finally:
        flow.close()
        db.close()
