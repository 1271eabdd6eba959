/*
 * ll_print_reads.c - prints the statements whose plans tests/integration/test_history_plans.py
 * checks on a generated history (issue 42: every read bounded by an index or a window), exactly as
 * they ship: the texts come from the headers the services and loadctl compile (no copy of the SQL
 * in Python). Output: one JSON object per line, {"name", "nparams", "sql"}. A test tool, not
 * installed.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "claim_sql.h"
#include "cleanup_sql.h"
#include "gauges_sql.h"
#include "monitor_sql.h"
#include "runs_sql.h"
#include "show_sql.h"
#include "verify_sql.h"

int main(void)
{
    const ll_stmt *const all[] = {
        &VF_ST_PAGE_FIRST, &VF_ST_PAGE_NEXT, &VF_ST_RUN_EVENTS,   &VF_ST_VALIDATE_DISPATCH,
        &VF_ST_PARTITIONS, &SWEEP_ST_GAUGES, &MON_COUNTS,         &MON_RUNS,
        &MON_ALERTS,       &RUNS_LIST,       &CLEANUP_CANDIDATES, &SHOW_DISPATCHES,
        &CLAIM_ACK_REISSUE};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        json_t *o = json_pack("{s:s, s:i, s:s}", "name", all[i]->name, "nparams", all[i]->nparams, "sql",
                              all[i]->sql);
        if (!o)
            return 1;
        char *line = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!line)
            return 1;
        puts(line);
        free(line);
    }
    return 0;
}
