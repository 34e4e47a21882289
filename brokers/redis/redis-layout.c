/* redis-layout.c - the number of partitions a namespace is split in, as
 * recorded in {ns}:meta (see redis-partitions.h), and what `sluice
 * migrate` reads of the namespace's layout (its version and script set
 * are checked and recorded by every connection: redis-broker.c).
 *
 * Why the record lives in {ns}:meta whatever the number: it is the one key
 * every client finds without knowing the number, and it is where an
 * unpartitioned namespace, made before partitions existed, already
 * records its mode; an absent field means 1, so such a namespace reads as
 * what it is.
 *
 * Why a change is allowed on an empty namespace only: a task's partition
 * is a hash of its id modulo the number, so under another number its
 * result, its schedule entry and its dead letter are looked up in the
 * wrong place, and its queue is read by nobody. Emptiness is judged by
 * the recorded layout's stats: nothing ready, scheduled, in flight or
 * dead-lettered. Results and idempotency claims of finished tasks are
 * not counted (they expire by themselves); after a change they are not
 * found.
 *
 * The check builds brokers of its own (one for {ns}:meta, one per
 * partition of the recorded number, to count their tasks through the
 * contract), with the builder redis.c gives it: it runs above the brokers
 * it checks, as the gate of the one the user holds, never inside one.
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/redis-broker.h"
#include "brokers/redis/redis-partitions.h"

struct _SluiceRedisLayout {
  gchar *ns;
  gchar *url_text;
  gchar *mode_setting;
  SluiceRedisOptions options; /* .ns, .url and .mode_setting point at the
                                 above */
  SluiceRedisUrl url;
  guint n;
  SluiceRedisPartBuilder build;
  GMutex lock;
  gint ok; /* atomic: checked already */
};

SluiceRedisLayout *
sluice_redis_layout__new(const SluiceRedisOptions *options,
                         const SluiceRedisUrl *url, guint n,
                         SluiceRedisPartBuilder build)
{
  SluiceRedisLayout *layout = g_new0(SluiceRedisLayout, 1);

  layout->options = *options;
  layout->ns = g_strdup(options->ns != NULL ? options->ns
                                            : SLUICE_REDIS_DEFAULT_NAMESPACE);
  layout->options.ns = layout->ns;
  layout->options.url = NULL;
  layout->mode_setting = g_strdup(options->mode_setting);
  layout->options.mode_setting = layout->mode_setting;
  sluice_redis_url__copy(url, &layout->url);
  layout->n = n;
  layout->build = build;
  g_mutex_init(&layout->lock);
  return layout;
}

void
sluice_redis_layout__free(gpointer data)
{
  SluiceRedisLayout *layout = data;

  if (layout == NULL)
    return;
  g_free(layout->ns);
  g_free(layout->mode_setting);
  sluice_redis_url__clear(&layout->url);
  g_mutex_clear(&layout->lock);
  g_free(layout);
}

/* Adds to @out_tasks what the namespace holds under @n partitions. */
static gboolean
count_tasks(SluiceRedisLayout *layout, guint n, gint64 *out_tasks,
            GError **error)
{
  *out_tasks = 0;
  for (guint k = 0; k < n; k++) {
    g_autoptr(SluiceBroker) part = layout->build(
        &layout->options, &layout->url, n == 1 ? -1 : (gint)k, n, error);
    SluiceBrokerStats stats;
    gboolean ok;

    if (part == NULL)
      return FALSE;
    sluice_broker_stats_init(&stats);
    ok = sluice_broker_stats(part, NULL, &stats, error);
    if (ok) {
      for (guint q = 0; q < stats.queues->len; q++)
        *out_tasks += ((SluiceQueueStats *)stats.queues->pdata[q])->ready;
      *out_tasks +=
          stats.scheduled + MAX(stats.in_flight, 0) + stats.dead_letters;
    }
    sluice_broker_stats_clear(&stats);
    if (!ok)
      return FALSE;
  }
  return TRUE;
}

static gboolean
meta_command(SluiceRedisBroker *anchor, const gchar *what,
             const gchar *const *words, redisReply **out_reply, GError **error)
{
  SluiceRedisArgv a;
  guint n = g_strv_length((gchar **)words);
  gboolean ok;

  sluice_redis_argv__init(&a, n, 0);
  for (guint i = 0; i < n; i++)
    sluice_redis_argv__add_str(&a, words[i]);
  sluice_redis_argv__finish(&a);
  ok =
      sluice_redis_broker__command(anchor, what, TRUE, &a, 0, out_reply, error);
  sluice_redis_argv__clear(&a);
  return ok;
}

static gboolean
ensure_locked(SluiceRedisLayout *layout, GError **error)
{
  g_autoptr(SluiceBroker) broker =
      layout->build(&layout->options, &layout->url, -1, 1, error);
  SluiceRedisBroker *anchor;
  g_autofree gchar *meta = NULL;
  g_autofree gchar *want = g_strdup_printf("%u", layout->n);
  redisReply *reply = NULL;
  guint64 recorded = 1;
  gint64 tasks = 0;

  if (broker == NULL)
    return FALSE;
  anchor = SLUICE_REDIS_BROKER(broker);
  meta = sluice_redis_keys__make(&anchor->keys, SLUICE_REDIS_K_META, NULL);
  {
    const gchar *const get[] = {"HGET", meta, "partitions", NULL};
    if (!meta_command(anchor, "reading the namespace's partitions", get, &reply,
                      error))
      return FALSE;
  }
  if (reply->type == REDIS_REPLY_STRING &&
      !g_ascii_string_to_unsigned(
          reply->str, 10, 1, SLUICE_REDIS_MAX_PARTITIONS, &recorded, NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "%s on Redis at %s records partitions “%s”, which is not a "
                "number of partitions: set it right (HSET %s partitions N) "
                "or delete the field if the namespace is not split",
                meta, layout->url.display, reply->str, meta);
    freeReplyObject(reply);
    return FALSE;
  }
  freeReplyObject(reply);
  if (recorded == layout->n)
    return TRUE;

  if (!count_tasks(layout, (guint)recorded, &tasks, error))
    return FALSE;
  if (tasks > 0) {
    g_set_error(
        error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
        "the namespace “%s” on Redis at %s is split in %" G_GUINT64_FORMAT
        " partition%s and holds %" G_GINT64_FORMAT
        " task%s (ready, scheduled, running or dead-lettered), but this "
        "client is set up for %u: use partitions=%" G_GUINT64_FORMAT
        " (the URL's ?partitions=N or SluiceRedisOptions.partitions), or, "
        "to change the number, stop every client, let the tasks drain "
        "under the old number and delete the dead letters first",
        layout->ns, layout->url.display, recorded, recorded == 1 ? "" : "s",
        tasks, tasks == 1 ? "" : "s", layout->n, recorded);
    return FALSE;
  }
  {
    const gchar *const set[] = {"HSET", meta, "partitions", want, NULL};
    const gchar *const del[] = {"HDEL", meta, "partitions", NULL};
    if (!meta_command(anchor, "recording the namespace's partitions",
                      layout->n == 1 ? del : set, &reply, error))
      return FALSE;
    freeReplyObject(reply);
  }
  sluice_broker_log(broker, G_LOG_LEVEL_INFO,
                    "namespace “%s” on Redis at %s: %" G_GUINT64_FORMAT
                    " partition%s recorded, now %u (it was empty)",
                    layout->ns, layout->url.display, recorded,
                    recorded == 1 ? "" : "s", layout->n);
  return TRUE;
}

gboolean
sluice_redis_layout__ensure(gpointer data, GError **error)
{
  SluiceRedisLayout *layout = data;
  gboolean ok;

  if (g_atomic_int_get(&layout->ok))
    return TRUE;
  g_mutex_lock(&layout->lock);
  ok = g_atomic_int_get(&layout->ok) || ensure_locked(layout, error);
  if (ok)
    g_atomic_int_set(&layout->ok, 1);
  g_mutex_unlock(&layout->lock);
  return ok;
}

/* ---- Reading the layout -------------------------------------------------- */

/* Sets *@out (transfer full) to field @field of @broker's meta key, NULL
 * when it has none. */
static gboolean
meta_field(SluiceBroker *broker, const gchar *field, gchar **out,
           GError **error)
{
  SluiceRedisBroker *self = SLUICE_REDIS_BROKER(broker);
  const gchar *const get[] = {"HGET", self->meta_key, field, NULL};
  redisReply *reply = NULL;

  *out = NULL;
  if (!meta_command(self, "reading the namespace's meta", get, &reply, error))
    return FALSE;
  if (reply->type == REDIS_REPLY_STRING)
    *out = g_strndup(reply->str, reply->len);
  freeReplyObject(reply);
  return TRUE;
}

/* The version a meta key with @mode and @layout stands for: 0 for a new
 * namespace, 1 for one made before versions were recorded. */
static guint
version_of(const gchar *mode, const gchar *layout)
{
  guint64 v = 0;

  if (layout != NULL)
    return g_ascii_string_to_unsigned(layout, 10, 1, G_MAXUINT32, &v, NULL)
               ? (guint)v
               : 0;
  return mode != NULL ? 1 : 0;
}

gboolean
sluice_redis_layout__read(const SluiceRedisOptions *options,
                          const SluiceRedisUrl *url,
                          SluiceRedisPartBuilder inspect, SluiceLayout *out,
                          GError **error)
{
  g_autoptr(SluiceBroker) anchor = inspect(options, url, -1, 1, error);
  const SluiceRedisScriptSet *mine = sluice_redis_scripts__set();
  g_autofree gchar *mode = NULL, *layout = NULL, *scripts = NULL,
                   *partitions = NULL;
  const gchar *ns =
      options->ns != NULL ? options->ns : SLUICE_REDIS_DEFAULT_NAMESPACE;
  guint64 n = 1;

  sluice_layout_init(out);
  out->current = SLUICE_REDIS_LAYOUT_VERSION;
  out->store =
      g_strdup_printf("the namespace “%s” on Redis at %s", ns, url->display);
  if (anchor == NULL || !meta_field(anchor, "mode", &mode, error) ||
      !meta_field(anchor, "layout", &layout, error) ||
      !meta_field(anchor, "scripts", &scripts, error) ||
      !meta_field(anchor, "partitions", &partitions, error)) {
    sluice_layout_clear(out);
    return FALSE;
  }
  out->version = version_of(mode, layout);
  out->recorded = layout != NULL;
  if (layout != NULL && out->version == 0)
    g_ptr_array_add(out->notes,
                    g_strdup_printf("its layout field is “%s”, which is not "
                                    "a layout version",
                                    layout));
  if (mode == NULL)
    g_ptr_array_add(out->notes,
                    g_strdup("nothing recorded yet: its first client records "
                             "its mode, layout version and script set"));
  else if (layout == NULL)
    g_ptr_array_add(out->notes,
                    g_strdup("made before layout versions were recorded: "
                             "version 1, which its next client of this "
                             "version records"));
  if (mode != NULL)
    g_ptr_array_add(out->notes, g_strdup_printf("mode: %s", mode));
  g_ptr_array_add(
      out->notes,
      g_strdup_printf("script set: %s recorded, this client's %s%s",
                      scripts != NULL ? scripts : "none", mine->recorded,
                      scripts != NULL && strcmp(scripts, mine->recorded) != 0
                          ? " (they differ)"
                          : ""));
  if (partitions != NULL &&
      g_ascii_string_to_unsigned(partitions, 10, 2, SLUICE_REDIS_MAX_PARTITIONS,
                                 &n, NULL)) {
    g_ptr_array_add(out->notes,
                    g_strdup_printf("partitions: %" G_GUINT64_FORMAT, n));
    for (guint k = 0; k < n; k++) {
      g_autoptr(SluiceBroker) part =
          inspect(options, url, (gint)k, (guint)n, error);
      g_autofree gchar *part_mode = NULL, *part_layout = NULL;
      guint v;

      if (part == NULL || !meta_field(part, "mode", &part_mode, error) ||
          !meta_field(part, "layout", &part_layout, error)) {
        sluice_layout_clear(out);
        return FALSE;
      }
      v = version_of(part_mode, part_layout);
      if (v != out->version || (part_layout != NULL) != out->recorded)
        g_ptr_array_add(
            out->notes,
            g_strdup_printf("partition %u: layout version %u%s", k, v,
                            part_layout == NULL && v > 0 ? " (not recorded yet)"
                                                         : ""));
    }
  }
  return TRUE;
}
