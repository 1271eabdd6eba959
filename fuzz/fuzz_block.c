/*
 * fuzz_block.c - libFuzzer target: ll_decode with the block framing (input: reader selector byte,
 * then the message value; see harness.h).
 */
#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ll_fuzz_decode(LL_FRAMING_BLOCK, data, size);
    return 0;
}
