/* cmd-workflow.c - `sluice workflow show ID` draws a workflow's tree with
 * each task's state; `sluice workflow cancel ID` cancels what has not run.
 */
#include "config.h"

#include "cli/cli.h"

static const gchar *
policy_name(SluiceChordPolicy policy)
{
  switch (policy) {
  case SLUICE_CHORD_FAIL_FAST:
    return "fail fast";
  case SLUICE_CHORD_IGNORE_FAILURES:
    return "ignore failures";
  case SLUICE_CHORD_WAIT_ALL:
  default:
    return "wait for all";
  }
}

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
    g_string_append_printf(out, "chord (%s)\n", policy_name(node->policy));
    break;
  }
  for (guint i = 0; i < node->children->len; i++)
    draw(g_ptr_array_index(node->children, i), out, inner,
         i + 1 == node->children->len, FALSE);
}

static void
node_json(CliJson *j, const SluiceWorkflowNode *node)
{
  static const gchar *const kinds[] = {"task", "group", "chain", "chord"};

  cli_json_begin_object(j);
  cli_json_key(j, "kind");
  cli_json_string(j, kinds[node->kind]);
  if (node->kind == SLUICE_WORKFLOW_NODE_TASK) {
    cli_json_key(j, "task");
    cli_json_string(j, node->task);
    cli_json_key(j, "id");
    cli_json_string(j, node->task_id);
    cli_json_key(j, "state");
    cli_json_string(j, node->state == SLUICE_STATE_UNKNOWN
                           ? "waiting"
                           : sluice_task_state_to_string(node->state));
  } else {
    if (node->kind == SLUICE_WORKFLOW_NODE_CHORD) {
      cli_json_key(j, "policy");
      cli_json_string(j, policy_name(node->policy));
    }
    cli_json_key(j, "children");
    cli_json_begin_array(j);
    for (guint i = 0; i < node->children->len; i++)
      node_json(j, g_ptr_array_index(node->children, i));
    cli_json_end_array(j);
  }
  cli_json_end_object(j);
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
    cli_json_begin_object(j);
    cli_json_key(j, "id");
    cli_json_string(j, argv[2]);
    cli_json_key(j, "tasks");
    cli_json_int(j, st.tasks);
    cli_json_key(j, "results");
    cli_json_int(j, st.total);
    cli_json_key(j, "finished");
    cli_json_int(j, st.finished);
    cli_json_key(j, "failed");
    cli_json_int(j, st.failed);
    cli_json_key(j, "tree");
    node_json(j, root);
    cli_json_end_object(j);
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
