/* sluice-trace.h - a producer's W3C trace context, carried by its messages.
 *
 * A message carries the trace context of the code that enqueued it in two
 * of its headers, named as the W3C Trace Context HTTP headers:
 *
 *   traceparent  "00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>"
 *   tracestate   vendor entries, "key=value,key=value" (optional)
 *
 * The producer sets them on the enqueue options' headers, or has the
 * client add them from the enqueuing thread's current span through
 * SluiceClientOptions.headers_hook. The client refuses a malformed one
 * (SLUICE_CLIENT_ERROR_INVALID, saying what is wrong) rather than let it
 * break every trace it would have joined. A retry, a deferral, a release
 * and a dead-letter replay keep the headers, so every attempt of a task
 * belongs to its producer's trace. The task reads them with
 * sluice_task_context_get_header(), and every log line the worker writes
 * about the task carries SLUICE_TRACEPARENT and SLUICE_TRACE_ID
 * (sluice_task_context_log() gives the task's own lines the same fields).
 * docs/observability.md shows how to continue the trace in OpenTelemetry.
 */
#pragma once

#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

#define SLUICE_HEADER_TRACEPARENT "traceparent"
#define SLUICE_HEADER_TRACESTATE "tracestate"

/**
 * sluice_trace_context_check:
 * @traceparent: (nullable): a traceparent value
 * @tracestate: (nullable): a tracestate value
 *
 * Checks both against the W3C Trace Context (level 1) format: traceparent
 * is version-traceid-parentid-flags in lower-case hex, a version other
 * than ff, a trace id and a parent id that are not all zeros (version 00
 * is exactly 55 characters; a later version may append "-..." fields);
 * tracestate is at most 512 characters and 32 comma-separated members of
 * key=value with the keys and values the format allows, and needs a
 * traceparent. NULL means absent.
 * Returns: TRUE, or FALSE and SLUICE_CLIENT_ERROR_INVALID naming what is
 * wrong.
 */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_trace_context_check(const gchar *traceparent,
                                    const gchar *tracestate, GError **error);

G_END_DECLS
