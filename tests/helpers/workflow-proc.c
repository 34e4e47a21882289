/* workflow-proc.c - enqueues one chord for the dashboard's browser test
 * (`sluice` has no command that enqueues a workflow): two demo.noop
 * members and a demo.echo callback on --queue, on the Redis broker of
 * --url (reliable mode) in --namespace. Prints the workflow's id.
 */
#include "config.h"

#include <sluice/sluice.h>
#include <stdio.h>

int
main(int argc, char **argv)
{
  g_autofree gchar *url = NULL, *ns = NULL, *queue = NULL;
  const GOptionEntry entries[] = {
      {"url", 0, 0, G_OPTION_ARG_STRING, &url, "Redis URL", "URL"},
      {"namespace", 0, 0, G_OPTION_ARG_STRING, &ns, "namespace", "NS"},
      {"queue", 0, 0, G_OPTION_ARG_STRING, &queue, "queue", "Q"},
      {NULL}};
  g_autoptr(GOptionContext) context = g_option_context_new(NULL);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceBroker) broker = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceWorkflow) chord = NULL;
  g_autofree gchar *id = NULL;
  SluiceWorkflow *group;
  SluiceRedisOptions ro;
  SluiceEnqueueOptions eo;

  g_option_context_add_main_entries(context, entries, NULL);
  if (!g_option_context_parse(context, &argc, &argv, &error) || url == NULL ||
      ns == NULL || queue == NULL) {
    g_printerr("workflow-proc: %s\n",
               error != NULL ? error->message
                             : "--url, --namespace and --queue are required");
    return 2;
  }
  sluice_redis_options_init(&ro);
  ro.url = url;
  ro.ns = ns;
  ro.mode = SLUICE_REDIS_RELIABLE;
  broker = sluice_redis_broker_new(&ro, NULL, &error);
  if (broker != NULL)
    client = sluice_client_new(broker, NULL, &error);
  if (client == NULL) {
    g_printerr("workflow-proc: %s\n", error->message);
    return 1;
  }
  sluice_enqueue_options_init(&eo);
  eo.queue = queue;
  group = sluice_workflow_group();
  sluice_workflow_add(group, sluice_workflow_task("demo.noop", NULL, &eo));
  sluice_workflow_add(group, sluice_workflow_task("demo.noop", NULL, &eo));
  chord =
      sluice_workflow_chord(group, sluice_workflow_task("demo.echo", NULL, &eo),
                            SLUICE_CHORD_WAIT_ALL);
  id = sluice_client_enqueue_workflow(client, chord, &error);
  if (id == NULL) {
    g_printerr("workflow-proc: %s\n", error->message);
    return 1;
  }
  printf("%s\n", id);
  return 0;
}
