/*
 * fuzz_schema.c - libFuzzer target: ll_schema_from_json on the input as schema JSON text
 * (the path a container's embedded writer schema takes). A schema that loads is also used to
 * decode an empty datum and to encode a null and an empty object (every field from its
 * default), and what encodes is decoded again, so the tree and the defaults are walked. It is
 * also a differential: avro-c must read every schema that loads as the same structure
 * (ll/codecavro.h); a refusal or a difference aborts, with avro-c's reading on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/codec.h"
#include "ll/codecavro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    char err[256];
    err[0] = '\0';
    ll_schema *s = ll_schema_from_json(text, err, sizeof err);
    free(text);
    if (s == NULL) {
        if (err[0] == '\0')
            abort(); /* a refusal always says why */
        return 0;
    }
    (void)ll_schema_fullname(s);
    if (ll_schema_avro_agrees(s, err, sizeof err) != 1) {
        fprintf(stderr, "fuzz_schema: ours and avro-c differ: %s\n", err);
        abort();
    }
    ll_decode_opts o = {.framing = LL_FRAMING_BARE, .reader = s};
    json_t *out = NULL;
    if (ll_decode(&o, "", 0, &out, err, sizeof err) == 0)
        json_decref(out);
    ll_encode_opts eo = {.framing = LL_FRAMING_BARE, .schema = s};
    json_t *values[2] = {json_null(), json_object()};
    for (int i = 0; i < 2; i++) {
        unsigned char *buf = NULL;
        size_t len = 0;
        if (ll_encode(&eo, values[i], &buf, &len, err, sizeof err) == 0) {
            if (ll_decode(&o, buf, len, &out, err, sizeof err) == 0)
                json_decref(out);
            free(buf);
        }
        json_decref(values[i]);
    }
    ll_schema_free(s);
    return 0;
}
