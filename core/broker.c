/* broker.c - the one dispatch point per broker slot, and broker plumbing.
 *
 * The core never calls a slot of a broker directly: it calls the
 * sluice_broker_<slot>() functions below. Each checks its arguments, applies
 * the slot's documented fallback when the slot is NULL, and enforces the
 * GError rule (FALSE exactly when an error is set) so that a buggy broker is
 * reported where it misbehaves, not three frames later.
 *
 * Registration is sluice_broker_new(): the class is validated (version,
 * instance size, every required slot) and copied, as Redis copies module
 * type methods, so a broker built against an older version of the contract
 * reads NULL for the slots it does not know.
 *
 * When implementing a new broker, read sluice/sys/broker.h first; then run the
 * conformance suite (tests/conformance/) against it.
 */
#include "config.h"

#include <string.h>

#include "core/sluice-private.h"

/* The first argument is the quark's name, not an expression. */
/* clang-format off */
G_DEFINE_QUARK(sluice-broker-error-quark, sluice_broker_error)
/* clang-format on */

struct _SluiceBrokerPrivate {
  gatomicrefcount ref_count;
  SluiceBrokerClass klass; /* the validated copy */
  SluiceClock *clock;
};

/* The slots every broker must provide, by name for the error message. */
#define REQUIRED_SLOT(field)                                                   \
  {                                                                            \
    G_STRINGIFY(field), G_STRUCT_OFFSET(SluiceBrokerClass, field)              \
  }
static const struct {
  const gchar *name;
  glong offset;
} required_slots[] = {
    REQUIRED_SLOT(enqueue),          REQUIRED_SLOT(fetch),
    REQUIRED_SLOT(settle),           REQUIRED_SLOT(promote_due),
    REQUIRED_SLOT(cancel_scheduled), REQUIRED_SLOT(get_record),
    REQUIRED_SLOT(put_record),       REQUIRED_SLOT(revoke),
    REQUIRED_SLOT(list_revocations), REQUIRED_SLOT(dlq_list),
    REQUIRED_SLOT(dlq_get),          REQUIRED_SLOT(dlq_replay),
    REQUIRED_SLOT(dlq_delete),       REQUIRED_SLOT(stats),
    REQUIRED_SLOT(finalize),
};

/* The bytes of SluiceBrokerClass that a broker of @version defines. */
static gsize
class_size_of_version(guint32 version)
{
  if (version == 1)
    return G_STRUCT_OFFSET(SluiceBrokerClass, check);
  if (version == 2)
    return G_STRUCT_OFFSET(SluiceBrokerClass, put_records);
  if (version == 3)
    return G_STRUCT_OFFSET(SluiceBrokerClass, join_open);
  return sizeof(SluiceBrokerClass);
}

static gboolean
slot_missing(const SluiceBrokerClass *klass, glong offset)
{
  return G_STRUCT_MEMBER(gpointer, klass, offset) == NULL;
}

static gboolean
validate_class(const SluiceBrokerClass *klass, GError **error)
{
  const gchar *name = klass->name != NULL ? klass->name : "(unnamed)";

  if (klass->version == 0 || klass->version > SLUICE_BROKER_CLASS_VERSION) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_VERSION,
                "broker “%s” declares contract version %u, but this Sluice "
                "knows versions 1 to %u: rebuild the broker against this "
                "Sluice's sluice/sys/broker.h",
                name, klass->version, SLUICE_BROKER_CLASS_VERSION);
    return FALSE;
  }
  if (klass->name == NULL || klass->name[0] == '\0') {
    g_set_error_literal(error, SLUICE_BROKER_ERROR,
                        SLUICE_BROKER_ERROR_INCOMPLETE,
                        "a broker class has no name: set .name");
    return FALSE;
  }
  if (klass->instance_size < sizeof(SluiceBroker)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INVALID,
                "broker “%s” has instance_size %" G_GSIZE_FORMAT
                ", smaller than SluiceBroker: set .instance_size to the size "
                "of the struct that embeds SluiceBroker first",
                name, klass->instance_size);
    return FALSE;
  }
  for (gsize i = 0; i < G_N_ELEMENTS(required_slots); i++) {
    if (slot_missing(klass, required_slots[i].offset)) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                  "broker “%s” is incomplete: the required slot “%s” is NULL "
                  "(see sluice/sys/broker.h for its contract)",
                  name, required_slots[i].name);
      return FALSE;
    }
  }
  if ((klass->caps & SLUICE_BROKER_CAP_LEASES) &&
      (klass->heartbeat == NULL || klass->reclaim == NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                "broker “%s” declares SLUICE_BROKER_CAP_LEASES but lacks the "
                "“%s” slot that leases need",
                name, klass->heartbeat == NULL ? "heartbeat" : "reclaim");
    return FALSE;
  }
  if (klass->version >= 3 &&
      (klass->set_paused == NULL) != (klass->list_paused == NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                "broker “%s” must provide set_paused and list_paused "
                "together, or neither",
                name);
    return FALSE;
  }
  if (klass->version >= 4 &&
      ((klass->join_open == NULL) != (klass->join_arrive == NULL) ||
       (klass->join_open == NULL) != (klass->join_read == NULL) ||
       (klass->join_open == NULL) !=
           ((klass->caps & SLUICE_BROKER_CAP_JOINS) == 0))) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                "broker “%s” must provide join_open, join_arrive and "
                "join_read together, with SLUICE_BROKER_CAP_JOINS, or none "
                "of them",
                name);
    return FALSE;
  }
  if (klass->version >= 4 && klass->remove_queued != NULL &&
      klass->list_queued == NULL) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                "broker “%s” provides remove_queued without list_queued: it "
                "removes what list_queued lists",
                name);
    return FALSE;
  }
  if (klass->version >= 4 &&
      (klass->put_progress == NULL) != (klass->get_progress == NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                "broker “%s” must provide put_progress and get_progress "
                "together, or neither",
                name);
    return FALSE;
  }
  if (klass->version >= 4 &&
      (klass->append_events == NULL) != (klass->read_events == NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                "broker “%s” must provide append_events and read_events "
                "together, or neither",
                name);
    return FALSE;
  }
  if (klass->version >= 4 &&
      (klass->slot_acquire == NULL) != (klass->slot_release == NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                "broker “%s” must provide slot_acquire and slot_release "
                "together, or neither",
                name);
    return FALSE;
  }
  if (klass->version >= 4 &&
      (klass->unique_enqueue == NULL) != (klass->unique_update == NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                "broker “%s” must provide unique_enqueue and unique_update "
                "together, or neither",
                name);
    return FALSE;
  }
  if ((klass->claim_periodic == NULL) != (klass->last_periodic == NULL)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                "broker “%s” must provide claim_periodic and last_periodic "
                "together, or neither",
                name);
    return FALSE;
  }
  return TRUE;
}

SluiceBroker *
sluice_broker_new(const SluiceBrokerClass *klass, SluiceClock *clock,
                  GError **error)
{
  SluiceBroker *broker;
  SluiceBrokerPrivate *priv;

  g_return_val_if_fail(klass != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  if (!validate_class(klass, error))
    return NULL;

  priv = g_new0(SluiceBrokerPrivate, 1);
  g_atomic_ref_count_init(&priv->ref_count);
  /* A broker built against an older contract has a shorter class: copy only
   * what its version defines, and the later slots read as NULL (their
   * documented fallbacks). */
  memcpy(&priv->klass, klass, class_size_of_version(klass->version));
  priv->clock =
      clock != NULL ? sluice_clock_ref(clock) : sluice_clock_new_real();

  broker = g_malloc0(klass->instance_size);
  broker->klass = &priv->klass;
  broker->priv = priv;
  return broker;
}

SluiceBroker *
sluice_broker_ref(SluiceBroker *broker)
{
  g_return_val_if_fail(broker != NULL, NULL);
  g_atomic_ref_count_inc(&broker->priv->ref_count);
  return broker;
}

void
sluice_broker_unref(SluiceBroker *broker)
{
  SluiceBrokerPrivate *priv;

  if (broker == NULL || !g_atomic_ref_count_dec(&broker->priv->ref_count))
    return;
  priv = broker->priv;
  if (priv->klass.close != NULL)
    priv->klass.close(broker);
  priv->klass.finalize(broker);
  sluice_clock_unref(priv->clock);
  g_free(priv);
  g_free(broker);
}

const gchar *
sluice_broker_get_name(SluiceBroker *broker)
{
  g_return_val_if_fail(broker != NULL, NULL);
  return broker->klass->name;
}

SluiceClock *
sluice_broker_get_clock(SluiceBroker *broker)
{
  g_return_val_if_fail(broker != NULL, NULL);
  return broker->priv->clock;
}

guint64
sluice_broker_get_caps(SluiceBroker *broker)
{
  g_return_val_if_fail(broker != NULL, 0);
  return broker->klass->caps;
}

const SluiceBrokerClass *
sluice_broker__get_class(SluiceBroker *broker)
{
  return broker->klass;
}

/* ---- The GError rule ------------------------------------------------------
 *
 * Every slot is called with a local GError so the rule can be checked even
 * when the caller passed error == NULL.
 */
static gboolean
finish(SluiceBroker *broker, const gchar *slot, gboolean ok, GError *local,
       GError **error)
{
  if (ok && local != NULL) {
    g_critical("broker “%s”: slot %s returned TRUE but set an error (%s); "
               "the error is dropped",
               broker->klass->name, slot, local->message);
    g_error_free(local);
    return TRUE;
  }
  if (!ok && local == NULL) {
    g_critical("broker “%s”: slot %s returned FALSE without setting an error",
               broker->klass->name, slot);
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
                "broker “%s” failed in %s without saying why",
                broker->klass->name, slot);
    return FALSE;
  }
  if (!ok)
    g_propagate_error(error, local);
  return ok;
}

static gboolean
unsupported(SluiceBroker *broker, const gchar *what, GError **error)
{
  g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNSUPPORTED,
              "the “%s” broker cannot %s", broker->klass->name, what);
  return FALSE;
}

/* ---- Dispatch ---------------------------------------------------------- */

gboolean
sluice_broker_enqueue(SluiceBroker *broker, SluiceSubmit *items, guint n_items,
                      GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  if (n_items == 0)
    return TRUE;
  for (guint i = 0; i < n_items; i++) {
    g_return_val_if_fail(items[i].id != NULL && items[i].queue != NULL &&
                             items[i].payload != NULL,
                         FALSE);
    items[i].existed = FALSE;
  }
  ok = broker->klass->enqueue(broker, items, n_items, &local);
  return finish(broker, "enqueue", ok, local, error);
}

gboolean
sluice_broker_fetch(SluiceBroker *broker, const gchar *consumer,
                    const gchar *const *queues, guint max, gint64 block_ms,
                    GPtrArray *out, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(consumer != NULL, FALSE);
  g_return_val_if_fail(queues != NULL && queues[0] != NULL, FALSE);
  g_return_val_if_fail(out != NULL, FALSE);
  if (max == 0)
    return TRUE;
  ok = broker->klass->fetch(broker, consumer, queues, max, MAX(block_ms, 0),
                            out, &local);
  return finish(broker, "fetch", ok, local, error);
}

gboolean
sluice_broker_settle(SluiceBroker *broker, const gchar *consumer,
                     SluiceSettlement *items, guint n_items, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(consumer != NULL, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  if (n_items == 0)
    return TRUE;
  for (guint i = 0; i < n_items; i++) {
    SluiceSettlement *s = &items[i];
    g_return_val_if_fail(s->delivery != NULL, FALSE);
    g_return_val_if_fail(s->action != SLUICE_SETTLE_RETRY ||
                             (s->id != NULL && s->reschedule_payload != NULL),
                         FALSE);
    g_return_val_if_fail(s->action != SLUICE_SETTLE_DEAD_LETTER ||
                             s->dead_letter != NULL,
                         FALSE);
    g_return_val_if_fail(s->record == NULL || s->id != NULL, FALSE);
    s->status = SLUICE_SETTLE_DONE;
  }
  ok = broker->klass->settle(broker, consumer, items, n_items, &local);
  return finish(broker, "settle", ok, local, error);
}

gboolean
sluice_broker_heartbeat(SluiceBroker *broker, const gchar *consumer,
                        gint64 lease_ms, SluiceDelivery *const *held,
                        guint n_held, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(consumer != NULL, FALSE);
  if (broker->klass->heartbeat == NULL)
    return TRUE;
  ok = broker->klass->heartbeat(broker, consumer, lease_ms, held, n_held,
                                &local);
  return finish(broker, "heartbeat", ok, local, error);
}

gboolean
sluice_broker_reclaim(SluiceBroker *broker, const gchar *consumer,
                      const gchar *const *queues, guint max, gint64 idle_ms,
                      GPtrArray *out, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(consumer != NULL, FALSE);
  g_return_val_if_fail(queues != NULL, FALSE);
  g_return_val_if_fail(out != NULL, FALSE);
  if (broker->klass->reclaim == NULL || max == 0)
    return TRUE;
  ok = broker->klass->reclaim(broker, consumer, queues, max, idle_ms, out,
                              &local);
  return finish(broker, "reclaim", ok, local, error);
}

gboolean
sluice_broker_leave(SluiceBroker *broker, const gchar *consumer, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(consumer != NULL, FALSE);
  if (broker->klass->leave == NULL)
    return TRUE;
  ok = broker->klass->leave(broker, consumer, &local);
  return finish(broker, "leave", ok, local, error);
}

void
sluice_broker_wakeup(SluiceBroker *broker)
{
  g_return_if_fail(broker != NULL);
  if (broker->klass->wakeup != NULL)
    broker->klass->wakeup(broker);
}

gboolean
sluice_broker_promote_due(SluiceBroker *broker, gint64 now_ms, guint max,
                          guint *out_promoted, gint64 *out_next_due,
                          GError **error)
{
  GError *local = NULL;
  guint promoted = 0;
  gint64 next_due = 0;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  ok = broker->klass->promote_due(broker, now_ms, MAX(max, 1), &promoted,
                                  &next_due, &local);
  if (out_promoted != NULL)
    *out_promoted = ok ? promoted : 0;
  if (out_next_due != NULL)
    *out_next_due = ok ? next_due : 0;
  return finish(broker, "promote_due", ok, local, error);
}

gboolean
sluice_broker_cancel_scheduled(SluiceBroker *broker, const gchar *id,
                               GBytes *record, gint64 record_ttl_ms,
                               gboolean *out_removed, GError **error)
{
  GError *local = NULL;
  gboolean removed = FALSE;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(id != NULL, FALSE);
  ok = broker->klass->cancel_scheduled(broker, id, record, record_ttl_ms,
                                       &removed, &local);
  if (out_removed != NULL)
    *out_removed = ok && removed;
  return finish(broker, "cancel_scheduled", ok, local, error);
}

gboolean
sluice_broker_get_record(SluiceBroker *broker, const gchar *id,
                         GBytes **out_record, GError **error)
{
  GError *local = NULL;
  GBytes *record = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(id != NULL, FALSE);
  g_return_val_if_fail(out_record != NULL, FALSE);
  ok = broker->klass->get_record(broker, id, &record, &local);
  if (!ok)
    g_clear_pointer(&record, g_bytes_unref);
  *out_record = record;
  return finish(broker, "get_record", ok, local, error);
}

gboolean
sluice_broker_put_record(SluiceBroker *broker, const gchar *id, GBytes *record,
                         gboolean final, gint64 ttl_ms, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(id != NULL && record != NULL, FALSE);
  ok = broker->klass->put_record(broker, id, record, final, ttl_ms, &local);
  return finish(broker, "put_record", ok, local, error);
}

gboolean
sluice_broker_put_records(SluiceBroker *broker, const SluiceRecordWrite *items,
                          guint n, GError **error)
{
  GError *local = NULL;
  gboolean ok = TRUE;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(n == 0 || items != NULL, FALSE);
  if (n == 0)
    return TRUE;
  if (broker->klass->put_records != NULL) {
    ok = broker->klass->put_records(broker, items, n, &local);
    return finish(broker, "put_records", ok, local, error);
  }
  for (guint i = 0; ok && i < n; i++)
    ok = broker->klass->put_record(broker, items[i].id, items[i].record, FALSE,
                                   items[i].ttl_ms, &local);
  return finish(broker, "put_record", ok, local, error);
}

static gboolean
record_is_final(GBytes *record)
{
  g_autoptr(SluiceResult) result = NULL;

  if (record == NULL)
    return FALSE;
  result = sluice_result_decode(record, NULL);
  return result != NULL &&
         sluice_task_state_is_final(sluice_result_get_state(result));
}

gboolean
sluice_broker_wait_record(SluiceBroker *broker, const gchar *id,
                          gint64 timeout_ms, GBytes **out_record,
                          GError **error)
{
  GError *local = NULL;
  GBytes *record = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(id != NULL, FALSE);
  g_return_val_if_fail(out_record != NULL, FALSE);
  timeout_ms = MAX(timeout_ms, 0);

  if (broker->klass->wait_record != NULL) {
    ok = broker->klass->wait_record(broker, id, timeout_ms, &record, &local);
  } else {
    /* Fallback for brokers without notifications: read every 50 ms of real
     * time. Documented in sluice/sys/broker.h as the cost of leaving it out. */
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
    for (;;) {
      ok = broker->klass->get_record(broker, id, &record, &local);
      if (!ok || record_is_final(record) || g_get_monotonic_time() >= deadline)
        break;
      g_clear_pointer(&record, g_bytes_unref);
      g_usleep(MIN(50000, MAX(deadline - g_get_monotonic_time(), 0)));
    }
  }
  if (!ok)
    g_clear_pointer(&record, g_bytes_unref);
  *out_record = record;
  return finish(broker, "wait_record", ok, local, error);
}

gboolean
sluice_broker_revoke(SluiceBroker *broker, const gchar *id, gint64 expires_at,
                     GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(id != NULL, FALSE);
  ok = broker->klass->revoke(broker, id, expires_at, &local);
  return finish(broker, "revoke", ok, local, error);
}

gboolean
sluice_broker_list_revocations(SluiceBroker *broker, gint64 after,
                               gint64 now_ms, GPtrArray *out, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(out != NULL, FALSE);
  ok = broker->klass->list_revocations(broker, after, now_ms, out, &local);
  return finish(broker, "list_revocations", ok, local, error);
}

gboolean
sluice_broker_claim_periodic(SluiceBroker *broker, const gchar *name,
                             gint64 occurrence_at, SluiceSubmit *item,
                             gboolean *out_claimed, GError **error)
{
  GError *local = NULL;
  gboolean claimed = FALSE;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(name != NULL && item != NULL, FALSE);
  if (broker->klass->claim_periodic == NULL)
    return unsupported(broker, "dispatch periodic tasks", error);
  item->existed = FALSE;
  ok = broker->klass->claim_periodic(broker, name, occurrence_at, item,
                                     &claimed, &local);
  if (out_claimed != NULL)
    *out_claimed = ok && claimed;
  return finish(broker, "claim_periodic", ok, local, error);
}

gboolean
sluice_broker_last_periodic(SluiceBroker *broker, const gchar *name,
                            gint64 *out_last, GError **error)
{
  GError *local = NULL;
  gint64 last = 0;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(name != NULL, FALSE);
  if (broker->klass->last_periodic == NULL)
    return unsupported(broker, "dispatch periodic tasks", error);
  ok = broker->klass->last_periodic(broker, name, &last, &local);
  if (out_last != NULL)
    *out_last = ok ? last : 0;
  return finish(broker, "last_periodic", ok, local, error);
}

gboolean
sluice_broker_dlq_list(SluiceBroker *broker, const gchar *after, guint limit,
                       GPtrArray *out, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(out != NULL, FALSE);
  if (limit == 0)
    return TRUE;
  ok = broker->klass->dlq_list(broker, after, limit, out, &local);
  return finish(broker, "dlq_list", ok, local, error);
}

gboolean
sluice_broker_dlq_get(SluiceBroker *broker, const gchar *entry_id,
                      SluiceDeadLetter **out_entry, GError **error)
{
  GError *local = NULL;
  SluiceDeadLetter *entry = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(entry_id != NULL, FALSE);
  g_return_val_if_fail(out_entry != NULL, FALSE);
  ok = broker->klass->dlq_get(broker, entry_id, &entry, &local);
  if (!ok)
    g_clear_pointer(&entry, sluice_dead_letter_free);
  *out_entry = entry;
  return finish(broker, "dlq_get", ok, local, error);
}

gboolean
sluice_broker_dlq_replay(SluiceBroker *broker, const gchar *entry_id,
                         SluiceSubmit *item, gboolean *out_found,
                         GError **error)
{
  GError *local = NULL;
  gboolean found = FALSE;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(entry_id != NULL && item != NULL, FALSE);
  item->existed = FALSE;
  ok = broker->klass->dlq_replay(broker, entry_id, item, &found, &local);
  if (out_found != NULL)
    *out_found = ok && found;
  return finish(broker, "dlq_replay", ok, local, error);
}

gboolean
sluice_broker_dlq_delete(SluiceBroker *broker, const gchar *entry_id,
                         gboolean *out_found, GError **error)
{
  GError *local = NULL;
  gboolean found = FALSE;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(entry_id != NULL, FALSE);
  ok = broker->klass->dlq_delete(broker, entry_id, &found, &local);
  if (out_found != NULL)
    *out_found = ok && found;
  return finish(broker, "dlq_delete", ok, local, error);
}

gboolean
sluice_broker_stats(SluiceBroker *broker, const gchar *const *queues,
                    SluiceBrokerStats *out, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(out != NULL, FALSE);
  ok = broker->klass->stats(broker, queues, out, &local);
  return finish(broker, "stats", ok, local, error);
}

gboolean
sluice_broker_purge(SluiceBroker *broker, const gchar *queue,
                    guint64 *out_removed, GError **error)
{
  GError *local = NULL;
  guint64 removed = 0;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(queue != NULL, FALSE);
  if (broker->klass->purge == NULL)
    return unsupported(broker, "purge a queue", error);
  ok = broker->klass->purge(broker, queue, &removed, &local);
  if (out_removed != NULL)
    *out_removed = ok ? removed : 0;
  return finish(broker, "purge", ok, local, error);
}

gboolean
sluice_broker_check(SluiceBroker *broker, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  if (broker->klass->check == NULL)
    return TRUE;
  ok = broker->klass->check(broker, &local);
  return finish(broker, "check", ok, local, error);
}

gboolean
sluice_broker_list_revocations_since(SluiceBroker *broker, gint64 *inout_cursor,
                                     gint64 now_ms, GPtrArray *out,
                                     GError **error)
{
  GError *local = NULL;
  gint64 next;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(inout_cursor != NULL && out != NULL, FALSE);
  if (broker->klass->list_revocations_since == NULL) {
    /* Every live revocation, every time: correct whatever the TTLs. */
    ok = broker->klass->list_revocations(broker, 0, now_ms, out, &local);
    return finish(broker, "list_revocations", ok, local, error);
  }
  next = *inout_cursor;
  ok = broker->klass->list_revocations_since(broker, *inout_cursor, now_ms, out,
                                             &next, &local);
  if (ok && next >= *inout_cursor)
    *inout_cursor = next;
  return finish(broker, "list_revocations_since", ok, local, error);
}

gboolean
sluice_broker_count_reclaimable(SluiceBroker *broker, const gchar *consumer,
                                const gchar *const *queues, guint max,
                                gint64 idle_ms, guint *out_n, GError **error)
{
  GError *local = NULL;
  guint n = 0;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(consumer != NULL && queues != NULL, FALSE);
  g_return_val_if_fail(out_n != NULL, FALSE);
  *out_n = 0;
  if (broker->klass->count_reclaimable == NULL)
    return unsupported(broker, "count what it could reclaim", error);
  ok = broker->klass->count_reclaimable(broker, consumer, queues, max, idle_ms,
                                        &n, &local);
  if (ok)
    *out_n = MIN(n, max);
  return finish(broker, "count_reclaimable", ok, local, error);
}

gboolean
sluice_broker_lookup_task(SluiceBroker *broker, const gchar *id,
                          SluiceTaskLocation *out, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(id != NULL && out != NULL, FALSE);
  memset(out, 0, sizeof *out);
  if (broker->klass->lookup_task == NULL)
    return TRUE;
  ok = broker->klass->lookup_task(broker, id, out, &local);
  if (!ok)
    sluice_task_location_clear(out);
  return finish(broker, "lookup_task", ok, local, error);
}

gboolean
sluice_broker_announce(SluiceBroker *broker, const gchar *consumer,
                       GBytes *info, gint64 ttl_ms, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(consumer != NULL && info != NULL, FALSE);
  if (broker->klass->announce == NULL)
    return TRUE;
  ok = broker->klass->announce(broker, consumer, info, MAX(ttl_ms, 1), &local);
  return finish(broker, "announce", ok, local, error);
}

/* A listing slot's cursor: what the broker set, or NULL; never a cursor
 * the caller passed in, so the caller owns exactly what it gets. */
static gboolean
finish_listing(SluiceBroker *broker, const gchar *slot, gboolean ok,
               GError *local, gchar *cursor, gchar **out_cursor, GError **error)
{
  if (ok && out_cursor != NULL)
    *out_cursor = cursor;
  else
    g_free(cursor);
  return finish(broker, slot, ok, local, error);
}

gboolean
sluice_broker_list_queued(SluiceBroker *broker, const gchar *queue,
                          const gchar *cursor, guint limit, GPtrArray *out,
                          gchar **out_cursor, GError **error)
{
  GError *local = NULL;
  gchar *next = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(queue != NULL && out != NULL, FALSE);
  if (out_cursor != NULL)
    *out_cursor = NULL;
  if (broker->klass->list_queued == NULL)
    return unsupported(broker, "list the messages waiting in a queue", error);
  if (limit == 0)
    return TRUE;
  ok = broker->klass->list_queued(broker, queue, cursor, limit, out, &next,
                                  &local);
  return finish_listing(broker, "list_queued", ok, local, next, out_cursor,
                        error);
}

gboolean
sluice_broker_list_scheduled(SluiceBroker *broker, const gchar *cursor,
                             guint limit, GPtrArray *out, gchar **out_cursor,
                             GError **error)
{
  GError *local = NULL;
  gchar *next = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(out != NULL, FALSE);
  if (out_cursor != NULL)
    *out_cursor = NULL;
  if (broker->klass->list_scheduled == NULL)
    return unsupported(broker, "list the schedule", error);
  if (limit == 0)
    return TRUE;
  ok = broker->klass->list_scheduled(broker, cursor, limit, out, &next, &local);
  return finish_listing(broker, "list_scheduled", ok, local, next, out_cursor,
                        error);
}

gboolean
sluice_broker_set_paused(SluiceBroker *broker, const gchar *queue,
                         gboolean paused, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(queue != NULL, FALSE);
  if (broker->klass->set_paused == NULL)
    return unsupported(broker, "pause a queue", error);
  ok = broker->klass->set_paused(broker, queue, paused, &local);
  return finish(broker, "set_paused", ok, local, error);
}

gboolean
sluice_broker_list_paused(SluiceBroker *broker, GPtrArray *out, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(out != NULL, FALSE);
  if (broker->klass->list_paused == NULL)
    return TRUE;
  ok = broker->klass->list_paused(broker, out, &local);
  return finish(broker, "list_paused", ok, local, error);
}

gboolean
sluice_broker_reschedule(SluiceBroker *broker, const gchar *id, gint64 due_at,
                         gboolean *out_found, GError **error)
{
  GError *local = NULL;
  gboolean found = FALSE;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(id != NULL, FALSE);
  if (out_found != NULL)
    *out_found = FALSE;
  if (broker->klass->reschedule == NULL)
    return unsupported(broker, "move a task on the schedule", error);
  ok = broker->klass->reschedule(broker, id, MAX(due_at, 0), &found, &local);
  if (out_found != NULL)
    *out_found = ok && found;
  return finish(broker, "reschedule", ok, local, error);
}

gboolean
sluice_broker_remove_queued(SluiceBroker *broker, SluiceRemoval *items,
                            guint n_items, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_items; i++) {
    g_return_val_if_fail(items[i].queue != NULL && items[i].payload != NULL,
                         FALSE);
    g_return_val_if_fail(items[i].record == NULL || items[i].id != NULL, FALSE);
    items[i].removed = FALSE;
  }
  if (broker->klass->remove_queued == NULL)
    return unsupported(broker, "take a queued task out of its queue", error);
  if (n_items == 0)
    return TRUE;
  ok = broker->klass->remove_queued(broker, items, n_items, &local);
  if (!ok)
    for (guint i = 0; i < n_items; i++)
      items[i].removed = FALSE;
  return finish(broker, "remove_queued", ok, local, error);
}

/* ---- Joins (version 4) --------------------------------------------------- */

gboolean
sluice_broker_join_open(SluiceBroker *broker, const SluiceJoinSpec *joins,
                        guint n_joins, SluiceSubmit *items, guint n_items,
                        gboolean *out_existed, GError **error)
{
  GError *local = NULL;
  gboolean existed = FALSE;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(joins != NULL && n_joins > 0, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_joins; i++)
    g_return_val_if_fail(
        joins[i].id != NULL && joins[i].total > 0 &&
            (joins[i].release != NULL || joins[i].n_release == 0),
        FALSE);
  if (out_existed != NULL)
    *out_existed = FALSE;
  if (broker->klass->join_open == NULL)
    return unsupported(broker, "run workflows (it has no joins)", error);
  ok = broker->klass->join_open(broker, joins, n_joins, items, n_items,
                                &existed, &local);
  if (out_existed != NULL)
    *out_existed = ok && existed;
  return finish(broker, "join_open", ok, local, error);
}

gboolean
sluice_broker_join_arrive(SluiceBroker *broker, SluiceJoinArrival *items,
                          guint n_items, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_items; i++) {
    g_return_val_if_fail(items[i].join_id != NULL && items[i].outcome != NULL,
                         FALSE);
    items[i].counted = FALSE;
    items[i].released = FALSE;
  }
  if (n_items == 0)
    return TRUE;
  if (broker->klass->join_arrive == NULL)
    return unsupported(broker, "run workflows (it has no joins)", error);
  ok = broker->klass->join_arrive(broker, items, n_items, &local);
  return finish(broker, "join_arrive", ok, local, error);
}

gboolean
sluice_broker_join_read(SluiceBroker *broker, const gchar *join_id,
                        gboolean with_outcomes, SluiceJoinState *out,
                        gboolean *out_found, GError **error)
{
  GError *local = NULL;
  gboolean found = FALSE;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(join_id != NULL && out != NULL, FALSE);
  memset(out, 0, sizeof *out);
  if (out_found != NULL)
    *out_found = FALSE;
  if (broker->klass->join_read == NULL)
    return unsupported(broker, "run workflows (it has no joins)", error);
  ok = broker->klass->join_read(broker, join_id, with_outcomes, out, &found,
                                &local);
  if (!ok || !found)
    sluice_join_state_clear(out);
  if (out_found != NULL)
    *out_found = ok && found;
  return finish(broker, "join_read", ok, local, error);
}

/* ---- Progress (version 4) ------------------------------------------------ */

gboolean
sluice_broker_put_progress(SluiceBroker *broker, const gchar *id,
                           GBytes *progress, gint64 ttl_ms, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(id != NULL && progress != NULL, FALSE);
  if (broker->klass->put_progress == NULL)
    return TRUE;
  ok =
      broker->klass->put_progress(broker, id, progress, MAX(ttl_ms, 1), &local);
  return finish(broker, "put_progress", ok, local, error);
}

gboolean
sluice_broker_get_progress(SluiceBroker *broker, const gchar *id,
                           GBytes **out_progress, GError **error)
{
  GError *local = NULL;
  GBytes *progress = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(id != NULL && out_progress != NULL, FALSE);
  *out_progress = NULL;
  if (broker->klass->get_progress == NULL)
    return unsupported(broker, "store task progress", error);
  ok = broker->klass->get_progress(broker, id, &progress, &local);
  if (ok)
    *out_progress = progress;
  else
    g_clear_pointer(&progress, g_bytes_unref);
  return finish(broker, "get_progress", ok, local, error);
}

/* ---- Events (version 4) -------------------------------------------------- */

gboolean
sluice_broker_append_events(SluiceBroker *broker, GBytes *const *events,
                            guint n, guint max_len, gint64 max_age_ms,
                            gint64 now_ms, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(events != NULL || n == 0, FALSE);
  if (n == 0 || broker->klass->append_events == NULL)
    return TRUE;
  ok = broker->klass->append_events(broker, events, n, MAX(max_len, 1),
                                    MAX(max_age_ms, 1), now_ms, &local);
  return finish(broker, "append_events", ok, local, error);
}

gboolean
sluice_broker_read_events(SluiceBroker *broker, const gchar *cursor,
                          guint limit, gint64 block_ms, GPtrArray *out,
                          gchar **out_cursor, GError **error)
{
  GError *local = NULL;
  gchar *next = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL && out != NULL, FALSE);
  g_return_val_if_fail(out_cursor != NULL, FALSE);
  *out_cursor = NULL;
  if (broker->klass->read_events == NULL)
    return unsupported(broker, "keep events", error);
  ok = broker->klass->read_events(broker, cursor, MAX(limit, 1),
                                  MAX(block_ms, 0), out, &next, &local);
  if (ok)
    *out_cursor = next != NULL ? next : g_strdup(cursor);
  else
    g_free(next);
  return finish(broker, "read_events", ok, local, error);
}

gboolean
sluice_broker_join_grow(SluiceBroker *broker, const gchar *join_id,
                        guint expected_total, guint by, SluiceSubmit *items,
                        guint n_items, guint *out_total, GError **error)
{
  GError *local = NULL;
  guint total = 0;
  gboolean ok;

  g_return_val_if_fail(broker != NULL && join_id != NULL, FALSE);
  g_return_val_if_fail(out_total != NULL && by > 0, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  *out_total = 0;
  if (broker->klass->join_grow == NULL)
    return unsupported(broker, "add tasks to an open batch", error);
  ok = broker->klass->join_grow(broker, join_id, expected_total, by, items,
                                n_items, &total, &local);
  if (ok)
    *out_total = total;
  return finish(broker, "join_grow", ok, local, error);
}

/* ---- Flow control (version 4) ------------------------------------------- */

gboolean
sluice_broker_rate_acquire(SluiceBroker *broker, SluiceRateAcquire *items,
                           guint n_items, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_items; i++) {
    g_return_val_if_fail(items[i].key != NULL, FALSE);
    g_return_val_if_fail(items[i].interval_us > 0, FALSE);
    g_return_val_if_fail(items[i].tolerance_us >= 0, FALSE);
    g_return_val_if_fail(items[i].block_ms >= 0, FALSE);
    items[i].granted = FALSE;
    items[i].wait_ms = 0;
    items[i].now_ms = 0;
  }
  if (broker->klass->rate_acquire == NULL)
    return unsupported(broker, "apply a rate limit", error);
  if (n_items == 0)
    return TRUE;
  ok = broker->klass->rate_acquire(broker, items, n_items, &local);
  return finish(broker, "rate_acquire", ok, local, error);
}

gboolean
sluice_broker_slot_acquire(SluiceBroker *broker, SluiceSlotAcquire *items,
                           guint n_items, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_items; i++) {
    g_return_val_if_fail(items[i].key != NULL, FALSE);
    g_return_val_if_fail(items[i].holder != NULL, FALSE);
    g_return_val_if_fail(items[i].max > 0, FALSE);
    g_return_val_if_fail(items[i].lease_ms > 0, FALSE);
    items[i].granted = FALSE;
  }
  if (broker->klass->slot_acquire == NULL)
    return unsupported(broker, "apply a concurrency limit", error);
  if (n_items == 0)
    return TRUE;
  ok = broker->klass->slot_acquire(broker, items, n_items, &local);
  return finish(broker, "slot_acquire", ok, local, error);
}

gboolean
sluice_broker_slot_release(SluiceBroker *broker, SluiceSlotRelease *items,
                           guint n_items, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_items; i++) {
    g_return_val_if_fail(items[i].key != NULL, FALSE);
    g_return_val_if_fail(items[i].holder != NULL, FALSE);
    items[i].woke = FALSE;
  }
  if (broker->klass->slot_release == NULL)
    return unsupported(broker, "apply a concurrency limit", error);
  if (n_items == 0)
    return TRUE;
  ok = broker->klass->slot_release(broker, items, n_items, &local);
  return finish(broker, "slot_release", ok, local, error);
}

gboolean
sluice_broker_unique_enqueue(SluiceBroker *broker, SluiceUniqueSubmit *items,
                             guint n_items, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_items; i++) {
    g_return_val_if_fail(items[i].key != NULL, FALSE);
    g_return_val_if_fail(items[i].submit.id != NULL, FALSE);
    g_return_val_if_fail(items[i].claim_ttl_ms > 0, FALSE);
    items[i].existed = FALSE;
    items[i].replaced = FALSE;
    items[i].submit.existed = FALSE;
    g_clear_pointer(&items[i].holder, g_free);
  }
  if (broker->klass->unique_enqueue == NULL)
    return unsupported(broker, "enqueue with a uniqueness key", error);
  if (n_items == 0)
    return TRUE;
  ok = broker->klass->unique_enqueue(broker, items, n_items, &local);
  return finish(broker, "unique_enqueue", ok, local, error);
}

gboolean
sluice_broker_unique_update(SluiceBroker *broker, SluiceUniqueUpdate *items,
                            guint n_items, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_items; i++) {
    g_return_val_if_fail(items[i].key != NULL && items[i].id != NULL, FALSE);
    g_return_val_if_fail(items[i].action <= SLUICE_UNIQUE_RENEW, FALSE);
    g_return_val_if_fail(items[i].ttl_ms > 0 ||
                             items[i].action == SLUICE_UNIQUE_CHECK ||
                             items[i].action == SLUICE_UNIQUE_START ||
                             items[i].action == SLUICE_UNIQUE_RELEASE,
                         FALSE);
    items[i].superseded = FALSE;
  }
  if (broker->klass->unique_update == NULL)
    return unsupported(broker, "enqueue with a uniqueness key", error);
  if (n_items == 0)
    return TRUE;
  ok = broker->klass->unique_update(broker, items, n_items, &local);
  return finish(broker, "unique_update", ok, local, error);
}

gboolean
sluice_broker_list_slots(SluiceBroker *broker, guint limit, GPtrArray *out,
                         GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL && out != NULL, FALSE);
  if (broker->klass->list_slots == NULL)
    return unsupported(broker, "list concurrency slots", error);
  if (limit == 0)
    return TRUE;
  ok = broker->klass->list_slots(broker, limit, out, &local);
  return finish(broker, "list_slots", ok, local, error);
}
