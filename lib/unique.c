/* unique.c - uniqueness by key, as the core sees it: checking the options,
 * naming the key (given, or derived from the task and its argument
 * bytes), and enqueueing through the broker's `unique_enqueue` slot, which
 * claims the key and writes the message in one atomic step.
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

/* The replaced task never runs: say so in its record now (it may have
 * been taken off the schedule, where no worker would ever write one, and
 * someone may wait for its result).
 * Best effort, after the enqueue: the worker that meets a replaced task in
 * its queue writes the same. */
static void
record_replaced(SluiceClient *client, const SluiceEnvelope *by,
                const gchar *holder)
{
  const SluiceClientOptions *options = sluice_client__options(client);
  g_autoptr(SluiceResult) r = sluice_result_new(holder, SLUICE_STATE_CANCELLED);
  g_autofree gchar *why = g_strdup_printf(
      "replaced by task %s of the same uniqueness key before it started",
      by->id);
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  gint64 now = sluice_clock_now_ms(sluice_client__clock(client));

  sluice_result_set_task(r, by->task, by->queue);
  sluice_result_set_error(r, why);
  sluice_result_set_times(r, 0, 0, now);
  bytes = sluice_result_encode(r);
  if (!sluice_broker_put_record(sluice_client_get_broker(client), holder, bytes,
                                TRUE, options->result_ttl_ms, &error))
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "could not record that task %s was replaced: %s",
                        holder, error->message);
}

gboolean
sluice_unique__enqueue(SluiceClient *client, SluicePrepared *p, guint n,
                       gchar **out_holders, GError **error)
{
  g_autofree SluiceUniqueSubmit *items = g_new0(SluiceUniqueSubmit, MAX(n, 1));
  gboolean ok;

  for (guint i = 0; i < n; i++) {
    sluice_client__fill_submit(client, &p[i], &items[i].submit);
    items[i].key = p[i].unique_key;
    items[i].claim_ttl_ms = p[i].unique_ttl_ms;
    items[i].replace = p[i].unique_replace;
    out_holders[i] = NULL;
  }
  ok = sluice_broker_unique_enqueue(sluice_client_get_broker(client), items, n,
                                    error);
  for (guint i = 0; i < n; i++) {
    /* A repeat of a call whose reply was lost finds its own claim. */
    if (ok && items[i].existed && items[i].holder != NULL &&
        !g_str_equal(items[i].holder, p[i].env->id))
      out_holders[i] = g_steal_pointer(&items[i].holder);
    else if (ok && items[i].submit.existed)
      out_holders[i] = g_strdup(p[i].env->id);
    else if (ok && items[i].replaced && items[i].holder != NULL)
      record_replaced(client, p[i].env, items[i].holder);
    g_free(items[i].holder);
  }
  return ok;
}
