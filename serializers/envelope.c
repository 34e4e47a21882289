/* envelope.c - the envelope as a value: its life cycle, headers and
 * history. What each field may hold is envelope-fields.c's, which both
 * codecs share; codec.c is the front door that picks a codec.
 */
#include "config.h"

#include <sluice/sluice.h>

#include "serializers/text.h"
#include "serializers/codec-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The quark's name is stringified: clang-format must not space it out. */
/* clang-format off */
G_DEFINE_QUARK(sluice-codec-error-quark, sluice_codec_error)
/* clang-format on */

static const guint8 nil_args[] = {SLUICE_MP_NIL_BYTE};

GBytes *
sluice_envelope__nil_args(void)
{
  return g_bytes_new_static(nil_args, sizeof nil_args);
}

/* ---- Life cycle ---------------------------------------------------------- */

void
sluice_message_options_init(SluiceMessageOptions *opts)
{
  g_return_if_fail(opts != NULL);
  /* As sluice_retry_policy_init_unset() does; written out so that this
   * bottom layer calls nothing above it. */
  opts->retry.max_attempts = SLUICE_RETRY_UNSET;
  opts->retry.initial_backoff_ms = SLUICE_RETRY_UNSET;
  opts->retry.multiplier = SLUICE_RETRY_UNSET;
  opts->retry.max_backoff_ms = SLUICE_RETRY_UNSET;
  opts->retry.jitter = SLUICE_UNSET;
  opts->timeout_ms = 0;
  opts->expires_at = 0;
  opts->store_result = SLUICE_UNSET;
  opts->result_ttl_ms = 0;
  opts->dead_letter = SLUICE_UNSET;
  opts->hard_timeout_ms = 0;
}

void
sluice_decode_limits_init(SluiceDecodeLimits *limits)
{
  g_return_if_fail(limits != NULL);
  limits->max_bytes = SLUICE_DEFAULT_MAX_MESSAGE_BYTES;
  limits->max_depth = SLUICE_DEFAULT_MAX_DEPTH;
}

SluiceEnvelope *
sluice_envelope__new_for_decode(void)
{
  SluiceEnvelope *env = g_new0(SluiceEnvelope, 1);

  /* history and headers stay NULL until something is put in them: most
   * messages have neither, and this runs once per message on the worker's
   * hot path. */
  sluice_message_options_init(&env->opts);
  return env;
}

SluiceEnvelope *
sluice_envelope_new(void)
{
  SluiceEnvelope *env = sluice_envelope__new_for_decode();

  env->version = SLUICE_ENVELOPE_VERSION;
  env->attempt = 1;
  env->args = sluice_envelope__nil_args();
  return env;
}

static gpointer
copy_string(gconstpointer s, gpointer unused)
{
  return g_strdup(s);
}

SluiceEnvelope *
sluice_envelope_copy(const SluiceEnvelope *env)
{
  SluiceEnvelope *copy;

  g_return_val_if_fail(env != NULL, NULL);

  copy = g_new0(SluiceEnvelope, 1);
  *copy = *env;
  copy->id = g_strdup(env->id);
  copy->task = g_strdup(env->task);
  copy->queue = g_strdup(env->queue);
  copy->wf = g_strdup(env->wf);
  copy->unique = g_strdup(env->unique);
  copy->seal = g_strdup(env->seal);
  /* GBytes is immutable: sharing it is as good as a deep copy. */
  copy->args = env->args != NULL ? g_bytes_ref(env->args) : NULL;
  copy->unknown_fields =
      env->unknown_fields != NULL ? g_bytes_ref(env->unknown_fields) : NULL;
  copy->unknown_opts =
      env->unknown_opts != NULL ? g_bytes_ref(env->unknown_opts) : NULL;
  copy->history = NULL;
  if (env->history != NULL && env->history->len > 0) {
    copy->history = g_ptr_array_copy(env->history, copy_string, NULL);
    g_ptr_array_set_free_func(copy->history, g_free);
  }
  copy->headers = NULL;
  if (env->headers != NULL && g_hash_table_size(env->headers) > 0) {
    GHashTableIter iter;
    gpointer k, v;

    copy->headers =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    g_hash_table_iter_init(&iter, env->headers);
    while (g_hash_table_iter_next(&iter, &k, &v))
      g_hash_table_insert(copy->headers, g_strdup(k), g_strdup(v));
  }
  return copy;
}

void
sluice_envelope_free(SluiceEnvelope *env)
{
  if (env == NULL)
    return;
  g_free(env->id);
  g_free(env->task);
  g_free(env->queue);
  g_free(env->wf);
  g_free(env->unique);
  g_free(env->seal);
  if (env->args != NULL)
    g_bytes_unref(env->args);
  if (env->unknown_fields != NULL)
    g_bytes_unref(env->unknown_fields);
  if (env->unknown_opts != NULL)
    g_bytes_unref(env->unknown_opts);
  if (env->history != NULL)
    g_ptr_array_unref(env->history);
  if (env->headers != NULL)
    g_hash_table_unref(env->headers);
  g_free(env);
}

void
sluice_envelope_set_header(SluiceEnvelope *env, const gchar *name,
                           const gchar *value)
{
  g_return_if_fail(env != NULL);
  g_return_if_fail(name != NULL && value != NULL);
  if (env->headers == NULL)
    env->headers =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_hash_table_replace(env->headers, g_strdup(name), g_strdup(value));
}

const gchar *
sluice_envelope_get_header(const SluiceEnvelope *env, const gchar *name)
{
  g_return_val_if_fail(env != NULL && name != NULL, NULL);
  return env->headers != NULL ? g_hash_table_lookup(env->headers, name) : NULL;
}

void
sluice_envelope_add_history(SluiceEnvelope *env, const gchar *line)
{
  gchar *valid;
  gsize len;

  g_return_if_fail(env != NULL);
  g_return_if_fail(line != NULL);

  /* A task's error text may be anything (bytes from a socket, a path); the
   * wire format wants UTF-8, so repair it rather than lose the line. */
  valid = g_utf8_make_valid(line, -1);
  len = strlen(valid);
  if (len > SLUICE_HISTORY_MAX_LINE_BYTES) {
    gsize cut = SLUICE_HISTORY_MAX_LINE_BYTES;

    /* Back up over continuation bytes to the start of the character that
     * straddles the limit, and cut before it. */
    while (cut > 0 && ((guchar)valid[cut] & 0xc0) == 0x80)
      cut--;
    valid[cut] = '\0';
  }
  if (env->history == NULL)
    env->history = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(env->history, valid);
  if (env->history->len > SLUICE_HISTORY_MAX_LINES)
    g_ptr_array_remove_range(env->history, 0,
                             env->history->len - SLUICE_HISTORY_MAX_LINES);
}
