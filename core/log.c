/* log.c - structured log lines with the task's id, name, queue and attempt.
 *
 * The fields are those of sluice-private.h. The CLI installs a writer that
 * sends them to journald or prints them as JSON; library users get GLib's
 * default writer unless they install their own.
 */
#include "config.h"

#include "core/sluice-private.h"

static void
log_fields(GLogLevelFlags level, const gchar *task_id, const gchar *task,
           const gchar *queue, guint attempt, const gchar *message)
{
  GLogField fields[7];
  gsize n = 0;
  gchar attempt_text[16];
  g_autofree gchar *escaped = NULL;

  /* A message may quote what a task or a message said; whatever reads the
   * log (a terminal, journald, a JSON log) gets valid UTF-8. */
  if (G_UNLIKELY(!g_utf8_validate(message, -1, NULL)))
    message = escaped = sluice_text__escape(message, -1, 0);

  fields[n++] = (GLogField){"GLIB_DOMAIN", G_LOG_DOMAIN, -1};
  fields[n++] = (GLogField){"MESSAGE", message, -1};
  if (task_id != NULL)
    fields[n++] = (GLogField){"SLUICE_TASK_ID", task_id, -1};
  if (task != NULL)
    fields[n++] = (GLogField){"SLUICE_TASK", task, -1};
  if (queue != NULL)
    fields[n++] = (GLogField){"SLUICE_QUEUE", queue, -1};
  if (attempt > 0) {
    g_snprintf(attempt_text, sizeof attempt_text, "%u", attempt);
    fields[n++] = (GLogField){"SLUICE_ATTEMPT", attempt_text, -1};
  }
  g_log_structured_array(level, fields, n);
}

void
sluice_log__message(GLogLevelFlags level, const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *message = NULL;

  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  log_fields(level, NULL, NULL, NULL, 0, message);
}

void
sluice_log__task(GLogLevelFlags level, const gchar *task_id, const gchar *task,
                 const gchar *queue, guint attempt, const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *message = NULL;

  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  log_fields(level, task_id, task, queue, attempt, message);
}
