/* sluice-private.h - internals shared by the core, the serializers and the
 * brokers. Never installed.
 *
 * Semi-private functions are named sluice_<module>__<verb> (two
 * underscores): callable across files of the library, not by users.
 */
#pragma once

#ifndef SLUICE_COMPILATION
#error "sluice-private.h is internal to libsluice"
#endif

#include <sluice/sluice-broker.h>
#include <sluice/sluice.h>

G_BEGIN_DECLS

/* ---- Structured logging --------------------------------------------------
 *
 * Every log line goes through g_log_structured_array() with the log domain
 * "sluice" and, where a task is concerned, the fields SLUICE_TASK_ID,
 * SLUICE_TASK, SLUICE_QUEUE and SLUICE_ATTEMPT, so journald (or a JSON log
 * writer) can filter by task. NULL fields are left out.
 */
void sluice_log__message(GLogLevelFlags level, const gchar *format, ...)
    G_GNUC_PRINTF(2, 3);
void sluice_log__task(GLogLevelFlags level, const gchar *task_id,
                      const gchar *task, const gchar *queue, guint attempt,
                      const gchar *format, ...) G_GNUC_PRINTF(6, 7);

/* ---- Brokers ---------------------------------------------------------------
 */

/* The class a broker instance was validated against (the core's copy). */
const SluiceBrokerClass *sluice_broker__get_class(SluiceBroker *broker);

G_END_DECLS
