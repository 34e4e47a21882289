/* web-workflows.c - GET /api/workflows/ID: a workflow's counts and tree,
 * each task with its state now, as `sluice workflow show --json` prints
 * them (the same two client calls), for the dashboard's workflow page.
 */
#include "config.h"

#include "cli/web-api.h"

void
web_get_workflow(Web *web, SoupServerMessage *msg, const gchar *id)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceWorkflowNode) root = NULL;
  g_autoptr(CliJson) json = NULL;
  SluiceWorkflowStatus st;

  if (*id == '\0') {
    web_respond_message(msg, SOUP_STATUS_BAD_REQUEST,
                        "give a workflow id: /api/workflows/ID");
    return;
  }
  if (!sluice_client_get_workflow(web->client, id, &st, &error) ||
      (root = sluice_client_get_workflow_tree(web->client, id, &error)) ==
          NULL) {
    web_respond_error(msg, error);
    return;
  }
  json = cli_json_new();
  cli_workflow_to_json(json, id, &st, root);
  web_respond_json(msg, SOUP_STATUS_OK, json);
}
