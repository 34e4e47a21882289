/* modules.c - task modules: shared objects that register tasks.
 *
 * A module is a shared object exporting
 *
 *     gboolean sluice_module_init (SluiceRegistry *registry, GError **error);
 *
 * which registers its tasks with sluice_registry_add() and returns TRUE, or
 * returns FALSE with @error set (a missing configuration, a duplicate task
 * name). examples/demo-module/ is one; build yours with
 *
 *     cc -shared -fPIC -o mytasks.so mytasks.c $(pkg-config --cflags \
 *        --libs sluice)
 *
 * --module takes a path; a bare name (no slash) is looked for first in the
 * current directory (as a user who just built mytasks.so expects; dlopen()
 * alone would search only the library path), then, as NAME or NAME.so, in
 * the directories of $SLUICE_MODULE_PATH (colon-separated) and then the
 * installed module directory (SLUICE_MODULE_DIR, where `make install` puts
 * the demo module).
 *
 * Modules are opened with G_MODULE_BIND_LOCAL, so two modules may have
 * private symbols of the same name, and are never unloaded (see
 * cli_modules_load()).
 */
#include "config.h"

#include <string.h>

#include <gmodule.h>

#include "cli/cli.h"

#define MODULE_INIT_SYMBOL SLUICE_MODULE_INIT_SYMBOL

typedef SluiceModuleInitFunc ModuleInitFunc;

/* Where module @given is: a path as given; a bare name in the current
 * directory, else in the installed module directory. */
/* @name, or @name.so, in @dir; NULL if neither is there. */
static gchar *
find_in(const gchar *dir, const gchar *name)
{
  g_autofree gchar *plain = g_build_filename(dir, name, NULL);
  g_autofree gchar *with_so = NULL;

  if (g_file_test(plain, G_FILE_TEST_IS_REGULAR))
    return g_steal_pointer(&plain);
  with_so = g_strconcat(plain, ".so", NULL);
  if (g_file_test(with_so, G_FILE_TEST_IS_REGULAR))
    return g_steal_pointer(&with_so);
  return NULL;
}

/* Where module @given is: a path as given; a bare name in the current
 * directory, else in $SLUICE_MODULE_PATH, else in the installed module
 * directory. */
static gchar *
resolve(const gchar *given)
{
  const gchar *path = g_getenv("SLUICE_MODULE_PATH");
  gchar *found;

  if (strchr(given, '/') != NULL)
    return g_strdup(given);
  if (g_file_test(given, G_FILE_TEST_IS_REGULAR))
    return g_build_filename(".", given, NULL);
  if (path != NULL) {
    g_auto(GStrv) dirs = g_strsplit(path, G_SEARCHPATH_SEPARATOR_S, -1);
    for (guint i = 0; dirs[i] != NULL; i++)
      if (dirs[i][0] != '\0' && (found = find_in(dirs[i], given)) != NULL)
        return found;
  }
  if ((found = find_in(SLUICE_MODULE_DIR, given)) != NULL)
    return found;
  return g_strdup(given); /* dlopen()'s own search, and its error */
}

/* Loads one module into @registry; appends to @loaded a line saying what
 * it registered. */
static gboolean
load_one(const gchar *given, SluiceRegistry *registry, GPtrArray *loaded,
         GError **error)
{
  g_autofree gchar *path = resolve(given);
  GModule *module;
  gpointer symbol = NULL;
  ModuleInitFunc init;
  g_autoptr(GError) local = NULL;
  g_auto(GStrv) before = sluice_registry_list(registry);
  g_auto(GStrv) after = NULL;
  g_autoptr(GString) added = g_string_new(NULL);

  module = g_module_open(path, G_MODULE_BIND_LOCAL);
  if (module == NULL) {
    g_set_error(error, CLI_ERROR, CLI_ERROR_FAILED,
                "cannot load the task module %s: %s (give the path of a "
                "shared object, e.g. ./mytasks.so, or the name of one "
                "installed in %s, e.g. demo)",
                given, g_module_error(), SLUICE_MODULE_DIR);
    return FALSE;
  }
  if (!g_module_symbol(module, MODULE_INIT_SYMBOL, &symbol) || symbol == NULL) {
    g_set_error(error, CLI_ERROR, CLI_ERROR_FAILED,
                "%s is not a task module: it has no %s symbol (%s); a "
                "module exports gboolean " MODULE_INIT_SYMBOL
                " (SluiceRegistry *registry, GError **error)",
                path, MODULE_INIT_SYMBOL, g_module_error());
    g_module_close(module);
    return FALSE;
  }
  /* Task functions stay in the registry, and a task that ignores its
   * cancellable may still run on an executor thread after the worker has
   * stopped: unloading the code under it would crash the process on its
   * way out. So a module stays mapped until the process ends. */
  g_module_make_resident(module);

  init = (ModuleInitFunc)symbol;
  if (!init(registry, &local)) {
    g_set_error(error, CLI_ERROR, CLI_ERROR_FAILED,
                "the task module %s failed to initialise: %s", path,
                local != NULL ? local->message
                              : MODULE_INIT_SYMBOL
                    " returned FALSE without saying why");
    return FALSE;
  }

  after = sluice_registry_list(registry);
  for (guint i = 0; after[i] != NULL; i++)
    if (!g_strv_contains((const gchar *const *)before, after[i]))
      g_string_append_printf(added, "%s%s", added->len > 0 ? ", " : "",
                             after[i]);
  g_ptr_array_add(
      loaded,
      g_strdup_printf("loaded the task module %s: %s", path,
                      added->len > 0 ? added->str : "it registered no task"));
  return TRUE;
}

gboolean
cli_modules_load(const gchar *const *paths, SluiceRegistry *registry,
                 GError **error)
{
  g_autoptr(GPtrArray) loaded = g_ptr_array_new_with_free_func(g_free);

  for (guint i = 0; paths != NULL && paths[i] != NULL; i++)
    if (!load_one(paths[i], registry, loaded, error))
      return FALSE;
  /* Logged once all are in, so that a module that fails is reported on
   * one line of its own rather than after its predecessors' news. */
  for (guint i = 0; i < loaded->len; i++)
    g_info("%s", (const gchar *)loaded->pdata[i]);
  return TRUE;
}
