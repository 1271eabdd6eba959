/*
 * monitor_draw.c - one frame of the `loadctl monitor` dashboard (monitor_tui.h): the header
 * lines, the active runs, the selected run's detail, the alerts and the status line, each
 * clipped to the screen (any size, any resize); control characters become spaces.
 */
#include <curses.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "monitor_tui.h"

/* Bytes of the first `cols` characters of UTF-8 text s (one column each). */
static size_t clip_bytes(const char *s, int cols)
{
    size_t i = 0;
    for (int c = 0; s[i] && c < cols; c++) {
        i++;
        while ((s[i] & 0xC0) == 0x80)
            i++;
    }
    return i;
}

/* Writes formatted text at (y, x), clipped to the screen; control characters become spaces. */
static void put(int y, int x, attr_t attr, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(int y, int x, attr_t attr, const char *fmt, ...)
{
    if (y < 0 || y >= LINES || x < 0 || x >= COLS)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* Control characters become spaces; without a UTF-8 locale each non-ASCII character
     * becomes one '?' (ncurses would draw it as several cells and break the columns). */
    char *w = buf;
    for (const char *p = buf; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c >= 0x80 && !lc_tui_utf8_terminal) {
            if ((c & 0xC0) != 0x80)
                *w++ = '?';
            continue;
        }
        *w++ = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    *w = '\0';
    int cols = COLS - x - (y == LINES - 1 ? 1 : 0); /* never the bottom-right cell */
    if (cols <= 0)
        return;
    attron(attr);
    mvaddnstr(y, x, buf, (int)clip_bytes(buf, cols));
    attroff(attr);
}

static attr_t color(const tui *t, int pair)
{
    return t->colors ? COLOR_PAIR(pair) : A_NORMAL;
}

/* The attribute a run or partition status is drawn with. */
static attr_t status_attr(const tui *t, const char *st)
{
    if (strcmp(st, "PUBLISH_UNKNOWN") == 0 || strncmp(st, "FAILED", 6) == 0 || strcmp(st, "TIMED_OUT") == 0)
        return color(t, C_ERROR) | A_BOLD;
    if (strcmp(st, "SUCCESS") == 0 || strcmp(st, "PASS") == 0)
        return color(t, C_OK);
    if (strcmp(st, "RETRY") == 0 || strcmp(st, "WARN") == 0 || strcmp(st, "FAIL") == 0)
        return color(t, C_WARN);
    return A_NORMAL;
}

static void draw_header(const tui *t)
{
    const lc_snapshot *s = &t->snap;
    attr_t title = t->colors ? color(t, C_TITLE) : A_REVERSE;
    attron(title);
    mvhline(0, 0, ' ', COLS);
    attroff(title);
    put(0, 0, title | A_BOLD, " loadledger monitor  %.19s UTC  every %llds",
        t->have_snap ? lc_snapshot_time(s) : "", (long long)(t->cfg->refresh_ms / 1000));
    const char *keys = "q quit  r refresh  Up/Down select  Enter detail ";
    if (COLS > 60 + (int)strlen(keys))
        put(0, COLS - (int)strlen(keys), title, "%s", keys);
    if (!t->have_snap)
        return;
    char line[512];
    int n = snprintf(line, sizeof line, "active:");
    for (int i = 0; i < LC_N_ACTIVE && n < (int)sizeof line; i++) {
        long c = lc_snapshot_count(s, "active", LC_STATUS_ORDER[i]);
        if (c > 0)
            n += snprintf(line + n, sizeof line - (size_t)n, " %s %ld", LC_STATUS_ORDER[i], c);
    }
    if (n == 7)
        n += snprintf(line + n, sizeof line - (size_t)n, " none");
    if (n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, "   ended in 24h:");
    int before = n;
    for (int i = LC_N_ACTIVE; i < LL_RUN_STATUS_COUNT && n < (int)sizeof line; i++) {
        long c = lc_snapshot_count(s, "recent", LC_STATUS_ORDER[i]);
        if (c > 0)
            n += snprintf(line + n, sizeof line - (size_t)n, " %s %ld", LC_STATUS_ORDER[i], c);
    }
    if (n == before && n < (int)sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, " none");
    put(1, 0, A_NORMAL, "%s", line);
    long dead = lc_snapshot_count(s, "dispatch", "DEAD");
    char pre[96];
    int x = snprintf(pre, sizeof pre, "dispatches: PENDING %ld  SENT %ld  DEAD ",
                     lc_snapshot_count(s, "dispatch", "PENDING"), lc_snapshot_count(s, "dispatch", "SENT"));
    put(2, 0, A_NORMAL, "%s", pre);
    put(2, x, dead ? color(t, C_ERROR) | A_BOLD : A_NORMAL, "%ld", dead);
    put(2, x + snprintf(NULL, 0, "%ld", dead), A_NORMAL, "   cleanup due: %ld   alerts: %d",
        lc_snapshot_count(s, "cleanupDue", NULL), PQntuples(s->alerts));
}

/* Column widths of the run list for the current width. */
typedef struct widths {
    int id, job, bk;
} widths;

static widths run_widths(void)
{
    /* A row is 50 columns plus these three: 80 columns fit 8 + 12 + 10. */
    widths w = {8, 12, 10};
    int extra = COLS - 80;
    if (extra >= 40) {
        w.id = 36;
        extra -= 28;
    }
    if (extra > 0) {
        w.job += extra / 2 > 28 ? 28 : extra / 2;
        w.bk += extra - extra / 2 > 22 ? 22 : extra - extra / 2;
    }
    return w;
}

/* The run list in rows [y, y + h). */
static void draw_runs(tui *t, int y, int h)
{
    const PGresult *r = t->snap.runs;
    int n = PQntuples(r);
    widths w = run_widths();
    put(y, 0, A_BOLD, "RUNS (%d active)", n);
    put(y + 1, 0, A_UNDERLINE, "  %-*.*s %-*.*s %-*.*s %-19s %9s %4s %4s %5s", w.id, w.id, "RUN", w.job,
        w.job, "JOB", w.bk, w.bk, "BUSINESS KEY", "STATUS", "DONE/EXP", "FAIL", "RUN", "IDLE");
    int rows = h - 2;
    if (rows <= 0)
        return;
    if (t->sel >= 0 && t->sel < t->top)
        t->top = t->sel;
    if (t->sel >= t->top + rows)
        t->top = t->sel - rows + 1;
    if (t->top > n - rows)
        t->top = n - rows;
    if (t->top < 0)
        t->top = 0;
    for (int i = t->top, row = 0; i < n && row < rows; i++, row++) {
        char prog[40], age[24];
        snprintf(prog, sizeof prog, "%s/%s", lc_cell(r, i, MR_SUCCESS), lc_cell(r, i, MR_EXPECTED));
        lc_format_age(strtoll(lc_cell(r, i, MR_IDLE_S), NULL, 10), age, sizeof age);
        attr_t a = i == t->sel ? A_REVERSE : A_NORMAL;
        put(y + 2 + row, 0, a, "%c %-*.*s %-*.*s %-*.*s ", i == t->sel ? '>' : ' ', w.id, w.id,
            lc_cell(r, i, MR_ID), w.job, w.job, lc_cell(r, i, MR_JOB), w.bk, w.bk, lc_cell(r, i, MR_BK));
        int x = 5 + w.id + w.job + w.bk;
        const char *st = lc_cell(r, i, MR_STATUS);
        put(y + 2 + row, x, a | status_attr(t, st), "%-19s", st);
        bool failed = strcmp(lc_cell(r, i, MR_FAILED), "0") != 0;
        put(y + 2 + row, x + 19, a, " %9s ", prog);
        put(y + 2 + row, x + 30, a | (failed ? color(t, C_ERROR) : A_NORMAL), "%4s",
            lc_cell(r, i, MR_FAILED));
        put(y + 2 + row, x + 34, a, " %4s %5s", lc_cell(r, i, MR_RUNNING), age);
    }
    if (n == 0)
        put(y + 2, 2, color(t, C_DIM), "no active run");
}

/* The selected run's partitions and metrics in rows [y, y + h). */
static void draw_detail(tui *t, int y, int h)
{
    const lc_snapshot *s = &t->snap;
    if (h <= 0)
        return;
    mvhline(y, 0, '-', COLS);
    if (!s->run || PQntuples(s->run) == 0) {
        put(y, 2, A_BOLD, " no run selected ");
        return;
    }
    put(y, 2, A_BOLD, " %s  %s / %s  %s ", lc_cell(s->run, 0, MD_ID), lc_cell(s->run, 0, MD_JOB),
        lc_cell(s->run, 0, MD_BK), lc_cell(s->run, 0, MD_STATUS));
    int line = y + 1;
    if (!PQgetisnull(s->run, 0, MD_ERR_CODE) && h > 2)
        put(line++, 2, color(t, C_ERROR), "error %s: %s", lc_cell(s->run, 0, MD_ERR_CODE),
            lc_cell(s->run, 0, MD_ERR_MSG));
    int left = y + h - line;
    int nm = PQntuples(s->metrics), np = PQntuples(s->parts);
    int metric_rows = nm ? (nm + 1 < left / 3 ? nm + 1 : left / 3) : 0;
    int part_rows = left - metric_rows;
    if (part_rows > 0) {
        put(line, 2, A_UNDERLINE, "%-9s %-10s %10s %10s %6s %4s  %-18s %s", "PARTITION", "STATUS", "ROWS",
            "EXPECTED", "CHUNKS", "ATT", "WORKER", "ERROR");
        int rows = part_rows - 1;
        if (t->part_top > np - rows)
            t->part_top = np - rows;
        if (t->part_top < 0)
            t->part_top = 0;
        for (int i = t->part_top, row = 1; i < np && row <= rows; i++, row++) {
            const char *st = lc_cell(s->parts, i, MP_STATUS);
            put(line + row, 2, A_NORMAL, "%-9s ", lc_cell(s->parts, i, MP_ID));
            put(line + row, 12, status_attr(t, st), "%-10s", st);
            put(line + row, 22, A_NORMAL, " %10s %10s %6s %4s  %-18.18s %s", lc_cell(s->parts, i, MP_ACTUAL),
                lc_cell(s->parts, i, MP_EXPECTED), lc_cell(s->parts, i, MP_CHUNKS),
                lc_cell(s->parts, i, MP_ATTEMPTS), lc_cell(s->parts, i, MP_WORKER),
                PQgetisnull(s->parts, i, MP_ERR_CODE) ? "" : PQgetvalue(s->parts, i, MP_ERR_CODE));
        }
        if (np > rows && rows > 0)
            put(line, COLS - 24 > 60 ? COLS - 24 : 60, color(t, C_DIM), "%d-%d of %d PgUp/PgDn",
                t->part_top + 1, t->part_top + rows < np ? t->part_top + rows : np, np);
        line += part_rows;
    }
    if (metric_rows > 0) {
        put(line, 2, A_UNDERLINE, "%-8s %-28s %-18s %-18s %s", "STAGE", "METRIC", "EXPECTED", "ACTUAL",
            "RESULT");
        for (int i = 0; i < nm && i < metric_rows - 1; i++) {
            put(line + 1 + i, 2, A_NORMAL, "%-8s %-28.28s %-18.18s %-18.18s ",
                lc_cell(s->metrics, i, MM_STAGE), lc_cell(s->metrics, i, MM_NAME),
                lc_cell(s->metrics, i, MM_EXPECTED), lc_cell(s->metrics, i, MM_ACTUAL));
            const char *res = lc_cell(s->metrics, i, MM_RESULT);
            put(line + 1 + i, 78, status_attr(t, res), "%s", res);
        }
    }
}

/* The alerts in rows [y, y + h). */
static void draw_alerts(const tui *t, int y, int h)
{
    const PGresult *a = t->snap.alerts;
    int n = PQntuples(a);
    if (h <= 0)
        return;
    put(y, 0, A_BOLD, "ALERTS (%d)", n);
    for (int i = 0; i < n && i < h - 1; i++) {
        bool err = strcmp(lc_cell(a, i, MA_SEVERITY), "ERROR") == 0;
        put(y + 1 + i, 0, color(t, err ? C_ERROR : C_WARN) | (err ? A_BOLD : A_NORMAL), "%-5s %-15s",
            lc_cell(a, i, MA_SEVERITY), lc_cell(a, i, MA_KIND));
        int jw = COLS >= 120 ? 24 : 12;
        put(y + 1 + i, 22, A_NORMAL, "%.8s %-*.*s %-11s %s", lc_cell(a, i, MA_RUN), jw, jw,
            lc_cell(a, i, MA_JOB), lc_cell(a, i, MA_AT_SHORT),
            PQgetisnull(a, i, MA_MESSAGE) ? "" : PQgetvalue(a, i, MA_MESSAGE));
    }
    if (n == 0)
        put(y + 1, 2, color(t, C_OK), "no alert");
}

void lc_tui_draw(tui *t)
{
    erase();
    draw_header(t);
    int top = 3, bottom = LINES - 1; /* body rows [top, bottom) and the status line */
    int avail = bottom - top;
    if (t->have_snap && avail > 0) {
        int nruns = PQntuples(t->snap.runs), nalerts = PQntuples(t->snap.alerts);
        int alerts_cap = t->detail ? avail / 5 : avail / 3;
        int alerts_h = nalerts + 1 < alerts_cap ? nalerts + 1 : alerts_cap;
        if (alerts_h < 2 && avail >= 6)
            alerts_h = 2;
        int runs_h = avail - alerts_h;
        if (t->detail) {
            int cap = avail / 3 > 3 ? avail / 3 : 3;
            runs_h = nruns + 2 < cap ? (nruns + 2 > 3 ? nruns + 2 : 3) : cap;
            if (runs_h > avail - alerts_h)
                runs_h = avail - alerts_h;
        }
        if (runs_h < 0)
            runs_h = 0;
        draw_runs(t, top, runs_h);
        int detail_h = t->detail ? avail - runs_h - alerts_h : 0;
        draw_detail(t, top + runs_h, detail_h);
        draw_alerts(t, top + runs_h + detail_h, alerts_h);
    }
    put(LINES - 1, 0, t->status_error ? color(t, C_ERROR) | A_BOLD : color(t, C_DIM), "%s", t->status);
    refresh();
}
