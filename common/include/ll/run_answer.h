/*
 * run_answer.h - what a service does with the decision of a run-level event (ll_run_event_decide,
 * ll_publish_result_decide; docs/contract.md §5.6-§5.10, §5.13, §5.14 and K§6): one function over a
 * small table each event declares, one row per ll_run_event, instead of a switch in every
 * service. The table says apply, defer, or reply with which outcome, code and runStatus; the
 * event's own functions apply it and build its reply (its extra fields). No I/O of its own.
 */
#ifndef LL_RUN_ANSWER_H
#define LL_RUN_ANSWER_H

#include <jansson.h>
#include <stdbool.h>

#include "ll/kloop.h"
#include "ll/rules.h"

/* What one decision does. */
typedef enum ll_run_act {
    LL_RUN_ACT_REPLY = 0, /* LL_APPLY_ROLLBACK with the reply the event builds from the row */
    LL_RUN_ACT_APPLY,     /* the event's apply function (it writes, replies, returns its ll_apply) */
    LL_RUN_ACT_DEFER,     /* LL_APPLY_DEFER, out->reason "run is <current>; waiting for <apply>" */
    LL_RUN_ACT_DEFER_RUN  /* LL_APPLY_DEFER, out->reason as the run lock left it ("run … not in the
                           * ledger yet") */
} ll_run_act;

/* The runStatus of a reply row. */
typedef enum ll_run_reply_status {
    LL_RUN_RS_NONE = 0, /* none (null): the run is not in the ledger */
    LL_RUN_RS_CURRENT,  /* the locked run's status (ll_run_event_in.current) */
    LL_RUN_RS_DONE      /* the status the event leads to (ll_run_event_in.done) */
} ll_run_reply_status;

/* One row of an event's table. Strings static. */
typedef struct ll_run_answer {
    ll_run_act act;
    const char *outcome;        /* REPLY: "REJECTED" or "REPLAY" */
    const char *code;           /* REPLY: the reply code (RUN_NOT_FOUND, RUN_STATUS_MISMATCH, ...) or NULL */
    ll_run_reply_status status; /* REPLY: which runStatus the reply names */
    bool ok;                    /* REPLY: the event's yes/no field (claimed, stageValidated, success) */
} ll_run_answer;

/* The rows every run-level event's table shares (docs/contract.md §5.6-§5.14, the run-event
 * ladder): apply, wait for the run or for the status it waits for, an unknown run. A table lists
 * them first, then its own REPLAY and mismatch rows. */
#define LL_RUN_ANSWERS_COMMON                                                                                \
    [LL_RUN_EVENT_APPLY] = {LL_RUN_ACT_APPLY, NULL, NULL, LL_RUN_RS_NONE, false},                            \
    [LL_RUN_EVENT_DEFER_RUN] = {LL_RUN_ACT_DEFER_RUN, NULL, NULL, LL_RUN_RS_NONE, false},                    \
    [LL_RUN_EVENT_DEFER] = {LL_RUN_ACT_DEFER, NULL, NULL, LL_RUN_RS_NONE, false},                            \
    [LL_RUN_EVENT_RUN_NOT_FOUND] = {LL_RUN_ACT_REPLY, "REJECTED", "RUN_NOT_FOUND", LL_RUN_RS_NONE, false}
/* The run's status (or its token) is not one the event applies in: RUN_STATUS_MISMATCH naming the
 * run's status. */
#define LL_RUN_ANSWER_MISMATCH                                                                               \
    {                                                                                                        \
        LL_RUN_ACT_REPLY, "REJECTED", "RUN_STATUS_MISMATCH", LL_RUN_RS_CURRENT, false                        \
    }

/* The event's side. ctx is the event's own state (borrowed). apply: the LL_RUN_ACT_APPLY step,
 * returns its ll_apply (LL_APPLY_COMMIT, or LL_APPLY_DB, ...). reply: a new reply for row (outcome,
 * code) with run_status (static name, or NULL for LL_RUN_RS_NONE), plus the event's own fields;
 * a new reference the loop then owns (through out->reply). */
typedef struct ll_run_event_ops {
    ll_apply (*apply)(void *ctx, ll_apply_out *out);
    json_t *(*reply)(void *ctx, const ll_run_answer *row, const char *run_status);
} ll_run_event_ops;

/*
 * Does what table[ev] says for an event judged on in (the state ll_run_event_decide saw): REPLY sets
 * out->reply from ops->reply and returns LL_APPLY_ROLLBACK; APPLY returns ops->apply's answer;
 * DEFER writes the reason naming in->current and in->apply and returns LL_APPLY_DEFER; DEFER_RUN
 * returns LL_APPLY_DEFER leaving out->reason alone. An ev outside the enum takes the
 * LL_RUN_EVENT_STATUS_MISMATCH row. table has LL_RUN_EVENT_COUNT rows, indexed by ll_run_event;
 * table, in and ops borrowed.
 */
ll_apply ll_run_event_act(const ll_run_answer table[LL_RUN_EVENT_COUNT], ll_run_event ev,
                          const ll_run_event_in *in, const ll_run_event_ops *ops, void *ctx,
                          ll_apply_out *out);

#endif
