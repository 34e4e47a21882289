/* command.c - see command.h. */
#include "config.h"

#include <check.h>
#include <glib/gstdio.h>
#include <gio/gio.h>
#include <sys/resource.h>
#ifdef __linux__
#include <signal.h>
#include <sys/prctl.h>
#endif

#include "tests/helpers/command.h"
#include "tests/helpers/redis-fixture.h"

void
sluice_test_command_free(SluiceTestCommand *ctx)
{
  g_autoptr(GDir) d = NULL;
  const gchar *name;

  if (ctx == NULL)
    return;
  d = g_dir_open(ctx->dir, 0, NULL);
  while (d != NULL && (name = g_dir_read_name(d)) != NULL) {
    g_autofree gchar *path = g_build_filename(ctx->dir, name, NULL);
    g_unlink(path);
  }
  g_rmdir(ctx->dir);
  g_free(ctx->dir);
  g_free(ctx->url);
  g_free(ctx->ns);
  g_strfreev(ctx->env);
  g_free(ctx);
}

SluiceTestCommand *
sluice_test_command_new(const gchar *mode, SluiceTestRedis *server,
                        const gchar *dir_prefix)
{
  SluiceTestCommand *ctx = g_new0(SluiceTestCommand, 1);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *template = g_strdup_printf("%s-XXXXXX", dir_prefix);
  gchar **env = g_get_environ();

  ctx->mode = mode;
  ctx->url = g_strdup(sluice_test_redis_url(
      server != NULL ? server : sluice_test_redis_shared()));
  ctx->ns = sluice_test_namespace();
  env = g_environ_unsetenv(env, "SLUICE_CONFIG");
  env = g_environ_unsetenv(env, "SLUICE_PASSWORD_FILE");
  env = g_environ_unsetenv(env, "G_MESSAGES_DEBUG");
  env = g_environ_setenv(env, "LC_ALL", "C.UTF-8", TRUE);
  env = g_environ_setenv(env, "SLUICE_URL", ctx->url, TRUE);
  env = g_environ_setenv(env, "SLUICE_MODE", ctx->mode, TRUE);
  env = g_environ_setenv(env, "SLUICE_NAMESPACE", ctx->ns, TRUE);
  ctx->env = env;
  ctx->dir = g_dir_make_tmp(template, &error);
  ck_assert_msg(ctx->dir != NULL, "%s", error != NULL ? error->message : "");
  return ctx;
}

void
sluice_test_command_child_setup(gpointer data)
{
  struct rlimit none = {0, 0};

  setrlimit(RLIMIT_CORE, &none);
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
}

void
sluice_test_run_free(SluiceTestRun *run)
{
  if (run == NULL)
    return;
  g_free(run->out);
  g_free(run->err);
  g_free(run);
}

/* Spawns `sluice` with @argv (after the command's own name). */
static GSubprocess *
spawn(SluiceTestCommand *ctx, GSubprocessFlags flags, GPtrArray *args)
{
  g_autoptr(GSubprocessLauncher) launcher = g_subprocess_launcher_new(flags);
  g_autoptr(GPtrArray) argv = g_ptr_array_new();
  g_autoptr(GError) error = NULL;
  GSubprocess *proc;

  g_ptr_array_add(argv, (gpointer)SLUICE_TEST_COMMAND);
  for (guint i = 0; i < args->len; i++)
    g_ptr_array_add(argv, args->pdata[i]);
  g_ptr_array_add(argv, NULL);
  g_subprocess_launcher_set_environ(launcher, ctx->env);
  g_subprocess_launcher_set_child_setup(
      launcher, sluice_test_command_child_setup, NULL, NULL);
  proc = g_subprocess_launcher_spawnv(
      launcher, (const gchar *const *)argv->pdata, &error);
  ck_assert_msg(proc != NULL, "spawn: %s", error->message);
  return proc;
}

SluiceTestRun *
sluice_test_command_run(SluiceTestCommand *ctx, const gchar *first, ...)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new();
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  SluiceTestRun *run = g_new0(SluiceTestRun, 1);
  va_list ap;

  va_start(ap, first);
  for (const gchar *a = first; a != NULL; a = va_arg(ap, const gchar *))
    g_ptr_array_add(args, (gpointer)a);
  va_end(ap);
  proc = spawn(ctx,
               G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_PIPE,
               args);
  ck_assert(g_subprocess_communicate_utf8(proc, NULL, NULL, &run->out,
                                          &run->err, &error));
  run->status = g_subprocess_get_if_exited(proc)
                    ? g_subprocess_get_exit_status(proc)
                    : -1;
  return run;
}

gchar *
sluice_test_command_enqueue(SluiceTestCommand *ctx, const gchar *first, ...)
{
  g_autoptr(GPtrArray) args = g_ptr_array_new();
  g_autoptr(GSubprocess) proc = NULL;
  g_autoptr(GError) error = NULL;
  gchar *out = NULL;
  va_list ap;

  g_ptr_array_add(args, (gpointer) "enqueue");
  va_start(ap, first);
  for (const gchar *a = first; a != NULL; a = va_arg(ap, const gchar *))
    g_ptr_array_add(args, (gpointer)a);
  va_end(ap);
  proc = spawn(
      ctx, G_SUBPROCESS_FLAGS_STDOUT_PIPE | G_SUBPROCESS_FLAGS_STDERR_SILENCE,
      args);
  ck_assert(
      g_subprocess_communicate_utf8(proc, NULL, NULL, &out, NULL, &error));
  ck_assert_msg(g_subprocess_get_if_exited(proc) &&
                    g_subprocess_get_exit_status(proc) == 0,
                "enqueue failed");
  g_strchomp(out);
  return out;
}
