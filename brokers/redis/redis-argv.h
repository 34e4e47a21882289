/* redis-argv.h - the argument vector of one Redis command (internal).
 *
 * Every command and script call of the Redis brokers is built here, so the
 * wire forms of what the contract hands a broker (a submit, a stored
 * record, a TTL) are written down once. Strings and byte arrays are
 * borrowed, not copied: an enqueue of a thousand payloads costs no copy of
 * them before hiredis formats the command.
 */
#pragma once

#include "brokers/redis/redis-keys.h"

G_BEGIN_DECLS

/* Used when a caller passes a record or claim TTL <= 0: every per-task key
 * must expire (result_ttl defaults to 24 h). */
#define SLUICE_REDIS_DEFAULT_RECORD_TTL_MS (24 * 60 * 60 * 1000)

/**
 * SluiceRedisArgv:
 *
 * Builds the argument vector of one command without an allocation per
 * argument: strings and byte arrays are borrowed (they must outlive the
 * call), numbers and records are formatted into one scratch buffer.
 * sluice_redis_argv__finish() turns the scratch offsets into pointers once
 * the buffer stops growing.
 */
typedef struct {
  const char **argv;
  size_t *lens;
  gssize *scratch_at; /* >= 0: argv[i] lives at scratch->str + value */
  guint len;
  guint cap;
  GString *scratch;
} SluiceRedisArgv;

/** sluice_redis_argv__init: room for @cap arguments (it grows if needed)
 * and @scratch_hint bytes of scratch. Clear with _clear(). */
void sluice_redis_argv__init(SluiceRedisArgv *a, guint cap, gsize scratch_hint);
void sluice_redis_argv__clear(SluiceRedisArgv *a);
/** Adds @len bytes at @data, borrowed. */
void sluice_redis_argv__add(SluiceRedisArgv *a, const void *data, gsize len);
/** Adds a NUL-terminated string, borrowed; NULL adds "". */
void sluice_redis_argv__add_str(SluiceRedisArgv *a, const gchar *s);
/** Adds a GBytes' data, borrowed; NULL adds "". */
void sluice_redis_argv__add_bytes(SluiceRedisArgv *a, GBytes *bytes);
/** Adds @value in decimal (copied into the scratch buffer). */
void sluice_redis_argv__add_int(SluiceRedisArgv *a, gint64 value);
/** Adds @n empty slots (the EVALSHA head, filled by script__eval). */
void sluice_redis_argv__reserve(SluiceRedisArgv *a, guint n);
/** Adds a stored record: the flag byte then @record (copied); NULL adds
 * "" (no record). */
void sluice_redis_argv__add_record(SluiceRedisArgv *a, GBytes *record,
                                   gboolean final);
/** Adds a record or claim TTL: @ttl_ms, or the default when it is <= 0. */
void sluice_redis_argv__add_record_ttl(SluiceRedisArgv *a, gint64 ttl_ms);
/** Adds the seven arguments of a full submit, as the shared scripts read
 * them: id queue payload due dedup_ttl record record_ttl (the record is
 * added as not final). */
void sluice_redis_argv__add_submit(SluiceRedisArgv *a,
                                   const SluiceSubmit *item);
/** Adds the key @suffix + @name of @keys (built in the scratch buffer). */
void sluice_redis_argv__add_key(SluiceRedisArgv *a, const SluiceRedisKeys *keys,
                                const gchar *suffix, const gchar *name);
/** Resolves scratch arguments; call once, after the last add. */
void sluice_redis_argv__finish(SluiceRedisArgv *a);

G_END_DECLS
