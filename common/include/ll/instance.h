/*
 * instance.h - one process per consuming instance (issue 41, item 6; docs/design.md §3, "One
 * process per instance id"; the table: schemas/sql/0015_service_instance.sql).
 *
 * A consuming service's transactional.id is <group>.<service.instance_id> (setup.c): a second
 * process with the same pair would fence the first one's Kafka transactions, be fenced in turn
 * when the first restarts, and so on. So each process takes the lease of its (group, instance id)
 * in nifi_ops.service_instance at start, before its producer exists, and holds it for its life:
 *
 *   - taken by compare-and-set: inserted when absent; else taken over only when the holder's lease
 *     has expired (no renewal for its lease_ms, by the database's clock), or when the holder ran on
 *     this machine (same host name, boot id and pid namespace) and its process is gone (a kill -9
 *     restarted at once, as systemd or the chaos drill do); the update names the lease_seq it read,
 *     so a holder that renewed meanwhile wins;
 *   - otherwise refused: the process exits LL_EXIT_INSTANCE_HELD with one instance_held line naming
 *     the holder (host, pid, since, last renewal);
 *   - renewed every third of the lease on a thread and connection of its own (a long batch or a
 *     Kafka wait of the loop never lets it lapse); a renewal that finds the row not its own decides
 *     again as at start: a row gone or stale (the database went back in time: a restore, a failover
 *     that lost commits) is taken again, a live holder (this process was frozen past its lease and
 *     another took over) stops the service (instance_lease_lost, exit 2 as a fenced producer);
 *   - deleted at a clean exit, after the producer is gone, so a successor starts at once.
 *
 * A lease row, not a session advisory lock: behind a transaction-mode pooler a session lock
 * belongs to whichever server connection ran it and dies unseen when the pooler closes that one.
 * Every statement is one bounded transaction (db.statement_timeout, db.lock_timeout,
 * db.response_timeout); the SQL is in visible constants (instance.c).
 *
 * The pure parts (the decision, the same-machine test, the /proc stat parse) are unit tested in
 * tests/unit/test_core_instance.c; the whole in tests/integration/test_instance_lease.py.
 */
#ifndef LL_INSTANCE_H
#define LL_INSTANCE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ll/config.h"

/* The exit code of a consuming service whose instance lease is held by another process at start
 * (or could not be checked because the database did not answer within a lease period). Not 1: the systemd
 * unit restarts it (Restart=on-failure), so a process that waited for a crashed holder on another host starts
 * once that lease expires. */
#define LL_EXIT_INSTANCE_HELD 4

/* The service.instance_lease entry of the loop's key table (LL_LOOP_CONFIG_KEYS): the lease
 * period, PT1S..PT1H, default PT30S; renewed every third of it. */
#define LL_INSTANCE_LEASE_KEY                                                                                \
    {                                                                                                        \
        "service.instance_lease", "PT30S", false,                                                            \
            "lease on (group, service.instance_id) held for the process's life, renewed every third of"      \
            " it: a second process with the same pair is refused at start (exit 4) while the holder renews;" \
            " a crashed holder is taken over after it (at once on the same machine)",                        \
            LL_CONFIG_DURATION, LL_SEC, LL_HOUR                                                              \
    }

/* One process as the lease records it (all text NUL-terminated; "" or 0 when unknown). */
typedef struct ll_instance_proc {
    char host[256];       /* gethostname() */
    long long pid;        /* getpid() */
    long long proc_start; /* the process's start, clock ticks after boot (/proc/<pid>/stat field 22) */
    char boot_id[64];     /* /proc/sys/kernel/random/boot_id: a reboot makes every older holder dead */
    char pid_ns[64];      /* readlink /proc/self/ns/pid, e.g. "pid:[4026531836]": pids compare only in one */
} ll_instance_proc;

/* What a start found in the lease row, for ll_instance_decide. */
typedef struct ll_instance_seen {
    bool held;         /* a row exists (a clean exit deletes it) */
    int64_t age_ms;    /* since its last renewal, by the database's clock (negative: as 0) */
    int64_t lease_ms;  /* the holder's own lease period (it renews every third of it) */
    bool same_machine; /* ll_instance_same_machine(holder, this process) */
    int holder_alive;  /* same_machine only: 1 its process runs, 0 gone, -1 unknown (as alive) */
} ll_instance_seen;

/* The decision at start. */
typedef enum ll_instance_decision {
    LL_INSTANCE_TAKE_FREE = 0, /* no holder: insert the row */
    LL_INSTANCE_TAKE_EXPIRED,  /* the holder did not renew within its lease: take it over */
    LL_INSTANCE_TAKE_DEAD,     /* the holder's process on this machine is gone: take it over at once */
    LL_INSTANCE_REFUSE         /* a live holder: exit LL_EXIT_INSTANCE_HELD naming it */
} ll_instance_decision;

/* The decision for what a start saw (rules above: free, expired when age_ms > lease_ms, dead on
 * this machine when holder_alive == 0, else refuse). Pure. */
ll_instance_decision ll_instance_decide(const ll_instance_seen *seen);

/* The decision's name for the logs: "free", "expired", "dead", "refuse" (static). Pure. */
const char *ll_instance_decision_name(ll_instance_decision d);

/* Whether two processes run on the same machine and pid namespace, so that a pid of one means the
 * same process to the other: host, boot_id and pid_ns equal and none of them empty. Pure. */
bool ll_instance_same_machine(const ll_instance_proc *a, const ll_instance_proc *b);

/* The start time (field 22, starttime, clock ticks after boot) and the state (field 3: R, S, D, Z
 * for a zombie, X dead, ...) of a /proc/<pid>/stat line into *start and *state; the command name
 * (field 2, in parentheses) may hold spaces and ')'. 0, or -1 (both untouched) for a line that is
 * not one. Pure. */
int ll_instance_parse_stat(const char *stat, long long *start, char *state);

/* This process's identity (host, pid, start, boot id, pid namespace); what /proc does not give is
 * left "" or 0 (then no holder ever counts as on the same machine). */
void ll_instance_proc_self(ll_instance_proc *out);

/* Whether p's process still runs, asked on this machine (the caller checked
 * ll_instance_same_machine): 0 when kill(pid, 0) says ESRCH, or /proc/<pid>/stat shows another
 * start time (the pid was reused) or a zombie not reaped yet, 1 when it runs, -1 when it cannot
 * tell (counts as alive). */
int ll_instance_proc_alive(const ll_instance_proc *p);

/* A held lease and its renewal thread (instance.c). Opaque; owned by the caller of
 * ll_instance_lease_take, freed by ll_instance_lease_end. */
typedef struct ll_instance_lease ll_instance_lease;

/*
 * Takes the lease of (group, instance) for the process named service (its application_name),
 * on a connection of its own made from cfg (db.conninfo, db.tx_attempts and the db.* timeouts)
 * with service.instance_lease as the period, then starts its renewal thread; on_lost (may be NULL)
 * is called once from that thread if another live process took the lease over (it must only set
 * flags; the service then stops and exits 2).
 * A database that does not answer is tried again each second for one lease period; *stop (the
 * stop signal) ends that wait.
 * Returns 0 with *out set; LL_EXIT_INSTANCE_HELD with err saying who holds it (logged as
 * instance_held) or that the database did not answer (instance_lease_unchecked); 1 with err for a
 * bad key or a database error (logged). *out is NULL unless 0.
 */
int ll_instance_lease_take(const char *service, const ll_config *cfg, const char *group, const char *instance,
                           volatile sig_atomic_t *stop, void (*on_lost)(void), ll_instance_lease **out,
                           char *err, size_t errlen);

/* Whether the renewal found the lease taken over by another process (on_lost was called). */
bool ll_instance_lease_lost(const ll_instance_lease *lease);

/* Stops the renewal thread, deletes the row if this process still holds it (a bounded statement;
 * a failure is logged and the lease then expires), closes the connection and frees lease.
 * NULL does nothing. */
void ll_instance_lease_end(ll_instance_lease *lease);

#endif
