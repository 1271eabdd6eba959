"""Ledger states written directly with SQL (as the migration account), for tests of the operator's
tool and the monitor: a run in any status with its timestamps in the past, partitions, dispatches,
metrics and events. These are fixtures, not a service: nothing here follows the CAS rules.

Times are given as seconds in the past (``ended_ago=4 * 86400``) and computed by the database clock,
like every time decision of the ledger.
"""
import json
import uuid

from .scenario import HDFS_ROOT, JOB

ACTIVE = ("CREATED", "EXTRACTING", "EXTRACTED_VALIDATED", "STAGE_VALIDATING", "STAGING_VALIDATED",
          "PUBLISHING", "PUBLISHED", "PUBLISH_UNKNOWN")
FAILED = ("FAILED_MANIFEST", "FAILED_EXTRACT", "FAILED_STAGE_VALIDATION", "FAILED_PUBLISH",
          "FAILED_TARGET_VALIDATION", "FAILED_SNAPSHOT_EXPIRED", "TIMED_OUT")


def unique_key(prefix="t"):
    """A business key of its own (one active run per job and business key)."""
    return "2026-09-28.%s%s" % (prefix, uuid.uuid4().hex[:12])


def insert_run(cur, status, job=JOB, business_key=None, run_id=None, heartbeat_ago=0, completed_ago=None,
               started_ago=None, expected_partitions=None, error_stage=None, error_code=None, error_message=None,
               publish_token=None, publish_started_ago=None, cleaned=False):
    """Inserts one run row in `status`; returns its run id. completed_ago=None leaves completed_at
    NULL (the ended time is then heartbeat_at)."""
    run_id = run_id or str(uuid.uuid4())
    business_key = business_key or unique_key()
    started_ago = max(started_ago or 0, heartbeat_ago or 0, completed_ago or 0) + 60
    cur.execute(
        "INSERT INTO nifi_ops.load_run (run_id, job_key, business_key, status, expected_partition_count,"
        " hdfs_run_path, stage_table_name, publish_token, started_at, heartbeat_at, completed_at,"
        " publish_started_at, error_stage, error_code, error_message, cleaned_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s,"
        "  clock_timestamp() - %s * interval '1 second', clock_timestamp() - %s * interval '1 second',"
        "  clock_timestamp() - %s * interval '1 second', clock_timestamp() - %s * interval '1 second',"
        "  %s, %s, %s, CASE WHEN %s THEN clock_timestamp() END)",
        (run_id, job, business_key, status, expected_partitions,
         "%s/%s/run_id=%s" % (HDFS_ROOT, job, run_id), "stg_%s" % run_id.replace("-", ""), publish_token,
         started_ago, heartbeat_ago, completed_ago, publish_started_ago, error_stage, error_code, error_message,
         cleaned))
    return run_id


def insert_partition(cur, run_id, partition_id, status="PENDING", expected=15000, actual=None, attempts=0,
                     worker=None, lower=None, upper=None):
    """Inserts one partition (range [lower, upper), derived from the id when not given)."""
    n = int(partition_id)
    lower = lower if lower is not None else 1 + n * 15000
    upper = upper if upper is not None else lower + 15000
    cur.execute(
        "INSERT INTO nifi_ops.load_partition (run_id, partition_id, lower_bound, upper_bound, status,"
        " expected_row_count, actual_row_count, attempt_count, worker_node, heartbeat_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, clock_timestamp())",
        (run_id, partition_id, lower, upper, status, expected, actual, attempts, worker))


def insert_dispatch(cur, run_id, status, dispatch_type="VALIDATE_RUN", partition_id=None, attempts=0,
                    last_error=None, next_attempt_ago=0, dispatch_id=None):
    """Inserts one outbox row; returns its dispatch id."""
    dispatch_id = dispatch_id or str(uuid.uuid4())
    cur.execute(
        "INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, partition_id, status,"
        " attempt_count, last_error, last_http_status, next_attempt_at, sent_at, acked_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, clock_timestamp() - %s * interval '1 second',"
        "  CASE WHEN %s IN ('SENT', 'ACKED') THEN clock_timestamp() END,"
        "  CASE WHEN %s = 'ACKED' THEN clock_timestamp() END)",
        (dispatch_id, run_id, dispatch_type, partition_id, status, attempts, last_error,
         503 if status == "DEAD" else None, next_attempt_ago, status, status))
    return dispatch_id


def insert_metric(cur, run_id, stage, name, expected, actual, result="PASS", query_version="v1"):
    """Inserts one validation metric."""
    cur.execute(
        "INSERT INTO nifi_ops.load_validation (run_id, stage, metric_name, expected_value, actual_value,"
        " result, query_version) VALUES (%s, %s, %s, %s, %s, %s, %s)",
        (run_id, stage, name, expected, actual, result, query_version))


def insert_event(cur, run_id, name, level="WARN", message=None, job=JOB, ago=0, details=None):
    """Inserts one event as NiFi PG-90 would (e.g. CLEANUP_FAILED)."""
    cur.execute(
        "INSERT INTO nifi_ops.load_event (event_id, event_time, event_level, event_name, run_id, job_key,"
        " process_group, message, details)"
        " VALUES (%s, clock_timestamp() - %s * interval '1 second', %s, %s, %s, %s, 'PG-90', %s, %s)",
        (str(uuid.uuid4()), ago, level, name, run_id, job, message, json.dumps(details or {})))


def run_row(cur, run_id):
    """The run row as a dict (column name -> value), or None."""
    cur.execute("SELECT * FROM nifi_ops.load_run WHERE run_id = %s", (run_id,))
    row = cur.fetchone()
    return dict(zip([d[0] for d in cur.description], row)) if row else None


def dispatch_row(cur, dispatch_id):
    """The dispatch row as a dict, or None."""
    cur.execute("SELECT * FROM nifi_ops.load_dispatch WHERE dispatch_id = %s", (dispatch_id,))
    row = cur.fetchone()
    return dict(zip([d[0] for d in cur.description], row)) if row else None


def events(cur, run_id, name=None):
    """The run's events, oldest first, as dicts (details already decoded by psycopg2)."""
    cur.execute("SELECT * FROM nifi_ops.load_event WHERE run_id = %s AND (%s::text IS NULL OR event_name = %s)"
                " ORDER BY event_time", (run_id, name, name))
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]
