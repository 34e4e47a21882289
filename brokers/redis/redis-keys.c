/* redis-keys.c - key names for the Redis brokers (see redis-keys.h).
 *
 * Nothing else in Sluice pastes key strings together: C code calls
 * sluice_redis_keys__append()/_make(), Lua scripts use the locals of the
 * prelude, brokers/redis/lua/prelude.lua. To add a key, add its
 * SLUICE_REDIS_K_* suffix to redis-keys.h, document it in the layout table
 * there, and add one line to the prelude (and to the check in
 * test-redis-fast.c); a per-task key must be written with a PX expiry.
 *
 * Why scripts build keys themselves instead of receiving them in KEYS:
 * promotion learns a message's queue only inside the script, so scripts
 * must be able to name keys anyway; passing just the partition prefix as
 * KEYS[1] routes every script to the partition's slot on Redis Cluster and
 * keeps each call's argument list short. Every key a script touches shares
 * the prefix's hash tag, so it is always in the slot KEYS[1] names.
 */
#include "config.h"

#include "brokers/redis/redis-keys.h"
#include "brokers/redis/net/redis-net.h"

gboolean
sluice_redis_keys__valid_namespace(const gchar *ns, GError **error)
{
  if (ns == NULL || ns[0] == '\0') {
    g_set_error_literal(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                        "the Redis namespace is empty: give a short name such "
                        "as “sluice”, or none for the default");
    return FALSE;
  }
  if (strlen(ns) > 256) {
    g_set_error_literal(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                        "the Redis namespace is longer than 256 bytes: every "
                        "key carries it, so choose a short one");
    return FALSE;
  }
  for (const gchar *p = ns; *p != '\0'; p++) {
    if (*p == '{' || *p == '}' || *p == '#' || g_ascii_iscntrl(*p)) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                  "the Redis namespace “%s” contains “%c”, which is not "
                  "allowed (braces make the hash tag, “#” is reserved for "
                  "partitions, control characters are refused): choose "
                  "another name",
                  ns, g_ascii_iscntrl(*p) ? '?' : *p);
      return FALSE;
    }
  }
  return TRUE;
}

void
sluice_redis_keys__init(SluiceRedisKeys *keys, const gchar *ns)
{
  g_return_if_fail(keys != NULL && ns != NULL);
  keys->ns = g_strdup(ns);
  keys->prefix = g_strdup_printf("{%s}:", ns);
  keys->prefix_len = strlen(keys->prefix);
  keys->slot = sluice_redis_slot__of_key(keys->prefix, keys->prefix_len);
}

/* The tries after which a partition takes its last tag, wherever it falls:
 * a range holds at least 16 of the 16384 slots, so a try lands in it with
 * odds of 1 in 1024 at worst, and this many tries all miss with odds below
 * 1e-40. */
#define PARTITION_TAG_TRIES 100000u

void
sluice_redis_keys__init_partition(SluiceRedisKeys *keys, const gchar *ns,
                                  guint index, guint n)
{
  /* Strictly inside its 1/n of the slot space: ceil(k S / n) up to, not
   * including, floor((k + 1) S / n), so that a partition never sits on a
   * boundary that redis-cli --cluster create may give either neighbour. */
  guint64 lo = ((guint64)index * SLUICE_REDIS_SLOTS + n - 1) / n;
  guint64 hi = ((guint64)(index + 1) * SLUICE_REDIS_SLOTS) / n;

  g_return_if_fail(keys != NULL && ns != NULL && n > 0 && index < n);
  keys->ns = g_strdup(ns);
  for (guint j = 0;; j++) {
    gchar *prefix = j == 0 ? g_strdup_printf("{%s#%u}:", ns, index)
                           : g_strdup_printf("{%s#%u.%u}:", ns, index, j);
    guint slot = sluice_redis_slot__of_key(prefix, strlen(prefix));

    if ((slot >= lo && slot < hi) || j == PARTITION_TAG_TRIES) {
      keys->prefix = prefix;
      keys->slot = slot;
      break;
    }
    g_free(prefix);
  }
  keys->prefix_len = strlen(keys->prefix);
}

void
sluice_redis_keys__clear(SluiceRedisKeys *keys)
{
  if (keys == NULL)
    return;
  g_clear_pointer(&keys->ns, g_free);
  g_clear_pointer(&keys->prefix, g_free);
  keys->prefix_len = 0;
}

gsize
sluice_redis_keys__append(const SluiceRedisKeys *keys, GString *buf,
                          const gchar *suffix, const gchar *name)
{
  gsize offset = buf->len;

  g_string_append_len(buf, keys->prefix, keys->prefix_len);
  g_string_append(buf, suffix);
  if (name != NULL)
    g_string_append(buf, name);
  return offset;
}

gchar *
sluice_redis_keys__make(const SluiceRedisKeys *keys, const gchar *suffix,
                        const gchar *name)
{
  return g_strconcat(keys->prefix, suffix, name, NULL);
}
