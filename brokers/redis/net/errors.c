/* errors.c - what a Redis error reply says went wrong, as a GError that
 * tells the user what to do (see errors-private.h; users of the layer call
 * it through sluice_redis_reply__check() and its siblings in redis-net.h).
 *
 * An error reply maps to a broker error code by its first word; a NOPERM
 * names the command to grant, and for a script, Redis only names the
 * refused line, so the command is found on that line of the script's text.
 * The namespace a permission message names is a plain string its owner
 * gives the pool (sluice_redis_pool__set_namespace()). New error codes
 * belong in sluice_redis_error__check().
 */
#include "config.h"

#include <string.h>

#include "brokers/redis/net/errors-private.h"
#include "serializers/text.h"

static gboolean
has_prefix(const redisReply *reply, const gchar *prefix)
{
  return reply->len >= strlen(prefix) &&
         strncmp(reply->str, prefix, strlen(prefix)) == 0;
}

/* "config|get" -> "CONFIG GET". */
static gchar *
command_name(const gchar *acl_name, gsize len)
{
  gchar *name = g_ascii_strup(acl_name, (gssize)len);

  g_strdelimit(name, "|", ' ');
  return name;
}

/* The commands a line of a Lua script calls: "XADD", "XGROUP CREATE". */
static gchar *
commands_on_line(const gchar *line, gsize len)
{
  GString *names = g_string_new(NULL);
  const gchar *end = line + len;

  for (const gchar *p = line; p < end;) {
    const gchar *call = g_strstr_len(p, end - p, "call('");
    const gchar *name, *q;

    if (call == NULL)
      break;
    name = call + 6;
    q = memchr(name, '\'', (gsize)(end - name));
    if (q == NULL)
      break;
    if (names->len > 0)
      g_string_append(names, ", ");
    {
      g_autofree gchar *upper = g_ascii_strup(name, q - name);
      g_autofree gchar *shown = sluice_text__escape(upper, -1, 40);
      g_string_append(names, shown);
    }
    /* A literal second word of a container command is its subcommand. */
    if (g_str_has_prefix(q, "', '")) {
      const gchar *sub = q + 4;
      const gchar *sub_end = memchr(sub, '\'', (gsize)(end - sub));
      gboolean word = sub_end != NULL && sub_end > sub;

      for (const gchar *c = sub; word && c < sub_end; c++)
        word = g_ascii_isupper(*c);
      if (word) {
        g_autofree gchar *shown = sluice_text__escape(sub, sub_end - sub, 40);
        g_string_append_printf(names, " %s", shown);
      }
    }
    p = q + 1;
  }
  if (names->len == 0) {
    g_string_free(names, TRUE);
    return NULL;
  }
  return g_string_free(names, FALSE);
}

/* What a NOPERM (or a script's permission) error says is missing, as a
 * phrase that follows "may not". */
static gchar *
missing_permission(const gchar *ns, const redisReply *reply,
                   const SluiceRedisScriptInfo *script)
{
  const gchar *msg = reply->str != NULL ? reply->str : "";
  const gchar *run = strstr(msg, "to run the '");
  g_autofree gchar *grant = NULL;

  grant = ns != NULL ? g_strdup_printf("~{%s}:* and &{%s}:*", ns, ns)
                     : g_strdup("~{<namespace>}:* and &{<namespace>}:*");
  if (run != NULL) {
    const gchar *name = run + strlen("to run the '");
    const gchar *q = strchr(name, '\'');

    if (q != NULL) {
      g_autofree gchar *command = command_name(name, q - name);
      g_autofree gchar *acl = g_ascii_strdown(name, q - name);
      g_autofree gchar *shown = sluice_text__escape(command, -1, 60);
      g_autofree gchar *rule = sluice_text__escape(acl, -1, 60);

      return g_strdup_printf("run %s (grant it with ACL SETUSER <user> +%s)",
                             shown, rule);
    }
  }
  if (strstr(msg, "keys") != NULL)
    return g_strdup_printf("access a key it needs (grant the namespace's "
                           "keys and channels: %s)",
                           grant);
  if (strstr(msg, "channel") != NULL)
    return g_strdup_printf("use a channel it needs (grant the namespace's "
                           "keys and channels: %s)",
                           grant);
  if (strstr(msg, "can't run this command") != NULL) {
    const gchar *at = strstr(msg, "@user_script:");
    guint64 line_no = 0;

    /* Redis names the line of the script, not the command: find it. */
    if (at != NULL && script != NULL && script->text != NULL)
      line_no = g_ascii_strtoull(at + strlen("@user_script:"), NULL, 10);
    if (line_no > 0) {
      const gchar *line = script->text;

      for (guint64 n = 1; n < line_no && line != NULL; n++) {
        line = strchr(line, '\n');
        if (line != NULL)
          line++;
      }
      if (line != NULL) {
        const gchar *eol = strchr(line, '\n');
        g_autofree gchar *names = commands_on_line(
            line, eol != NULL ? (gsize)(eol - line) : strlen(line));

        if (names != NULL)
          return g_strdup_printf(
              "run %s, which line %" G_GUINT64_FORMAT
              " of Sluice's %s script calls (grant it with ACL SETUSER "
              "<user> +<command>)",
              names, line_no, script->name);
      }
    }
    return g_strdup_printf("run a command that Sluice's %s script calls "
                           "(ACL LOG on the server names it)",
                           script != NULL ? script->name : "Lua");
  }
  return g_strdup_printf("do what Sluice needs (grant the commands of its "
                         "role, and %s)",
                         grant);
}

gboolean
sluice_redis_error__check(const gchar *url, const gchar *ns,
                          const redisReply *reply, const gchar *what,
                          const SluiceRedisScriptInfo *script, GError **error)
{
  const gchar *msg;

  if (reply == NULL || reply->type != REDIS_REPLY_ERROR)
    return TRUE;
  msg = reply->str != NULL ? reply->str : "";

  if (has_prefix(reply, "OOM")) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FULL,
                "%s refused: Redis at %s is out of memory (maxmemory "
                "reached) and takes no new work until workers drain the "
                "queues or maxmemory is raised (%s)",
                what, url, msg);
  } else if (has_prefix(reply, "NOAUTH")) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH,
                "Redis at %s requires a password: put it in the URL "
                "(redis://:password@host, or redis://user:password@host for "
                "an ACL user)",
                url);
  } else if (has_prefix(reply, "WRONGPASS") || has_prefix(reply, "ERR AUTH") ||
             has_prefix(reply, "ERR invalid password") ||
             has_prefix(reply, "ERR invalid username")) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH,
                "Redis at %s refused the user or password of the URL (%s): "
                "check the credentials (percent-encode special characters)",
                url, msg);
  } else if (has_prefix(reply, "NOPERM") ||
             has_prefix(reply, "ERR The user executing the script can't")) {
    g_autofree gchar *missing = missing_permission(ns, reply, script);
    g_autofree gchar *said = sluice_text__escape(msg, -1, 300);

    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_AUTH,
                "%s refused: the Redis user of %s may not %s (Redis said: "
                "%s); docs/security.md and sluice(1) (\"Least privilege\") "
                "list the ACL each role needs",
                what, url, missing, said);
  } else if (has_prefix(reply, "MISCONF")) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "%s refused: Redis at %s cannot persist to disk and refuses "
                "writes; check its log, its dir and free disk space (%s)",
                what, url, msg);
  } else if (has_prefix(reply, "LOADING") || has_prefix(reply, "BUSY") ||
             has_prefix(reply, "MASTERDOWN") || has_prefix(reply, "TRYAGAIN") ||
             has_prefix(reply, "CLUSTERDOWN")) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "%s: Redis at %s cannot serve now (%s); retry shortly", what,
                url, msg);
  } else if (has_prefix(reply, "MOVED ") || has_prefix(reply, "ASK ")) {
    /* A redis+cluster:// broker follows these and only gives up on a slot
     * that keeps moving; a redis:// URL may name a cluster node. */
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "%s: Redis at %s sent the namespace's keys to another Redis "
                "Cluster node (%s): name a cluster with a redis+cluster:// "
                "URL, or, if it is one, its slot is moving: retry shortly",
                what, url, msg);
  } else if (has_prefix(reply, "READONLY")) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNAVAILABLE,
                "%s refused: Redis at %s is a read-only replica (%s); point "
                "the URL at the primary",
                what, url, msg);
  } else {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
                "%s failed on Redis at %s: %s", what, url, msg);
  }
  return FALSE;
}
