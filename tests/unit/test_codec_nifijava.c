/*
 * test_codec_nifijava.c - ll_decode on the bytes NiFi 2.6.0's own AvroRecordSetWriter writers
 * produced (Java: Avro 1.12.0, captured by the harness of tests/nifi with --dump from the
 * reference scenario; tests/unit/data/nifi_java/), checked against what python3-avro reads
 * from the same bytes (expected.json).
 *
 * Kept here: the block framing reads both a headerless container block and a whole container
 * file. The bytes were captured with an earlier emulation of PublishKafka that took its buffer
 * after each record: claim_first_container.bin is the header of one "Embed Avro Schema" writer
 * plus the first claim's block (the bytes of a one-record container file, which is what the
 * shipped embedded flow sends: ConvertRecord, then PublishKafka sending the content whole);
 * claim_next_block.bin is the second claim of the same writer, a headerless block with the same
 * sync marker: what PublishKafka 2.6.0's record path really sends for EVERY record, the first one
 * too (RecordValueFactory clears its buffer before each record, dropping the header the writer
 * wrote when created; tests/nifi/README.md, "Findings kept as tests").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ll/codec.h"

/* dir/name into buf; dir from the environment variable env, else next to this file. */
static const char *path_of(const char *env, const char *fallback_rel, const char *name, char *buf, size_t len)
{
    const char *dir = getenv(env);
    if (dir != NULL && *dir != '\0') {
        snprintf(buf, len, "%s/%s", dir, name);
        return buf;
    }
    char here[900];
    snprintf(here, sizeof here, "%s", __FILE__);
    char *slash = strrchr(here, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        snprintf(here, sizeof here, "tests/unit");
    snprintf(buf, len, "%s/%s/%s", here, fallback_rel, name);
    return buf;
}

static unsigned char *slurp(const char *name, size_t *len)
{
    char p[1024];
    path_of("LL_TEST_DATA", "data", name, p, sizeof p);
    FILE *f = fopen(p, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", p);
    unsigned char *buf = malloc(1 << 16);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static ll_schema *topic_schema(const char *name)
{
    char p[1024], file[128], err[256] = "";
    snprintf(file, sizeof file, "%s.avsc", name);
    path_of("LL_SCHEMA_DIR", "../../schemas/avro", file, p, sizeof p);
    ll_schema *s = ll_schema_from_file(p, err, sizeof err);
    if (s == NULL)
        fail_msg("%s: %s", p, err);
    return s;
}

/* python3-avro's reading of fixture name (from expected.json); a new reference. */
static json_t *expected(const char *name)
{
    char p[1024];
    json_error_t je;
    path_of("LL_TEST_DATA", "data", "nifi_java/expected.json", p, sizeof p);
    json_t *all = json_load_file(p, 0, &je);
    if (all == NULL)
        fail_msg("%s: %s", p, je.text);
    json_t *one = json_incref(json_object_get(all, name));
    json_decref(all);
    if (one == NULL)
        fail_msg("expected.json lacks %s", name);
    return one;
}

/* Decodes nifi_java/<file> as a message of topic schema `schema` in `framing` and checks it
 * equals python3-avro's reading. ids: the Confluent table (may be NULL). */
static void decodes_as_python_reads(const char *schema, ll_framing framing, const ll_schema_ids *ids,
                                    const char *file)
{
    char rel[256], err[256] = "";
    snprintf(rel, sizeof rel, "nifi_java/%s", file);
    size_t len;
    unsigned char *buf = slurp(rel, &len);
    ll_schema *reader = topic_schema(schema);
    ll_decode_opts o = {.framing = framing, .reader = reader, .ids = ids};
    json_t *got = NULL;
    int rc = ll_decode(&o, buf, len, &got, err, sizeof err);
    free(buf);
    ll_schema_free(reader);
    if (rc != 0)
        fail_msg("%s (framing %d): %s", file, (int)framing, err);
    json_t *want = expected(file);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT),
             *w = json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT);
        fail_msg("%s: got %s, python3-avro read %s", file, g ? g : "?", w ? w : "?");
    }
    json_decref(got);
    json_decref(want);
}

/* A one-record container file and a headerless block (both from one writer of a FlowFile of 7
 * claims) on a block-framed topic. */
static void test_embedded_container_and_block(void **state)
{
    (void)state;
    decodes_as_python_reads("PartitionClaim", LL_FRAMING_BLOCK, NULL, "claim_first_container.bin");
    decodes_as_python_reads("PartitionClaim", LL_FRAMING_BLOCK, NULL, "claim_next_block.bin");
    /* the container on its own still reads as a container */
    decodes_as_python_reads("PartitionClaim", LL_FRAMING_CONTAINER, NULL, "claim_first_container.bin");
    /* a one-record container file (as ConvertRecord writes it), on a block-framed topic */
    decodes_as_python_reads("StageValidated", LL_FRAMING_BLOCK, NULL, "stage_validated_container.bin");

    /* both come from one writer: the block carries the container's sync marker */
    size_t clen, blen;
    unsigned char *c = slurp("nifi_java/claim_first_container.bin", &clen);
    unsigned char *b = slurp("nifi_java/claim_next_block.bin", &blen);
    assert_true(clen > 16 && blen > 16);
    assert_memory_equal(c + clen - 16, b + blen - 16, 16);
    free(c);
    free(b);
}

/* A headerless block is still not a container (the container framing stays strict). */
static void test_block_on_container_topic_refused(void **state)
{
    (void)state;
    size_t len;
    unsigned char *buf = slurp("nifi_java/claim_next_block.bin", &len);
    ll_schema *reader = topic_schema("PartitionClaim");
    ll_decode_opts o = {.framing = LL_FRAMING_CONTAINER, .reader = reader};
    json_t *got = (json_t *)0x1;
    char err[256] = "";
    assert_int_equal(ll_decode(&o, buf, len, &got, err, sizeof err), -1);
    assert_null(got);
    assert_non_null(strstr(err, "bad container magic"));
    ll_schema_free(reader);
    free(buf);
}

/* The other strategies: a container file (ConvertRecord's, embedded-file), schema reference, no schema. */
static void test_other_strategies(void **state)
{
    (void)state;
    decodes_as_python_reads("RunRequest", LL_FRAMING_CONTAINER, NULL, "run_request_container.bin");
    decodes_as_python_reads("ValidationMetrics", LL_FRAMING_BARE, NULL, "metrics_bare.bin");
    ll_schema_ids *ids = ll_schema_ids_new();
    assert_non_null(ids);
    assert_int_equal(ll_schema_ids_put(ids, 31, topic_schema("Manifest")), 0);
    decodes_as_python_reads("Manifest", LL_FRAMING_CONFLUENT, ids, "manifest_confluent31.bin");
    ll_schema_ids_free(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedded_container_and_block),
        cmocka_unit_test(test_block_on_container_topic_refused),
        cmocka_unit_test(test_other_strategies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
