/*
 * gap.c - `loadctl accept-gap GROUP TOPIC PARTITION --from OFFSET --to OFFSET --reason TEXT`
 * (issue 39, item 6; docs/operations.md "Offsets the topic no longer holds"): an operator's
 * decision that the inputs of [from, to) on one partition, deleted by the topic's retention before
 * the group read them, are lost for good. One INSERT into nifi_ops.offset_gap_acceptance with who
 * (the operator's OS user and host, lc_audit_details) and why; the consuming service stopped on
 * that gap (offsets_unreadable) finds it within loop.position_check_interval and reads on from
 * `to`. Nothing else changes: the runs whose inputs were lost are the operator's to settle (the
 * sweeper times them out, or `loadctl` does).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/ledger.h"
#include "loadctl.h"

static const char USAGE[] =
    "usage: loadctl accept-gap GROUP TOPIC PARTITION --from OFFSET --to OFFSET --reason TEXT [--json]\n\n"
    "Records that the inputs of offsets [--from, --to) of TOPIC's PARTITION, which the broker deleted\n"
    "before the consumer group GROUP read them, are lost for good: the service stopped on that gap\n"
    "(log event offsets_unreadable, metric loadledger_unreadable_offsets, which name the range) reads\n"
    "on from --to. --reason (5..2000 chars) records why; it is kept with your OS user and host.\n"
    "Exit 0 recorded, 1 usage, 2 INVALID_REASON, 3 database.\n";

static const ll_stmt ST_ACCEPT = {
    "accept_gap",
    "INSERT INTO nifi_ops.offset_gap_acceptance (consumer_group, topic, kafka_partition, from_offset, "
    "to_offset,"
    " reason, accepted_by) VALUES ($1, $2, $3::int, $4::bigint, $5::bigint, $6, $7) RETURNING acceptance_id",
    7};

/* Parses an offset (0 .. 2^62): 0, or -1. */
static int parse_offset(const char *s, long *out)
{
    return s && lc_parse_int(s, 0, 4611686018427387904L, out) == 0 ? 0 : -1;
}

int lc_accept_gap(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *pos[3], *from_s = NULL, *to_s = NULL, *reason = NULL;
    int npos;
    lc_optspec specs[] = {
        {"from", &from_s, NULL}, {"to", &to_s, NULL}, {"reason", &reason, NULL}, {NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 3, 3, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    long part, from, to;
    if (strlen(pos[0]) < 1 || strlen(pos[0]) > 255 || strlen(pos[1]) < 1 || strlen(pos[1]) > 255)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "GROUP and TOPIC must be 1..255 bytes");
    if (lc_parse_int(pos[2], 0, 1000000, &part) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "PARTITION must be an integer >= 0");
    if (parse_offset(from_s, &from) != 0 || parse_offset(to_s, &to) != 0 || to <= from)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--from and --to must be offsets with --from < --to");
    if ((rc = lc_check_reason(o, reason, "why the inputs are lost")) != LC_CONTINUE)
        return rc;
    json_t *who = lc_audit_details();
    char *by = json_dumps(who, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(who);
    char ps[24], fs[24], ts[24];
    snprintf(ps, sizeof ps, "%ld", part);
    snprintf(fs, sizeof fs, "%ld", from);
    snprintf(ts, sizeof ts, "%ld", to);
    ll_db db;
    if ((rc = lc_db_open(o, &db)) != LC_OK) {
        free(by);
        return rc;
    }
    const char *p[7] = {pos[0], pos[1], ps, fs, ts, reason, by ? by : "unknown"};
    PGresult *r = lc_query(o, &db, &ST_ACCEPT, p);
    if (!r) {
        rc = LC_DB;
    } else {
        const char *id = PQntuples(r) == 1 ? PQgetvalue(r, 0, 0) : "?";
        if (o->json)
            lc_print_json(json_pack("{s:b,s:s,s:s,s:i,s:I,s:I,s:s}", "ok", 1, "acceptanceId", id, "group",
                                    pos[0], "partition", (int)part, "from", (json_int_t)from, "to",
                                    (json_int_t)to, "topic", pos[1]));
        else
            printf("accepted offsets [%ld, %ld) of %s[%ld] as lost for group %s (acceptance %s): the service "
                   "reads"
                   " on from %ld within loop.position_check_interval\n",
                   from, to, pos[1], part, pos[0], id, to);
        PQclear(r);
    }
    ll_db_close(&db);
    free(by);
    return rc;
}
