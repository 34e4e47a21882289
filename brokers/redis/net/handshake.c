/* handshake.c - what every new connection says first (see
 * handshake-private.h).
 *
 * One pipelined round trip: AUTH (with the URL's ACL user when it has one;
 * never shown), SELECT when the database is not 0, and CLIENT ID, whose
 * answer is what a wakeup names in CLIENT UNBLOCK (node.c). A caller may
 * add one command to the same trip (the Sentinel router's ROLE) and read
 * its reply itself. hiredis 0.14 speaks RESP2 only, so there is no HELLO.
 *
 * To extend: connection-level setup that every user of the layer needs
 * (CLIENT SETNAME, HELLO 3 once replies are RESP3) belongs here; what only
 * one owner needs is its setup hook (sluice_redis_pool__set_setup()).
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/net/errors-private.h"
#include "brokers/redis/net/handshake-private.h"

gboolean
sluice_redis_handshake__run(SluiceRedisConn *conn, const SluiceRedisUrl *url,
                            const gchar *grant_ns, const gchar *probe,
                            redisReply **out_probe, gchar **reason,
                            GError **error)
{
  redisReply *replies[4] = {NULL, NULL, NULL, NULL};
  guint n = 0;
  guint auth_at = G_MAXUINT, select_at = G_MAXUINT, probe_at = G_MAXUINT;
  guint id_at;
  gboolean ok = FALSE;

  if (url->password != NULL) {
    const char *argv[3];
    size_t lens[3];
    int argc = 0;

    argv[argc] = "AUTH";
    lens[argc++] = 4;
    if (url->user != NULL) {
      argv[argc] = url->user;
      lens[argc++] = strlen(url->user);
    }
    argv[argc] = url->password;
    lens[argc++] = strlen(url->password);
    sluice_redis_conn__append(conn, argc, argv, lens);
    auth_at = n++;
  }
  if (url->db != 0) {
    gchar db[16];
    const char *argv[2] = {"SELECT", db};
    size_t lens[2];

    g_snprintf(db, sizeof db, "%d", url->db);
    lens[0] = 6;
    lens[1] = strlen(db);
    sluice_redis_conn__append(conn, 2, argv, lens);
    select_at = n++;
  }
  {
    const char *argv[2] = {"CLIENT", "ID"};
    size_t lens[2] = {6, 2};
    sluice_redis_conn__append(conn, 2, argv, lens);
    id_at = n++;
  }
  if (probe != NULL) {
    const char *argv[1] = {probe};
    size_t lens[1] = {strlen(probe)};
    sluice_redis_conn__append(conn, 1, argv, lens);
    probe_at = n++;
  }
  if (!sluice_redis_conn__transact(conn, n, replies, conn->setup_timeout_ms,
                                   reason))
    return FALSE;

  if (auth_at != G_MAXUINT &&
      !sluice_redis_error__check(url->display, grant_ns, replies[auth_at],
                                 "AUTH", NULL, error))
    goto out;
  if (select_at != G_MAXUINT && replies[select_at]->type == REDIS_REPLY_ERROR) {
    if (sluice_redis_reply__is_error_code(replies[select_at], "ERR"))
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "Redis at %s refused database %d (%s): use a database "
                  "number below its “databases” setting",
                  url->display, url->db, replies[select_at]->str);
    else
      sluice_redis_error__check(url->display, grant_ns, replies[select_at],
                                "SELECT", NULL, error);
    goto out;
  }
  if (!sluice_redis_error__check(url->display, grant_ns, replies[id_at],
                                 "CLIENT ID", NULL, error))
    goto out;
  if (replies[id_at]->type != REDIS_REPLY_INTEGER) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
                "Redis at %s answered CLIENT ID with something else than a "
                "number: is it a Redis server (7.0 or newer)?",
                url->display);
    goto out;
  }
  conn->client_id = replies[id_at]->integer;
  if (probe_at != G_MAXUINT && out_probe != NULL) {
    *out_probe = replies[probe_at];
    replies[probe_at] = NULL;
  }
  ok = TRUE;
out:
  sluice_redis_replies__free(replies, n);
  return ok;
}
