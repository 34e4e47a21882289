/* slot-log.c - see slot-log.h. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tests/helpers/slot-log.h"

static gchar **
read_lines(const gchar *path)
{
  g_autofree gchar *text = NULL;

  if (!g_file_get_contents(path, &text, NULL, NULL))
    return g_new0(gchar *, 1);
  return g_strsplit(text, "\n", -1);
}

/* "start <id> <pid>" or "end <id> <pid>": sets @out_start, @out_id (owned)
 * and @out_pid. */
static gboolean
parse(const gchar *line, gboolean *out_start, gchar **out_id, gint *out_pid)
{
  g_auto(GStrv) f = g_strsplit(line, " ", 3);

  if (g_strv_length(f) != 3)
    return FALSE;
  *out_start = g_str_equal(f[0], "start");
  *out_id = g_strdup(f[1]);
  *out_pid = atoi(f[2]);
  return TRUE;
}

void
sluice_test_slot_log_read(const gchar *path, guint limit, gint killed_pid,
                          guint after, SluiceTestSlotLog *out)
{
  g_auto(GStrv) lines = read_lines(path);
  /* "id pid" of the runs that ended, to leave out the killed one's others. */
  g_autoptr(GHashTable) closed =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  guint running = 0;

  memset(out, 0, sizeof *out);
  out->ended = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; lines[i] != NULL; i++) {
    gboolean start;
    gchar *id = NULL;
    gint pid;

    if (parse(lines[i], &start, &id, &pid) && !start)
      g_hash_table_add(closed, g_strdup_printf("%s %d", id, pid));
    g_free(id);
  }
  for (guint i = 0; lines[i] != NULL; i++) {
    gboolean start;
    gchar *id = NULL;
    gint pid;
    g_autofree gchar *run = NULL;

    if (!parse(lines[i], &start, &id, &pid))
      continue;
    out->lines++;
    run = g_strdup_printf("%s %d", id, pid);
    if (start && pid == killed_pid && !g_hash_table_contains(closed, run)) {
      g_free(id);
      continue;
    }
    if (start) {
      running++;
      out->peak = MAX(out->peak, running);
      if (i >= after)
        out->peak_after = MAX(out->peak_after, running);
      if (running > limit && out->first_overrun == NULL)
        out->first_overrun = g_strdup_printf("line %u: %s", i + 1, lines[i]);
      g_free(id);
    } else {
      running = running > 0 ? running - 1 : 0;
      g_hash_table_add(out->ended, id);
    }
  }
}

void
sluice_test_slot_log_clear(SluiceTestSlotLog *log)
{
  g_clear_pointer(&log->ended, g_hash_table_unref);
  g_clear_pointer(&log->first_overrun, g_free);
}

guint
sluice_test_slot_log_count(const gchar *path)
{
  g_auto(GStrv) lines = read_lines(path);
  guint n = 0;

  for (guint i = 0; lines[i] != NULL; i++)
    n += lines[i][0] != '\0';
  return n;
}

gboolean
sluice_test_slot_log_running(const gchar *path, gint pid)
{
  g_auto(GStrv) lines = read_lines(path);
  gint open = 0;

  for (guint i = 0; lines[i] != NULL; i++) {
    gboolean start;
    gchar *id = NULL;
    gint p;

    if (parse(lines[i], &start, &id, &p) && p == pid)
      open += start ? 1 : -1;
    g_free(id);
  }
  return open > 0;
}
