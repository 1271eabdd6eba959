/*
 * verify_topics.c - the topic invariants of `loadctl verify --topics` (docs/contract.md K§3):
 * every input offset below its group's committed offset has one answer, a reply or a dead letter
 * (read_committed, matched by the reply's sourceTopic/sourcePartition/sourceOffset and the dead
 * letter's ll.source.* headers), later REPLAY replies agreeing with it (ll_input_judge_answers;
 * tools/loadctl/README.md "Answers that agree"), so no offset was committed ahead of its database
 * effect, and no chunk report was lost (its load_file row, a REJECTED/REPLAY reply, or a dead
 * letter).
 *
 * The work is bounded before it starts: at most max_records records are read in all, within
 * timeout_ms; a check a bound stopped says so (vf_check.bounded). Nothing is committed: the
 * reader has a group id of its own, assigns partitions and never commits.
 */
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ll/codec.h"
#include "ll/kloop.h"
#include "ll/pgarray.h"
#include "ll/rules.h"
#include "ll/topics.h"
#include "ll/verify.h"
#include "kreader.h"
#include "routes.h"
#include "verify.h"
#include "verify_topics.h"

/* Which chunk reports of a batch have their file row ($1 run ids, $2 partitions, $3 indexes). */
static const ll_stmt ST_FILE_ROWS = {
    "verify_file_rows",
    "SELECT t.i FROM unnest($1::uuid[], $2::text[], $3::int[]) WITH ORDINALITY AS t(r, p, c, i)"
    " WHERE EXISTS (SELECT 1 FROM nifi_ops.load_file f"
    "                WHERE f.run_id = t.r AND f.partition_id = t.p AND f.chunk_index = t.c)",
    3};
#define FILE_BATCH 1000

static int load_schemas(reader *r, char *err, size_t errlen)
{
    const char *ids_file = ll_config_get(r->cfg, "schema.ids_file");
    if (ids_file && *ids_file && !(r->ids = ll_schema_ids_load(ids_file, err, errlen)))
        return -1;
    for (int i = 0; i < LC_N_ROUTES; i++) {
        const char *logical[2] = {LC_ROUTES[i].input, LC_ROUTES[i].reply};
        const char *file[2] = {LC_ROUTES[i].input_schema, LC_ROUTES[i].reply_schema};
        for (int k = 0; k < 2; k++) {
            ll_topic_name(r->cfg, logical[k], r->names[i][k], sizeof r->names[i][k]);
            if (!(r->schemas[i][k] = ll_topic_schema_load(r->cfg, file[k], err, errlen)) ||
                ll_topic_framing(r->cfg, logical[k], &r->dopts[i][k].framing, err, errlen) != 0)
                return -1;
            r->dopts[i][k].reader = r->schemas[i][k];
            r->dopts[i][k].ids = r->ids;
        }
    }
    ll_topic_name(r->cfg, "dead-letters", r->dlq, sizeof r->dlq);
    return 0;
}

static void add_part(reader *r, int kind, int route, int32_t p, int64_t end)
{
    r->parts = realloc(r->parts, (r->n_parts + 1) * sizeof *r->parts);
    if (!r->parts)
        abort();
    r->parts[r->n_parts++] = (part){kind, route, p, end, false};
}

const char *vf_topics_topic_of(const reader *r, const part *p)
{
    return p->kind == K_DLQ ? r->dlq : r->names[p->route][p->kind == K_INPUT ? 0 : 1];
}

/*
 * Plans the reading: the committed offset of every input partition (one lookup per group),
 * and the watermarks of every partition. rk assigns from the low watermarks in *asg. Each wait for
 * the broker's answer lasts at most KAFKA_WAIT_MS and never longer than the command's --timeout
 * (wait_ms), so an unreachable broker fails the command within the time it was given.
 */
static int plan(reader *r, rd_kafka_t *rk, rd_kafka_topic_partition_list_t *asg, int wait_ms, char *err,
                size_t errlen)
{
    const char *prefix = ll_config_get(r->cfg, "topic.prefix");
    for (int i = 0; i < LC_N_ROUTES; i++) {
        int n = lc_topic_partitions(rk, r->names[i][0], wait_ms, err, errlen);
        if (n < 0)
            return -1;
        int m = lc_topic_partitions(rk, r->names[i][1], wait_ms, err, errlen);
        if (m < 0)
            return -1;
        char group[300];
        snprintf(group, sizeof group, "%s%s", prefix ? prefix : "loadledger.", LC_ROUTES[i].service);
        rd_kafka_t *g = lc_reader_new(r->cfg, group, err, errlen);
        if (!g)
            return -1;
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(n);
        for (int p = 0; p < n; p++)
            rd_kafka_topic_partition_list_add(l, r->names[i][0], p);
        rd_kafka_resp_err_t e = rd_kafka_committed(g, l, wait_ms);
        lc_reader_close(g);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(err, errlen, "committed offsets of group %s: %s", group, rd_kafka_err2str(e));
            rd_kafka_topic_partition_list_destroy(l);
            return -1;
        }
        for (int p = 0; p < l->cnt; p++)
            if (l->elems[p].offset > 0)
                add_part(r, K_INPUT, i, l->elems[p].partition, l->elems[p].offset);
        rd_kafka_topic_partition_list_destroy(l);
        for (int p = 0; p < m; p++)
            add_part(r, K_REPLY, i, p, -1);
    }
    int n = lc_topic_partitions(rk, r->dlq, wait_ms, err, errlen);
    if (n < 0)
        return -1;
    for (int p = 0; p < n; p++)
        add_part(r, K_DLQ, -1, p, -1);
    for (size_t i = 0; i < r->n_parts; i++) {
        part *p = &r->parts[i];
        int64_t lo, hi;
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(rk, vf_topics_topic_of(r, p), p->partition, &lo, &hi, wait_ms);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(err, errlen, "watermarks of %s [%" PRId32 "]: %s", vf_topics_topic_of(r, p),
                     p->partition, rd_kafka_err2str(e));
            return -1;
        }
        if (p->end < 0 || p->end > hi)
            p->end = hi;
        p->done = lo >= p->end;
        if (!p->done)
            rd_kafka_topic_partition_list_add(asg, vf_topics_topic_of(r, p), p->partition)->offset = lo;
    }
    return 0;
}

static int cmp_trace(const void *a, const void *b)
{
    const trace *x = a, *y = b;
    if (x->route != y->route)
        return x->route < y->route ? -1 : 1;
    if (x->partition != y->partition)
        return x->partition < y->partition ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Marks the chunk inputs whose file row exists, FILE_BATCH at a time. */
static int file_rows(reader *r, ll_db *db, char *err, size_t errlen)
{
    size_t *which = malloc(FILE_BATCH * sizeof *which);
    if (!which)
        abort();
    int rc = 0;
    for (size_t i = 0; i < r->n_inputs && rc == 0;) {
        ll_pgarray runs = {0}, pids = {0}, idx = {0};
        size_t n = 0;
        for (; i < r->n_inputs && n < FILE_BATCH; i++)
            if (r->inputs[i].run) {
                ll_pgarray_add(&runs, r->inputs[i].run);
                ll_pgarray_add(&pids, r->inputs[i].pid);
                ll_pgarray_add_ll(&idx, r->inputs[i].chunk_index);
                which[n++] = i;
            }
        if (n > 0) {
            const char *p[3] = {ll_pgarray_text(&runs), ll_pgarray_text(&pids), ll_pgarray_text(&idx)};
            PGresult *res = ll_db_exec(db, &ST_FILE_ROWS, p);
            if (!res) {
                snprintf(err, errlen, "%s: %s", ST_FILE_ROWS.name, db->err.message);
                rc = -1;
            } else {
                for (int k = 0; k < PQntuples(res); k++) {
                    long ord = strtol(PQgetvalue(res, k, 0), NULL, 10);
                    if (ord >= 1 && (size_t)ord <= n)
                        r->inputs[which[ord - 1]].file_row = true;
                }
                PQclear(res);
            }
        }
        ll_pgarray_free(&runs);
        ll_pgarray_free(&pids);
        ll_pgarray_free(&idx);
    }
    free(which);
    return rc;
}

/*
 * Whether an input was replayed after a restore: at or above the offset the offsets file of the
 * restore recorded for its group and partition, or any offset of a partition it has none for
 * (`loadctl offsets restore` starts those at the earliest; docs/operations.md "Restore from a
 * backup"). Otherwise it was not: an input a service read again by itself because the database had
 * gone back in time is applied again without a second answer (docs/design.md §5), so two answers
 * there are a violation.
 */
static bool replayed(const reader *r, const input *in)
{
    if (!r->restored)
        return false;
    const char *prefix = ll_config_get(r->cfg, "topic.prefix");
    char group[300];
    snprintf(group, sizeof group, "%s%s", prefix ? prefix : "loadledger.", LC_ROUTES[in->route].service);
    size_t k, j;
    json_t *g, *e;
    json_array_foreach(json_object_get(r->restored, "groups"), k, g)
    {
        const char *name = json_string_value(json_object_get(g, "group"));
        if (!name || strcmp(name, group) != 0)
            continue;
        json_array_foreach(json_object_get(g, "offsets"), j, e)
        {
            const char *topic = json_string_value(json_object_get(e, "topic"));
            if (topic && strcmp(topic, r->names[in->route][0]) == 0 &&
                json_integer_value(json_object_get(e, "partition")) == in->partition)
                return in->offset >= json_integer_value(json_object_get(e, "offset"));
        }
    }
    return true;
}

/* "ACCEPTED, REPLAY/CODE, dead letter" of answers a[0..n) into buf. */
static const char *answers_text(const ll_answer *a, size_t n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && at < len; i++) {
        int w = a[i].dead_letter ? snprintf(buf + at, len - at, "%sdead letter", i ? ", " : "")
                                 : snprintf(buf + at, len - at, "%s%s%s%s", i ? ", " : "", a[i].outcome,
                                            a[i].code ? "/" : "", a[i].code ? a[i].code : "");
        at += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

/* Judges every input against the replies and dead letters naming it (ll_input_judge_answers). */
static void judge(reader *r, vf_check *checks)
{
    if (r->n_traces > 1)
        qsort(r->traces, r->n_traces, sizeof *r->traces, cmp_trace);
    ll_answer *ans = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < r->n_inputs; i++) {
        const input *in = &r->inputs[i];
        trace key = {.route = in->route, .partition = in->partition, .offset = in->offset};
        /* the first trace not below the key, then every equal one */
        size_t lo = 0, hi = r->n_traces;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (cmp_trace(&r->traces[mid], &key) < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        long replies = 0, dead = 0;
        const char *outcome = NULL;
        size_t n = 0;
        for (size_t k = lo; k < r->n_traces && cmp_trace(&r->traces[k], &key) == 0; k++, n++) {
            const trace *t = &r->traces[k];
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                if (!(ans = realloc(ans, cap * sizeof *ans)))
                    abort();
            }
            ans[n] = (ll_answer){.dead_letter = t->dlq,
                                 .outcome = t->outcome,
                                 .code = t->code[0] ? t->code : NULL,
                                 .granted = t->granted};
            if (t->dlq) {
                dead++;
            } else {
                replies++;
                outcome = t->outcome;
            }
        }
        const char *topic = r->names[in->route][0];
        ll_input_verdict v = ll_input_judge_answers(ans, n, replayed(r, in));
        char text[200];
        if (v == LL_INPUT_MISSING) {
            vf_violation(&checks[VF_ONE_REPLY], "%s[%" PRId32 "]@%" PRId64 ": no reply, no dead letter",
                         topic, in->partition, in->offset);
            vf_violation(&checks[VF_OFFSET_AHEAD],
                         "%s[%" PRId32 "]@%" PRId64 ": below the committed offset"
                         " without its effect",
                         topic, in->partition, in->offset);
        } else if (v == LL_INPUT_DUPLICATE) {
            vf_violation(&checks[VF_ONE_REPLY],
                         "%s[%" PRId32 "]@%" PRId64 ": %ld replies, %ld dead letters (%s)", topic,
                         in->partition, in->offset, replies, dead, answers_text(ans, n, text, sizeof text));
        } else if (v == LL_INPUT_CONTRADICTED) {
            vf_violation(&checks[VF_ONE_REPLY], "%s[%" PRId32 "]@%" PRId64 ": answers disagree (%s)", topic,
                         in->partition, in->offset, answers_text(ans, n, text, sizeof text));
        }
        if (in->route == LC_CHUNK_ROUTE && !ll_chunk_accounted(in->file_row, outcome, dead > 0))
            vf_violation(&checks[VF_CHUNK_LOST], "%s[%" PRId32 "]@%" PRId64 ": %s/%s chunk %" PRId32 " %s",
                         topic, in->partition, in->offset, in->run ? in->run : "?", in->pid ? in->pid : "?",
                         in->chunk_index, outcome ? outcome : "without reply");
    }
    free(ans);
}

static void reader_free(reader *r)
{
    for (int i = 0; i < LC_N_ROUTES; i++)
        for (int k = 0; k < 2; k++)
            ll_schema_free(r->schemas[i][k]);
    ll_schema_ids_free(r->ids);
    for (size_t i = 0; i < r->n_inputs; i++) {
        free(r->inputs[i].run);
        free(r->inputs[i].pid);
    }
    free(r->inputs);
    free(r->traces);
    free(r->parts);
}

int vf_check_topics(const ll_config *cfg, ll_db *db, const vf_bounds *b, json_t *restored, vf_check *checks,
                    char *err, size_t errlen)
{
    reader r = {.cfg = cfg, .restored = restored};
    rd_kafka_t *rk = NULL;
    rd_kafka_topic_partition_list_t *asg = rd_kafka_topic_partition_list_new(64);
    int rc = -1;
    if (!ll_config_get(cfg, "kafka.bootstrap.servers")) {
        snprintf(err, errlen, "--topics needs kafka.bootstrap.servers (--config FILE or the environment)");
        goto out;
    }
    if (load_schemas(&r, err, errlen) != 0 || !(rk = lc_reader_new(cfg, "loadctl-verify", err, errlen)) ||
        plan(&r, rk, asg, lc_broker_wait_ms(b->timeout_ms), err, errlen) != 0)
        goto out;
    rd_kafka_resp_err_t e = rd_kafka_assign(rk, asg);
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "assign: %s", rd_kafka_err2str(e));
        goto out;
    }
    bool bounded = vf_topics_read_all(&r, rk, b);
    rd_kafka_assign(rk, NULL);
    if (file_rows(&r, db, err, errlen) != 0)
        goto out;
    judge(&r, checks);
    for (int i = VF_ONE_REPLY; i <= VF_CHUNK_LOST; i++) {
        checks[i].ran = true;
        checks[i].bounded = bounded;
    }
    rc = 0;
out:
    rd_kafka_topic_partition_list_destroy(asg);
    lc_reader_close(rk);
    reader_free(&r);
    return rc;
}
