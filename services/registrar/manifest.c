/*
 * manifest.c - registering a run's partition plan (docs/contract.md §5.2).
 *
 * Order of the transaction: lock the run (a run request not applied yet: DEFER); a run past
 * CREATED answers from the ledger (REPLAY when the partition ids and source count match, else
 * RUN_STATUS_MISMATCH); the invariants of ll_manifest_violations decide; a violation commits
 * FAILED_MANIFEST and answers MANIFEST_INVALID; otherwise the partitions are inserted in one
 * statement (empty ones SUCCESS at once), the run moves CREATED -> EXTRACTING by CAS, the
 * SOURCE metrics are upserted, and a manifest whose partitions are all empty completes the
 * extract at once (§5.2 step 10).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/ledger.h"
#include "ll/rules.h"
#include "registrar.h"

static const ll_stmt ST_PARTITIONS = {
    "reg_manifest_partitions",
    "SELECT partition_id, lower_bound::text, upper_bound::text, upper_inclusive,"
    " is_null_partition, expected_row_count FROM nifi_ops.load_partition"
    " WHERE run_id = $1::uuid ORDER BY partition_id",
    1};

static const ll_stmt ST_FAIL_MANIFEST = {
    "reg_manifest_fail",
    "UPDATE nifi_ops.load_run SET status = 'FAILED_MANIFEST', error_stage = 'MANIFEST',"
    " error_code = 'MANIFEST_INVALID', error_message = nullif(left($2, 2000), ''),"
    " completed_at = clock_timestamp(), heartbeat_at = clock_timestamp(),"
    " version_no = version_no + 1 WHERE run_id = $1::uuid AND status = 'CREATED'",
    2};

/* docs/contract.md §3.2: each partition in the status ll_partition_initial_status gave it (the
 * registrar's "initialStatus", a value); one that starts SUCCESS (empty) has 0 rows, 0 files and
 * is completed at once. */
static const ll_stmt ST_INSERT_PARTITIONS = {
    "reg_manifest_insert_partitions",
    "INSERT INTO nifi_ops.load_partition (run_id, partition_id, lower_bound, upper_bound,"
    " upper_inclusive, is_null_partition, status, expected_row_count, actual_row_count,"
    " fragment_count, file_count, byte_count, completed_at)"
    " SELECT $1::uuid, p.\"partitionId\", p.\"lowerBound\", p.\"upperBound\","
    " coalesce(p.\"upperInclusive\", false), coalesce(p.\"isNullPartition\", false),"
    " p.\"initialStatus\", p.\"expectedRowCount\","
    " CASE WHEN p.\"initialStatus\" = 'SUCCESS' THEN 0 END, CASE WHEN p.\"initialStatus\" = 'SUCCESS' THEN 0 "
    "END,"
    " CASE WHEN p.\"initialStatus\" = 'SUCCESS' THEN 0 END, CASE WHEN p.\"initialStatus\" = 'SUCCESS' THEN 0 "
    "END,"
    " CASE WHEN p.\"initialStatus\" = 'SUCCESS' THEN clock_timestamp() END"
    " FROM jsonb_to_recordset($2::jsonb) AS p(\"partitionId\" text, \"lowerBound\" numeric,"
    " \"upperBound\" numeric, \"upperInclusive\" boolean, \"isNullPartition\" boolean,"
    " \"expectedRowCount\" bigint, \"initialStatus\" text)",
    2};

static const ll_stmt ST_START_EXTRACT = {
    "reg_manifest_start_extract",
    "UPDATE nifi_ops.load_run SET status = 'EXTRACTING', snapshot_scn = $2::numeric,"
    " source_count = $3::bigint, source_null_split_count = $4::bigint,"
    " source_min_split = $5::numeric, source_max_split = $6::numeric,"
    " expected_partition_count = $7::int, success_partition_count = $8::int,"
    " heartbeat_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status = 'CREATED'",
    8};

/* docs/contract.md §5.2 step 8: SOURCE metrics stored as PASS without judgement. */
static const ll_stmt ST_SOURCE_METRICS = {
    "reg_manifest_source_metrics",
    "INSERT INTO nifi_ops.load_validation (run_id, stage, metric_name, expected_value,"
    " actual_value, result, query_version, details, measured_at)"
    " SELECT $1::uuid, 'SOURCE', m.key, NULL, m.value, 'PASS', $3, '{}'::jsonb, clock_timestamp()"
    " FROM jsonb_each_text($2::jsonb) AS m"
    " ON CONFLICT (run_id, stage, metric_name, query_version) DO UPDATE SET"
    " actual_value = excluded.actual_value, result = excluded.result,"
    " details = excluded.details, measured_at = excluded.measured_at",
    3};

/* The checked manifest: the rule input plus the raw JSON parts the SQL takes. */
typedef struct manifest_in {
    char run_id[37];
    ll_manifest plan;
    ll_manifest_partition *parts;
    const char *scn;
    const char *metrics_version;
    json_t *metrics;    /* borrowed */
    json_t *partitions; /* borrowed */
} manifest_in;

static bool opt_decimal(ll_apply_out *out, const json_t *o, const char *field, const char **v)
{
    json_t *j = json_object_get(o, field);
    *v = NULL;
    if (!j || json_is_null(j))
        return true;
    *v = json_string_value(j);
    if (!*v || !ll_is_decimal_str(*v))
        return ll_invalid(out, "%s: not a decimal string of up to 38 digits", field);
    return true;
}

static bool read_partitions(const json_t *arr, manifest_in *mi, ll_apply_out *out)
{
    size_t n = json_array_size(arr);
    if (!json_is_array(arr) || n < 1 || n > 10000)
        return ll_invalid(out, "partitions: 1..10000 items required");
    mi->parts = calloc(n, sizeof *mi->parts);
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(arr, i);
        ll_manifest_partition *mp = &mi->parts[i];
        int64_t rows = 0;
        if (!ll_need_str(out, p, "partitionId", ll_is_partition_id, "^([0-9]{4}|NULL)$", 4, 4,
                         &mp->partition_id) ||
            !opt_decimal(out, p, "lowerBound", &mp->lower_bound) ||
            !opt_decimal(out, p, "upperBound", &mp->upper_bound) ||
            !ll_need_int(out, p, "expectedRowCount", 0, INT64_MAX, &rows))
            return false;
        mp->expected_row_count = rows;
        mp->upper_inclusive = ll_f_bool(p, "upperInclusive", false);
        mp->is_null_partition = ll_f_bool(p, "isNullPartition", false);
    }
    mi->plan.partitions = mi->parts;
    mi->plan.n_partitions = n;
    return true;
}

static bool read_manifest(const json_t *v, manifest_in *mi, ll_apply_out *out)
{
    int64_t planned = 0;
    mi->metrics = json_object_get(v, "sourceMetrics");
    mi->partitions = json_object_get(v, "partitions");
    mi->metrics_version = ll_f_str(v, "sourceMetricsVersion");
    if (!mi->metrics_version)
        mi->metrics_version = "v1";
    if (!ll_need_uuid(out, v, "runId", mi->run_id) || !opt_decimal(out, v, "snapshotScn", &mi->scn) ||
        !ll_need_int(out, v, "sourceCount", 0, INT64_MAX, &mi->plan.source_count) ||
        !ll_need_int(out, v, "sourceNullSplitCount", 0, INT64_MAX, &mi->plan.source_null_split_count) ||
        !opt_decimal(out, v, "sourceMinSplit", &mi->plan.source_min_split) ||
        !opt_decimal(out, v, "sourceMaxSplit", &mi->plan.source_max_split) ||
        !ll_need_int(out, v, "plannedPartitionCount", 1, 10000, &planned))
        return false;
    mi->plan.planned_partition_count = (int32_t)planned;
    /* the contract accepts 100 characters but stores 50 (its §13 gap): refuse what cannot be stored */
    long vlen = ll_utf8_chars(mi->metrics_version);
    if (vlen < 1 || vlen > 50)
        return ll_invalid(out, "sourceMetricsVersion: 1..50 characters");
    if (json_is_object(mi->metrics)) {
        if (json_object_size(mi->metrics) > 200)
            return ll_invalid(out, "sourceMetrics: at most 200 entries");
        const char *k;
        json_t *val;
        json_object_foreach(mi->metrics, k, val)
        {
            long n = ll_utf8_chars(json_string_value(val) ? json_string_value(val) : "");
            if (!ll_is_metric_name(k) || n < 0 || n > 2000)
                return ll_invalid(
                    out, "sourceMetrics: entry '%.60s' invalid (name pattern, value ≤ 2000 chars)", k);
        }
    }
    return read_partitions(mi->partitions, mi, out);
}

/* Partitions of the request with rows, in request order (the response's dispatchPartitions). */
static json_t *dispatch_from_request(const manifest_in *mi, int *empty)
{
    json_t *a = json_array();
    *empty = 0;
    for (size_t i = 0; i < mi->plan.n_partitions; i++) {
        if (ll_partition_initial_status(mi->parts[i].expected_row_count) == LL_PART_SUCCESS)
            (*empty)++;
        else
            json_array_append(a, json_array_get(mi->partitions, i));
    }
    return a;
}

static json_t *decision(const ll_msg *m, const char *run_id, const char *outcome, const char *code,
                        const char *message, const char *status, json_t *dispatch, int empty, bool scheduled,
                        json_t *violations)
{
    json_t *r = ll_reply_new(m, run_id, NULL, outcome, code, message, status, NULL);
    json_object_set_new(r, "dispatchPartitions", dispatch ? dispatch : json_array());
    json_object_set_new(r, "emptyPartitionCount", json_integer(empty));
    json_object_set_new(r, "validationScheduled", json_boolean(scheduled));
    json_object_set_new(r, "violations", violations ? violations : json_array());
    /* docs/contract.md §5.2 step 2: RUN_STATUS_MISMATCH carries details {runStatus} */
    if (code && status && strcmp(code, "RUN_STATUS_MISMATCH") == 0)
        json_object_set_new(r, "details", json_pack("{s:s}", "runStatus", status));
    return r;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* docs/contract.md §5.2 step 2: the run is past CREATED; answer from the ledger. LL_DB_ROLLBACK with the
 * reply set (nothing is written), or LL_DB_ERROR (db->err). */
static ll_db_rc answer_registered(ll_db *db, const ll_msg *m, const manifest_in *mi, const ll_run_row *run,
                                  const ll_strlist *violations, ll_apply_out *out)
{
    const char *p[1] = {mi->run_id};
    PGresult *r = ll_db_exec(db, &ST_PARTITIONS, p);
    if (!r)
        return LL_DB_ERROR;
    size_t n = mi->plan.n_partitions;
    bool same = PQntuples(r) > 0 && (size_t)PQntuples(r) == n && run->source_count == mi->plan.source_count;
    if (same) {
        const char **ids = malloc(n * sizeof *ids);
        for (size_t i = 0; i < n; i++)
            ids[i] = mi->parts[i].partition_id;
        qsort(ids, n, sizeof *ids, cmp_str);
        for (size_t i = 0; i < n && same; i++)
            same = strcmp(ids[i], PQgetvalue(r, (int)i, 0)) == 0;
        free(ids);
    }
    if (same) {
        json_t *dispatch = json_array();
        int empty = 0;
        for (int i = 0; i < PQntuples(r); i++) {
            long long rows = ll_db_ll(r, i, 5, 0);
            if (ll_partition_initial_status(rows) == LL_PART_SUCCESS) {
                empty++;
                continue;
            }
            json_t *o =
                json_pack("{s:s,s:o,s:o,s:b,s:b,s:I}", "partitionId", PQgetvalue(r, i, 0), "lowerBound",
                          ll_db_text(r, i, 1) ? json_string(ll_db_text(r, i, 1)) : json_null(), "upperBound",
                          ll_db_text(r, i, 2) ? json_string(ll_db_text(r, i, 2)) : json_null(),
                          "upperInclusive", ll_db_bool(r, i, 3), "isNullPartition", ll_db_bool(r, i, 4),
                          "expectedRowCount", (json_int_t)rows);
            json_array_append_new(dispatch, o);
        }
        out->reply = decision(m, mi->run_id, "REPLAY", NULL, NULL, ll_run_status_name(run->status), dispatch,
                              empty, false, NULL);
    } else if (run->status == LL_RUN_FAILED_MANIFEST && violations->n > 0 && run->error_message) {
        /* the same invalid manifest again: the same refusal (nothing was written either time) */
        char *joined = ll_strlist_join(violations, "; ");
        bool again = strncmp(joined, run->error_message, 2000) == 0;
        json_t *vs = json_array();
        for (size_t i = 0; i < violations->n; i++)
            json_array_append_new(vs, json_string(violations->items[i]));
        out->reply = again ? decision(m, mi->run_id, "REPLAY", "MANIFEST_INVALID", joined, "FAILED_MANIFEST",
                                      NULL, 0, false, vs)
                           : decision(m, mi->run_id, "REJECTED", "RUN_STATUS_MISMATCH", NULL,
                                      "FAILED_MANIFEST", NULL, 0, false, (json_decref(vs), NULL));
        free(joined);
    } else {
        out->reply = decision(m, mi->run_id, "REJECTED", "RUN_STATUS_MISMATCH", NULL,
                              ll_run_status_name(run->status), NULL, 0, false, NULL);
    }
    PQclear(r);
    return LL_DB_ROLLBACK;
}

/* docs/contract.md §5.2 step 5: commit FAILED_MANIFEST, then answer MANIFEST_INVALID. LL_DB_OK with the
 * reply set, or the failed statement's result (db->err). */
static ll_db_rc fail_manifest(ll_db *db, const ll_msg *m, const manifest_in *mi, const ll_strlist *violations,
                              ll_apply_out *out)
{
    char *joined = ll_strlist_join(violations, "; ");
    const char *p[2] = {mi->run_id, joined};
    PGresult *r = ll_db_exec(db, &ST_FAIL_MANIFEST, p);
    ll_db_rc rc = LL_DB_ERROR;
    if (r) {
        PQclear(r);
        ll_event ev = {.name = "MANIFEST_INVALID",
                       .level = "ERROR",
                       .run_id = mi->run_id,
                       .chunk_index = -1,
                       .row_count = -1,
                       .error_code = "MANIFEST_INVALID",
                       .message = joined};
        if ((rc = ll_event_insert(db, &ev)) == LL_DB_OK) {
            json_t *vs = json_array();
            for (size_t i = 0; i < violations->n; i++)
                json_array_append_new(vs, json_string(violations->items[i]));
            out->reply = decision(m, mi->run_id, "REJECTED", "MANIFEST_INVALID", joined, "FAILED_MANIFEST",
                                  NULL, 0, false, vs);
        }
    }
    free(joined);
    return rc;
}

/* The request's partitions, each with the "initialStatus" ll_partition_initial_status gives it
 * (docs/contract.md §3.2: an empty one is SUCCESS at once), as ST_INSERT_PARTITIONS reads them; a malloc'd
 * JSON text the caller frees. */
static char *partitions_with_status(const manifest_in *mi)
{
    json_t *rows = json_deep_copy(mi->partitions);
    for (size_t i = 0; i < mi->plan.n_partitions; i++) {
        ll_part_status st = ll_partition_initial_status(mi->parts[i].expected_row_count);
        json_object_set_new(json_array_get(rows, i), "initialStatus", json_string(ll_part_status_name(st)));
    }
    char *text = json_dumps(rows, JSON_COMPACT);
    json_decref(rows);
    return text;
}

/* docs/contract.md §5.2 steps 6-10. LL_DB_OK with the reply set, or the failed statement's result. */
static ll_db_rc register_plan(ll_db *db, const ll_msg *m, const manifest_in *mi, ll_apply_out *out)
{
    int empty = 0;
    json_t *dispatch = dispatch_from_request(mi, &empty);
    char *parts = partitions_with_status(mi);
    json_t *metrics = json_is_object(mi->metrics) ? json_deep_copy(mi->metrics) : json_object();
    char count[24], nulls[24], pcount[16], ecount[16];
    snprintf(count, sizeof count, "%lld", (long long)mi->plan.source_count);
    snprintf(nulls, sizeof nulls, "%lld", (long long)mi->plan.source_null_split_count);
    snprintf(pcount, sizeof pcount, "%zu", mi->plan.n_partitions);
    snprintf(ecount, sizeof ecount, "%d", empty);
    json_object_set_new(metrics, "SOURCE_COUNT", json_string(count));
    char *metrics_s = json_dumps(metrics, JSON_COMPACT);
    json_decref(metrics);

    const char *p_ins[2] = {mi->run_id, parts};
    const char *p_start[8] = {
        mi->run_id, mi->scn, count, nulls, mi->plan.source_min_split, mi->plan.source_max_split,
        pcount,     ecount};
    const char *p_met[3] = {mi->run_id, metrics_s, mi->metrics_version};
    ll_db_rc rc = ll_db_exec_discard(db, &ST_INSERT_PARTITIONS, p_ins);
    if (rc == LL_DB_OK)
        rc = ll_db_exec_discard(db, &ST_START_EXTRACT, p_start);
    if (rc == LL_DB_OK)
        rc = ll_db_exec_discard(db, &ST_SOURCE_METRICS, p_met);
    free(parts);
    free(metrics_s);
    json_t *details = json_pack("{s:i,s:i,s:o}", "partitions", (int)mi->plan.n_partitions, "empty", empty,
                                "snapshotScn", mi->scn ? json_string(mi->scn) : json_null());
    ll_event ev = {.name = "MANIFEST_CREATED",
                   .level = "INFO",
                   .run_id = mi->run_id,
                   .chunk_index = -1,
                   .row_count = mi->plan.source_count,
                   .details = details};
    if (rc == LL_DB_OK)
        rc = ll_event_insert(db, &ev);
    json_decref(details);
    bool won = false;
    if (rc == LL_DB_OK && (size_t)empty == mi->plan.n_partitions)
        rc = ll_run_complete_extract(db, mi->run_id, &won);
    if (rc != LL_DB_OK) {
        json_decref(dispatch);
        return rc;
    }
    out->reply = decision(m, mi->run_id, "ACCEPTED", NULL, NULL, won ? "EXTRACTED_VALIDATED" : "EXTRACTING",
                          dispatch, empty, won, NULL);
    return LL_DB_OK;
}

ll_apply registrar_apply_manifest(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    manifest_in mi;
    memset(&mi, 0, sizeof mi);
    ll_run_row run;
    ll_strlist violations = {0};
    ll_apply a = LL_APPLY_DEAD;
    if (!read_manifest(m->value, &mi, out))
        goto done;
    if (ll_run_lock(db, mi.run_id, &run) != LL_DB_OK) {
        a = LL_APPLY_DB;
        goto done;
    }
    if (!run.found) {
        bool rejected = false;
        if (ll_run_request_rejected(db, mi.run_id, &rejected) != LL_DB_OK) {
            a = LL_APPLY_DB;
        } else if (rejected) {
            out->reply = decision(m, mi.run_id, "REJECTED", "RUN_NOT_FOUND", "the run request was refused",
                                  NULL, NULL, 0, false, NULL);
            a = LL_APPLY_ROLLBACK;
        } else {
            snprintf(out->reason, sizeof out->reason, "run %s not in the ledger yet", mi.run_id);
            a = LL_APPLY_DEFER;
        }
        goto done;
    }
    if (ll_manifest_violations(&mi.plan, run.allow_empty_source, &violations) < 0) {
        a = LL_APPLY_DB;
        goto done_run;
    }
    if (run.status != LL_RUN_CREATED)
        a = ll_apply_of_db(answer_registered(db, m, &mi, &run, &violations, out));
    else if (violations.n > 0)
        a = ll_apply_of_db(fail_manifest(db, m, &mi, &violations, out));
    else
        a = ll_apply_of_db(register_plan(db, m, &mi, out));
done_run:
    ll_run_row_clear(&run);
done:
    ll_strlist_clear(&violations);
    free(mi.parts);
    return a;
}
