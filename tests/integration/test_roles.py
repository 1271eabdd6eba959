"""Per-role deny tests on the real database (issue 9 §7, migrations 0004 and 0008): each service's
PostgreSQL role is refused (insufficient_privilege) every write outside its job, and still allowed
the statements its service runs. The statements touch no row (WHERE false, or a rolled-back
transaction): PostgreSQL checks the rights before it looks for rows."""
import psycopg2
import psycopg2.errors
import pytest

from llsim.stack import Stack

NIL = "'00000000-0000-0000-0000-000000000000'::uuid"

# (role, statement) pairs that must be refused.
DENIED = [
    # the registrar admits runs: it never writes a file, a token, a dispatch's state, the event log
    ("ll_registrar", "INSERT INTO nifi_ops.load_file (run_id, partition_id, chunk_index) VALUES (%s, 'p', 0)" % NIL),
    ("ll_registrar", "UPDATE nifi_ops.load_file SET status = 'INVALIDATED' WHERE false"),
    ("ll_registrar", "UPDATE nifi_ops.load_dispatch SET status = 'SENT' WHERE false"),
    ("ll_registrar", "INSERT INTO nifi_ops.load_claim_token (run_id) VALUES (%s)" % NIL),
    ("ll_registrar", "UPDATE nifi_ops.load_partition SET status = 'SUCCESS' WHERE false"),
    ("ll_registrar", "DELETE FROM nifi_ops.load_run WHERE false"),
    ("ll_registrar", "SELECT event_name FROM nifi_ops.load_event LIMIT 1"),
    # the claimer owns claims: it cannot create, requeue or retarget a command, nor write files
    ("ll_claimer", "INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type) VALUES (%s, %s, 'X')"
     % (NIL, NIL)),
    ("ll_claimer", "UPDATE nifi_ops.load_dispatch SET attempt_count = 0 WHERE false"),
    ("ll_claimer", "UPDATE nifi_ops.load_dispatch SET next_attempt_at = now() WHERE false"),
    ("ll_claimer", "UPDATE nifi_ops.load_dispatch SET run_id = %s WHERE false" % NIL),
    ("ll_claimer", "DELETE FROM nifi_ops.load_dispatch WHERE false"),
    ("ll_claimer", "UPDATE nifi_ops.load_file SET status = 'INVALIDATED' WHERE false"),
    ("ll_claimer", "UPDATE nifi_ops.load_validation SET result = 'PASS' WHERE false"),
    # completion applies the gates: never a claim token, never a deletion
    ("ll_completion", "INSERT INTO nifi_ops.load_claim_token (run_id) VALUES (%s)" % NIL),
    ("ll_completion", "DELETE FROM nifi_ops.load_file WHERE false"),
    ("ll_completion", "TRUNCATE nifi_ops.load_event"),
    # the dispatcher delivers the outbox: it writes no file, no run, no partition, no new command
    ("ll_dispatcher", "INSERT INTO nifi_ops.load_file (run_id, partition_id, chunk_index) VALUES (%s, 'p', 0)" % NIL),
    ("ll_dispatcher", "UPDATE nifi_ops.load_file SET status = 'INVALIDATED' WHERE false"),
    ("ll_dispatcher", "UPDATE nifi_ops.load_run SET status = 'SUCCESS' WHERE false"),
    ("ll_dispatcher", "UPDATE nifi_ops.load_partition SET status = 'SUCCESS' WHERE false"),
    ("ll_dispatcher", "INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type) VALUES (%s, %s, 'X')"
     % (NIL, NIL)),
    ("ll_dispatcher", "UPDATE nifi_ops.load_dispatch SET dispatch_type = 'X' WHERE false"),
    ("ll_dispatcher", "UPDATE nifi_ops.load_dispatch SET acked_at = now() WHERE false"),
    # the sweeper recovers: it creates no run and no file, and deletes no event
    ("ll_sweeper", "INSERT INTO nifi_ops.load_run (run_id) VALUES (%s)" % NIL),
    ("ll_sweeper", "INSERT INTO nifi_ops.load_file (run_id, partition_id, chunk_index) VALUES (%s, 'p', 0)" % NIL),
    ("ll_sweeper", "DELETE FROM nifi_ops.load_event WHERE false"),
    # the operator changes only what loadctl's commands change (resolve, cleanup, resend)
    ("ll_operator", "INSERT INTO nifi_ops.load_run (run_id) VALUES (%s)" % NIL),
    ("ll_operator", "DELETE FROM nifi_ops.load_run WHERE false"),
    ("ll_operator", "UPDATE nifi_ops.load_run SET snapshot_scn = 1 WHERE false"),
    ("ll_operator", "UPDATE nifi_ops.load_run SET extracted_count = 0 WHERE false"),
    ("ll_operator", "UPDATE nifi_ops.load_run SET business_key = 'x' WHERE false"),
    ("ll_operator", "UPDATE nifi_ops.load_partition SET status = 'SUCCESS' WHERE false"),
    ("ll_operator", "UPDATE nifi_ops.load_file SET status = 'INVALIDATED' WHERE false"),
    ("ll_operator", "INSERT INTO nifi_ops.load_claim_token (run_id) VALUES (%s)" % NIL),
    ("ll_operator", "UPDATE nifi_ops.load_validation SET result = 'PASS' WHERE false"),
    ("ll_operator", "INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type) VALUES (%s, %s, 'X')"
     % (NIL, NIL)),
    ("ll_operator", "UPDATE nifi_ops.load_dispatch SET run_id = %s WHERE false" % NIL),
    ("ll_operator", "UPDATE nifi_ops.load_dispatch SET acked_at = now() WHERE false"),
    ("ll_operator", "DELETE FROM nifi_ops.load_event WHERE false"),
    # the instance lease (0015) is the consuming services' own: the others only read it, or not at all
    ("ll_dispatcher", "UPDATE nifi_ops.service_instance SET renewed_at = now() WHERE false"),
    ("ll_sweeper", "DELETE FROM nifi_ops.service_instance WHERE false"),
    ("ll_operator", "DELETE FROM nifi_ops.service_instance WHERE false"),
    # the retention purge (0018) deletes the rows of old runs and writes its audit row, nothing else:
    # no update, no read beyond run_id, no lock of its own on a run (the functions lock), no other table
    ("ll_retention", "UPDATE nifi_ops.load_run SET status = 'SUCCESS' WHERE false"),
    ("ll_retention", "UPDATE nifi_ops.load_run SET cleaned_at = now() WHERE false"),
    ("ll_retention", "SELECT run_id FROM nifi_ops.load_run WHERE false FOR UPDATE"),
    ("ll_retention", "SELECT status FROM nifi_ops.load_run WHERE false"),
    ("ll_retention", "SELECT message FROM nifi_ops.load_event WHERE false"),
    ("ll_retention", "INSERT INTO nifi_ops.load_run (run_id) VALUES (%s)" % NIL),
    ("ll_retention", "INSERT INTO nifi_ops.load_file (run_id, partition_id, chunk_index) VALUES (%s, 'p', 0)" % NIL),
    ("ll_retention", "UPDATE nifi_ops.load_event SET message = 'x' WHERE false"),
    ("ll_retention", "UPDATE nifi_ops.load_dispatch SET status = 'PENDING' WHERE false"),
    ("ll_retention", "TRUNCATE nifi_ops.load_event"),
    ("ll_retention", "DELETE FROM nifi_ops.load_run_rejection WHERE false"),
    ("ll_retention", "DELETE FROM nifi_ops.consumer_position WHERE false"),
    ("ll_retention", "DELETE FROM nifi_ops.position_rewind WHERE false"),
    ("ll_retention", "DELETE FROM nifi_ops.input_refusal WHERE false"),
    ("ll_retention", "DELETE FROM nifi_ops.offset_gap_acceptance WHERE false"),
    ("ll_retention", "DELETE FROM nifi_ops.service_instance WHERE false"),
    ("ll_retention", "DELETE FROM nifi_ops.sweeper_instance WHERE false"),
    ("ll_retention", "DELETE FROM nifi_ops.schema_migrations WHERE false"),
] + [
    # the purge's functions lock and count old runs for ll_retention only (their schema is usable by it alone)
    (r, "SELECT * FROM nifi_ops_retention.%s(now(), 1)" % f)
    for r in ("ll_operator", "ll_sweeper", "ll_completion")
    for f in ("lock_runs", "count_runs")
] + [
    # DDL belongs to the migration account alone
    (r, "CREATE TABLE nifi_ops.ll_intruder (x int)")
    for r in ("ll_registrar", "ll_claimer", "ll_completion", "ll_dispatcher", "ll_sweeper", "ll_operator",
              "ll_retention")
]

# (role, statement) pairs each service's own work needs: they must still pass.
ALLOWED = [
    ("ll_claimer", "UPDATE nifi_ops.load_dispatch SET status = 'ACKED', acked_at = clock_timestamp() WHERE false"),
    ("ll_dispatcher", "UPDATE nifi_ops.load_dispatch SET attempt_count = attempt_count + 1,"
                      " next_attempt_at = now(), status = 'SENT', sent_at = now(), last_http_status = 1,"
                      " last_error = NULL WHERE false"),
    ("ll_dispatcher", "SELECT dispatch_id FROM nifi_ops.load_dispatch WHERE false FOR UPDATE SKIP LOCKED"),
    ("ll_operator", "SELECT run_id FROM nifi_ops.load_run WHERE false FOR UPDATE"),
    ("ll_operator", "UPDATE nifi_ops.load_run SET status = 'PUBLISHED', version_no = version_no + 1,"
                    " heartbeat_at = now(), published_at = now(), completed_at = now(), error_stage = NULL,"
                    " error_code = NULL, error_message = NULL, cleaned_at = now() WHERE false"),
    ("ll_operator", "UPDATE nifi_ops.load_dispatch SET status = 'PENDING', attempt_count = 0,"
                    " next_attempt_at = now(), last_error = NULL WHERE false"),
    ("ll_completion", "UPDATE nifi_ops.load_file SET status = 'WRITTEN' WHERE false"),
    ("ll_sweeper", "UPDATE nifi_ops.load_file SET status = 'INVALIDATED' WHERE false"),
] + [
    # the instance lease (common/src/core/instance.c): read, take, take over, renew, release
    (r, sql) for r in ("ll_registrar", "ll_claimer", "ll_completion") for sql in (
        "SELECT holder, lease_seq FROM nifi_ops.service_instance WHERE false",
        "INSERT INTO nifi_ops.service_instance (consumer_group, instance_id, holder, host, pid, proc_start,"
        " boot_id, pid_ns, lease_ms) VALUES ('g', 'i', 'h', 'host', 1, 0, '', '', 30000)"
        " ON CONFLICT (consumer_group, instance_id) DO NOTHING",
        "UPDATE nifi_ops.service_instance SET holder = 'h', lease_seq = lease_seq + 1, renewed_at = now() WHERE false",
        "DELETE FROM nifi_ops.service_instance WHERE false",
    )
] + [("ll_operator", "SELECT * FROM nifi_ops.service_instance WHERE false")] + [
    # the retention purge (tools/loadctl/purge.c): lock or count the candidates, delete every row keyed
    # by them, children first, and write the audit row
    ("ll_retention", "SELECT run_id, cleaned FROM nifi_ops_retention.lock_runs(now(), 1)"),
    ("ll_retention", "SELECT runs, oldest, newest, uncleaned FROM nifi_ops_retention.count_runs(now(), 1)"),
    ("ll_retention", "SELECT set_config('lock_timeout', '2s', true), set_config('statement_timeout', '60s', true)"),
    ("ll_retention", "INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, process_group,"
                     " processor_name, row_count, message, details) VALUES (gen_random_uuid(), 'INFO',"
                     " 'RUNS_PURGED', 'LOAD_CONTROL_API', 'runs_purged', 0, 'm', '{}'::jsonb)"),
] + [
    ("ll_retention", "DELETE FROM nifi_ops.%s WHERE run_id = ANY('{}'::uuid[])" % t)
    for t in ("load_claim_token", "load_file", "load_partition", "load_validation", "load_validation_start",
              "load_dispatch", "load_publish_token", "load_event", "load_run")
]


@pytest.fixture(scope="module")
def stack():
    s = Stack()
    s.migrate()
    return s


def run_as(stack, role, sql):
    """Runs sql as role inside a transaction that is rolled back."""
    c = psycopg2.connect(stack.conninfo(role))
    try:
        with c.cursor() as cur:
            cur.execute(sql)
    finally:
        c.rollback()
        c.close()


@pytest.mark.parametrize("role,sql", DENIED, ids=["%s:%s" % (r, s[:60]) for r, s in DENIED])
def test_role_is_refused(stack, role, sql):
    with pytest.raises(psycopg2.errors.InsufficientPrivilege):
        run_as(stack, role, sql)


@pytest.mark.parametrize("role,sql", ALLOWED, ids=["%s:%s" % (r, s[:60]) for r, s in ALLOWED])
def test_role_keeps_what_its_service_needs(stack, role, sql):
    run_as(stack, role, sql)
