/* log-capture.c - see log-capture.h. */
#include "config.h"

#include <string.h>

#include "tests/helpers/log-capture.h"

static GMutex log_lock;
static GString *log_text;
static gchar *delay_needle; /* under log_lock */
static guint delay_ms;

static gboolean
delayed(const GLogField *fields, gsize n_fields)
{
  gboolean yes = FALSE;

  g_mutex_lock(&log_lock);
  for (gsize i = 0; delay_needle != NULL && i < n_fields; i++)
    if (g_strcmp0(fields[i].key, "MESSAGE") == 0 && fields[i].length < 0 &&
        strstr(fields[i].value, delay_needle) != NULL)
      yes = TRUE;
  g_mutex_unlock(&log_lock);
  return yes;
}

static GLogWriterOutput
capture_writer(GLogLevelFlags level, const GLogField *fields, gsize n_fields,
               gpointer user_data)
{
  if (delayed(fields, n_fields))
    g_usleep((gulong)delay_ms * 1000);
  g_mutex_lock(&log_lock);
  if (log_text == NULL)
    log_text = g_string_new(NULL);
  for (gsize i = 0; i < n_fields; i++) {
    if (g_strcmp0(fields[i].key, "MESSAGE") == 0) {
      if (fields[i].length < 0)
        g_string_append(log_text, fields[i].value);
      else
        g_string_append_len(log_text, fields[i].value, fields[i].length);
      g_string_append_c(log_text, '\n');
    }
  }
  g_mutex_unlock(&log_lock);
  return g_log_writer_default(level, fields, n_fields, user_data);
}

void
sluice_test_log_capture_install(void)
{
  g_log_set_writer_func(capture_writer, NULL, NULL);
}

void
sluice_test_log_capture_delay(const gchar *needle, guint ms)
{
  g_mutex_lock(&log_lock);
  g_free(delay_needle);
  delay_needle = g_strdup(needle);
  delay_ms = ms;
  g_mutex_unlock(&log_lock);
}

void
sluice_test_log_capture_reset(void)
{
  g_mutex_lock(&log_lock);
  if (log_text != NULL)
    g_string_truncate(log_text, 0);
  g_mutex_unlock(&log_lock);
}

gboolean
sluice_test_log_capture_contains(const gchar *needle)
{
  return sluice_test_log_capture_count(needle) > 0;
}

guint
sluice_test_log_capture_count(const gchar *needle)
{
  guint n = 0;

  g_return_val_if_fail(needle != NULL && *needle != '\0', 0);
  g_mutex_lock(&log_lock);
  for (const gchar *p = log_text != NULL ? log_text->str : NULL;
       p != NULL && (p = strstr(p, needle)) != NULL; p += strlen(needle))
    n++;
  g_mutex_unlock(&log_lock);
  return n;
}
