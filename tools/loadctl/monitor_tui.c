/*
 * monitor_tui.c - the ncurses dashboard of `loadctl monitor` (monitor_tui.h; a frame is drawn by
 * monitor_draw.c).
 *
 *   line 0      title, database time, keys
 *   lines 1-2   active runs per status, ended in 24 h, dispatch backlog, cleanup due
 *   runs        the active runs with partition progress; the selected one marked '>'
 *   detail      (Enter) the selected run's partitions and validation metrics
 *   alerts      docs/contract.md §5.21, ERROR first
 *   last line   when the frame was read, or why it could not be
 *
 * Keys: q quit, r refresh now, Up/Down (k/j) select, Enter detail on/off, PgUp/PgDn scroll the
 * detail's partitions. A frame is read every --refresh and after every key that changes what is
 * shown. Everything is drawn on stdscr with clipping to the current LINES x COLS, so any size
 * (even 1x1) and any resize is safe; a lost database keeps the last frame on screen with the
 * error below it and is retried at each refresh. SIGINT, SIGTERM and SIGHUP end the loop like q:
 * the terminal is always restored by endwin().
 */
#include <curses.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "monitor_tui.h"
#include "ll/clock.h"

static volatile sig_atomic_t stop_requested;
bool lc_tui_utf8_terminal;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

/*
 * Reads a new frame; on failure keeps the last one and says why on the status line. Returns
 * true when the selection had to move to another run while its detail is shown (read again).
 */
static bool reload(tui *t)
{
    lc_snapshot next;
    const char *run = t->detail && t->selected[0] ? t->selected : NULL;
    if (lc_snapshot_load(t->db, t->cfg, run, &next) != 0) {
        snprintf(t->status, sizeof t->status, "database unavailable, showing the last frame: %s",
                 t->db->err.message[0] ? t->db->err.message : "no connection");
        t->status_error = true;
        return false;
    }
    lc_snapshot_clear(&t->snap);
    t->snap = next;
    t->have_snap = true;
    time_t now = time(NULL);
    struct tm tmv;
    localtime_r(&now, &tmv);
    char hhmmss[16];
    strftime(hhmmss, sizeof hhmmss, "%H:%M:%S", &tmv);
    snprintf(t->status, sizeof t->status, "read at %s; next in %llds", hhmmss,
             (long long)(t->cfg->refresh_ms / 1000));
    t->status_error = false;
    int n = PQntuples(t->snap.runs), found = -1;
    for (int i = 0; i < n && t->selected[0] && found < 0; i++)
        if (strcmp(PQgetvalue(t->snap.runs, i, MR_ID), t->selected) == 0)
            found = i;
    if (found >= 0) {
        t->sel = found;
    } else if (t->detail && t->snap.run && PQntuples(t->snap.run) > 0) {
        t->sel = -1; /* the run shown is not active (any more): keep showing it, mark no row */
    } else if (n > 0) {
        t->sel = t->sel < 0 ? 0 : (t->sel >= n ? n - 1 : t->sel);
        snprintf(t->selected, sizeof t->selected, "%s", PQgetvalue(t->snap.runs, t->sel, MR_ID));
        return t->detail;
    } else {
        t->sel = -1;
        t->selected[0] = '\0';
    }
    return false;
}

/* Moves the selection by delta rows. */
static void move_selection(tui *t, int delta)
{
    if (!t->have_snap || PQntuples(t->snap.runs) == 0)
        return;
    int n = PQntuples(t->snap.runs);
    int sel = t->sel + delta;
    sel = sel < 0 ? 0 : (sel >= n ? n - 1 : sel);
    t->sel = sel;
    t->part_top = 0;
    snprintf(t->selected, sizeof t->selected, "%s", PQgetvalue(t->snap.runs, sel, MR_ID));
}

/* Applies one key; returns true when a new frame must be read. Sets *quit for q. */
static bool handle_key(tui *t, int ch, bool *quit)
{
    switch (ch) {
    case 'q':
    case 'Q':
        *quit = true;
        return false;
    case 'r':
    case 'R':
        return true;
    case KEY_UP:
    case 'k':
        move_selection(t, -1);
        return t->detail;
    case KEY_DOWN:
    case 'j':
        move_selection(t, 1);
        return t->detail;
    case '\n':
    case '\r':
    case KEY_ENTER:
        t->detail = !t->detail;
        t->part_top = 0;
        return t->detail;
    case KEY_NPAGE:
        t->part_top += 10;
        return false;
    case KEY_PPAGE:
        t->part_top -= 10;
        return false;
    default:
        return false;
    }
}

static void setup_colors(tui *t)
{
    t->colors = has_colors() && start_color() == OK;
    if (!t->colors)
        return;
    use_default_colors();
    init_pair(C_TITLE, COLOR_BLACK, COLOR_CYAN);
    init_pair(C_ERROR, COLOR_RED, -1);
    init_pair(C_WARN, COLOR_YELLOW, -1);
    init_pair(C_OK, COLOR_GREEN, -1);
    init_pair(C_DIM, COLOR_BLUE, -1);
}

int lc_monitor_tui(ll_db *db, const lc_monitor_cfg *cfg, const char *run_id)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: getch returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    setlocale(LC_ALL, "");
    lc_tui_utf8_terminal = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        fprintf(stderr, "loadctl: usage: TERM=%s is not a terminal ncurses knows; use monitor --once\n",
                getenv("TERM") ? getenv("TERM") : "");
        return LC_USAGE;
    }
    set_term(scr);
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    tui t = {.db = db, .cfg = cfg};
    setup_colors(&t);
    if (run_id) {
        snprintf(t.selected, sizeof t.selected, "%s", run_id);
        t.detail = true;
    }
    snprintf(t.status, sizeof t.status, "reading the ledger...");
    lc_tui_draw(&t);
    long long next = 0;
    bool quit = false;
    while (!quit && !stop_requested) {
        if (ll_now_ms() >= next) {
            if (reload(&t))
                reload(&t);
            next = ll_now_ms() + cfg->refresh_ms;
        }
        lc_tui_draw(&t);
        long long wait = next - ll_now_ms();
        timeout(wait > 1000 ? 1000 : (wait < 0 ? 0 : (int)wait));
        int ch = getch();
        if (ch == KEY_RESIZE)
            clearok(curscr, TRUE); /* repaint everything at the new size */
        if (ch == ERR || ch == KEY_RESIZE)
            continue;
        if (handle_key(&t, ch, &quit))
            next = 0;
    }
    endwin();
    delscreen(scr);
    lc_snapshot_clear(&t.snap);
    return LC_OK;
}
