/*
 * test_loop_decode.c - a batch decodes each message once (ll_batch_decode, batch.h;
 * issue 26): the set-based part and the per-message path share the first call's value, or its
 * reason when the value does not decode; what is kept is released once (ll_batch_decoded_drop),
 * and a held copy (partition.c) keeps only the message's bytes, so the batch that retries it
 * decodes it again. Leaks and double frees are the sanitizer's and valgrind's to find.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../common/src/loop/batch.h"
#include "../../common/src/loop/partition.h"
#include "../../common/src/loop/txn.h"
#include "ll/codec.h"

/* A topic of a one-field record in the bare framing, and one encoded value of it. */
typedef struct fixture {
    ll_schema *schema;
    topic_io io;
    part_state ps;
    unsigned char *buf; /* {"runId": "r1"} encoded, owned */
    size_t len;         /* bytes */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char err[256];
    f->schema = ll_schema_from_json(
        "{\"type\":\"record\",\"name\":\"T\",\"fields\":[{\"name\":\"runId\",\"type\":\"string\"}]}", err,
        sizeof err);
    assert_non_null(f->schema);
    f->io.dopts.framing = LL_FRAMING_BARE;
    f->io.dopts.reader = f->schema;
    strcpy(f->ps.topic, "t.chunks");
    ll_encode_opts eo = {.framing = LL_FRAMING_BARE, .schema = f->schema};
    json_t *v = json_pack("{s:s}", "runId", "r1");
    assert_int_equal(ll_encode(&eo, v, &f->buf, &f->len, err, sizeof err), 0);
    json_decref(v);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    free(f->buf);
    ll_schema_free(f->schema);
    free(f);
    return 0;
}

static lmsg msg_of(fixture *f, const void *value, size_t len, int64_t offset)
{
    lmsg m;
    memset(&m, 0, sizeof m);
    strcpy(m.run, "r1");
    m.key = m.run;
    m.key_len = 2;
    m.io = &f->io;
    m.ps = &f->ps;
    m.offset = offset;
    m.value = value;
    m.len = len;
    return m;
}

/* Three looks at one message (the set-based part twice, then the per-message path): one decode,
 * the same value each time, kept until it is dropped, and dropped once. */
static void test_one_decode_per_message(void **state)
{
    fixture *f = *state;
    batch b;
    memset(&b, 0, sizeof b);
    lmsg m = msg_of(f, f->buf, f->len, 5);
    const char *why = "unset";
    json_t *v1 = ll_batch_decode(&b, &m, &why);
    assert_non_null(v1);
    assert_null(why);
    assert_string_equal(json_string_value(json_object_get(v1, "runId")), "r1");
    assert_ptr_equal(ll_batch_decode(&b, &m, &why), v1);
    assert_ptr_equal(ll_batch_decode(&b, &m, &why), v1);
    assert_int_equal(b.n_decodes, 1);
    assert_int_equal(b.n_kept, 1);
    assert_ptr_equal(m.decoded, v1);
    ll_batch_decoded_drop(&b, &m);
    assert_null(m.decoded);
    assert_int_equal(b.n_kept, 0);
    ll_batch_decoded_drop(&b, &m); /* nothing kept: nothing done */
    assert_int_equal(b.n_kept, 0);
    /* a later batch (or the same message taken again after its drop) decodes it anew */
    assert_non_null(ll_batch_decode(&b, &m, &why));
    assert_int_equal(b.n_decodes, 2);
    ll_batch_decoded_drop(&b, &m);
}

/* A value that does not decode: decoded once, its reason kept and given to every look (the
 * per-message path dead-letters it with that reason); a tombstone is nothing to decode. */
static void test_decode_error_kept(void **state)
{
    fixture *f = *state;
    batch b;
    memset(&b, 0, sizeof b);
    static const unsigned char bad[] = {0xff, 0xfe};
    lmsg m = msg_of(f, bad, sizeof bad, 6);
    const char *why = NULL;
    assert_null(ll_batch_decode(&b, &m, &why));
    assert_non_null(why);
    assert_true(why[0] != '\0');
    const char *first = why;
    why = NULL;
    assert_null(ll_batch_decode(&b, &m, &why));
    assert_ptr_equal(why, first);
    assert_int_equal(b.n_decodes, 1);
    assert_int_equal(b.n_kept, 1);
    ll_batch_decoded_drop(&b, &m);
    assert_null(m.decode_err);
    assert_int_equal(b.n_kept, 0);

    lmsg t = msg_of(f, NULL, 0, 7);
    assert_null(ll_batch_decode(&b, &t, &why));
    assert_string_equal(why, "empty message value");
    assert_int_equal(b.n_decodes, 1);
    assert_int_equal(b.n_kept, 0);
}

/* A decoded message that is held: its copy has the bytes and no decoded value (the batch's, not
 * the queue's; design.md §9 bounds the queue by bytes), and decodes them in the next batch. */
static void test_held_copy_keeps_only_bytes(void **state)
{
    fixture *f = *state;
    ll_loop l;
    memset(&l, 0, sizeof l);
    l.max_held = 4;
    batch b;
    memset(&b, 0, sizeof b);
    lmsg m = msg_of(f, f->buf, f->len, 8);
    const char *why = NULL;
    json_t *v = ll_batch_decode(&b, &m, &why);
    assert_non_null(v);
    lmsg *c = ll_loop_hold_copy(&l, &m);
    assert_non_null(c);
    assert_null(c->decoded);
    assert_null(c->decode_err);
    assert_int_equal(c->len, f->len);
    assert_memory_equal(c->value, f->buf, f->len);
    ll_batch_decoded_drop(&b, &m); /* the batch's end */
    batch next;
    memset(&next, 0, sizeof next);
    json_t *again = ll_batch_decode(&next, c, &why);
    assert_non_null(again);
    assert_string_equal(json_string_value(json_object_get(again, "runId")), "r1");
    assert_int_equal(next.n_decodes, 1);
    ll_batch_decoded_drop(&next, c);
    ll_loop_drop_held(&f->ps);
    free(f->ps.held);
    f->ps.held = NULL;
    f->ps.cap_held = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_decode_per_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_decode_error_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_copy_keeps_only_bytes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
