/* sluice-clock.h - the injectable clock.
 *
 * Every due time, expiry, backoff and timeout in Sluice is read from a
 * SluiceClock, never from g_get_real_time() directly, so that a test can
 * replace real time by a fake clock and advance it: a retry backoff of 30 s
 * then takes no real time at all.
 *
 * Times are milliseconds since the Unix epoch (wall-clock time), because
 * they travel in envelopes between machines (an ETA means the same instant
 * for every worker).
 *
 * A fake clock only moves when sluice_clock_advance() is called. Components
 * that sleep until a due time (the promoter, the timeout watchdog) register a
 * watch with sluice_clock_add_watch() and are woken when it moves, so a test
 * never waits for real time to catch up.
 */
#pragma once

#include <sluice/sluice-macros.h>

G_BEGIN_DECLS

typedef struct _SluiceClock SluiceClock;

/**
 * SluiceClockWatchFunc:
 * @clock: the clock that moved
 * @now_ms: its new time
 * @user_data: as given to sluice_clock_add_watch()
 *
 * Called from the thread that called sluice_clock_advance(), after the clock
 * moved and without any Sluice lock held. Must not call
 * sluice_clock_remove_watch() on @clock.
 */
typedef void (*SluiceClockWatchFunc)(SluiceClock *clock, gint64 now_ms,
                                     gpointer user_data);

/**
 * sluice_clock_new_real:
 *
 * Returns: (transfer full): a clock that reads the system's wall clock.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceClock *sluice_clock_new_real(void);

/**
 * sluice_clock_new_fake:
 * @start_ms: the time the clock starts at, in ms since the epoch
 *
 * Returns: (transfer full): a clock that stands still until
 * sluice_clock_advance() moves it.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceClock *sluice_clock_new_fake(gint64 start_ms);

/** sluice_clock_ref: Returns: (transfer full) @clock, one reference more. */
SLUICE_AVAILABLE_IN_0_1
SluiceClock *sluice_clock_ref(SluiceClock *clock);

/** sluice_clock_unref: drops one reference; frees on the last. NULL-safe. */
SLUICE_AVAILABLE_IN_0_1
void sluice_clock_unref(SluiceClock *clock);

/** sluice_clock_now_ms: Returns: the clock's current time (ms since epoch). */
SLUICE_AVAILABLE_IN_0_1
gint64 sluice_clock_now_ms(SluiceClock *clock);

/** sluice_clock_is_fake: Returns: TRUE for a clock made by _new_fake(). */
SLUICE_AVAILABLE_IN_0_1
gboolean sluice_clock_is_fake(SluiceClock *clock);

/**
 * sluice_clock_advance:
 * @clock: a fake clock
 * @delta_ms: how far to move it forward (>= 0)
 *
 * Moves a fake clock and runs every watch. Calling it on a real clock is a
 * programming error (g_return_if_fail).
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_clock_advance(SluiceClock *clock, gint64 delta_ms);

/**
 * sluice_clock_add_watch:
 * @clock: any clock (watches on a real clock are never called)
 * @func: called each time a fake clock moves
 * @user_data: (nullable): passed to @func; not owned
 *
 * Returns: an id > 0 for sluice_clock_remove_watch().
 */
SLUICE_AVAILABLE_IN_0_1
guint sluice_clock_add_watch(SluiceClock *clock, SluiceClockWatchFunc func,
                             gpointer user_data);

/**
 * sluice_clock_remove_watch:
 *
 * Removes a watch. When this returns, the watch's function is not running
 * and will not run again, so @user_data may be freed.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_clock_remove_watch(SluiceClock *clock, guint watch_id);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceClock, sluice_clock_unref)

G_END_DECLS
