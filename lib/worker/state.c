/* state.c - the reference that keeps a worker's state alive.
 *
 * The user's reference (sluice_worker_ref/unref, worker.c) stops the worker
 * when it goes; every thread, job and pending settlement holds a core
 * reference, so the state they touch outlives the stop until the last of
 * them lets go. This file is the bottom of the worker's files: it calls
 * none of them.
 */
#include "config.h"

#include "lib/worker/worker-private.h"

SluiceWorker *
sluice_worker__core_ref(SluiceWorker *worker)
{
  g_atomic_ref_count_inc(&worker->core_refs);
  return worker;
}

void
sluice_worker__core_unref(SluiceWorker *worker)
{
  if (!g_atomic_ref_count_dec(&worker->core_refs))
    return;
  sluice_metrics__clear(worker);
  sluice_worker__hooks_clear(worker);
  g_ptr_array_unref(worker->active_queues);
  g_ptr_array_unref(worker->periodics);
  g_hash_table_unref(worker->revoked);
  g_mutex_clear(&worker->revoke_lock);
  g_hash_table_unref(worker->repeated);
  g_mutex_clear(&worker->outage_lock);
  g_main_context_unref(worker->context);
  g_async_queue_unref(worker->settle_queue);
  g_ptr_array_unref(worker->executors);
  g_cond_clear(&worker->exec_cond);
  g_mutex_clear(&worker->exec_lock);
  g_rand_free(worker->rand);
  g_hash_table_unref(worker->jobs);
  g_cond_clear(&worker->cond);
  g_mutex_clear(&worker->lock);
  g_free(worker->id);
  g_strfreev(worker->queues);
  g_clear_pointer(&worker->queue_rates, g_hash_table_unref);
  g_clear_pointer(&worker->queue_slots, g_hash_table_unref);
  g_free(worker->weights);
  g_free(worker->wrr_current);
  sluice_clock_unref(worker->clock);
  sluice_registry_unref(worker->registry);
  sluice_keyring_unref(worker->options.keyring);
  sluice_broker_unref(worker->broker);
  g_free(worker);
}
