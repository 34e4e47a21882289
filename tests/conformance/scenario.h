/* scenario.h - what the conformance scenarios share (scenario.c): the
 * factory, the recorder that task functions report to, the task functions
 * themselves, and the environment of one scenario (a broker made by the
 * factory on a fake clock, a registry, a client and a worker).
 *
 * The scenarios of docs/design.md live in files by topic (retry.c,
 * dead-letters.c, records.c, cancel.c, queue.c, periodic.c, workers.c,
 * stop.c, load.c, steering.c); conformance.c puts them in the suite. The
 * kit is built with hidden visibility, so these names stay inside it.
 */
#pragma once

#include "tests/conformance/conformance.h"

G_BEGIN_DECLS

extern const SluiceConformanceFactory *factory;

/* What task functions saw, reset by env_new(). */
typedef struct {
  GMutex lock;
  GCond cond;
  GHashTable *attempts; /* id -> GArray of guint (attempt * 1000 + retries) */
  guint runs;
  guint running;
  guint peak;
  guint at_gate;
  gboolean gate_open;
  gboolean broken;
  guint started_blockers;
  guint cancelled_seen;
  GPtrArray *order;       /* task ids in the order they started */
  GHashTable *deliveries; /* id -> delivery count of its last run */
  GHashTable *traces; /* id -> GPtrArray of "traceparent|tracestate" by run */
  guint suspects_running; /* t.watch runs with a delivery count >= 2 */
  guint beside_suspect;   /* t.watch runs that overlapped such a run */
} ConformanceRecorder;

extern ConformanceRecorder rec;

typedef struct {
  SluiceClock *clock;
  SluiceBroker *broker;
  SluiceRegistry *registry;
  SluiceTestHarness *h;
  SluiceClient *client;
  SluiceWorker *worker;
  gint64 t0;
} Env;

gboolean ordered(SluiceBroker *broker);
gint index_of_id(GPtrArray *ids, const gchar *id);
void rec_reset(void);
void rec_run(SluiceTaskContext *ctx);
guint runs_of(const gchar *id);
guint attempt_of(const gchar *id, guint i);
gchar *trace_of(const gchar *id, guint i);
guint total_runs(void);
void on_cancelled(GCancellable *cancellable, gpointer data);
gint64 arg_int(SluiceTaskContext *ctx, const gchar *key, gint64 fallback);
gboolean task_ok(SluiceTaskContext *ctx, gpointer data, GError **error);
gboolean task_fail(SluiceTaskContext *ctx, gpointer data, GError **error);
gboolean task_fatal(SluiceTaskContext *ctx, gpointer data, GError **error);
gboolean task_retry_in(SluiceTaskContext *ctx, gpointer data, GError **error);
gboolean task_flaky(SluiceTaskContext *ctx, gpointer data, GError **error);
gboolean task_long_error(SluiceTaskContext *ctx, gpointer data, GError **error);
gboolean task_broken_until_fixed(SluiceTaskContext *ctx, gpointer data,
                                 GError **error);
gboolean task_gate(SluiceTaskContext *ctx, gpointer data, GError **error);
gboolean task_blocker(SluiceTaskContext *ctx, gpointer data, GError **error);
gboolean task_busy(SluiceTaskContext *ctx, gpointer data, GError **error);
guint delivery_count_of(const gchar *id);
gboolean task_watch(SluiceTaskContext *ctx, gpointer data, GError **error);
gboolean task_stubborn(SluiceTaskContext *ctx, gpointer data, GError **error);
gboolean task_count(SluiceTaskContext *ctx, gpointer data, GError **error);
void add_task(Env *e, const gchar *name, SluiceTaskFunc func,
              const SluiceTaskOptions *options);
Env *env_new_full(guint dead_letter_max, const SluiceWorkerOptions *options);
void default_options(SluiceWorkerOptions *o);
Env *env_new(void);
void env_free(Env *e);
void run_idle(Env *e);
gchar *enqueue(Env *e, const gchar *task, const gchar *json_args,
               const SluiceEnqueueOptions *options);
SluiceTaskState state_of(Env *e, const gchar *id);
GPtrArray *dead_letters(Env *e);
SluiceDeadLetter *only_dead_letter(Env *e);
SluiceWorkerStats stats_of(Env *e);

#define ck_assert_state(e, id, want)                                           \
  do {                                                                         \
    SluiceTaskState _got = state_of(e, id);                                    \
    ck_assert_msg(_got == (want), "task %s: state %s, expected %s", (id),      \
                  sluice_task_state_to_string(_got),                           \
                  sluice_task_state_to_string(want));                          \
  } while (0)

/* The `running` record is written by the settler, shortly after the task
 * starts: wait for it (or for any @want) rather than expect it at once. */
#define ck_assert_state_soon(e, id, want)                                      \
  do {                                                                         \
    gint64 _deadline = g_get_monotonic_time() + 30 * G_USEC_PER_SEC;           \
    while (state_of(e, id) != (want) && g_get_monotonic_time() < _deadline)    \
      g_usleep(2000);                                                          \
    ck_assert_state(e, id, want);                                              \
  } while (0)

/* ---- 1. attempt is 1-based; retries = attempt - 1; a retry keeps its id -- */

void expect_next_attempt_after(Env *e, const gchar *id, gint64 delay);
gboolean blocker_started(gpointer n);
gboolean blocker_cancelled(gpointer n);
gboolean at_gate(gpointer n);
void open_gate(void);
gboolean runs_reached(gpointer n);
gboolean log_mentions(gpointer needle);
gboolean wait_until(gboolean (*check)(gpointer), gpointer data,
                    gint64 timeout_ms);

/* Each topic file adds its scenarios to the test cases it is given. */
void sluice_conformance__add_retry(TCase *semantics);
void sluice_conformance__add_dead_letters(TCase *semantics);
void sluice_conformance__add_records(TCase *semantics);
void sluice_conformance__add_cancel(TCase *semantics);
void sluice_conformance__add_stop(TCase *stop);
void sluice_conformance__add_load(TCase *load);
void sluice_conformance__add_queue(TCase *semantics);
void sluice_conformance__add_periodic(TCase *semantics);
void sluice_conformance__add_workers(TCase *semantics);
void sluice_conformance__add_steering(TCase *steer);
void sluice_conformance__add_seal(TCase *semantics);

G_END_DECLS
