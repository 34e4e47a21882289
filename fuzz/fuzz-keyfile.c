/* fuzz-keyfile.c - the command's settings from a key file
 * (cli_settings_load: [connection], password_file, the environment's
 * absence) and the check of a group's keys.
 *
 * The input is the file. Oracles: a failure is a usage error whose
 * message is printable UTF-8 (it goes to a terminal: keys, values and
 * GLib's own messages about the file are quoted escaped); a success has a
 * URL, a namespace and a known mode.
 */
/* memfd_create() */
#define _GNU_SOURCE

#include "fuzz/fuzz-common.h"

#include "cli/cli.h"

#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static int file = -1;
static gchar *path;

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  static const gchar *const worker_keys[] = {"modules", "queues", "concurrency",
                                             "log-format", NULL};
  g_autoptr(GError) error = NULL;
  CliCommon common = {0};
  CliSettings settings = {0};

  fuzz_init();
  if (file < 0) {
    g_unsetenv("SLUICE_URL");
    g_unsetenv("SLUICE_MODE");
    g_unsetenv("SLUICE_NAMESPACE");
    g_unsetenv("SLUICE_PASSWORD_FILE");
    file = memfd_create("sluice-fuzz-keyfile", 0);
    FUZZ_ASSERT(file >= 0, "memfd_create failed");
    path = g_strdup_printf("/proc/self/fd/%d", file);
    /* The key file as a user names it without --config: the command's
     * options are a table now, and the environment is one of its
     * sources. */
    g_setenv("SLUICE_CONFIG", path, TRUE);
  }
  FUZZ_ASSERT(ftruncate(file, 0) == 0 &&
                  pwrite(file, data, size, 0) == (ssize_t)size,
              "cannot write the key file");
  if (!cli_settings_load(&common, &settings, &error)) {
    FUZZ_ASSERT(error != NULL, "failed without an error");
    FUZZ_ASSERT(fuzz_text_is_printable(error->message), "not printable: %s",
                error->message);
    return 0;
  }
  FUZZ_ASSERT(settings.url != NULL && settings.namespace_ != NULL,
              "settings without a URL or a namespace");
  FUZZ_ASSERT(
      settings.mode == CLI_MODE_FAST || settings.mode == CLI_MODE_RELIABLE ||
          settings.mode == CLI_MODE_MEMORY || settings.mode == CLI_MODE_SQLITE,
      "an unknown mode");
  /* SQLite is the database a sqlite:// URL names (or the default one);
   * only the memory mode, which ignores the URL, wins over it. */
  FUZZ_ASSERT(settings.mode == CLI_MODE_MEMORY ||
                  (settings.mode == CLI_MODE_SQLITE) ==
                      g_str_has_prefix(settings.url, "sqlite://"),
              "mode and URL disagree: %s", settings.url);
  if (!cli_keyfile_check_keys(&settings, "worker", worker_keys, &error))
    FUZZ_ASSERT(fuzz_text_is_printable(error->message), "not printable: %s",
                error->message);
  cli_settings_clear(&settings);
  return 0;
}
