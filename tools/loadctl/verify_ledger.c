/*
 * verify_ledger.c - the ledger invariants of `loadctl verify`: run status against its events
 * (docs/contract.md §3.1, §8), one validate-run dispatch and one validation start per run (§5.7, §5.12,
 * uq_load_dispatch_validate), a SUCCESS partition's files against its rows (§5.4 steps 8-10)
 * and the partition counters of migration 0007. Read-only. The runs are read in pages of
 * RUN_PAGE runs in start order, newest first (verify_sql.h): each check is one statement per page,
 * each statement one snapshot of its page, so verify is linear in the runs (issue 42).
 * STAGE_VALIDATION_STARTED events are counted for the runs of load_run (an event naming a run id the ledger
 * does not hold is no longer read: the service writes that event only under its run's lock).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/pgarray.h"
#include "ll/verify.h"
#include "verify.h"
#include "verify_sql.h"

/* Runs per page of every check (bounds the memory of one result and each statement's reads). */
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

/* Judges one run from rows [from, to) of r (its status events in order): its status (c) and its
 * validation starts (starts: at most one STAGE_VALIDATION_STARTED, §5.7). */
static void judge_run(vf_check *c, vf_check *starts, const PGresult *r, int from, int to)
{
    size_t n = 0, started = 0;
    ll_status_event *ev = calloc((size_t)(to - from) + 1, sizeof *ev);
    if (!ev)
        abort();
    for (int i = from; i < to; i++) {
        if (PQgetisnull(r, i, 2))
            continue; /* the run without any status event (LEFT JOIN) */
        started += strcmp(PQgetvalue(r, i, 2), "STAGE_VALIDATION_STARTED") == 0;
        ev[n++] = (ll_status_event){cell(r, i, 2),
                                    cell(r, i, 3),
                                    cell(r, i, 4),
                                    cell(r, i, 5),
                                    cell(r, i, 6),
                                    cell(r, i, 7),
                                    strcmp(PQgetvalue(r, i, 8), "t") == 0};
    }
    const char *run = PQgetvalue(r, from, 0), *stored = PQgetvalue(r, from, 1);
    if (started > 1)
        vf_violation(starts, "%s: %zu validation starts", run, started);
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

/* The run-status and validation-start checks of the page (an array of run ids): each run judged
 * from its status events. */
static int check_run_events(ll_db *db, vf_check *c, vf_check *starts, const char *page, const char **what)
{
    const char *p[1] = {page};
    PGresult *r = ll_db_exec(db, &VF_ST_RUN_EVENTS, p);
    if (!r) {
        *what = VF_ST_RUN_EVENTS.name;
        return -1;
    }
    int rows = PQntuples(r);
    for (int i = 0; i < rows;) {
        int j = i + 1;
        while (j < rows && strcmp(PQgetvalue(r, j, 0), PQgetvalue(r, i, 0)) == 0)
            j++;
        judge_run(c, starts, r, i, j);
        i = j;
    }
    PQclear(r);
    return 0;
}

/* The validate-run dispatch check of the page (an array of run ids): every row one violation. */
static int check_validate_dispatch(ll_db *db, vf_check *c, const char *page, const char **what)
{
    const char *p[1] = {page};
    PGresult *r = ll_db_exec(db, &VF_ST_VALIDATE_DISPATCH, p);
    if (!r) {
        *what = VF_ST_VALIDATE_DISPATCH.name;
        return -1;
    }
    for (int i = 0; i < PQntuples(r); i++)
        vf_violation(c, "%s: %s with %s VALIDATE_RUN dispatches", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
                     PQgetvalue(r, i, 2));
    PQclear(r);
    return 0;
}

/* The two partition checks of the page (an array of run ids), from one read of its files: a row
 * is a partition failing either, with a flag for each (VF_ST_PARTITIONS). */
static int check_partitions(ll_db *db, vf_check *rows, vf_check *counters, const char *page,
                            const char **what)
{
    const char *p[1] = {page};
    PGresult *r = ll_db_exec(db, &VF_ST_PARTITIONS, p);
    if (!r) {
        *what = VF_ST_PARTITIONS.name;
        return -1;
    }
    for (int i = 0; i < PQntuples(r); i++) {
        if (strcmp(PQgetvalue(r, i, 6), "t") == 0)
            vf_violation(rows, "%s/%s: %s rows, its files sum to %s", PQgetvalue(r, i, 0),
                         PQgetvalue(r, i, 1), PQgetvalue(r, i, 2), PQgetvalue(r, i, 3));
        if (strcmp(PQgetvalue(r, i, 7), "t") == 0)
            vf_violation(counters,
                         "%s/%s: counters say %s files, the WRITTEN files are %s (or their sums differ)",
                         PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), PQgetvalue(r, i, 4), PQgetvalue(r, i, 5));
    }
    PQclear(r);
    return 0;
}

/* The keyset of the page walk: the start time and run id of the last run read (empty: none yet). */
typedef struct {
    char started[64];
    char run[40];
} page_key;

/* The next page of runs after `key` into `page` (emptied first; an array of run ids), `key` moved
 * to its last run: 1 a page, 0 no more runs, -1 a database error. */
static int next_page(ll_db *db, page_key *key, ll_pgarray *page, const char **what)
{
    const char *pn[3] = {key->started, key->run, RUN_PAGE};
    const char *pf[1] = {RUN_PAGE};
    const ll_stmt *st = key->run[0] ? &VF_ST_PAGE_NEXT : &VF_ST_PAGE_FIRST;
    PGresult *r = ll_db_exec(db, st, key->run[0] ? pn : pf);
    if (!r) {
        *what = st->name;
        return -1;
    }
    ll_pgarray_free(page);
    int n = PQntuples(r);
    for (int i = 0; i < n; i++)
        ll_pgarray_add(page, PQgetvalue(r, i, 0));
    if (n > 0) {
        snprintf(key->run, sizeof key->run, "%s", PQgetvalue(r, n - 1, 0));
        snprintf(key->started, sizeof key->started, "%s", PQgetvalue(r, n - 1, 1));
    }
    PQclear(r);
    return n > 0;
}

int vf_check_ledger(ll_db *db, vf_check *checks, const char **what)
{
    static const int RAN[] = {VF_RUN_STATUS, VF_STAGE_VALIDATING, VF_VALIDATE_DISPATCH, VF_PARTITION_ROWS,
                              VF_PARTITION_COUNTERS};
    ll_pgarray page = {0};
    page_key key = {"", ""};
    int rc = 0, more;
    while (rc == 0 && (more = next_page(db, &key, &page, what)) != 0) {
        const char *ids = ll_pgarray_text(&page);
        if (more < 0 ||
            check_run_events(db, &checks[VF_RUN_STATUS], &checks[VF_STAGE_VALIDATING], ids, what) != 0 ||
            check_validate_dispatch(db, &checks[VF_VALIDATE_DISPATCH], ids, what) != 0 ||
            check_partitions(db, &checks[VF_PARTITION_ROWS], &checks[VF_PARTITION_COUNTERS], ids, what) != 0)
            rc = -1;
    }
    ll_pgarray_free(&page);
    if (rc != 0)
        return -1;
    for (size_t i = 0; i < sizeof RAN / sizeof RAN[0]; i++)
        checks[RAN[i]].ran = true;
    return 0;
}
