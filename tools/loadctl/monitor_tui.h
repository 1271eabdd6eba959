/*
 * monitor_tui.h - what the two files of the ncurses dashboard share (not a public header):
 *
 *   monitor_tui.c   the dashboard's loop: frames read, keys, signals, the terminal set up and
 *                   restored
 *   monitor_draw.c  one frame drawn on stdscr, clipped to LINES x COLS
 */
#ifndef LC_MONITOR_TUI_H
#define LC_MONITOR_TUI_H

#include "monitor.h"

/* Colour pairs (used only when the terminal has colours). */
enum { C_TITLE = 1, C_ERROR, C_WARN, C_OK, C_DIM };

/* State of the dashboard between frames. */
typedef struct tui {
    ll_db *db;
    const lc_monitor_cfg *cfg;
    lc_snapshot snap;
    bool have_snap;
    char selected[40]; /* run id of the selected run ("" = none) */
    int sel, top;      /* selected row and first row shown in the run list */
    int part_top;      /* first partition shown in the detail */
    bool detail;
    bool colors;
    char status[600]; /* the last line */
    bool status_error;
} tui;

/* The locale's codeset is UTF-8: ledger text is shown as is (set once by lc_monitor_tui). */
extern bool lc_tui_utf8_terminal;

/* monitor_draw.c: draws the whole frame of t (its snapshot, selection, status line). */
void lc_tui_draw(tui *t);

#endif
