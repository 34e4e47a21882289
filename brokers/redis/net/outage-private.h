/* outage-private.h - the outage of one server: backoff between
 * reconnection attempts and the lines that say it went and came back
 * (outage.c; internal to brokers/redis/net/).
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/**
 * SluiceRedisOutage:
 *
 * Whether one server (one node of a pool) is out of reach, since when,
 * and when the next attempt to reach it may be made. Its own lock; safe
 * from any thread. Initialise with sluice_redis_outage__init().
 */
typedef struct {
  GMutex lock;
  const gchar *display;
  gint64 max_backoff_ms;
  gboolean active;
  gint64 since_us;        /* monotonic */
  gint64 next_attempt_us; /* monotonic; no attempt before this */
  gint64 backoff_ms;      /* the next pause after a failed attempt */
} SluiceRedisOutage;

/**
 * sluice_redis_outage__init:
 * @display: (transfer none): the server's URL as it may be shown, for the
 *   log lines; must outlive @outage
 * @max_backoff_ms: > 0: the longest pause between attempts
 */
void sluice_redis_outage__init(SluiceRedisOutage *outage, const gchar *display,
                               gint64 max_backoff_ms);
void sluice_redis_outage__clear(SluiceRedisOutage *outage);

/**
 * sluice_redis_outage__may_try:
 * @out_wait_ms: (out): on FALSE, how long until the next attempt
 *
 * Whether the calling thread may try to connect now. Outside an outage
 * always; during one, one thread per backoff period (this call claims the
 * period's attempt), so that threads do not pile up connection attempts.
 */
gboolean sluice_redis_outage__may_try(SluiceRedisOutage *outage,
                                      gint64 *out_wait_ms);

/** sluice_redis_outage__active: Returns: TRUE during an outage. */
gboolean sluice_redis_outage__active(SluiceRedisOutage *outage);

/**
 * sluice_redis_outage__lost:
 * A connection that worked failed (@reason): the server may be gone, or
 * just this connection, so the next attempt may be made at once. Starts
 * an outage (one line) if none is under way.
 */
void sluice_redis_outage__lost(SluiceRedisOutage *outage, const gchar *reason);

/**
 * sluice_redis_outage__failed:
 * An attempt to connect failed (@reason): starts an outage (one line) if
 * none is under way, and puts the next attempt one backoff period away
 * (100 ms, doubling up to the maximum).
 */
void sluice_redis_outage__failed(SluiceRedisOutage *outage,
                                 const gchar *reason);

/** sluice_redis_outage__ended: a connection was made: ends the outage (one
 * line, with how long it lasted) and resets the backoff. */
void sluice_redis_outage__ended(SluiceRedisOutage *outage);

G_END_DECLS
