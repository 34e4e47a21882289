/* command.h - the `sluice` command under test: a test's world (mode,
 * namespace, scratch directory, an environment for the command) and
 * running the command in it, for the test programs that drive the built
 * cli/sluice (test-metrics, test-web).
 */
#pragma once

#include <glib.h>

#include "tests/helpers/redis-server.h"

G_BEGIN_DECLS

/* The command as built, from the build tree. */
#define SLUICE_TEST_COMMAND TEST_BUILDDIR "/cli/sluice"

/**
 * SluiceTestCommand:
 * @mode: "fast" or "reliable" (not owned)
 * @url: the Redis URL the command is pointed at
 * @ns: a namespace of its own
 * @env: the command's environment: SLUICE_URL, SLUICE_MODE and
 *   SLUICE_NAMESPACE set, SLUICE_CONFIG, SLUICE_PASSWORD_FILE and
 *   G_MESSAGES_DEBUG unset, LC_ALL C.UTF-8
 * @dir: a scratch directory, emptied and removed by the free
 * @n_logs: for the test's own use (numbering log files in @dir)
 */
typedef struct {
  const gchar *mode;
  gchar *url;
  gchar *ns;
  gchar **env;
  gchar *dir;
  guint n_logs;
} SluiceTestCommand;

/* On @server (NULL: the program's shared one); @dir_prefix names the
 * scratch directory ("sluice-web"). */
SluiceTestCommand *sluice_test_command_new(const gchar *mode,
                                           SluiceTestRedis *server,
                                           const gchar *dir_prefix);
void sluice_test_command_free(SluiceTestCommand *ctx);

/* A child that leaves no core file and dies with the test (a
 * GSubprocessLauncher child setup). */
void sluice_test_command_child_setup(gpointer data);

typedef struct {
  int status; /* the exit status, or -1 when killed */
  gchar *out;
  gchar *err;
} SluiceTestRun;

void sluice_test_run_free(SluiceTestRun *run);

/* `sluice ARGS... NULL`, waited for. */
SluiceTestRun *sluice_test_command_run(SluiceTestCommand *ctx,
                                       const gchar *first,
                                       ...) G_GNUC_NULL_TERMINATED;

/* `sluice enqueue ARGS... NULL`, which must succeed: the task id
 * (transfer full). */
gchar *sluice_test_command_enqueue(SluiceTestCommand *ctx, const gchar *first,
                                   ...) G_GNUC_NULL_TERMINATED;

G_END_DECLS
