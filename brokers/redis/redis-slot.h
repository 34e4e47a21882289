/* redis-slot.h - Redis Cluster hash slots (internal).
 *
 * A key's slot is CRC16 (XMODEM) of its hash tag modulo 16384, as the
 * Cluster specification defines it: the tag is what lies between the first
 * '{' and the first '}' after it, when that is not empty; otherwise the
 * whole key. Every key of a namespace partition carries the tag "{ns}",
 * "{ns#k}" or "{ns#k.j}", so the partition's prefix alone names its slot.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

#define SLUICE_REDIS_SLOTS 16384

/**
 * sluice_redis_slot__of_key:
 * @key: (array length=len): a key, binary-safe
 *
 * Returns: the Redis Cluster slot of @key, 0 ... SLUICE_REDIS_SLOTS - 1.
 */
guint sluice_redis_slot__of_key(const gchar *key, gsize len);

G_END_DECLS
