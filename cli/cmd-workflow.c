/* cmd-workflow.c - `sluice workflow show ID` draws a workflow's tree with
 * each task's state; `sluice workflow cancel ID` cancels what has not run.
 */
#include "config.h"

#include "cli/cli.h"

static void
draw(const SluiceWorkflowNode *node, GString *out, const gchar *prefix,
     gboolean last, gboolean root)
{
  g_autofree gchar *inner =
      root ? g_strdup("") : g_strconcat(prefix, last ? "   " : "│  ", NULL);

  if (!root)
    g_string_append_printf(out, "%s%s", prefix, last ? "└─ " : "├─ ");
  switch (node->kind) {
  case SLUICE_WORKFLOW_NODE_TASK:
    g_string_append_printf(out, "%s  %s  %s\n", node->task, node->task_id,
                           node->state == SLUICE_STATE_UNKNOWN
                               ? "waiting"
                               : sluice_task_state_to_string(node->state));
    break;
  case SLUICE_WORKFLOW_NODE_GROUP:
    g_string_append(out, "group\n");
    break;
  case SLUICE_WORKFLOW_NODE_CHAIN:
    g_string_append(out, "chain\n");
    break;
  case SLUICE_WORKFLOW_NODE_CHORD:
  default:
    g_string_append_printf(out, "chord (%s)\n",
                           cli_chord_policy_name(node->policy));
    break;
  }
  for (guint i = 0; i < node->children->len; i++)
    draw(g_ptr_array_index(node->children, i), out, inner,
         i + 1 == node->children->len, FALSE);
}

int
cli_cmd_workflow(int argc, char **argv)
{
  CliCommon common = {0};
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceClient) client = NULL;
  g_autoptr(SluiceWorkflowNode) root = NULL;
  SluiceWorkflowStatus st;
  int status = CLI_EXIT_OK;

  if (!cli_parse_options(
          &common, CLI_OPTIONS_CONNECTION | CLI_OPTIONS_JSON, NULL,
          "show|cancel ID",
          "show: draw a workflow (groups, chains, chords) as a tree, with "
          "each task's\nstate; cancel: cancel every task of it that has not "
          "run.",
          NULL, &argc, &argv, &error)) {
    status = cli_report(error);
    goto out;
  }
  if (argc != 3 ||
      (g_strcmp0(argv[1], "show") != 0 && g_strcmp0(argv[1], "cancel") != 0)) {
    cli_usage_error(&error, "give sluice workflow show ID, or sluice workflow "
                            "cancel ID");
    status = cli_report(error);
    goto out;
  }
  common.read_only = g_strcmp0(argv[1], "show") == 0;
  if ((client = cli_open_client(&common, NULL, &error)) == NULL) {
    status = cli_report(error);
    goto out;
  }
  if (g_strcmp0(argv[1], "cancel") == 0) {
    if (!sluice_client_cancel_workflow(client, argv[2], &error))
      status = cli_report(error);
    else if (!common.json)
      printf("cancelled what had not run of workflow %s\n", argv[2]);
    goto out;
  }
  if (!sluice_client_get_workflow(client, argv[2], &st, &error) ||
      (root = sluice_client_get_workflow_tree(client, argv[2], &error)) ==
          NULL) {
    status = cli_report(error);
    goto out;
  }
  if (common.json) {
    g_autoptr(CliJson) j = cli_json_new();
    cli_workflow_to_json(j, argv[2], &st, root);
    cli_json_print(j);
  } else {
    g_autoptr(GString) out = g_string_new(NULL);
    g_string_append_printf(out,
                           "workflow %s: %u tasks; %u of %u results in, %u "
                           "failed\n",
                           argv[2], st.tasks, st.finished, st.total, st.failed);
    draw(root, out, "", TRUE, TRUE);
    fputs(out->str, stdout);
  }
out:
  cli_common_clear(&common);
  return status;
}
