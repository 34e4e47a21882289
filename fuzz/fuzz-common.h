/* fuzz-common.h - what every fuzz target of fuzz/ shares: the oracles.
 *
 * A target is one LLVMFuzzerTestOneInput() over one function that takes
 * bytes from outside. Besides the sanitizers (a memory error, a leak, UB)
 * and libFuzzer's timeout, each target checks properties that must hold
 * for every input and calls abort() when one does not, which libFuzzer
 * reports as a crash with the input saved:
 *
 *   - every GError message is valid UTF-8, and Sluice's own (its error
 *     domains) hold no control character: they are shown on terminals and
 *     in logs (fuzz_check_error());
 *   - GLib never complains: a critical or a warning means a function was
 *     called with something it should never have been given
 *     (fuzz_init() makes them abort);
 *   - what each target states about its function (a round trip, an
 *     agreement of two codecs, a password that never shows).
 */
#pragma once

#include "config.h"

#include "lib/sluice-private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_ASSERT(cond, ...)                                                 \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "fuzz oracle failed: %s (%s:%d)\n", #cond, __FILE__,     \
              __LINE__);                                                       \
      fprintf(stderr, __VA_ARGS__);                                            \
      fputc('\n', stderr);                                                     \
      abort();                                                                 \
    }                                                                          \
  } while (0)

/* A critical or a warning (GLib's g_return_if_fail included) is a finding:
 * abort(), which libFuzzer catches and reports with the input (GLib's own
 * fatal path raises SIGTRAP, which it does not). Notices and infos would
 * only slow the fuzzer down. */
static inline GLogWriterOutput
fuzz_log_writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields,
                gpointer data)
{
  if (!(level &
        (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING)))
    return G_LOG_WRITER_HANDLED;
  g_log_writer_default(level, fields, n_fields, data);
  abort();
}

static inline void
fuzz_init(void)
{
  static gboolean done;

  if (done)
    return;
  done = TRUE;
  g_log_set_writer_func(fuzz_log_writer, NULL, NULL);
}

/* Printable UTF-8: no C0, DEL or C1 control character. */
static inline gboolean
fuzz_text_is_printable(const gchar *text)
{
  if (!g_utf8_validate(text, -1, NULL))
    return FALSE;
  for (const gchar *p = text; *p != '\0'; p = g_utf8_next_char(p)) {
    gunichar c = g_utf8_get_char(p);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f))
      return FALSE;
  }
  return TRUE;
}

static inline void
fuzz_check_error(const GError *error)
{
  if (error == NULL)
    return;
  FUZZ_ASSERT(g_utf8_validate(error->message, -1, NULL),
              "error message not UTF-8: %s", error->message);
  if (error->domain == SLUICE_CODEC_ERROR ||
      error->domain == SLUICE_BROKER_ERROR ||
      error->domain == SLUICE_WORKER_ERROR ||
      error->domain == SLUICE_CLIENT_ERROR ||
      error->domain == SLUICE_TASK_ERROR)
    FUZZ_ASSERT(fuzz_text_is_printable(error->message),
                "control character in: %s", error->message);
}

/* A NUL-terminated copy of the input (many functions take strings). */
static inline gchar *
fuzz_string(const guint8 *data, size_t size)
{
  return g_strndup((const gchar *)data, size);
}

static inline gboolean
fuzz_strings_equal(GPtrArray *a, GPtrArray *b)
{
  guint na = a != NULL ? a->len : 0, nb = b != NULL ? b->len : 0;

  if (na != nb)
    return FALSE;
  for (guint i = 0; i < na; i++)
    if (strcmp(a->pdata[i], b->pdata[i]) != 0)
      return FALSE;
  return TRUE;
}

static inline gboolean
fuzz_headers_equal(GHashTable *a, GHashTable *b)
{
  guint na = a != NULL ? g_hash_table_size(a) : 0;
  guint nb = b != NULL ? g_hash_table_size(b) : 0;
  GHashTableIter iter;
  gpointer k, v;

  if (na != nb)
    return FALSE;
  if (na == 0)
    return TRUE;
  g_hash_table_iter_init(&iter, a);
  while (g_hash_table_iter_next(&iter, &k, &v))
    if (g_strcmp0(v, g_hash_table_lookup(b, k)) != 0)
      return FALSE;
  return TRUE;
}

/* Two nullable byte strings: the carried keys of an envelope. */
static inline gboolean
fuzz_bytes_equal(GBytes *a, GBytes *b)
{
  return a == NULL ? b == NULL : b != NULL && g_bytes_equal(a, b);
}

/* Field by field, args and carried keys as bytes (@args_too FALSE: their
 * bytes may differ in encoding, as JSON turns float32 into float64). */
static inline gboolean
fuzz_envelopes_equal(const SluiceEnvelope *a, const SluiceEnvelope *b,
                     gboolean args_too)
{
  const SluiceMessageOptions *x = &a->opts, *y = &b->opts;

  return a->version == b->version && strcmp(a->id, b->id) == 0 &&
         strcmp(a->task, b->task) == 0 && strcmp(a->queue, b->queue) == 0 &&
         (!args_too ||
          (g_bytes_equal(a->args, b->args) &&
           fuzz_bytes_equal(a->unknown_fields, b->unknown_fields) &&
           fuzz_bytes_equal(a->unknown_opts, b->unknown_opts))) &&
         a->attempt == b->attempt && a->enqueued_at == b->enqueued_at &&
         a->eta == b->eta && a->unknown_since == b->unknown_since &&
         x->retry.max_attempts == y->retry.max_attempts &&
         x->retry.initial_backoff_ms == y->retry.initial_backoff_ms &&
         x->retry.multiplier == y->retry.multiplier &&
         x->retry.max_backoff_ms == y->retry.max_backoff_ms &&
         x->retry.jitter == y->retry.jitter && x->timeout_ms == y->timeout_ms &&
         x->expires_at == y->expires_at && x->store_result == y->store_result &&
         x->result_ttl_ms == y->result_ttl_ms &&
         x->dead_letter == y->dead_letter &&
         fuzz_strings_equal(a->history, b->history) &&
         fuzz_headers_equal(a->headers, b->headers);
}
