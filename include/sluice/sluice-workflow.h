/* sluice-workflow.h - groups, chains and chords of tasks.
 *
 * A workflow is a tree of nodes, built here and enqueued in one step:
 *
 *   - a task: a name, arguments and enqueue options;
 *   - a group: its members run in parallel;
 *   - a chain: its steps run one after the other; each step gets the
 *     previous step's result as its arguments (a group's results, when the
 *     previous step is a group), and a failure stops the chain unless the
 *     failed step was marked to continue;
 *   - a chord: a group and a callback that runs once, after the group,
 *     with every member's result as its arguments.
 *
 *     SluiceWorkflow *group = sluice_workflow_group ();
 *     for (guint i = 0; i < 100; i++)
 *       sluice_workflow_add (group, sluice_workflow_task ("img.resize", a[i],
 *                                                         NULL));
 *     g_autoptr(SluiceWorkflow) chord = sluice_workflow_chord (
 *         group, sluice_workflow_task ("img.zip", NULL, NULL),
 *         SLUICE_CHORD_WAIT_ALL);
 *     g_autofree gchar *id = sluice_client_enqueue_workflow (client, chord,
 *                                                            &error);
 *
 * sluice_workflow_add() and sluice_workflow_chord() take the nodes they
 * are given (transfer full), so a tree is built without a free per node;
 * the root is the caller's.
 *
 * What a callback or a chain step receives, as its msgpack arguments:
 *
 *   - after a single task: that task's result (nil if it failed and the
 *     chain continues);
 *   - after a group (a chord's callback, or a chain step after a group):
 *     a map {"results": [...], "errors": [...], "args": <its own args>}.
 *     "results" holds one value per member, in the order the members were
 *     added (a group inside a group adds its members in place), nil where
 *     a member failed or never ran; "errors" one map {"index", "id",
 *     "state", "error"} per failed member. With SLUICE_CHORD_IGNORE_FAILURES
 *     "results" holds only the successful members' results, in order, and
 *     "errors" is empty.
 *
 * The broker keeps the count of finished members atomically (the join
 * slots of sluice/sys/broker.h), so a callback is enqueued exactly once
 * however members finish: at the same instant on different workers,
 * retried, redelivered after a crash or replayed from the dead letters (a
 * member counts once, with its first final outcome). Task ids inside a
 * workflow are "<workflow id>.<n>", n counting tasks depth first from 0.
 *
 * Names of tasks are not checked against a registry: a workflow may name a
 * task that a rollout has yet to bring. A workflow with an empty group or
 * chain, a node added twice or into itself, or more than
 * SLUICE_WORKFLOW_MAX_TASKS tasks is refused when it is enqueued, and
 * nothing of it is enqueued.
 */
#pragma once

#include <sluice/sluice-client.h>
#include <sluice/sluice-macros.h>
#include <sluice/sluice-result.h>

G_BEGIN_DECLS

/* The most tasks one workflow may hold (callbacks and steps included). */
#define SLUICE_WORKFLOW_MAX_TASKS 20000

/* How long the broker keeps a workflow's state (its joins): 7 days. A
 * workflow whose tasks take longer never completes. */
#define SLUICE_WORKFLOW_TTL_MS (7 * 24 * 3600 * G_GINT64_CONSTANT(1000))

/**
 * SluiceChordPolicy:
 * @SLUICE_CHORD_FAIL_FAST: the first member that fails for good (dead
 *   letter, failed record or cancellation) runs the callback at once, with
 *   that error in "errors"; members not finished by then are cancelled
 * @SLUICE_CHORD_WAIT_ALL: the callback runs once every member finished,
 *   with the successes in "results" and the failures in "errors"
 * @SLUICE_CHORD_IGNORE_FAILURES: the callback runs once every member
 *   finished, with only the successes
 */
typedef enum {
  SLUICE_CHORD_FAIL_FAST,
  SLUICE_CHORD_WAIT_ALL,
  SLUICE_CHORD_IGNORE_FAILURES,
} SluiceChordPolicy;

typedef struct _SluiceWorkflow SluiceWorkflow;

/**
 * sluice_workflow_task:
 * @task: (transfer none): the task's name; not checked against a registry
 * @args: (nullable) (transfer none): msgpack bytes of one value; NULL = nil.
 *   A chain step or callback that receives results gets them instead, and
 *   these under "args" when it follows a group.
 * @options: (nullable) (transfer none): copied: the queue, the message
 *   options and the headers; @id, @delay_ms and @eta_ms must be unset (a
 *   workflow names and starts its tasks itself)
 * Returns: (transfer full): a task node.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceWorkflow *sluice_workflow_task(const gchar *task, GBytes *args,
                                     const SluiceEnqueueOptions *options);

/** sluice_workflow_group: Returns: (transfer full): an empty group. */
SLUICE_AVAILABLE_IN_0_1
SluiceWorkflow *sluice_workflow_group(void);

/** sluice_workflow_chain: Returns: (transfer full): an empty chain. */
SLUICE_AVAILABLE_IN_0_1
SluiceWorkflow *sluice_workflow_chain(void);

/**
 * sluice_workflow_chord:
 * @group: (transfer full): a group
 * @callback: (transfer full): what runs after it, usually a task node
 * @policy: what a failed member does
 * Returns: (transfer full): the chord. A @group that is not a group is
 * reported when the workflow is enqueued.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceWorkflow *sluice_workflow_chord(SluiceWorkflow *group,
                                      SluiceWorkflow *callback,
                                      SluiceChordPolicy policy);

/**
 * sluice_workflow_add:
 * @parent: a group or a chain
 * @child: (transfer full): appended as its last member or step
 *
 * A node may be added once: adding it a second time, or into itself or
 * one of its own members, is not done and is reported (with the other
 * mistakes) when the workflow is enqueued.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_workflow_add(SluiceWorkflow *parent, SluiceWorkflow *child);

/**
 * sluice_workflow_set_continue:
 * @step: a chain's step
 * @continue_on_failure: TRUE: when this step fails for good, the chain
 *   goes on (the next step gets nil); FALSE (the default): it stops
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_workflow_set_continue(SluiceWorkflow *step,
                                  gboolean continue_on_failure);

SLUICE_AVAILABLE_IN_0_1
SluiceWorkflow *sluice_workflow_ref(SluiceWorkflow *workflow);
/** sluice_workflow_unref: NULL-safe; frees the tree it alone holds. */
SLUICE_AVAILABLE_IN_0_1
void sluice_workflow_unref(SluiceWorkflow *workflow);

/**
 * sluice_client_enqueue_workflow:
 * @workflow: (transfer none): the root node; not changed
 *
 * Checks the whole tree, then opens its joins and enqueues the tasks that
 * start at once, in one atomic step of the broker (join_open): all of it,
 * or nothing. The broker must have joins (sluice_broker_supports() with
 * SLUICE_BROKER_FEATURE_JOINS: every in-tree broker but a partitioned
 * Redis namespace has).
 * Returns: (transfer full): the workflow's id, or NULL and @error:
 * SLUICE_CLIENT_ERROR_INVALID (an empty group or chain, a cycle, a node
 * added twice, a bad name or option, more than SLUICE_WORKFLOW_MAX_TASKS
 * tasks), SLUICE_CLIENT_ERROR_TOO_LARGE, or the broker's error.
 */
SLUICE_AVAILABLE_IN_0_1
gchar *sluice_client_enqueue_workflow(SluiceClient *client,
                                      SluiceWorkflow *workflow, GError **error);

/**
 * SluiceWorkflowStatus:
 * @total: how many results the workflow produces (its last tasks)
 * @finished: how many of them are final
 * @failed: how many of those failed, were cancelled or never ran because
 *   a chain stopped
 * @tasks: how many tasks it holds
 */
typedef struct {
  guint total;
  guint finished;
  guint failed;
  guint tasks;
} SluiceWorkflowStatus;

/**
 * sluice_client_get_workflow:
 * @id: a workflow id
 * Returns: TRUE and @out filled; FALSE with SLUICE_CLIENT_ERROR_NOT_FOUND
 * when the broker knows no such workflow (never enqueued, or expired), or
 * the broker's error.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_get_workflow(SluiceClient *client, const gchar *id,
                                    SluiceWorkflowStatus *out, GError **error);

/**
 * sluice_client_cancel_workflow:
 * @id: a workflow id
 *
 * Cancels every task of the workflow that has not run: each is taken off
 * the schedule or revoked (sluice_client_cancel()), including the tasks
 * its joins have yet to release, which are then skipped when released.
 * A running task has its cancellable cancelled. Tasks that finished are
 * left as they are.
 * Returns: FALSE and @error (SLUICE_CLIENT_ERROR_NOT_FOUND for an unknown
 * workflow) if it could not.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_client_cancel_workflow(SluiceClient *client, const gchar *id,
                                       GError **error);

/**
 * SluiceWorkflowNodeKind:
 * The kinds of node of a workflow's tree.
 */
typedef enum {
  SLUICE_WORKFLOW_NODE_TASK,
  SLUICE_WORKFLOW_NODE_GROUP,
  SLUICE_WORKFLOW_NODE_CHAIN,
  SLUICE_WORKFLOW_NODE_CHORD,
} SluiceWorkflowNodeKind;

typedef struct _SluiceWorkflowNode SluiceWorkflowNode;

/**
 * SluiceWorkflowNode:
 * @kind: what it is
 * @task: (nullable): a task's name
 * @task_id: (nullable): a task's id
 * @state: a task's state now (SLUICE_STATE_UNKNOWN: not enqueued yet, a
 *   join has still to release it, or its record expired)
 * @policy: a chord's failure policy
 * @children: (element-type SluiceWorkflowNode): a group's members, a
 *   chain's steps, a chord's group and callback; empty for a task
 *
 * One node of the tree sluice_client_get_workflow_tree() returns. Owns
 * everything; free the root with sluice_workflow_node_free().
 */
struct _SluiceWorkflowNode {
  SluiceWorkflowNodeKind kind;
  gchar *task;
  gchar *task_id;
  SluiceTaskState state;
  SluiceChordPolicy policy;
  GPtrArray *children;
};

/**
 * sluice_client_get_workflow_tree:
 * @id: a workflow id
 *
 * Reads the workflow's shape (stored with it when it was enqueued) and the
 * state of each of its tasks (one read per task).
 * Returns: (transfer full): the root, or NULL and @error (NOT_FOUND for a
 * workflow the broker does not know).
 */
SLUICE_AVAILABLE_IN_0_1
SluiceWorkflowNode *sluice_client_get_workflow_tree(SluiceClient *client,
                                                    const gchar *id,
                                                    GError **error);
SLUICE_AVAILABLE_IN_0_1
void sluice_workflow_node_free(SluiceWorkflowNode *node);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceWorkflow, sluice_workflow_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceWorkflowNode, sluice_workflow_node_free)

G_END_DECLS
