/* producer-proc.c - a producer program for the process-level Redis tests.
 *
 * Enqueues --count tasks named --task, with the caller-chosen ids
 * "<prefix>-<n>" (so the test knows every id to expect, and a retried
 * enqueue cannot add a second task), in batches of --batch, then exits 0.
 * It exits 1 when an enqueue fails, 2 on bad options.
 */
#include "config.h"

#include <stdio.h>

#include <sluice/sluice-redis.h>
#include <sluice/sluice.h>

int
main(int argc, char **argv)
{
  g_autofree gchar *url = NULL, *mode = NULL, *ns = NULL, *prefix = NULL,
                   *task = NULL;
  gint count = 1000, batch = 100;
  GOptionEntry entries[] = {
      {"url", 0, 0, G_OPTION_ARG_STRING, &url, "Redis or sqlite:// URL", "URL"},
      {"mode", 0, 0, G_OPTION_ARG_STRING, &mode, "fast or reliable", "MODE"},
      {"namespace", 0, 0, G_OPTION_ARG_STRING, &ns, "key namespace", "NS"},
      {"prefix", 0, 0, G_OPTION_ARG_STRING, &prefix, "id prefix", "P"},
      {"task", 0, 0, G_OPTION_ARG_STRING, &task, "task name", "NAME"},
      {"count", 0, 0, G_OPTION_ARG_INT, &count, "tasks to enqueue", "N"},
      {"batch", 0, 0, G_OPTION_ARG_INT, &batch, "tasks per batch", "N"},
      {NULL},
  };
  g_autoptr(GOptionContext) context =
      g_option_context_new("- a Sluice test producer");
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autofree SluiceEnqueueRequest *requests = NULL;
  g_autofree SluiceEnqueueOptions *options = NULL;
  g_autoptr(GPtrArray) ids = g_ptr_array_new_with_free_func(g_free);
  SluiceRedisOptions ro;

  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, &error) || url == NULL ||
      prefix == NULL || task == NULL || count < 0 || batch < 1) {
    g_printerr("producer-proc: %s\n",
               error != NULL ? error->message
                             : "--url, --prefix and --task are required");
    return 2;
  }
  sluice_redis_options_init(&ro);
  ro.url = url;
  ro.ns = ns;
  ro.mode =
      g_strcmp0(mode, "fast") == 0 ? SLUICE_REDIS_FAST : SLUICE_REDIS_RELIABLE;
  broker = sluice_url_is_sqlite(url)
               ? sluice_broker_new_for_url(url, NULL, NULL, &error)
               : sluice_redis_broker_new(&ro, NULL, &error);
  if (broker != NULL)
    client = sluice_client_new(broker, NULL, &error);
  if (client == NULL) {
    g_printerr("producer-proc: %s\n", error->message);
    return 1;
  }

  requests = g_new0(SluiceEnqueueRequest, batch);
  options = g_new0(SluiceEnqueueOptions, batch);
  for (gint done = 0; done < count;) {
    gint n = MIN(batch, count - done);
    g_autoptr(GPtrArray) got = NULL;

    g_ptr_array_set_size(ids, 0);
    for (gint i = 0; i < n; i++) {
      gchar *id = g_strdup_printf("%s-%d", prefix, done + i);
      g_ptr_array_add(ids, id);
      sluice_enqueue_options_init(&options[i]);
      options[i].id = id;
      requests[i] =
          (SluiceEnqueueRequest){.task = task, .options = &options[i]};
    }
    got = sluice_client_enqueue_batch(client, requests, (guint)n, &error);
    if (got == NULL) {
      g_printerr("producer-proc: %s\n", error->message);
      return 1;
    }
    done += n;
  }
  return 0;
}
