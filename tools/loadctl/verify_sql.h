/*
 * verify_sql.h - the statements of `loadctl verify`'s ledger checks (verify_ledger.c; docs/contract.md
 * §3.1, §5.4, §5.7, §5.12, §8). Each check reads one page of runs at a time: the page is the run ids
 * of up to RUN_PAGE runs that started one after the other (VF_ST_PAGE_FIRST / VF_ST_PAGE_NEXT, a
 * keyset over ix_load_run_started), passed as an array, and every other table is read through a
 * run_id-leading index for the runs of that page only, so verify is linear in the runs (issue 42;
 * tests/integration/test_history_plans.py checks the plans). Pages in start order, not in run id
 * order: the rows of runs that started together were written together, so a page's events, files
 * and partitions lie on neighbouring heap pages; a page of random run ids (the primary key's
 * order) read 500 places of every table, and a year-old ledger twice the size took 5.3 times as
 * long (cache misses, the benchmark's first run). A header so that the plan test prints the texts that ship
 * (tests/tools/ll_print_reads.c).
 */
#ifndef LOADCTL_VERIFY_SQL_H
#define LOADCTL_VERIFY_SQL_H

#include "ll/db.h"
#include "ll/verify.h"

/* Runs past extraction: they had their completion CAS and so their VALIDATE_RUN (§5.11, §5.12).
 * TIMED_OUT and FAILED_EXTRACT/SNAPSHOT/MANIFEST runs never got there (§3.1). */
#define VF_PAST_EXTRACTION                                                                                   \
    "'EXTRACTED_VALIDATED', 'STAGE_VALIDATING', 'STAGING_VALIDATED', 'PUBLISHING', 'PUBLISHED',"             \
    " 'PUBLISH_UNKNOWN', 'SUCCESS', 'FAILED_STAGE_VALIDATION', 'FAILED_PUBLISH', 'FAILED_TARGET_VALIDATION'"

/* The first page of runs: the run ids and start times of the $1 newest runs, in the order of
 * ix_load_run_started (started_at DESC, run_id): a range of that index stopped after $1 rows.
 * ORDER BY names the table's columns (r.): a bare started_at is the output column started_at::text,
 * a text sort no index serves, which read and sorted every run past the keyset on every page. */
static const ll_stmt VF_ST_PAGE_FIRST = {"verify_page_first",
                                         "SELECT r.run_id::text, r.started_at::text FROM nifi_ops.load_run r"
                                         " ORDER BY r.started_at DESC, r.run_id LIMIT $1::int",
                                         1};

/* The next page: the $3 runs after the run ($1 started_at, $2 run_id) in the same order (none: no
 * more). The index range is started_at <= $1; the rest of the key is a filter of the few runs that
 * started at $1 exactly. */
static const ll_stmt VF_ST_PAGE_NEXT = {"verify_page_next",
                                        "SELECT r.run_id::text, r.started_at::text FROM nifi_ops.load_run r"
                                        " WHERE r.started_at <= $1::timestamptz"
                                        "   AND (r.started_at < $1::timestamptz OR r.run_id > $2::uuid)"
                                        " ORDER BY r.started_at DESC, r.run_id LIMIT $3::int",
                                        3};

/* The runs of the page ($1, an array of run ids) with their status events in event order
 * (LL_STATUS_EVENT_NAMES; STAGE_VALIDATION_STARTED among them, so that the same rows count each
 * run's validation starts, §5.7: the winner of load_validation_start is one row per run by its key).
 * The events through ix_load_event_status (0019: run_id, event_time of the status events only, a
 * seventh of the events; the names written out so that the planner matches the index's predicate),
 * else ix_load_event_run_time (run_id, event_time) on a ledger before 0019, run by run: the lateral
 * subquery (OFFSET 0 keeps it one) is a nested loop whatever the page's share of the table, so
 * that no page reads all the events (a hash join of a page would: verify quadratic again). */
static const ll_stmt VF_ST_RUN_EVENTS = {
    "verify_run_events",
    "SELECT p.run_id::text, p.status, e.event_name, e.partition_id, e.error_code, e.error_class,"
    "       e.details->>'to', e.details->>'resolution', coalesce(e.details ? 'publishToken', false)"
    "  FROM nifi_ops.load_run p LEFT JOIN LATERAL (SELECT x.* FROM nifi_ops.load_event x"
    "    WHERE x.run_id = p.run_id AND x.event_name IN (" LL_STATUS_EVENT_NAMES_SQL ") OFFSET 0) e ON true"
    " WHERE p.run_id = ANY ($1::uuid[])"
    " ORDER BY p.run_id, e.event_time, e.event_id",
    1};

/* Runs of the page $1 (run ids) whose VALIDATE_RUN dispatches are not exactly one (past extraction) or
 * not none (before); the dispatches through uq_load_dispatch_validate (run_id), run by run (an
 * aggregate in a lateral subquery is a nested loop, as below). */
static const ll_stmt VF_ST_VALIDATE_DISPATCH = {
    "verify_validate_dispatch",
    "SELECT r.run_id::text, r.status, d.n FROM nifi_ops.load_run r"
    "  CROSS JOIN LATERAL (SELECT count(*) AS n FROM nifi_ops.load_dispatch x"
    "    WHERE x.run_id = r.run_id AND x.dispatch_type = 'VALIDATE_RUN') d"
    " WHERE r.run_id = ANY ($1::uuid[])"
    "   AND d.n <> CASE WHEN r.status IN (" VF_PAST_EXTRACTION ") THEN 1 ELSE 0 END"
    " ORDER BY r.run_id",
    1};

/* The partitions of the runs of the page $1 (run ids) that break either partition check, their
 * WRITTEN files aggregated once: run_id, partition_id, the rows stored and summed (§5.4 step 10: a
 * SUCCESS partition's WRITTEN files sum to its rows), the file counter and count, then whether each
 * check fails: rows (SUCCESS only) and the 0007 counters (every counter equal to the aggregate of
 * the WRITTEN files). The files are read run by run: `run_id = ANY` on load_file_pkey or
 * ix_load_file_partition_status (both lead with run_id), one descent per run of the page, then
 * aggregated per (run_id, partition_id) (a HashAggregate in the plans seen), not partition by
 * partition: a descent per partition was 8 per run, three quarters of verify's buffers at 3,000
 * runs, one more buffer each whenever the index grew a level (verify's buffers x2.6 for twice the
 * history there; 17,829 -> 3,491 buffers a page at 20,000 runs). A partition without a WRITTEN
 * file has no row in the aggregate: coalesce. */
static const ll_stmt VF_ST_PARTITIONS = {
    "verify_partitions",
    "SELECT q.run_id, q.partition_id, q.stored_rows, q.file_rows, q.written_file_count, q.files,"
    "       q.rows_bad, q.counters_bad"
    "  FROM (SELECT p.run_id::text AS run_id, p.partition_id,"
    "               coalesce(p.actual_row_count, 0) AS stored_rows, coalesce(f.rows, 0) AS file_rows,"
    "               p.written_file_count, coalesce(f.files, 0) AS files,"
    "               p.status = 'SUCCESS' AND coalesce(p.actual_row_count, 0) <> coalesce(f.rows, 0)"
    "               AS rows_bad,"
    "               (p.written_file_count, p.written_row_count, p.written_byte_count, p.written_count_sum,"
    "                p.written_count_sumsq)"
    "               IS DISTINCT FROM (coalesce(f.files, 0)::int, coalesce(f.rows, 0)::bigint,"
    "                coalesce(f.bytes, 0)::bigint, coalesce(f.csum, 0)::bigint,"
    "                coalesce(f.csumsq, 0)::bigint)"
    "               AS counters_bad"
    "          FROM nifi_ops.load_partition p"
    "          LEFT JOIN (SELECT w.run_id, w.partition_id, count(*) AS files, sum(w.record_count) AS rows,"
    "                    sum(coalesce(w.byte_count, 0)) AS bytes, sum(w.fragment_count::bigint) AS csum,"
    "                    sum(w.fragment_count::bigint * w.fragment_count::bigint) AS csumsq"
    "               FROM nifi_ops.load_file w WHERE w.run_id = ANY ($1::uuid[]) AND w.status = 'WRITTEN'"
    "              GROUP BY w.run_id, w.partition_id) f"
    "            ON f.run_id = p.run_id AND f.partition_id = p.partition_id"
    "         WHERE p.run_id = ANY ($1::uuid[])) q"
    " WHERE q.rows_bad OR q.counters_bad"
    " ORDER BY q.run_id, q.partition_id",
    1};

#endif
