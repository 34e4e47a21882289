/* log.c - structured log lines with the task's id, name, queue, attempt
 * and trace context, the lines task code logs through its context
 * (sluice_task_context_log()), and the lines brokers log
 * (sluice_broker_log() in broker.c, sys/broker.h, writes them here).
 *
 * The fields are those of sluice-private.h, and SLUICE_BROKER for a
 * broker's line. The CLI installs a writer that sends them to journald or
 * prints them as JSON; library users get GLib's default writer unless they
 * install their own.
 */
#include "config.h"

#include <langinfo.h>
#include <locale.h>
#include <string.h>

#include "lib/sluice-private.h"

static const gchar *syslog_priority(GLogLevelFlags level);

/* ---- The charset of the lines --------------------------------------------
 *
 * The library's lines are UTF-8 (they quote names as “this”). GLib's
 * default writer converts each message to the charset of the C library's
 * locale, and a program that never called setlocale() runs in the "C"
 * locale, whose charset is ASCII: every “ came out as ?, on a terminal
 * that shows UTF-8 perfectly. What the terminal shows is what the
 * environment says (LC_ALL, LC_CTYPE, LANG): what setlocale(LC_ALL, "")
 * would have chosen. So while it logs from a program still entirely in the
 * "C" locale, the library's thread takes the environment's character type
 * for the length of the call (uselocale() is per thread: nothing else of
 * the program changes). A program that set a locale, or installed its own
 * writer, gets exactly what it asked for. */

/* The environment's LC_CTYPE value, as the C library resolves it. */
static const gchar *
environment_ctype_name(void)
{
  static const gchar *const vars[] = {"LC_ALL", "LC_CTYPE", "LANG"};

  for (gsize i = 0; i < G_N_ELEMENTS(vars); i++) {
    const gchar *v = g_getenv(vars[i]);
    if (v != NULL && *v != '\0')
      return v;
  }
  return NULL;
}

/* The environment's character type, or (locale_t)0 when it is the "C"
 * locale's anyway. */
static locale_t
environment_ctype(void)
{
  static gsize once = 0;
  static locale_t ctype = (locale_t)0;

  if (g_once_init_enter(&once)) {
    const gchar *name = environment_ctype_name();
    locale_t found = newlocale(LC_CTYPE_MASK, "", (locale_t)0);

    /* A UTF-8 locale named but not installed (common in containers):
     * the terminal still shows UTF-8, and C.UTF-8 is always there. */
    if (found == (locale_t)0 && name != NULL) {
      g_autofree gchar *lower = g_ascii_strdown(name, -1);
      if (strstr(lower, "utf-8") != NULL || strstr(lower, "utf8") != NULL)
        found = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    }
    if (found != (locale_t)0 &&
        strcmp(nl_langinfo_l(CODESET, found), "ANSI_X3.4-1968") == 0) {
      freelocale(found);
      found = (locale_t)0;
    }
    ctype = found;
    g_once_init_leave(&once, 1);
  }
  return ctype;
}

/* g_log_structured_array(), in the environment's charset when the program
 * never left the "C" locale. */
static void
write_fields(GLogLevelFlags level, const GLogField *fields, gsize n)
{
  const gchar *program = setlocale(LC_ALL, NULL);
  locale_t ctype = (locale_t)0;
  locale_t before = (locale_t)0;

  if (program != NULL &&
      (strcmp(program, "C") == 0 || strcmp(program, "POSIX") == 0) &&
      uselocale((locale_t)0) == LC_GLOBAL_LOCALE)
    ctype = environment_ctype();
  if (ctype != (locale_t)0)
    before = uselocale(ctype);
  g_log_structured_array(level, fields, n);
  if (ctype != (locale_t)0)
    uselocale(before);
}

/* A line of at most sizeof text - 1 bytes, built without printf: the
 * finish line runs once per task, and each g_snprintf() cost about a
 * thousand instructions of the worker's settler. */
typedef struct {
  gchar text[256];
  gsize len;
} LineBuf;

static void
line_add(LineBuf *b, const gchar *s)
{
  gsize n = strlen(s);

  n = MIN(n, sizeof b->text - 1 - b->len);
  memcpy(b->text + b->len, s, n);
  b->len += n;
  b->text[b->len] = '\0';
}

/* @v in decimal, at least @min_digits digits (zero-padded). */
static void
line_add_uint(LineBuf *b, guint64 v, guint min_digits)
{
  gchar digits[24];
  guint n = 0;

  do {
    digits[n++] = (gchar)('0' + v % 10);
    v /= 10;
  } while (v > 0 && n < sizeof digits);
  while (n < min_digits && n < sizeof digits)
    digits[n++] = '0';
  while (n > 0 && b->len < sizeof b->text - 1)
    b->text[b->len++] = digits[--n];
  b->text[b->len] = '\0';
}

/* The fields of a task's lines beyond its id, name, queue and attempt. */
typedef struct {
  const gchar *traceparent;
  gchar trace_id[33];
} TraceFields;

static void
trace_fields_of(const SluiceEnvelope *env, TraceFields *out)
{
  out->traceparent = sluice_trace__traceparent(env, out->trace_id);
}

static void
log_fields(GLogLevelFlags level, const gchar *task_id, const gchar *task,
           const gchar *queue, guint attempt, const TraceFields *trace,
           const gchar *message, const GLogField *extra, gsize n_extra)
{
  GLogField fields[16];
  gsize n = 0;
  LineBuf attempt_text = {.len = 0};
  g_autofree gchar *escaped = NULL;

  /* A message may quote what a task or a message said; whatever reads the
   * log (a terminal, journald, a JSON log) gets valid UTF-8. */
  if (G_UNLIKELY(!g_utf8_validate(message, -1, NULL)))
    message = escaped = sluice_text__escape(message, -1, 0);

  fields[n++] = (GLogField){"GLIB_DOMAIN", G_LOG_DOMAIN, -1};
  /* g_log_structured_array() adds no PRIORITY: the journal needs it. */
  fields[n++] = (GLogField){"PRIORITY", syslog_priority(level), -1};
  fields[n++] = (GLogField){"MESSAGE", message, -1};
  if (task_id != NULL)
    fields[n++] = (GLogField){"SLUICE_TASK_ID", task_id, -1};
  if (task != NULL)
    fields[n++] = (GLogField){"SLUICE_TASK", task, -1};
  if (queue != NULL)
    fields[n++] = (GLogField){"SLUICE_QUEUE", queue, -1};
  if (attempt > 0) {
    line_add_uint(&attempt_text, attempt, 1);
    fields[n++] = (GLogField){"SLUICE_ATTEMPT", attempt_text.text, -1};
  }
  if (trace != NULL && trace->traceparent != NULL) {
    fields[n++] = (GLogField){"SLUICE_TRACEPARENT", trace->traceparent, -1};
    fields[n++] = (GLogField){"SLUICE_TRACE_ID", trace->trace_id, -1};
  }
  for (gsize i = 0; i < n_extra && n < G_N_ELEMENTS(fields); i++)
    fields[n++] = extra[i];
  write_fields(level, fields, n);
}

void
sluice_log__message(GLogLevelFlags level, const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *message = NULL;

  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  log_fields(level, NULL, NULL, NULL, 0, NULL, message, NULL, 0);
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
  log_fields(level, task_id, task, queue, attempt, NULL, message, NULL, 0);
}

void
sluice_log__envelope(GLogLevelFlags level, const SluiceEnvelope *env,
                     const gchar *queue, const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *message = NULL;
  TraceFields trace;

  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  trace_fields_of(env, &trace);
  log_fields(level, env != NULL ? env->id : NULL,
             env != NULL ? env->task : NULL, queue,
             env != NULL ? env->attempt : 0, &trace, message, NULL, 0);
}

void
sluice_task_context_log(SluiceTaskContext *ctx, GLogLevelFlags level,
                        const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *message = NULL;

  g_return_if_fail(ctx != NULL);
  g_return_if_fail(format != NULL);
  /* A fatal level would abort the worker on a task's say-so. */
  g_return_if_fail((level & (G_LOG_LEVEL_ERROR | G_LOG_FLAG_FATAL)) == 0);
  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  sluice_log__envelope(level, ctx->envelope, ctx->envelope->queue, "%s",
                       message);
}

/* " in 1.234 ms" */
static void
line_add_ms(LineBuf *b, const gchar *before, gint64 us)
{
  line_add(b, before);
  line_add_uint(b, (guint64)us / 1000, 1);
  line_add(b, ".");
  line_add_uint(b, (guint64)us % 1000, 3);
  line_add(b, " ms");
}

void
sluice_log__finished(const SluiceEnvelope *env, const gchar *queue,
                     const gchar *outcome, const gchar *what,
                     gint64 duration_us, const gchar *then, gint64 delay_ms)
{
  const gchar *task = env != NULL ? env->task : NULL;
  LineBuf duration = {.len = 0};
  LineBuf delay = {.len = 0};
  LineBuf message = {.len = 0};
  GLogField extra[3];
  gsize n = 0;
  TraceFields trace;

  /* No allocation, no printf and no floating point: this runs once per
   * task. The run time and the delay are told apart in words, and the
   * outcome field is one word, so that key=value lines split on spaces
   * and commas keep it whole. */
  extra[n++] = (GLogField){"SLUICE_OUTCOME", outcome, -1};
  line_add(&message, task != NULL ? task : "task");
  line_add(&message, " ");
  line_add(&message, what);
  if (duration_us >= 0) {
    line_add_uint(&duration, (guint64)duration_us, 1);
    extra[n++] = (GLogField){"SLUICE_DURATION_US", duration.text, -1};
    line_add_ms(&message, " in ", duration_us);
  }
  if (then != NULL) {
    line_add(&message, "; ");
    line_add(&message, then);
    if (delay_ms >= 0) {
      line_add_uint(&delay, (guint64)delay_ms, 1);
      extra[n++] = (GLogField){"SLUICE_DELAY_MS", delay.text, -1};
      line_add(&message, " in ");
      line_add(&message, delay.text);
      line_add(&message, " ms");
    }
  }
  trace_fields_of(env, &trace);
  log_fields(G_LOG_LEVEL_INFO, env != NULL ? env->id : NULL, task, queue,
             env != NULL ? env->attempt : 0, &trace, message.text, extra, n);
}
/* syslog's priority for @level, as g_log_structured() would set it (GLib
 * does not export its own mapping). */
static const gchar *
syslog_priority(GLogLevelFlags level)
{
  if (level & G_LOG_LEVEL_ERROR)
    return "3";
  if (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING))
    return "4";
  if (level & G_LOG_LEVEL_MESSAGE)
    return "5";
  if (level & G_LOG_LEVEL_INFO)
    return "6";
  return "7";
}

void
sluice_log__broker(GLogLevelFlags level, const gchar *broker_name,
                   const gchar *message)
{
  GLogField fields[4];
  gsize n = 0;

  fields[n++] = (GLogField){"GLIB_DOMAIN", G_LOG_DOMAIN, -1};
  fields[n++] = (GLogField){"PRIORITY", syslog_priority(level), -1};
  fields[n++] = (GLogField){"MESSAGE", message, -1};
  if (broker_name != NULL)
    fields[n++] = (GLogField){"SLUICE_BROKER", broker_name, -1};
  write_fields(level, fields, n);
}
