/*
 * codecavro.h - avro-c 1.11.1's reading of a schema compared with ours: a test oracle.
 *
 * The services read and write every datum along our own parse of the schema (ll/codec.h) and do
 * not link avro-c. The unit test test_codecavro_agree and the fuzz_schema target link this
 * library (llcodecavro) to check that avro-c reads every schema we accept as the same structure:
 * the same types, full names, fields in order, enum symbols, fixed sizes and union branches.
 */
#ifndef LL_CODECAVRO_H
#define LL_CODECAVRO_H

#include <stddef.h>

#include "ll/codec.h"

/*
 * Parses the compact JSON text of s with avro-c and compares the two trees. Returns 1 when
 * they have the same structure; 0 when they differ, err naming the first difference by its path
 * (".field" a record field, "[]" array items, "{}" map values, "|i" union branch i), as in
 * "root.c|1: symbol 1 is Z in avro-c, Y in ours"; -1 when avro-c refuses the text, err holding
 * avro_strerror(). s is borrowed; nothing is kept.
 */
int ll_schema_avro_agrees(const ll_schema *s, char *err, size_t errlen);

/*
 * As ll_schema_avro_agrees, comparing s with avro-c's parse of another text: the oracle's own
 * test (a text of another shape must be found to differ). avro_text is borrowed.
 */
int ll_schema_avro_agrees_with(const ll_schema *s, const char *avro_text, char *err, size_t errlen);

#endif
