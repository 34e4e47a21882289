/* unique.c - uniqueness by key, as the core sees it: checking the options,
 * naming the key (given, or derived from the task and its argument bytes)
 * and reading the claim an envelope carries. The client enqueues through
 * the broker's `unique_enqueue` slot (client.c), which claims the key and
 * writes the message in one atomic step.
 *
 * The claim travels in the envelope (`uq`: a scope letter and the key), so
 * the worker that runs the message knows which claim to end and when
 * (executor.c at the start, settler.c after the settlement).
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

static gchar
scope_letter(SluiceUniqueScope scope)
{
  switch (scope) {
  case SLUICE_UNIQUE_WHILE_QUEUED:
    return 'q';
  case SLUICE_UNIQUE_WHILE_RUNNING:
    return 'r';
  case SLUICE_UNIQUE_FOR_TTL:
  default:
    return 't';
  }
}

gboolean
sluice_unique__parse(const SluiceEnvelope *env, SluiceUniqueScope *out_scope,
                     const gchar **out_key)
{
  const gchar *u = env != NULL ? env->unique : NULL;

  if (u == NULL || strlen(u) < 3 || u[1] != ':')
    return FALSE;
  switch (u[0]) {
  case 'q':
    *out_scope = SLUICE_UNIQUE_WHILE_QUEUED;
    break;
  case 'r':
    *out_scope = SLUICE_UNIQUE_WHILE_RUNNING;
    break;
  case 't':
    *out_scope = SLUICE_UNIQUE_FOR_TTL;
    break;
  default:
    return FALSE;
  }
  *out_key = u + 2;
  return TRUE;
}

static gboolean invalid(GError **error, const gchar *format, ...)
    G_GNUC_PRINTF(2, 3);

static gboolean
invalid(GError **error, const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *message = NULL;

  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  g_set_error_literal(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                      message);
  return FALSE;
}

/* The task's name and its argument bytes, each length-prefixed so that no
 * two (name, args) pairs hash the same input. The name stays readable in
 * the key, for operators. */
static gchar *
derived_key(const SluiceEnvelope *env)
{
  g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
  gsize task_len = strlen(env->task), args_len = 0;
  const guint8 *args =
      env->args != NULL ? g_bytes_get_data(env->args, &args_len) : NULL;
  guint64 lens[2] = {GUINT64_TO_BE(task_len), GUINT64_TO_BE(args_len)};

  g_checksum_update(sum, (const guchar *)lens, sizeof lens);
  g_checksum_update(sum, (const guchar *)env->task, task_len);
  if (args_len > 0)
    g_checksum_update(sum, args, args_len);
  return g_strdup_printf("%s:%s", env->task, g_checksum_get_string(sum));
}

gboolean
sluice_unique__prepare(const SluiceUniqueOptions *unique, gint64 default_ttl_ms,
                       gint64 now, SluicePrepared *p, GError **error)
{
  SluiceEnvelope *env = p->env;
  g_autofree gchar *key = NULL;
  gint64 wait;

  if (unique->scope != SLUICE_UNIQUE_WHILE_QUEUED &&
      unique->scope != SLUICE_UNIQUE_WHILE_RUNNING &&
      unique->scope != SLUICE_UNIQUE_FOR_TTL)
    return invalid(error,
                   "unique.scope: unknown scope %d (use "
                   "SLUICE_UNIQUE_WHILE_QUEUED, _WHILE_RUNNING or _FOR_TTL)",
                   (gint)unique->scope);
  if (unique->ttl_ms < 0 ||
      (unique->scope == SLUICE_UNIQUE_FOR_TTL && unique->ttl_ms == 0))
    return invalid(error, "unique.ttl_ms: %s, found %" G_GINT64_FORMAT,
                   unique->scope == SLUICE_UNIQUE_FOR_TTL
                       ? "a TTL scope needs how long, at least 1 ms"
                       : "cannot be negative (0 means the client's "
                         "dedup_ttl_ms)",
                   unique->ttl_ms);
  if (unique->debounce_ms < 0)
    return invalid(error,
                   "unique.debounce_ms: cannot be negative, found "
                   "%" G_GINT64_FORMAT,
                   unique->debounce_ms);
  if (unique->key != NULL) {
    gsize len = strlen(unique->key);
    if (len == 0 || len > SLUICE_MAX_UNIQUE_BYTES - 2 ||
        !g_utf8_validate(unique->key, len, NULL))
      return invalid(error,
                     "unique.key: must be 1 to %d bytes of UTF-8, found "
                     "%" G_GSIZE_FORMAT " bytes",
                     SLUICE_MAX_UNIQUE_BYTES - 2, len);
    for (const gchar *c = unique->key; *c != '\0'; c++)
      if (g_ascii_iscntrl(*c))
        return invalid(error, "unique.key: control characters are not "
                              "allowed in a key");
    key = g_strdup(unique->key);
  } else {
    key = derived_key(env);
  }

  if (unique->debounce_ms > 0) {
    env->eta = now + unique->debounce_ms;
    p->due_at = env->eta;
  }
  p->unique_replace = unique->replace || unique->debounce_ms > 0;
  /* A waiting message's claim must outlive its wait: the TTL counts from
   * when it is due (the TTL scope counts from now, as documented). */
  wait = p->due_at > now ? p->due_at - now : 0;
  p->unique_ttl_ms =
      unique->scope == SLUICE_UNIQUE_FOR_TTL
          ? unique->ttl_ms
          : (unique->ttl_ms > 0 ? unique->ttl_ms : default_ttl_ms) + wait;
  g_free(env->unique);
  env->unique = g_strdup_printf("%c:%s", scope_letter(unique->scope), key);
  p->unique_key = g_steal_pointer(&key);
  return TRUE;
}
