/* web-api.h - what the API's two files share (internal to `sluice web`):
 * web-answers.c answers and reads parameters, web-api.c serves the reads
 * and dispatches, web-writes.c carries out the writes. Every function that
 * takes @msg answers it itself.
 */
#pragma once

#include "cli/web.h"

G_BEGIN_DECLS

/* ---- Answers (web-answers.c) ---- */
/* The headers every answer carries (CSP, nosniff, no framing, no-store). */
void web_security_headers(SoupServerMessage *msg);
/* @json as the body with @status and the security headers. */
void web_respond_json(SoupServerMessage *msg, guint status, CliJson *json);
/* {"error": @text} with @status. */
void web_respond_message(SoupServerMessage *msg, guint status,
                         const gchar *text);
/* @error as a JSON error, with the status web_status_for() maps it to. */
void web_respond_error(SoupServerMessage *msg, const GError *error);
/* 400 for bad input, 404 for what is not there, 503 for a broker that
 * cannot be reached, 500 otherwise. */
guint web_status_for(const GError *error);

/* ---- Parameters (web-answers.c) ---- */
/* A parameter, or NULL when absent or empty. */
const gchar *web_param(GHashTable *params, const gchar *name);
/* limit= (default 50, at most 1000): FALSE with an error if malformed. */
gboolean web_param_limit(GHashTable *params, guint *out, GError **error);
/* A parameter that must be there: FALSE with an error naming it if not. */
gboolean web_param_required(GHashTable *params, const gchar *name,
                            const gchar **out, GError **error);
/* The reason= and task= filters of a dead-letter page or bulk action. */
gboolean web_dead_filters(GHashTable *params, const gchar **reason,
                          const gchar **task, GError **error);

/* ---- Events (web-events.c) ---- */
/* GET /api/events?cursor=&limit=: a page of the lifecycle events. */
void web_get_events(Web *web, SoupServerMessage *msg, GHashTable *query);

/* ---- Workflows (web-workflows.c) ---- */
/* GET /api/workflows/@id: its counts and tree. */
void web_get_workflow(Web *web, SoupServerMessage *msg, const gchar *id);

/* ---- Writes (web-writes.c) ---- */
/* TRUE when a write may run; otherwise it has answered 403 and why. */
gboolean web_may_write(Web *web, SoupServerMessage *msg);
/* POST /api/queues/pause|resume|purge. */
void web_post_queue(Web *web, SoupServerMessage *msg, const gchar *action,
                    GHashTable *form);
/* POST /api/tasks/delete|run-now. */
void web_post_task(Web *web, SoupServerMessage *msg, const gchar *action,
                   GHashTable *form);
/* POST /api/dead/replay|delete (@replay says which): one entry. */
void web_post_dead_one(Web *web, SoupServerMessage *msg, gboolean replay,
                       GHashTable *form);
/* POST /api/dead/replay-all|delete-all: the entries matching a filter,
 * if there are as many as the person confirmed. */
void web_post_dead_all(Web *web, SoupServerMessage *msg, gboolean replay,
                       GHashTable *form);

G_END_DECLS
