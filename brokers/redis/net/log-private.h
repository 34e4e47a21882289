/* log-private.h - the network layer's log lines (internal to
 * brokers/redis/net/).
 *
 * One structured line in the log domain "sluice", with the fields the
 * core's lines have (MESSAGE, PRIORITY): the same as sluice_broker_log()
 * with no broker, written here because the layer knows nothing of the
 * broker contract (<sluice/sys/broker.h>).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

static inline void sluice_redis_net__log(GLogLevelFlags level,
                                         const gchar *format, ...)
    G_GNUC_PRINTF(2, 3);

static inline void
sluice_redis_net__log(GLogLevelFlags level, const gchar *format, ...)
{
  va_list ap;
  gchar *message;
  GLogField fields[3];

  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  fields[0] = (GLogField){"GLIB_DOMAIN", G_LOG_DOMAIN, -1};
  /* syslog's priority, as journald needs it: g_log_structured_array()
   * adds none. */
  fields[1] =
      (GLogField){"PRIORITY",
                  (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_WARNING)) ? "4"
                  : (level & G_LOG_LEVEL_MESSAGE)                        ? "5"
                  : (level & G_LOG_LEVEL_INFO)                           ? "6"
                                                                         : "7",
                  -1};
  fields[2] = (GLogField){"MESSAGE", message, -1};
  g_log_structured_array(level, fields, G_N_ELEMENTS(fields));
  g_free(message);
}

G_END_DECLS
