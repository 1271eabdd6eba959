/*
 * retention.c - the cleanup settings as command-line options (docs/contract.md §9: cleanup.
 * success_retention P3D, cleanup.failed_retention P14D, cleanup.max_batch 200).
 */
#include <inttypes.h>
#include <stdio.h>

#include "retention.h"

void lc_retention_options(lc_retention *rt, lc_optspec *specs)
{
    rt->success_text = "P3D";
    rt->failed_text = "P14D";
    rt->batch_text = "200";
    specs[0] = (lc_optspec){"success-retention", &rt->success_text, NULL};
    specs[1] = (lc_optspec){"failed-retention", &rt->failed_text, NULL};
    specs[2] = (lc_optspec){"max-batch", &rt->batch_text, NULL};
}

int lc_retention_parse(const lc_opts *o, lc_retention *rt)
{
    if (lc_parse_duration(rt->success_text, &rt->success_ms) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL,
                       "--success-retention: '%s' is not a duration (P3D or seconds)", rt->success_text);
    if (lc_parse_duration(rt->failed_text, &rt->failed_ms) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL,
                       "--failed-retention: '%s' is not a duration (P14D or seconds)", rt->failed_text);
    if (lc_parse_int(rt->batch_text, 1, 100000, &rt->max_batch) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--max-batch must be an integer >= 1");
    snprintf(rt->success_param, sizeof rt->success_param, "%" PRId64, rt->success_ms);
    snprintf(rt->failed_param, sizeof rt->failed_param, "%" PRId64, rt->failed_ms);
    return LC_CONTINUE;
}
