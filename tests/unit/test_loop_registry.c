/*
 * test_loop_registry.c - the loop with a schema source (the registry, issue 30; the hook
 * in batch.c), driven through its io table (loop_fake.h): a writer schema the source cannot
 * give now (unreachable, 5xx) holds its run and only its run, never ends in a dead letter however
 * long it lasts (loop.prerequisite_wait 0), and is applied once the source answers; an id the
 * source does not know is held like a missing prerequisite and then dead-lettered (DECODE_FAILED,
 * the id named); the ids table is not needed.
 */
#include "loop_fake.h"

/* The source: id 1 unavailable until up, id 2 unknown, id 3 always there (the input schema). */
static int up;
static int source_calls[4];

static int source(void *ctx, int32_t id, char **text, size_t *len, char *err, size_t errlen)
{
    (void)ctx;
    if (id >= 1 && id <= 3)
        source_calls[id]++;
    if (id == 2 || id < 1 || id > 3) {
        snprintf(err, errlen, "schema id %d: not found", id);
        return LL_DECODE_UNKNOWN_ID;
    }
    if (id == 1 && !up) {
        snprintf(err, errlen, "schema id %d: unavailable: HTTP 503", id);
        return LL_DECODE_UNAVAILABLE;
    }
    *text = strdup(ll_schema_text(F.in_schema));
    *len = strlen(*text);
    return 0;
}

/* fk_put, the value framed as Confluent with id. */
static void put_framed(int part, int run, int seq, int32_t id)
{
    long long off = fk_put(part, run, seq);
    fk_entry *e = &F.log[part][off];
    unsigned char *v = malloc(e->len + 5);
    assert_non_null(v);
    v[0] = 0;
    v[1] = (unsigned char)(id >> 24);
    v[2] = (unsigned char)(id >> 16);
    v[3] = (unsigned char)(id >> 8);
    v[4] = (unsigned char)id;
    memcpy(v + 5, e->val, e->len);
    free(e->val);
    e->val = v;
    e->len += 5;
}

static void open_with_source(const char *wait)
{
    const char *const kv[] = {"loop.prerequisite_wait", wait, NULL};
    fk_open(0, kv);
    F.l->io[0].dopts.framing = LL_FRAMING_CONFLUENT;
    F.l->io[0].dopts.ids = NULL;
    F.l->io[0].dopts.source = source;
    up = 0;
    memset(source_calls, 0, sizeof source_calls);
}

static void test_unavailable_holds_only_its_run_and_never_dead_letters(void **state)
{
    (void)state;
    open_with_source("PT0S");
    fk_assign_parts(1);
    put_framed(0, 1, 1, 1); /* run 1: its writer schema's source is down */
    put_framed(0, 1, 2, 3); /* run 1's next message waits behind it */
    put_framed(0, 2, 3, 3); /* run 2 flows */
    fk_step(10);
    assert_int_equal(fk_held(0), 2);
    assert_int_equal(fk_answers(0, 0), 0);
    assert_int_equal(fk_answers(0, 2), 1);
    fk_run(10, 6); /* far past loop.prerequisite_wait (0): still held, no dead letter */
    assert_int_equal(fk_held(0), 2);
    assert_int_equal(F.n_dead_events, 0);
    assert_int_equal(fk_answers(0, 0), 0);
    assert_true(source_calls[1] >= 6);
    up = 1;
    fk_run(10, 10);
    assert_int_equal(fk_held(0), 0);
    assert_int_equal(F.n_dead_events, 0);
    fk_assert_answered_once(0, 0, 3);
    for (size_t i = 0; i < F.n_vis; i++)
        assert_string_equal(F.vis[i].topic, FK_REPLY);
    assert_int_equal(fk_sent(0, NULL, 0), 3);
}

static void test_unknown_id_waits_then_dead_letters(void **state)
{
    (void)state;
    open_with_source("PT0.3S");
    fk_assign_parts(1);
    put_framed(0, 1, 1, 2);
    fk_step(10);
    assert_int_equal(fk_held(0), 1); /* held, not dead-lettered at once */
    assert_int_equal(F.n_dead_events, 0);
    struct timespec ts = {0, 350 * 1000 * 1000};
    nanosleep(&ts, NULL);
    fk_run(10, 10);
    assert_int_equal(fk_held(0), 0);
    assert_int_equal(F.n_dead_events, 1);
    fk_assert_answered_once(0, 0, 1);
    assert_string_equal(F.vis[0].topic, FK_DLQ);
    assert_true(source_calls[2] >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_unavailable_holds_only_its_run_and_never_dead_letters, fk_teardown),
        cmocka_unit_test_teardown(test_unknown_id_waits_then_dead_letters, fk_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
