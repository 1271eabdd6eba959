/*
 * verify_ledger.c - the ledger invariants of `loadctl verify`: run status against its events
 * (docs/contract.md §3.1, §8), one validate-run dispatch and one validation start per run (§5.7, §5.12,
 * uq_load_dispatch_validate), a SUCCESS partition's files against its rows (§5.4 steps 8-10)
 * and the partition counters of migration 0007. Read-only; each statement is one snapshot.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/pgarray.h"
#include "ll/verify.h"
#include "verify.h"

/* Runs past extraction: they had their completion CAS and so their VALIDATE_RUN (§5.11, §5.12).
 * TIMED_OUT and FAILED_EXTRACT/SNAPSHOT/MANIFEST runs never got there (§3.1). */
#define VF_PAST_EXTRACTION                                                                                   \
    "'EXTRACTED_VALIDATED', 'STAGE_VALIDATING', 'STAGING_VALIDATED', 'PUBLISHING', 'PUBLISHED',"             \
    " 'PUBLISH_UNKNOWN', 'SUCCESS', 'FAILED_STAGE_VALIDATION', 'FAILED_PUBLISH', 'FAILED_TARGET_VALIDATION'"

/* Runs one page (by run id) with their status events in event order; $1 the status event names,
 * $2 the last run id of the previous page ('' for the first), $3 the page size. */
static const ll_stmt ST_RUN_EVENTS = {
    "verify_run_events",
    "WITH page AS (SELECT run_id, status FROM nifi_ops.load_run WHERE run_id::text > $2"
    "               ORDER BY run_id::text LIMIT $3::int)"
    " SELECT p.run_id::text, p.status, e.event_name, e.partition_id, e.error_code, e.error_class,"
    "        e.details->>'to', e.details->>'resolution', coalesce(e.details ? 'publishToken', false)"
    "   FROM page p LEFT JOIN nifi_ops.load_event e"
    "     ON e.run_id = p.run_id AND e.event_name = ANY($1::text[])"
    "  ORDER BY p.run_id::text, e.event_time, e.event_id",
    3};

/* Runs whose VALIDATE_RUN dispatches are not exactly one (past extraction) or not none (before). */
static const ll_stmt ST_VALIDATE_DISPATCH = {
    "verify_validate_dispatch",
    "SELECT r.run_id::text, r.status, count(d.dispatch_id)"
    "  FROM nifi_ops.load_run r LEFT JOIN nifi_ops.load_dispatch d"
    "    ON d.run_id = r.run_id AND d.dispatch_type = 'VALIDATE_RUN'"
    " GROUP BY r.run_id, r.status"
    " HAVING count(d.dispatch_id) <> CASE WHEN r.status IN (" VF_PAST_EXTRACTION ") THEN 1 ELSE 0 END"
    " ORDER BY r.run_id",
    0};

/* Runs with more than one validation start: STAGE_VALIDATION_STARTED events or winners (§5.7). */
static const ll_stmt ST_STAGE_VALIDATING = {
    "verify_stage_validating",
    "SELECT run_id::text, sum(n) FROM ("
    "  SELECT run_id, count(*) AS n FROM nifi_ops.load_event"
    "   WHERE event_name = 'STAGE_VALIDATION_STARTED' AND run_id IS NOT NULL GROUP BY run_id"
    "  UNION ALL SELECT run_id, 0 FROM nifi_ops.load_validation_start) s"
    " GROUP BY run_id HAVING max(n) > 1 ORDER BY run_id",
    0};

/* SUCCESS partitions whose WRITTEN files do not sum to their rows (§5.4 step 10). */
static const ll_stmt ST_PARTITION_ROWS = {
    "verify_partition_rows",
    "SELECT p.run_id::text, p.partition_id, coalesce(p.actual_row_count, 0), coalesce(f.rows, 0)"
    "  FROM nifi_ops.load_partition p"
    "  LEFT JOIN (SELECT run_id, partition_id, sum(record_count) AS rows FROM nifi_ops.load_file"
    "              WHERE status = 'WRITTEN' GROUP BY run_id, partition_id) f"
    "    ON f.run_id = p.run_id AND f.partition_id = p.partition_id"
    " WHERE p.status = 'SUCCESS' AND coalesce(p.actual_row_count, 0) <> coalesce(f.rows, 0)"
    " ORDER BY p.run_id, p.partition_id",
    0};

/* Partitions whose 0007 counters differ from an aggregate of their WRITTEN files. */
static const ll_stmt ST_PARTITION_COUNTERS = {
    "verify_partition_counters",
    "SELECT p.run_id::text, p.partition_id, p.written_file_count, coalesce(f.files, 0)"
    "  FROM nifi_ops.load_partition p"
    "  LEFT JOIN (SELECT run_id, partition_id, count(*) AS files, sum(record_count) AS rows,"
    "                    sum(coalesce(byte_count, 0)) AS bytes, sum(fragment_count::bigint) AS csum,"
    "                    sum(fragment_count::bigint * fragment_count::bigint) AS csumsq"
    "               FROM nifi_ops.load_file WHERE status = 'WRITTEN' GROUP BY run_id, partition_id) f"
    "    ON f.run_id = p.run_id AND f.partition_id = p.partition_id"
    " WHERE (p.written_file_count, p.written_row_count, p.written_byte_count, p.written_count_sum,"
    "        p.written_count_sumsq)"
    "       IS DISTINCT FROM (coalesce(f.files, 0)::int, coalesce(f.rows, 0)::bigint,"
    "        coalesce(f.bytes, 0)::bigint, coalesce(f.csum, 0)::bigint, coalesce(f.csumsq, 0)::bigint)"
    " ORDER BY p.run_id, p.partition_id",
    0};

/* Runs per page of the status check (bounds the memory of one result). */
#define RUN_PAGE "500"

void vf_violation(vf_check *c, const char *fmt, ...)
{
    c->violations++;
    if (json_array_size(c->samples) >= VF_SAMPLES)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    json_array_append_new(c->samples, json_string(buf));
}

static const char *cell(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

/* Judges one run from rows [from, to) of r (its status events in order). */
static void judge_run(vf_check *c, const PGresult *r, int from, int to)
{
    size_t n = 0;
    ll_status_event *ev = calloc((size_t)(to - from) + 1, sizeof *ev);
    if (!ev)
        abort();
    for (int i = from; i < to; i++) {
        if (PQgetisnull(r, i, 2))
            continue; /* the run without any status event (LEFT JOIN) */
        ev[n++] = (ll_status_event){cell(r, i, 2),
                                    cell(r, i, 3),
                                    cell(r, i, 4),
                                    cell(r, i, 5),
                                    cell(r, i, 6),
                                    cell(r, i, 7),
                                    strcmp(PQgetvalue(r, i, 8), "t") == 0};
    }
    const char *run = PQgetvalue(r, from, 0), *stored = PQgetvalue(r, from, 1);
    ll_run_status implied;
    int rc = ll_run_status_implied(ev, n, &implied);
    if (rc == 1)
        vf_violation(c, "%s: %s, but no event sets a status", run, stored);
    else if (rc < 0)
        vf_violation(c, "%s: %s, but its last status event %s names no status", run, stored, ev[n - 1].name);
    else if (strcmp(ll_run_status_name(implied), stored) != 0)
        vf_violation(c, "%s: %s, its events imply %s", run, stored, ll_run_status_name(implied));
    free(ev);
}

static int check_run_status(ll_db *db, vf_check *c, const char **what)
{
    ll_pgarray names = {0};
    for (size_t i = 0; LL_STATUS_EVENT_NAMES[i]; i++)
        ll_pgarray_add(&names, LL_STATUS_EVENT_NAMES[i]);
    char last[40] = "";
    int rc = 0;
    for (;;) {
        const char *p[3] = {ll_pgarray_text(&names), last, RUN_PAGE};
        PGresult *r = ll_db_exec(db, &ST_RUN_EVENTS, p);
        if (!r) {
            *what = ST_RUN_EVENTS.name;
            rc = -1;
            break;
        }
        int rows = PQntuples(r);
        for (int i = 0; i < rows;) {
            int j = i + 1;
            while (j < rows && strcmp(PQgetvalue(r, j, 0), PQgetvalue(r, i, 0)) == 0)
                j++;
            judge_run(c, r, i, j);
            i = j;
        }
        if (rows > 0)
            snprintf(last, sizeof last, "%s", PQgetvalue(r, rows - 1, 0));
        PQclear(r);
        if (rows == 0)
            break;
    }
    ll_pgarray_free(&names);
    c->ran = rc == 0;
    return rc;
}

/* Runs a statement whose every row is one violation described by fmt over its first columns. */
static int rows_as_violations(ll_db *db, const ll_stmt *st, vf_check *c, const char **what)
{
    PGresult *r = ll_db_exec(db, st, NULL);
    if (!r) {
        *what = st->name;
        return -1;
    }
    for (int i = 0; i < PQntuples(r); i++) {
        if (st == &ST_VALIDATE_DISPATCH)
            vf_violation(c, "%s: %s with %s VALIDATE_RUN dispatches", PQgetvalue(r, i, 0),
                         PQgetvalue(r, i, 1), PQgetvalue(r, i, 2));
        else if (st == &ST_STAGE_VALIDATING)
            vf_violation(c, "%s: %s validation starts", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
        else if (st == &ST_PARTITION_ROWS)
            vf_violation(c, "%s/%s: %s rows, its files sum to %s", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
                         PQgetvalue(r, i, 2), PQgetvalue(r, i, 3));
        else
            vf_violation(c, "%s/%s: counters say %s files, the WRITTEN files are %s (or their sums differ)",
                         PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 3));
    }
    PQclear(r);
    c->ran = true;
    return 0;
}

int vf_check_ledger(ll_db *db, vf_check *checks, const char **what)
{
    if (check_run_status(db, &checks[VF_RUN_STATUS], what) != 0 ||
        rows_as_violations(db, &ST_VALIDATE_DISPATCH, &checks[VF_VALIDATE_DISPATCH], what) != 0 ||
        rows_as_violations(db, &ST_STAGE_VALIDATING, &checks[VF_STAGE_VALIDATING], what) != 0 ||
        rows_as_violations(db, &ST_PARTITION_ROWS, &checks[VF_PARTITION_ROWS], what) != 0 ||
        rows_as_violations(db, &ST_PARTITION_COUNTERS, &checks[VF_PARTITION_COUNTERS], what) != 0)
        return -1;
    return 0;
}
