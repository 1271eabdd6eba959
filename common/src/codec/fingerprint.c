/*
 * fingerprint.c - the CRC-64-AVRO (Rabin) fingerprint of the Avro specification ("Schema
 * Fingerprints"), used as the key of the writer-schema cache. The table is built once.
 */
#include <pthread.h>

#include "codec_internal.h"

#define LL_FP_EMPTY 0xc15d213aa4d7a795ULL

static uint64_t fp_table[256];
static pthread_once_t fp_once = PTHREAD_ONCE_INIT;

static void fp_init(void)
{
    for (unsigned i = 0; i < 256; i++) {
        uint64_t fp = i;
        for (int j = 0; j < 8; j++)
            fp = (fp >> 1) ^ (LL_FP_EMPTY & (0 - (fp & 1)));
        fp_table[i] = fp;
    }
}

uint64_t ll_fingerprint64(const void *buf, size_t len)
{
    pthread_once(&fp_once, fp_init);
    const unsigned char *p = buf;
    uint64_t fp = LL_FP_EMPTY;
    for (size_t i = 0; i < len; i++)
        fp = (fp >> 8) ^ fp_table[(fp ^ p[i]) & 0xff];
    return fp;
}
