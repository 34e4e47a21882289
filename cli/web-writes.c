/* web-writes.c - the dashboard's write actions (POST /api/...) and the
 * checks before any of them runs: writes enabled, same origin, the token
 * (see web-api.c for the whole API and why each check).
 */
#include "config.h"

#include <string.h>

#include "cli/web-api.h"

/* ---- Writes -------------------------------------------------------------- */

gboolean
web_token_equal(const gchar *a, const gchar *b)
{
  guint8 da[32], db[32];
  gsize la = sizeof da, lb = sizeof db;
  g_autoptr(GChecksum) ca = g_checksum_new(G_CHECKSUM_SHA256);
  g_autoptr(GChecksum) cb = g_checksum_new(G_CHECKSUM_SHA256);
  guint8 diff = 0;

  g_checksum_update(ca, (const guchar *)a, (gssize)strlen(a));
  g_checksum_update(cb, (const guchar *)b, (gssize)strlen(b));
  g_checksum_get_digest(ca, da, &la);
  g_checksum_get_digest(cb, db, &lb);
  for (gsize i = 0; i < sizeof da; i++)
    diff |= (guint8)(da[i] ^ db[i]);
  return diff == 0;
}

/* Whether the request comes from this server's own pages: a browser
 * sends Origin with every POST and Sec-Fetch-Site with every request
 * (recent ones); a client that sends neither is not a browser, and
 * needs the token all the same. */
static gboolean
same_origin(const Web *web, SoupServerMessage *msg)
{
  SoupMessageHeaders *h = soup_server_message_get_request_headers(msg);
  const gchar *origin = soup_message_headers_get_one(h, "Origin");
  const gchar *site = soup_message_headers_get_one(h, "Sec-Fetch-Site");
  const gchar *host = soup_message_headers_get_one(h, "Host");

  if (site != NULL && strcmp(site, "same-origin") != 0)
    return FALSE;
  if (origin != NULL) {
    g_autofree gchar *own =
        host != NULL
            ? g_strconcat(web->https ? "https://" : "http://", host, NULL)
            : NULL;
    return own != NULL && g_ascii_strcasecmp(origin, own) == 0;
  }
  return TRUE;
}

/* Answers 403 and returns FALSE unless @msg may write. */
gboolean
web_may_write(Web *web, SoupServerMessage *msg)
{
  const gchar *token = soup_message_headers_get_one(
      soup_server_message_get_request_headers(msg), WEB_TOKEN_HEADER);

  if (web->read_only) {
    web_respond_message(msg, SOUP_STATUS_FORBIDDEN,
                        "this dashboard is read-only (sluice web --read-only)");
    return FALSE;
  }
  if (web->token == NULL) {
    web_respond_message(msg, SOUP_STATUS_FORBIDDEN,
                        "write actions are disabled: start sluice web with "
                        "--token-file FILE to enable them");
    return FALSE;
  }
  if (!same_origin(web, msg)) {
    web_respond_message(msg, SOUP_STATUS_FORBIDDEN,
                        "refused: a write must come from the dashboard's own "
                        "page (cross-origin request)");
    return FALSE;
  }
  if (token != NULL && token[0] == '\0')
    token = NULL;
  if (token == NULL || !web_token_equal(token, web->token)) {
    web_respond_message(msg, SOUP_STATUS_FORBIDDEN,
                        token == NULL
                            ? "give the token of --token-file in the "
                              "X-Sluice-Token header"
                            : "wrong token (X-Sluice-Token): it must be the "
                              "first line of the --token-file");
    return FALSE;
  }
  return TRUE;
}

static void
respond_done(SoupServerMessage *msg, const gchar *key, const gchar *value)
{
  g_autoptr(CliJson) json = cli_json_new();

  cli_json_begin_object(json);
  cli_json_key(json, "ok");
  cli_json_bool(json, TRUE);
  if (key != NULL) {
    cli_json_key(json, key);
    cli_json_string(json, value);
  }
  cli_json_end_object(json);
  web_respond_json(msg, SOUP_STATUS_OK, json);
}

void
web_post_queue(Web *web, SoupServerMessage *msg, const gchar *action,
               GHashTable *form)
{
  g_autoptr(GError) error = NULL;
  const gchar *queue;
  guint64 removed = 0;
  gboolean ok;

  if (!web_param_required(form, "queue", &queue, &error)) {
    web_respond_error(msg, error);
    return;
  }
  if (strcmp(action, "pause") == 0) {
    ok = sluice_client_pause(web->client, queue, &error);
  } else if (strcmp(action, "resume") == 0) {
    ok = sluice_client_resume(web->client, queue, &error);
  } else if (strcmp(action, "purge") == 0) {
    /* Deleting a queue's tasks takes its name typed again. */
    if (g_strcmp0(web_param(form, "confirm"), queue) != 0) {
      web_respond_message(msg, SOUP_STATUS_BAD_REQUEST,
                          "purging deletes every task waiting in the queue: "
                          "confirm with confirm=QUEUE");
      return;
    }
    ok = sluice_client_purge(web->client, queue, &removed, &error);
  } else {
    web_respond_message(msg, SOUP_STATUS_NOT_FOUND, "no such action");
    return;
  }
  if (!ok) {
    web_respond_error(msg, error);
    return;
  }
  g_info("dashboard: %s queue %s", action, queue);
  if (strcmp(action, "purge") == 0) {
    g_autoptr(CliJson) json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "ok");
    cli_json_bool(json, TRUE);
    cli_json_key(json, "removed");
    cli_json_int(json, (gint64)removed);
    cli_json_end_object(json);
    web_respond_json(msg, SOUP_STATUS_OK, json);
  } else {
    respond_done(msg, NULL, NULL);
  }
}

void
web_post_task(Web *web, SoupServerMessage *msg, const gchar *action,
              GHashTable *form)
{
  g_autoptr(GError) error = NULL;
  const gchar *id;

  if (!web_param_required(form, "id", &id, &error)) {
    web_respond_error(msg, error);
    return;
  }
  if (strcmp(action, "run-now") == 0) {
    if (!sluice_client_run_now(web->client, id, &error)) {
      web_respond_error(msg, error);
      return;
    }
    g_info("dashboard: run task %s now", id);
    respond_done(msg, NULL, NULL);
  } else if (strcmp(action, "delete") == 0) {
    static const gchar *const outcomes[] = {
        [SLUICE_DELETE_UNSCHEDULED] = "unscheduled",
        [SLUICE_DELETE_DEAD_LETTER] = "dead_letter",
        [SLUICE_DELETE_REVOKED] = "revoked",
        [SLUICE_DELETE_REMOVED] = "removed",
    };
    SluiceDeleteOutcome outcome = sluice_client_delete(web->client, id, &error);
    if (outcome == SLUICE_DELETE_FAILED) {
      web_respond_error(msg, error);
      return;
    }
    g_info("dashboard: delete task %s (%s)", id, outcomes[outcome]);
    respond_done(msg, "outcome", outcomes[outcome]);
  } else {
    web_respond_message(msg, SOUP_STATUS_NOT_FOUND, "no such action");
  }
}

void
web_post_dead_one(Web *web, SoupServerMessage *msg, gboolean replay,
                  GHashTable *form)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *task_id = NULL;
  const gchar *entry;
  gboolean ok;

  if (!web_param_required(form, "entry", &entry, &error)) {
    web_respond_error(msg, error);
    return;
  }
  ok = replay ? sluice_client_dlq_replay(web->client, entry, FALSE, &task_id,
                                         &error)
              : sluice_client_dlq_delete(web->client, entry, &error);
  if (!ok) {
    web_respond_error(msg, error);
    return;
  }
  g_info("dashboard: %s dead letter %s", replay ? "replay" : "delete", entry);
  respond_done(msg, "task_id", task_id);
}

void
web_post_dead_all(Web *web, SoupServerMessage *msg, gboolean replay,
                  GHashTable *form)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) entries = NULL;
  g_autoptr(CliJson) json = NULL;
  const gchar *reason, *task, *expect_text;
  guint64 expect;
  guint done = 0, gone = 0;

  if (!web_dead_filters(form, &reason, &task, &error) ||
      !web_param_required(form, "expect", &expect_text, &error) ||
      !cli_parse_count("expect", expect_text, 0, G_MAXUINT32, &expect,
                       &error) ||
      (entries = cli_dead_letter_snapshot(web->client, reason, task, &error)) ==
          NULL) {
    web_respond_error(msg, error);
    return;
  }
  if (entries->len != expect) {
    json = cli_json_new();
    cli_json_begin_object(json);
    cli_json_key(json, "error");
    cli_json_string(json, "the dead letters changed since they were counted: "
                          "confirm again with the new count");
    cli_json_key(json, "count");
    cli_json_int(json, entries->len);
    cli_json_end_object(json);
    web_respond_json(msg, SOUP_STATUS_CONFLICT, json);
    return;
  }
  for (guint i = 0; i < entries->len; i++) {
    const SluiceDeadLetter *e = entries->pdata[i];
    g_autoptr(GError) local = NULL;
    gboolean ok =
        replay ? sluice_client_dlq_replay(web->client, e->entry_id, FALSE, NULL,
                                          &local)
               : sluice_client_dlq_delete(web->client, e->entry_id, &local);
    if (ok) {
      done++;
    } else if (g_error_matches(local, SLUICE_CLIENT_ERROR,
                               SLUICE_CLIENT_ERROR_NOT_FOUND)) {
      gone++; /* replayed or deleted by someone else meanwhile */
    } else {
      g_autofree gchar *text = g_strdup_printf(
          "%s %u of %u dead letters, then: %s", replay ? "replayed" : "deleted",
          done, entries->len, local->message);
      web_respond_message(msg, web_status_for(local), text);
      return;
    }
  }
  g_info("dashboard: %s %u dead letters (reason %s, task %s)",
         replay ? "replay" : "delete", done, reason != NULL ? reason : "any",
         task != NULL ? task : "any");
  json = cli_json_new();
  cli_json_begin_object(json);
  cli_json_key(json, "ok");
  cli_json_bool(json, TRUE);
  cli_json_key(json, "done");
  cli_json_int(json, done);
  cli_json_key(json, "gone");
  cli_json_int(json, gone);
  cli_json_end_object(json);
  web_respond_json(msg, SOUP_STATUS_OK, json);
}
