/*
 * topics.h - the logical topics of loadledger (config/topics.conf), their broker names, framings
 * and schemas (topics.c).
 */
#ifndef LL_TOPICS_H
#define LL_TOPICS_H

#include <stddef.h>

#include "ll/codec.h"
#include "ll/config.h"

/* The topic.prefix and schema.dir entries of a key table (ll_topic_name, ll_schema_dir), one
 * definition for every table that has them. */
#define LL_TOPIC_KEYS                                                                                        \
    {"topic.prefix", "loadledger.", false, "prefix of every broker topic name", LL_CONFIG_NO_RANGE},         \
    {                                                                                                        \
        "schema.dir", NULL, false, "folder of the .avsc files", LL_CONFIG_NO_RANGE                           \
    }

/* Every logical topic name, NULL-terminated (the keys allowed in topic.<logical>.*). */
extern const char *const LL_ALL_TOPICS[];

/* Full broker topic name of a logical one: topic.<logical>.name, else topic.prefix + logical.
 * Writes into out (outlen bytes, truncated). */
void ll_topic_name(const ll_config *cfg, const char *logical, char *out, size_t outlen);
/* The schema directory: schema.dir, else $LL_SCHEMA_DIR, else the installed one, else the source
 * tree's. Borrowed (configuration, environment or a constant). */
const char *ll_schema_dir(const ll_config *cfg);

/* The configured framing of a topic (topic.<logical>.framing, default bare). 0, or -1 + err. */
int ll_topic_framing(const ll_config *cfg, const char *logical, ll_framing *out, char *err, size_t errlen);
/* Loads an .avsc from the schema folder. NULL + err on failure; caller frees. */
ll_schema *ll_topic_schema_load(const ll_config *cfg, const char *file, char *err, size_t errlen);

#endif
