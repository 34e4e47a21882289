/* slot-log.h - reads the start and end lines that worker-proc's t.slotted
 * writes, to check a concurrency limit across worker processes.
 *
 * The log's line order is the order the lines were written (each is one
 * O_APPEND write), and a slot is held from before a start line to after
 * its end line, so "how many had started and not ended" at each line is a
 * lower bound of the slots held then: it must never pass the limit.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  guint peak;           /* most running at once, over the whole log */
  guint peak_after;     /* the same, from line @after on */
  guint lines;          /* lines read */
  GHashTable *ended;    /* task id set: those with an end line (owned) */
  gchar *first_overrun; /* (nullable): the line where the limit was passed */
} SluiceTestSlotLog;

/**
 * sluice_test_slot_log_read:
 * @path: the log
 * @limit: the concurrency limit
 * @killed_pid: a worker killed during the run, or 0: its runs that never
 *   ended are left out (its slot lapses with its lease, unseen)
 * @after: where peak_after starts counting (a line number)
 * @out: (out caller-allocates): filled; clear with
 *   sluice_test_slot_log_clear()
 */
void sluice_test_slot_log_read(const gchar *path, guint limit, gint killed_pid,
                               guint after, SluiceTestSlotLog *out);
void sluice_test_slot_log_clear(SluiceTestSlotLog *log);
/* Returns: how many lines @path holds now. */
guint sluice_test_slot_log_count(const gchar *path);
/* Returns: whether a run of @pid has started and not ended yet. */
gboolean sluice_test_slot_log_running(const gchar *path, gint pid);

G_END_DECLS
