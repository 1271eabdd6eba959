/*
 * monitor.c - `loadctl monitor`: reads the options, then either prints one frame (--once, as
 * text or --json) or runs the ncurses dashboard (monitor_tui.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ll/rules.h"
#include "monitor.h"

static const char USAGE[] =
    "usage: loadctl monitor [--job KEY] [--refresh D] [--stale D] [--validation-stale D]\n"
    "                       [--alert-limit N] [--max-runs N] [--run RUN] [retention options]\n"
    "                       [--once [--json] [--services HOST:PORT,...]]\n\n"
    "A terminal dashboard of the ledger: active runs by status with partition progress, the\n"
    "selected run's partitions and validation metrics, the dispatch backlog and the alerts\n"
    "(PUBLISH_UNKNOWN, DISPATCH_DEAD, RUN_FAILED in 24 h, RUN_STALE, CLEANUP_FAILED).\n"
    "Keys: q quit, r refresh now, Up/Down select a run, Enter detail on/off, PgUp/PgDn scroll.\n\n"
    "  --job KEY             only this job's runs, alerts and counts\n"
    "  --refresh D           read the ledger every D (default 5 seconds, at least 1)\n"
    "  --stale D             CREATED/EXTRACTING without heartbeat for D is RUN_STALE (PT90M)\n"
    "  --validation-stale D  EXTRACTED_VALIDATED/STAGE_VALIDATING/STAGING_VALIDATED/PUBLISHED: (PT2H)\n"
    "  --alert-limit N       at most N alerts, 1..500 (100)\n"
    "  --max-runs N          at most N active runs listed, 1..5000 (200)\n"
    "  --run RUN             select this run and show its detail\n"
    "  --once                print one frame on stdout without ncurses and exit (--json: one\n"
    "                        object like GET /v1/monitor/summary, plus runs and run)\n"
    "  --services LIST       with --once: also each service's /metrics and /readyz (http.listen\n"
    "                        of each, comma-separated host:port, at most 16): state, inputs,\n"
    "                        rejected, dead letters, held runs, largest lag, outbox, RSS\n"
    "The retention options only feed the \"cleanup due\" count:\n" LC_RETENTION_USAGE;

/* Reads the duration option `name` into *ms (at least min_ms). LC_CONTINUE or LC_USAGE. */
static int duration_opt(const lc_opts *o, const char *name, const char *text, int64_t min_ms, int64_t *ms)
{
    if (lc_parse_duration(text, ms) != 0 || *ms < min_ms)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--%s: '%s' is not a duration of at least %" PRId64 " s",
                       name, text, min_ms / 1000);
    return LC_CONTINUE;
}

/* Parses every value of the settings; LC_CONTINUE or LC_USAGE. */
static int parse_cfg(const lc_opts *o, lc_monitor_cfg *cfg, const char *refresh, const char *stale,
                     const char *vstale, const char *alerts, const char *runs)
{
    int rc;
    if ((rc = duration_opt(o, "refresh", refresh, 1000, &cfg->refresh_ms)) != LC_CONTINUE ||
        (rc = duration_opt(o, "stale", stale, 0, &cfg->stale_ms)) != LC_CONTINUE ||
        (rc = duration_opt(o, "validation-stale", vstale, 0, &cfg->validation_stale_ms)) != LC_CONTINUE ||
        (rc = lc_retention_parse(o, &cfg->rt)) != LC_CONTINUE)
        return rc;
    if (lc_parse_int(alerts, 1, 500, &cfg->alert_limit) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--alert-limit must be 1..500");
    if (lc_parse_int(runs, 1, 5000, &cfg->max_runs) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--max-runs must be 1..5000");
    snprintf(cfg->stale_param, sizeof cfg->stale_param, "%" PRId64, cfg->stale_ms);
    snprintf(cfg->vstale_param, sizeof cfg->vstale_param, "%" PRId64, cfg->validation_stale_ms);
    snprintf(cfg->alert_param, sizeof cfg->alert_param, "%ld", cfg->alert_limit);
    snprintf(cfg->runs_param, sizeof cfg->runs_param, "%ld", cfg->max_runs);
    return LC_CONTINUE;
}

/* --once: one frame on stdout. */
static int print_once(const lc_opts *o, ll_db *db, lc_monitor_cfg *cfg, const char *run_id)
{
    lc_snapshot s;
    if (cfg->svc)
        lc_services_probe(cfg->svc, cfg->n_svc);
    if (lc_snapshot_load(db, cfg, run_id, &s) != 0)
        return lc_fail_db(o, db, "monitor");
    if (o->json)
        lc_monitor_print_json(&s, cfg);
    else
        lc_monitor_print_text(&s, cfg);
    lc_snapshot_clear(&s);
    return LC_OK;
}

int lc_monitor(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    lc_monitor_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    const char *pos[1], *refresh = "5", *stale = "PT90M", *vstale = "PT2H", *alerts = "100", *runs = "200",
                        *run = NULL, *services = NULL;
    bool once = false;
    int npos;
    lc_optspec specs[13] = {{"job", &cfg.job, NULL},
                            {"services", &services, NULL},
                            {"refresh", &refresh, NULL},
                            {"stale", &stale, NULL},
                            {"validation-stale", &vstale, NULL},
                            {"alert-limit", &alerts, NULL},
                            {"max-runs", &runs, NULL},
                            {"run", &run, NULL},
                            {"once", NULL, &once}};
    lc_retention_options(&cfg.rt, specs + 9);
    specs[12] = (lc_optspec){NULL, NULL, NULL};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 0, 0, &npos);
    if (rc != LC_CONTINUE || (rc = parse_cfg(o, &cfg, refresh, stale, vstale, alerts, runs)) != LC_CONTINUE)
        return rc;
    char run_id[37];
    if (cfg.job && !ll_is_job_key(cfg.job))
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--job must match ^[A-Z0-9_]{1,200}$");
    if (run && ll_uuid_canonical(run, run_id) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--run must be a run id (UUID)");
    if (!once && o->json)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--json needs --once (the dashboard is for people)");
    if (!once && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "the dashboard needs a terminal; use monitor --once");
    if (services && !once)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--services needs --once");
    char err[300];
    if (services && lc_services_parse(services, &cfg.svc, &cfg.n_svc, err, sizeof err) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "%s", err);
    ll_db db;
    if ((rc = lc_db_open(o, &db)) != LC_OK) {
        free(cfg.svc);
        return rc;
    }
    rc =
        once ? print_once(o, &db, &cfg, run ? run_id : NULL) : lc_monitor_tui(&db, &cfg, run ? run_id : NULL);
    ll_db_close(&db);
    free(cfg.svc);
    return rc;
}
