/*
 * harness.h - what the libFuzzer targets of fuzz/ share: the reader schemas an input can pick,
 * the Confluent schema-id table, and one decode call per input.
 *
 * An input of a decode target is one selector byte followed by a Kafka message value: the
 * selector (modulo the number of schemas) picks the reader schema, the rest goes to ll_decode
 * with the target's framing. The schemas are every .avsc of the directories in
 * LL_FUZZ_SCHEMA_DIRS (colon-separated; the compile-time default is the project's
 * schemas/avro and tests/unit/data), in directory order and then by file name, loaded once.
 * The id table maps tests/unit/data/ids.json's ids to their schemas and 100 + i to schema i.
 */
#ifndef LL_FUZZ_HARNESS_H
#define LL_FUZZ_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "ll/codec.h"

/* Loads the schemas and the id table on first use; aborts the fuzzer if none can be loaded. */
void ll_fuzz_init(void);

/*
 * Decodes data[1..size) with the framing and the reader chosen by data[0], as a consumer would
 * (max_message_bytes 1 MiB), and releases the result. Never fails: a refused input is fine.
 */
void ll_fuzz_decode(ll_framing framing, const uint8_t *data, size_t size);

#endif
