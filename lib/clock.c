/* clock.c - the injectable clock (see sluice-clock.h).
 *
 * A real clock reads g_get_real_time(). A fake clock holds a time that only
 * sluice_clock_advance() moves; every move runs the registered watches, so
 * the threads that sleep until a due time (the worker's promoter and timeout
 * watchdog) re-evaluate at once instead of waiting for real time.
 *
 * Watches run outside the clock's data lock but inside a recursive
 * dispatch lock: sluice_clock_remove_watch() takes that lock too, so once it
 * returns the watch cannot be running, and its user data may be freed.
 */
#include "config.h"

#include "lib/sluice-private.h"

typedef struct {
  guint id;
  SluiceClockWatchFunc func;
  gpointer user_data;
} ClockWatch;

struct _SluiceClock {
  gatomicrefcount ref_count;
  gboolean fake;
  GMutex lock;        /* guards now_ms, watches, next_watch_id */
  GRecMutex dispatch; /* held while watches run */
  gint64 now_ms;
  GArray *watches; /* ClockWatch */
  guint next_watch_id;
};

static SluiceClock *
clock_new(gboolean fake, gint64 start_ms)
{
  SluiceClock *clock = g_new0(SluiceClock, 1);

  g_atomic_ref_count_init(&clock->ref_count);
  clock->fake = fake;
  g_mutex_init(&clock->lock);
  g_rec_mutex_init(&clock->dispatch);
  clock->now_ms = start_ms;
  clock->watches = g_array_new(FALSE, FALSE, sizeof(ClockWatch));
  clock->next_watch_id = 1;
  return clock;
}

SluiceClock *
sluice_clock_new_real(void)
{
  return clock_new(FALSE, 0);
}

SluiceClock *
sluice_clock_new_fake(gint64 start_ms)
{
  g_return_val_if_fail(start_ms >= 0, NULL);
  return clock_new(TRUE, start_ms);
}

SluiceClock *
sluice_clock_ref(SluiceClock *clock)
{
  g_return_val_if_fail(clock != NULL, NULL);
  g_atomic_ref_count_inc(&clock->ref_count);
  return clock;
}

void
sluice_clock_unref(SluiceClock *clock)
{
  if (clock == NULL || !g_atomic_ref_count_dec(&clock->ref_count))
    return;
  g_array_unref(clock->watches);
  g_rec_mutex_clear(&clock->dispatch);
  g_mutex_clear(&clock->lock);
  g_free(clock);
}

gint64
sluice_clock_now_ms(SluiceClock *clock)
{
  gint64 now;

  g_return_val_if_fail(clock != NULL, 0);
  if (!clock->fake)
    return g_get_real_time() / 1000;
  g_mutex_lock(&clock->lock);
  now = clock->now_ms;
  g_mutex_unlock(&clock->lock);
  return now;
}

gboolean
sluice_clock_is_fake(SluiceClock *clock)
{
  g_return_val_if_fail(clock != NULL, FALSE);
  return clock->fake;
}

static void
run_watches(SluiceClock *clock, gint64 now)
{
  g_autoptr(GArray) snapshot = NULL;

  g_rec_mutex_lock(&clock->dispatch);
  g_mutex_lock(&clock->lock);
  snapshot = g_array_copy(clock->watches);
  g_mutex_unlock(&clock->lock);
  for (guint i = 0; i < snapshot->len; i++) {
    ClockWatch *watch = &g_array_index(snapshot, ClockWatch, i);
    watch->func(clock, now, watch->user_data);
  }
  g_rec_mutex_unlock(&clock->dispatch);
}

void
sluice_clock_advance(SluiceClock *clock, gint64 delta_ms)
{
  gint64 now;

  g_return_if_fail(clock != NULL);
  g_return_if_fail(clock->fake);
  g_return_if_fail(delta_ms >= 0);

  g_mutex_lock(&clock->lock);
  clock->now_ms += delta_ms;
  now = clock->now_ms;
  g_mutex_unlock(&clock->lock);
  run_watches(clock, now);
}

guint
sluice_clock_add_watch(SluiceClock *clock, SluiceClockWatchFunc func,
                       gpointer user_data)
{
  ClockWatch watch;

  g_return_val_if_fail(clock != NULL, 0);
  g_return_val_if_fail(func != NULL, 0);

  g_mutex_lock(&clock->lock);
  watch.id = clock->next_watch_id++;
  watch.func = func;
  watch.user_data = user_data;
  g_array_append_val(clock->watches, watch);
  g_mutex_unlock(&clock->lock);
  return watch.id;
}

void
sluice_clock_remove_watch(SluiceClock *clock, guint watch_id)
{
  g_return_if_fail(clock != NULL);

  /* Taking the dispatch lock waits out a run of the watches in progress. */
  g_rec_mutex_lock(&clock->dispatch);
  g_mutex_lock(&clock->lock);
  for (guint i = 0; i < clock->watches->len; i++) {
    if (g_array_index(clock->watches, ClockWatch, i).id == watch_id) {
      g_array_remove_index(clock->watches, i);
      break;
    }
  }
  g_mutex_unlock(&clock->lock);
  g_rec_mutex_unlock(&clock->dispatch);
}
