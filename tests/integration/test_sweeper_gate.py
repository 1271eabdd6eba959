"""The sweeper waits for the re-read (issue 39, item 3; docs/design.md §5, "The sweeper waits for
the re-read"; services/sweeper/gate.c). On a database of its own, with thresholds of seconds:

- a detected database loss that its consumer group has not read again yet (a position_rewind row
  whose group's position is below its end) keeps every rule from acting: a stale partition is not
  timed out until the group's position passes the range, then it is;
- a ledger that no longer holds the sweeper's own last tick (what a pooler that reconnected to a
  promoted standby shows behind the same connection) starts recovery.start_grace again: a stale
  partition is left alone for the grace, then timed out.

Before issue 39 the sweeper timed both out at its first tick.
"""
import time
import uuid

import pytest

from conftest import close_clean
from llsim.drills import Isolated, events
from llsim.flow import Flow
from llsim.kafkaio import Nifi
from test_sweeper import FAST, part_row, stalled_run


@pytest.fixture
def iso():
    iso = Isolated("sweepgate")
    for s in ("registrar", "claimer", "completion"):
        iso.stack.start(s)
    yield iso
    close_clean(iso)


def status_after(cur, run, pid, seconds):
    """The partition's status once `seconds` have passed (polled, to see a change early)."""
    end = time.time() + seconds
    while True:
        s = part_row(cur, run, pid, "status")[0]
        if s != "RUNNING" or time.time() > end:
            return s
        time.sleep(0.3)


def test_no_rule_acts_while_a_detected_loss_is_not_read_again(iso):
    st = iso.stack
    flow = Flow(Nifi(iso.bootstrap, iso.prefix))
    c = st.db()
    cur = c.cursor()
    try:
        run, stale = stalled_run(flow)
        # a loss detected by a group that has read again only up to offset 10 of [0, 100)
        group = "drill.gate.%s" % uuid.uuid4().hex[:8]
        cur.execute("INSERT INTO nifi_ops.consumer_position (consumer_group, topic, kafka_partition, next_offset)"
                    " VALUES (%s, 'chunks', 0, 10)", (group,))
        cur.execute("INSERT INTO nifi_ops.position_rewind (consumer_group, topic, kafka_partition, from_offset,"
                    " to_offset, offsets) VALUES (%s, 'chunks', 0, 0, 100, 100)", (group,))
        st.start("sweeper", "sweeper-gate", dict(FAST, **{"recovery.start_grace": "PT0S"}))
        # stale after 3 s; the sweeper ticks every 0.5 s: it would have acted within 6 s
        assert status_after(cur, run, stale, 8) == "RUNNING", "the sweeper acted before the loss was read again"
        waits = events(st.log_path("sweeper-gate"), "sweeper_waits")
        assert waits and "1 detected database losses not yet re-read" in waits[-1]["msg"], waits
        cur.execute("UPDATE nifi_ops.consumer_position SET next_offset = 100 WHERE consumer_group = %s", (group,))
        assert status_after(cur, run, stale, 15) == "TIMED_OUT"
        assert events(st.log_path("sweeper-gate"), "sweeper_resumes")
    finally:
        flow.close()
        c.close()


def test_a_ledger_without_the_sweepers_last_tick_restarts_the_grace(iso):
    st = iso.stack
    flow = Flow(Nifi(iso.bootstrap, iso.prefix))
    c = st.db()
    cur = c.cursor()
    try:
        st.start("sweeper", "sweeper-gate", dict(FAST, **{"recovery.start_grace": "PT10S"}))
        # the first grace passes; the sweeper ticks and records its token
        deadline = time.time() + 30
        while not events(st.log_path("sweeper-gate"), "sweeper_resumes") and time.time() < deadline:
            time.sleep(0.3)
        assert events(st.log_path("sweeper-gate"), "sweeper_resumes")
        # the ledger goes back to before the sweeper's last tick: its row holds another token
        cur.execute("UPDATE nifi_ops.sweeper_instance SET tick_token = gen_random_uuid()"
                    " WHERE instance_id = 'sweeper-gate'")
        assert cur.rowcount == 1
        t0 = time.time()
        run, stale = stalled_run(flow)
        # stale 3 s after its last chunk, but inside the grace that the loss started again
        left = 9 - (time.time() - t0)
        assert left > 3, "the stalled run took too long to set up (%.1f s)" % (time.time() - t0)
        assert status_after(cur, run, stale, left) == "RUNNING", "the sweeper acted inside the grace"
        assert events(st.log_path("sweeper-gate"), "sweeper_ledger_gone_back")
        assert status_after(cur, run, stale, 15) == "TIMED_OUT"
    finally:
        flow.close()
        c.close()
