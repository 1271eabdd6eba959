/*
 * instance.c - the instance lease: one process per (consumer group, service.instance_id)
 * (ll/instance.h has the rules; the table is schemas/sql/0015_service_instance.sql).
 */
#define _GNU_SOURCE
#include "ll/instance.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ll/clock.h"
#include "ll/db.h"
#include "ll/log.h"

/* ---- the pure parts ------------------------------------------------------------------------- */

ll_instance_decision ll_instance_decide(const ll_instance_seen *seen)
{
    if (!seen->held)
        return LL_INSTANCE_TAKE_FREE;
    int64_t age = seen->age_ms < 0 ? 0 : seen->age_ms; /* the database's clock stepped back: fresh */
    if (age > seen->lease_ms)
        return LL_INSTANCE_TAKE_EXPIRED;
    if (seen->same_machine && seen->holder_alive == 0)
        return LL_INSTANCE_TAKE_DEAD;
    return LL_INSTANCE_REFUSE;
}

const char *ll_instance_decision_name(ll_instance_decision d)
{
    switch (d) {
    case LL_INSTANCE_TAKE_FREE:
        return "free";
    case LL_INSTANCE_TAKE_EXPIRED:
        return "expired";
    case LL_INSTANCE_TAKE_DEAD:
        return "dead";
    case LL_INSTANCE_REFUSE:
        return "refuse";
    }
    return "refuse";
}

bool ll_instance_same_machine(const ll_instance_proc *a, const ll_instance_proc *b)
{
    return a->host[0] && a->boot_id[0] && a->pid_ns[0] && strcmp(a->host, b->host) == 0 &&
           strcmp(a->boot_id, b->boot_id) == 0 && strcmp(a->pid_ns, b->pid_ns) == 0;
}

int ll_instance_parse_stat(const char *stat, long long *start, char *state)
{
    const char *p = stat ? strrchr(stat, ')') : NULL;
    if (!p || p == stat)
        return -1;
    p++;
    char st = '?';
    /* after the command name: field 3 (state) ... field 22 (starttime), 20 fields */
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (!*p || *p == '\n')
            return -1;
        if (field == 3)
            st = *p;
        const char *end = p;
        while (*end && *end != ' ' && *end != '\n')
            end++;
        if (field == 22) {
            char num[32];
            size_t n = (size_t)(end - p);
            if (n == 0 || n >= sizeof num)
                return -1;
            memcpy(num, p, n);
            num[n] = '\0';
            char *stop = NULL;
            errno = 0;
            long long v = strtoll(num, &stop, 10);
            if (errno || *stop || v < 0)
                return -1;
            *start = v;
            *state = st;
            return 0;
        }
        p = end;
    }
    return -1;
}

/* ---- this machine --------------------------------------------------------------------------- */

/* The first line of a small file into out (newline cut), "" when it cannot be read. */
static void read_line(const char *path, char *out, size_t n)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (!fgets(out, (int)n, f))
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

/* The start time and state of process pid from /proc/<pid>/stat: 0, or -1 when it cannot be read. */
static int proc_start_of(long long pid, long long *out, char *state)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%lld/stat", pid);
    read_line(path, line, sizeof line);
    return line[0] ? ll_instance_parse_stat(line, out, state) : -1;
}

void ll_instance_proc_self(ll_instance_proc *out)
{
    memset(out, 0, sizeof *out);
    if (gethostname(out->host, sizeof out->host - 1) != 0)
        out->host[0] = '\0';
    out->pid = (long long)getpid();
    char state = '?';
    if (proc_start_of(out->pid, &out->proc_start, &state) != 0)
        out->proc_start = 0;
    read_line("/proc/sys/kernel/random/boot_id", out->boot_id, sizeof out->boot_id);
    ssize_t n = readlink("/proc/self/ns/pid", out->pid_ns, sizeof out->pid_ns - 1);
    out->pid_ns[n > 0 ? n : 0] = '\0';
}

int ll_instance_proc_alive(const ll_instance_proc *p)
{
    if (p->pid <= 0)
        return -1;
    if (kill((pid_t)p->pid, 0) != 0 && errno == ESRCH)
        return 0;
    long long start = 0;
    char state = '?';
    if (p->proc_start <= 0 || proc_start_of(p->pid, &start, &state) != 0)
        return -1; /* it exists (or is hidden from us): as alive */
    /* another start: the pid was reused; a zombie (Z) or dead (X) process has ended, only its
     * parent has not reaped it yet (a supervisor restarting it before its wait) */
    return start == p->proc_start && state != 'Z' && state != 'X' ? 1 : 0;
}

/* ---- the statements ------------------------------------------------------------------------- */

/* The row and its age by the database's clock ($1 group, $2 instance). */
static const ll_stmt LEASE_READ = {
    "instance_lease_read",
    "SELECT holder, host, pid, proc_start, boot_id, pid_ns, lease_ms, lease_seq,"
    " to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
    " to_char(renewed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
    " (extract(epoch FROM now() - renewed_at) * 1000)::bigint"
    " FROM nifi_ops.service_instance WHERE consumer_group = $1 AND instance_id = $2",
    2};

/* A free lease taken ($1 group, $2 instance, $3 holder, $4 host, $5 pid, $6 proc_start, $7 boot_id,
 * $8 pid_ns, $9 lease_ms): one row, or none when another start inserted it first. */
static const ll_stmt LEASE_INSERT = {
    "instance_lease_insert",
    "INSERT INTO nifi_ops.service_instance (consumer_group, instance_id, holder, host, pid, proc_start,"
    " boot_id, pid_ns, lease_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
    " ON CONFLICT (consumer_group, instance_id) DO NOTHING",
    9};

/* A lease taken over, by compare-and-set on the lease_seq read ($10): none when the holder renewed
 * (or another start took it) since. */
static const ll_stmt LEASE_TAKE_OVER = {
    "instance_lease_take_over",
    "UPDATE nifi_ops.service_instance SET holder = $3, host = $4, pid = $5, proc_start = $6, boot_id = $7,"
    " pid_ns = $8, lease_ms = $9, lease_seq = lease_seq + 1, started_at = now(), renewed_at = now()"
    " WHERE consumer_group = $1 AND instance_id = $2 AND lease_seq = $10",
    10};

/* The renewal ($3 holder): none when another process took the lease over. */
static const ll_stmt LEASE_RENEW = {"instance_lease_renew",
                                    "UPDATE nifi_ops.service_instance SET renewed_at = now(),"
                                    " lease_seq = lease_seq + 1"
                                    " WHERE consumer_group = $1 AND instance_id = $2 AND holder = $3",
                                    3};

/* The release at a clean exit ($3 holder). */
static const ll_stmt LEASE_RELEASE = {
    "instance_lease_release",
    "DELETE FROM nifi_ops.service_instance WHERE consumer_group = $1 AND instance_id = $2 AND holder = $3",
    3};

/* ---- the lease ------------------------------------------------------------------------------ */

struct ll_instance_lease {
    ll_db db; /* the lease's own connection: the renewal never waits for the loop's */
    char group[256], instance[256];
    char holder[40]; /* 32 random hex digits: this process's token */
    ll_instance_proc self;
    int64_t lease_ms;
    void (*on_lost)(void);
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool ending;       /* under mu: the thread stops */
    volatile int lost; /* set once by the thread; read by the service after its loop */
};

/* The holder as a start read it. */
typedef struct seen_row {
    ll_instance_proc proc;
    char holder[65], started[40], renewed[40];
    long long lease_ms, lease_seq, age_ms;
} seen_row;

static void copy_cell(const PGresult *r, int col, char *out, size_t n)
{
    const char *t = ll_db_text(r, 0, col);
    snprintf(out, n, "%s", t ? t : "");
}

/* Reads the row: 1 found (into *row), 0 none, -1 failed (db->err). */
static int read_row(ll_instance_lease *l, seen_row *row)
{
    const char *params[2] = {l->group, l->instance};
    PGresult *r = ll_db_exec(&l->db, &LEASE_READ, params);
    if (!r)
        return -1;
    int found = PQntuples(r) > 0;
    if (found) {
        copy_cell(r, 0, row->holder, sizeof row->holder);
        copy_cell(r, 1, row->proc.host, sizeof row->proc.host);
        row->proc.pid = ll_db_ll(r, 0, 2, 0);
        row->proc.proc_start = ll_db_ll(r, 0, 3, 0);
        copy_cell(r, 4, row->proc.boot_id, sizeof row->proc.boot_id);
        copy_cell(r, 5, row->proc.pid_ns, sizeof row->proc.pid_ns);
        row->lease_ms = ll_db_ll(r, 0, 6, 0);
        row->lease_seq = ll_db_ll(r, 0, 7, 0);
        copy_cell(r, 8, row->started, sizeof row->started);
        copy_cell(r, 9, row->renewed, sizeof row->renewed);
        row->age_ms = ll_db_ll(r, 0, 10, 0);
    }
    PQclear(r);
    return found;
}

/* Runs a statement that changes at most one row: its count (0 or 1), or -1 failed (db->err). */
static long exec_count(ll_instance_lease *l, const ll_stmt *st, const char *const *params)
{
    PGresult *r = ll_db_exec(&l->db, st, params);
    if (!r)
        return -1;
    long n = ll_db_affected(r);
    PQclear(r);
    return n;
}

/* The insert or the take-over (seq: the lease_seq read, or NULL for the insert): 1 taken, 0 lost
 * the race, -1 failed. */
static long write_lease(ll_instance_lease *l, const char *seq)
{
    char pid[24], start[24], lease[24];
    snprintf(pid, sizeof pid, "%lld", l->self.pid);
    snprintf(start, sizeof start, "%lld", l->self.proc_start);
    snprintf(lease, sizeof lease, "%" PRId64, l->lease_ms);
    const char *params[10] = {l->group, l->instance,     l->holder,      l->self.host, pid,
                              start,    l->self.boot_id, l->self.pid_ns, lease,        seq};
    return exec_count(l, seq ? &LEASE_TAKE_OVER : &LEASE_INSERT, params);
}

/* A live holder found: at start the refusal (instance_held: who holds the lease and what to do),
 * while running the loss (instance_lease_lost: who took it over); err gets the line's text. */
static void refuse(const ll_instance_lease *l, const seen_row *row, bool at_start, char *err, size_t errlen)
{
    if (at_start)
        snprintf(
            err, errlen,
            "service.instance_id '%s' of group '%s' is held by another process: host %s pid %lld, since"
            " %s, last renewed %s (%.1f s ago, lease %.1f s). Two processes with one instance id share one"
            " transactional.id and fence each other: stop that process, or give this one its own"
            " service.instance_id (a holder that died on another host is taken over once its lease"
            " expires)",
            l->instance, l->group, row->proc.host, row->proc.pid, row->started, row->renewed,
            (double)row->age_ms / 1000.0, (double)row->lease_ms / 1000.0);
    else
        snprintf(err, errlen,
                 "instance lease of %s/%s was taken over by another process: host %s pid %lld, since %s, last"
                 " renewed %s (this one did not renew it within its lease, %.1f s): stopping (exit 2)",
                 l->group, l->instance, row->proc.host, row->proc.pid, row->started, row->renewed,
                 (double)l->lease_ms / 1000.0);
    json_t *f = json_pack("{s:s,s:s,s:s,s:I,s:s,s:s,s:I,s:I}", "group", l->group, "instance_id", l->instance,
                          "holder_host", row->proc.host, "holder_pid", (json_int_t)row->proc.pid,
                          "holder_since", row->started, "holder_renewed_at", row->renewed, "lease_age_ms",
                          (json_int_t)row->age_ms, "lease_ms", (json_int_t)row->lease_ms);
    ll_log_json(LL_ERROR, NULL, at_start ? "instance_held" : "instance_lease_lost", f, "%s", err);
}

/* One try at the lease (at start, or again when a renewal found the row not this process's: the
 * database went back in time, or another process took it over): 0 taken, 1 refused (err),
 * 2 lost a race (try again), -1 database failure. */
static int try_take(ll_instance_lease *l, bool at_start, char *err, size_t errlen)
{
    seen_row row;
    memset(&row, 0, sizeof row);
    int found = read_row(l, &row);
    if (found < 0)
        return -1;
    ll_instance_seen seen = {found == 1, found ? row.age_ms : 0, found ? row.lease_ms : 0, false, -1};
    if (found) {
        seen.same_machine = ll_instance_same_machine(&row.proc, &l->self);
        if (seen.same_machine)
            seen.holder_alive = ll_instance_proc_alive(&row.proc);
    }
    ll_instance_decision d = ll_instance_decide(&seen);
    if (d == LL_INSTANCE_REFUSE) {
        refuse(l, &row, at_start, err, errlen);
        return 1;
    }
    char seq[24];
    snprintf(seq, sizeof seq, "%lld", row.lease_seq);
    long n = write_lease(l, d == LL_INSTANCE_TAKE_FREE ? NULL : seq);
    if (n < 0)
        return -1;
    if (n == 0)
        return 2;
    if (d != LL_INSTANCE_TAKE_FREE) {
        json_t *f = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:I}", "group", l->group, "instance_id", l->instance,
                              "reason", ll_instance_decision_name(d), "previous_host", row.proc.host,
                              "previous_pid", (json_int_t)row.proc.pid, "previous_renewed_at", row.renewed,
                              "lease_age_ms", (json_int_t)row.age_ms);
        ll_log_json(LL_WARN, NULL, "instance_taken_over", f,
                    "instance lease of %s/%s taken over from host %s pid %lld (%s: last renewed %s)",
                    l->group, l->instance, row.proc.host, row.proc.pid,
                    d == LL_INSTANCE_TAKE_DEAD ? "its process on this machine is gone" : "its lease expired",
                    row.renewed);
    } else if (!at_start) {
        ll_log(LL_WARN, NULL, "instance_lease_retaken",
               "instance lease of %s/%s was gone from the database (it went back in time, or an operator"
               " deleted the row): taken again",
               l->group, l->instance);
    }
    return 0;
}

/* Waits up to ms on the lease's condition; true when the lease ends. */
static bool wait_or_end(ll_instance_lease *l, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&l->mu);
    while (!l->ending)
        if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
            break;
    bool ending = l->ending;
    pthread_mutex_unlock(&l->mu);
    return ending;
}

/* The renewal thread: every third of the lease; a failure is logged and tried at the next turn
 * (while the database is down nobody can take the lease over either). */
static void *renew_thread(void *arg)
{
    ll_instance_lease *l = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* the stop signals go to the service's thread */
    int64_t every = l->lease_ms / 3 > 0 ? l->lease_ms / 3 : 1;
    while (!wait_or_end(l, every)) {
        const char *params[3] = {l->group, l->instance, l->holder};
        long n = ll_db_ensure(&l->db) == LL_DB_OK ? exec_count(l, &LEASE_RENEW, params) : -1;
        if (n == 0) {
            /* not this process's row: taken again when it is free, expired or its holder is gone
             * (a database that went back in time: a restore, a failover that lost commits), else
             * another live process holds it */
            char why[1024];
            int rc = try_take(l, false, why, sizeof why);
            if (rc == 1) {
                l->lost = 1;
                if (l->on_lost)
                    l->on_lost();
                break;
            }
            n = rc == 0 ? 1 : rc == 2 ? 0 : -1; /* a race: read again at the next turn */
        }
        if (n < 0)
            ll_log(LL_WARN, NULL, "instance_lease_renew_failed", "renewal of the instance lease of %s/%s: %s",
                   l->group, l->instance, l->db.err.message);
    }
    return NULL;
}

static void lease_free(ll_instance_lease *l)
{
    ll_db_close(&l->db);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* Makes the lease's object and connection: 0, or 1 with err (a bad key). */
static int lease_new(const char *service, const ll_config *cfg, const char *group, const char *instance,
                     ll_instance_lease **out, char *err, size_t errlen)
{
    int64_t lease_ms = 0, attempts = 0;
    if (ll_config_duration_ms(cfg, "service.instance_lease", &lease_ms, err, errlen) ||
        ll_config_int(cfg, "db.tx_attempts", &attempts, err, errlen))
        return 1;
    ll_instance_lease *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    snprintf(l->group, sizeof l->group, "%s", group);
    snprintf(l->instance, sizeof l->instance, "%s", instance);
    l->lease_ms = lease_ms;
    ll_instance_proc_self(&l->self);
    if (!l->self.host[0])
        snprintf(l->self.host, sizeof l->self.host, "unknown");
    unsigned char rnd[16] = {0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        /* no entropy call: the pid and the clock still make the token unique on this machine */
        int64_t t = ll_now_ms();
        memcpy(rnd, &t, sizeof t);
        memcpy(rnd + 8, &l->self.pid, sizeof l->self.pid);
    }
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(l->holder + 2 * i, 3, "%02x", rnd[i]);
    (void)ll_db_open(&l->db, ll_config_get(cfg, "db.conninfo"), service, (int)attempts);
    if (ll_db_configure_timeouts(&l->db, cfg, err, errlen) != 0) {
        lease_free(l);
        return 1;
    }
    *out = l;
    return 0;
}

int ll_instance_lease_take(const char *service, const ll_config *cfg, const char *group, const char *instance,
                           volatile sig_atomic_t *stop, void (*on_lost)(void), ll_instance_lease **out,
                           char *err, size_t errlen)
{
    *out = NULL;
    ll_instance_lease *l = NULL;
    if (lease_new(service, cfg, group, instance, &l, err, errlen) != 0)
        return 1;
    l->on_lost = on_lost;
    int64_t deadline = ll_now_ms() + l->lease_ms;
    int races = 0, rc = -1;
    while (!*stop) {
        rc = ll_db_ensure(&l->db) == LL_DB_OK ? try_take(l, true, err, errlen) : -1;
        if (rc == 0 || rc == 1)
            break;
        if (rc == 2 && ++races < 5)
            continue; /* another start or a renewal moved the row since it was read: read it again */
        if (rc == -1 && !ll_db_err_is_unavailable(&l->db) && !ll_db_err_is_busy(&l->db)) {
            snprintf(err, errlen, "instance lease of %s/%s: %s", group, instance, l->db.err.message);
            ll_log(LL_ERROR, NULL, "instance_lease_error", "%s", err);
            lease_free(l);
            return 1;
        }
        if (ll_now_ms() >= deadline) {
            snprintf(err, errlen,
                     "instance lease of %s/%s not checked: the database did not answer within the lease"
                     " (%" PRId64 " ms): %s",
                     group, instance, l->lease_ms, rc == 2 ? "the row kept changing" : l->db.err.message);
            ll_log(LL_ERROR, NULL, "instance_lease_unchecked", "%s", err);
            lease_free(l);
            return LL_EXIT_INSTANCE_HELD;
        }
        struct timespec ts = {1, 0};
        nanosleep(&ts, NULL);
    }
    if (rc != 0) {
        if (rc != 1)
            snprintf(err, errlen, "stopped while taking the instance lease");
        lease_free(l);
        return rc == 1 ? LL_EXIT_INSTANCE_HELD : 0;
    }
    if (pthread_create(&l->thread, NULL, renew_thread, l) != 0) {
        snprintf(err, errlen, "instance lease: no renewal thread");
        const char *params[3] = {l->group, l->instance, l->holder};
        (void)exec_count(l, &LEASE_RELEASE, params);
        lease_free(l);
        return 1;
    }
    l->thread_started = true;
    json_t *f = json_pack("{s:s,s:s,s:s,s:I,s:I}", "group", group, "instance_id", instance, "host",
                          l->self.host, "pid", (json_int_t)l->self.pid, "lease_ms", (json_int_t)l->lease_ms);
    ll_log_json(LL_INFO, NULL, "instance_lease_taken", f,
                "instance lease of %s/%s taken (renewed every %" PRId64 " ms)", group, instance,
                l->lease_ms / 3);
    *out = l;
    return 0;
}

bool ll_instance_lease_lost(const ll_instance_lease *lease)
{
    return lease && lease->lost;
}

void ll_instance_lease_end(ll_instance_lease *lease)
{
    if (!lease)
        return;
    if (lease->thread_started) {
        pthread_mutex_lock(&lease->mu);
        lease->ending = true;
        pthread_cond_signal(&lease->cv);
        pthread_mutex_unlock(&lease->mu);
        pthread_join(lease->thread, NULL);
    }
    if (!lease->lost) {
        const char *params[3] = {lease->group, lease->instance, lease->holder};
        long n = ll_db_ensure(&lease->db) == LL_DB_OK ? exec_count(lease, &LEASE_RELEASE, params) : -1;
        if (n < 0)
            ll_log(LL_WARN, NULL, "instance_lease_kept",
                   "instance lease of %s/%s not released (%s): a successor waits until it expires (%" PRId64
                   " ms)",
                   lease->group, lease->instance, lease->db.err.message, lease->lease_ms);
        else
            ll_log(LL_INFO, NULL, "instance_lease_released", "instance lease of %s/%s released", lease->group,
                   lease->instance);
    }
    lease_free(lease);
}
