/* progress.c - how bulk commands say where they are, and what may make them
 * touch many tasks at all.
 *
 * A command that works through many tasks (`dlq replay --all`, `dlq
 * purge`) draws a progress bar on stderr when stderr is a terminal, and
 * nothing there otherwise: a log or a pipe gets only the summary line the
 * command prints on stdout when it is done. The bar is redrawn in place
 * at most ten times a second and erased at the end.
 *
 * cli_confirm_many() is the one rule for destructive commands: touching
 * more than one task takes --yes, on a terminal and off it alike (a
 * script must say so as much as a person), and --dry-run is the way to
 * see what would be touched.
 */
#include "config.h"

#include <unistd.h>

#include "cli/cli.h"

#define BAR_WIDTH 30
#define REDRAW_US (100 * 1000)

struct _CliProgress {
  gchar *what;
  guint64 total;
  guint64 done;
  gint64 drawn_at; /* monotonic us; 0 = never */
  gboolean shown;
};

CliProgress *
cli_progress_new(const gchar *what, guint64 total)
{
  CliProgress *p = g_new0(CliProgress, 1);

  p->what = g_strdup(what);
  p->total = total;
  p->shown = total > 0 && isatty(STDERR_FILENO);
  return p;
}

static void
draw(CliProgress *p)
{
  guint filled = p->total > 0 ? (guint)(p->done * BAR_WIDTH / p->total) : 0;
  g_autoptr(GString) line = g_string_new("\r");

  g_string_append_printf(line, "%s [", p->what);
  for (guint i = 0; i < BAR_WIDTH; i++)
    g_string_append_c(line, i < filled ? '#' : '.');
  g_string_append_printf(line, "] %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT,
                         p->done, p->total);
  fputs(line->str, stderr);
  fflush(stderr);
  p->drawn_at = g_get_monotonic_time();
}

void
cli_progress_step(CliProgress *p)
{
  p->done++;
  if (p->shown && (p->drawn_at == 0 || p->done == p->total ||
                   g_get_monotonic_time() - p->drawn_at >= REDRAW_US))
    draw(p);
}

void
cli_progress_free(CliProgress *p)
{
  if (p == NULL)
    return;
  if (p->shown && p->drawn_at != 0) {
    /* Erase the bar: what follows on the terminal starts clean. */
    fputs("\r\033[K", stderr);
    fflush(stderr);
  }
  g_free(p->what);
  g_free(p);
}

gboolean
cli_confirm_many(guint64 n, gboolean yes, gboolean dry_run, const gchar *doing,
                 const gchar *what, GError **error)
{
  if (n <= 1 || yes || dry_run)
    return TRUE;
  return cli_usage_error(error,
                         "%s would touch %" G_GUINT64_FORMAT " %s: add --yes "
                         "to do it (--dry-run says what it would do)",
                         doing, n, what);
}
