/*
 * test_core_instance.c - the instance lease's pure parts (ll/instance.h): the decision at start
 * (take a free lease, refuse a live holder, take over an expired lease or a dead holder on this
 * machine), the same-machine test, and the parse of a /proc/<pid>/stat line; without a database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ll/instance.h"

/* A row renewed age_ms ago by a holder with a lease of lease_ms. */
static ll_instance_seen seen_row(int64_t age_ms, int64_t lease_ms, bool same_machine, int alive)
{
    ll_instance_seen s = {true, age_ms, lease_ms, same_machine, alive};
    return s;
}

static void test_no_row_is_taken(void **state)
{
    (void)state;
    ll_instance_seen s = {false, 0, 0, false, -1};
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_TAKE_FREE);
    assert_string_equal(ll_instance_decision_name(LL_INSTANCE_TAKE_FREE), "free");
}

static void test_a_renewing_holder_refuses(void **state)
{
    (void)state;
    ll_instance_seen s = seen_row(0, 30000, false, -1);
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_REFUSE);
    s = seen_row(10000, 30000, false, -1); /* renewed every 10 s */
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_REFUSE);
    s = seen_row(30000, 30000, false, -1); /* at the lease's end, not past it */
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_REFUSE);
    assert_string_equal(ll_instance_decision_name(LL_INSTANCE_REFUSE), "refuse");
}

static void test_an_expired_lease_is_taken_over(void **state)
{
    (void)state;
    ll_instance_seen s = seen_row(30001, 30000, false, -1);
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_TAKE_EXPIRED);
    /* the holder's own lease counts, not the starter's: a 2 s holder is expired after 2 s */
    s = seen_row(2500, 2000, false, -1);
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_TAKE_EXPIRED);
    /* expiry wins over what the same machine says: the row is stale whoever held it */
    s = seen_row(40000, 30000, true, 1);
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_TAKE_EXPIRED);
    assert_string_equal(ll_instance_decision_name(LL_INSTANCE_TAKE_EXPIRED), "expired");
}

static void test_a_clock_step_back_counts_as_fresh(void **state)
{
    (void)state;
    ll_instance_seen s = seen_row(-5000, 3000, false, -1);
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_REFUSE);
}

static void test_a_dead_holder_on_this_machine_is_taken_over_at_once(void **state)
{
    (void)state;
    ll_instance_seen s = seen_row(100, 30000, true, 0);
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_TAKE_DEAD);
    assert_string_equal(ll_instance_decision_name(LL_INSTANCE_TAKE_DEAD), "dead");
    /* alive, or unknown (a process hidden from us): refused */
    s = seen_row(100, 30000, true, 1);
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_REFUSE);
    s = seen_row(100, 30000, true, -1);
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_REFUSE);
    /* another machine's pid means nothing here, whatever "alive" says */
    s = seen_row(100, 30000, false, 0);
    assert_int_equal(ll_instance_decide(&s), LL_INSTANCE_REFUSE);
}

static ll_instance_proc proc(const char *host, const char *boot, const char *ns)
{
    ll_instance_proc p;
    memset(&p, 0, sizeof p);
    snprintf(p.host, sizeof p.host, "%s", host);
    snprintf(p.boot_id, sizeof p.boot_id, "%s", boot);
    snprintf(p.pid_ns, sizeof p.pid_ns, "%s", ns);
    p.pid = 42;
    return p;
}

static void test_same_machine_needs_host_boot_and_namespace(void **state)
{
    (void)state;
    ll_instance_proc a = proc("h1", "b1", "pid:[1]");
    ll_instance_proc b = proc("h1", "b1", "pid:[1]");
    assert_true(ll_instance_same_machine(&a, &b));
    b = proc("h2", "b1", "pid:[1]"); /* another host */
    assert_false(ll_instance_same_machine(&a, &b));
    b = proc("h1", "b2", "pid:[1]"); /* the same host rebooted: every older holder is gone... */
    assert_false(ll_instance_same_machine(&a, &b)); /* ...but only expiry says so (conservative) */
    b = proc("h1", "b1", "pid:[2]");                /* another container with the same host name */
    assert_false(ll_instance_same_machine(&a, &b));
    a = proc("h1", "", "pid:[1]"); /* unknown parts never match */
    b = proc("h1", "", "pid:[1]");
    assert_false(ll_instance_same_machine(&a, &b));
    a = proc("h1", "b1", "");
    b = proc("h1", "b1", "");
    assert_false(ll_instance_same_machine(&a, &b));
}

static void test_stat_start_is_field_22(void **state)
{
    (void)state;
    long long v = -1;
    char st = '?';
    const char *line = "1234 (ll-completion) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 11 0 987654 "
                       "123456789 2000 18446744073709551615\n";
    assert_int_equal(ll_instance_parse_stat(line, &v, &st), 0);
    assert_int_equal(v, 987654);
    assert_int_equal(st, 'S');
    /* a command name with spaces and a ')' of its own; a zombie */
    const char *odd = "77 (a b) c)) Z 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 1 1\n";
    assert_int_equal(ll_instance_parse_stat(odd, &v, &st), 0);
    assert_int_equal(v, 55);
    assert_int_equal(st, 'Z');
    v = 9;
    st = '?';
    assert_int_equal(ll_instance_parse_stat("12 (x) S 1 2 3", &v, &st), -1); /* too short */
    assert_int_equal(ll_instance_parse_stat("no parenthesis", &v, &st), -1);
    assert_int_equal(ll_instance_parse_stat(NULL, &v, &st), -1);
    assert_int_equal(ll_instance_parse_stat("1 (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -3 1", &v, &st),
                     -1);
    assert_int_equal(v, 9); /* untouched on error */
    assert_int_equal(st, '?');
}

static void test_this_process_is_alive(void **state)
{
    (void)state;
    ll_instance_proc me;
    ll_instance_proc_self(&me);
    assert_int_equal(me.pid, (long long)getpid());
    assert_true(me.host[0] != '\0');
    if (me.proc_start > 0)
        assert_int_equal(ll_instance_proc_alive(&me), 1);
    assert_true(ll_instance_same_machine(&me, &me) == (me.boot_id[0] && me.pid_ns[0]));
    /* the same pid with another start time: the pid was reused, the holder is gone */
    ll_instance_proc reused = me;
    reused.proc_start = me.proc_start + 1;
    if (me.proc_start > 0)
        assert_int_equal(ll_instance_proc_alive(&reused), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_row_is_taken),
        cmocka_unit_test(test_a_renewing_holder_refuses),
        cmocka_unit_test(test_an_expired_lease_is_taken_over),
        cmocka_unit_test(test_a_clock_step_back_counts_as_fresh),
        cmocka_unit_test(test_a_dead_holder_on_this_machine_is_taken_over_at_once),
        cmocka_unit_test(test_same_machine_needs_host_boot_and_namespace),
        cmocka_unit_test(test_stat_start_is_field_22),
        cmocka_unit_test(test_this_process_is_alive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
