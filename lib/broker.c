/* broker.c - the one dispatch point per broker slot, and broker plumbing.
 *
 * The core never calls a slot of a broker directly: it calls the
 * sluice_broker_<slot>() functions below. Each checks its arguments, applies
 * the slot's documented fallback when the slot is NULL, and enforces the
 * GError rule (FALSE exactly when an error is set) so that a buggy broker is
 * reported where it misbehaves, not three frames later.
 *
 * Registration is sluice_broker_new(): the class and every table it points
 * at are validated by one loop over a description of the contract
 * (class_slots[] and tables[] below: each slot's rule, each table's
 * version) and copied, as Redis copies module type methods, so a broker
 * built against an older version of the contract reads NULL for the slots
 * it does not know. Whether a broker has a capability or a family is
 * answered by sluice_broker_supports(), here, from the copy: no other file
 * reads a broker's class.
 *
 * When implementing a new broker, read sluice/sys/broker.h first; then run the
 * conformance suite (tests/conformance/) against it.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

/* The first argument is the quark's name, not an expression. */
/* clang-format off */
G_DEFINE_QUARK(sluice-broker-error-quark, sluice_broker_error)
/* clang-format on */

struct _SluiceBrokerPrivate {
  gatomicrefcount ref_count;
  const SluiceBrokerClass *registered; /* what the broker passed in */
  SluiceBrokerClass klass; /* the validated copy; its tables point below */
  SluiceBrokerSteering steering;
  SluiceBrokerPeriodic periodic;
  SluiceBrokerJoins joins;
  SluiceBrokerEvents events;
  SluiceBrokerRates rates;
  SluiceBrokerSlots slots;
  SluiceBrokerUnique unique;
  SluiceClock *clock;
};

/* ---- The contract, described --------------------------------------------
 *
 * Validation and copying are one loop over this description, so a slot or
 * a table added to sys/broker.h is one line here (and its dispatch
 * function), never a hand-written check. Each slot of the class says when
 * it must be set; every slot of a table present must be (a table is absent
 * or complete). A slot also says the version of its class or table that
 * added it: a broker built against an older version has no such slot, and
 * its copy reads NULL there. So the dispatch function of a slot that a
 * later version adds to a table checks the slot itself, not only the
 * table, and applies the fallback the header documents for it.
 *
 * To add a slot to a table (after 1.0, at the table's end, with its
 * version bumped): a line in its *_slots[] with that version as `since`,
 * its size at the new version in *_sizes[], and its dispatch function.
 */

typedef enum {
  SLOT_OPTIONAL,
  SLOT_REQUIRED,
  SLOT_REQUIRED_WITH_CAP, /* must be set when the class declares @cap */
  SLOT_ONLY_WITH_CAP,     /* may be set only when the class declares @cap */
} SlotRule;

typedef struct {
  const gchar *name;
  glong offset;
  guint32 since; /* the version of the class or table that added it */
  SlotRule rule;
  guint64 cap;
} SlotDesc;

typedef struct {
  const gchar *name;     /* "steering", or NULL for the class itself */
  glong field;           /* offset of its pointer in SluiceBrokerClass */
  glong copy;            /* offset of the core's copy in SluiceBrokerPrivate */
  guint32 known_version; /* SLUICE_BROKER_<FAMILY>_VERSION */
  const gchar *macro;    /* its name, for the message */
  const gsize *size_of_version; /* [v]: the bytes a table of version v has */
  const SlotDesc *slots;
  guint n_slots;
} TableDesc;

#define CORE(f, since, rule, cap)                                              \
  {                                                                            \
    G_STRINGIFY(f), G_STRUCT_OFFSET(SluiceBrokerClass, f), since, rule, cap    \
  }
#define REQ(f) CORE(f, 1, SLOT_REQUIRED, 0)
#define OPT(f) CORE(f, 1, SLOT_OPTIONAL, 0)

static const SlotDesc class_slots[] = {
    /* produce */
    REQ(enqueue),
    /* consume */
    REQ(fetch),
    REQ(settle),
    CORE(heartbeat, 1, SLOT_REQUIRED_WITH_CAP, SLUICE_BROKER_CAP_LEASES),
    CORE(reclaim, 1, SLOT_REQUIRED_WITH_CAP, SLUICE_BROKER_CAP_LEASES),
    CORE(count_reclaimable, 1, SLOT_ONLY_WITH_CAP, SLUICE_BROKER_CAP_LEASES),
    OPT(leave),
    OPT(wakeup),
    /* schedule */
    REQ(promote_due),
    REQ(cancel_scheduled),
    /* records */
    REQ(get_record),
    REQ(put_record),
    OPT(put_records),
    OPT(wait_record),
    OPT(lookup_task),
    /* revocations */
    REQ(revoke),
    REQ(list_revocations),
    /* dead letters */
    REQ(dlq_list),
    REQ(dlq_get),
    REQ(dlq_replay),
    REQ(dlq_delete),
    /* stats and workers */
    REQ(stats),
    OPT(announce),
    OPT(check),
    /* lifecycle */
    OPT(close),
    REQ(finalize),
};

#undef CORE
#undef REQ
#undef OPT

#define IN(type, f)                                                            \
  {                                                                            \
    G_STRINGIFY(f), G_STRUCT_OFFSET(type, f), 1, SLOT_REQUIRED, 0              \
  }

static const SlotDesc steering_slots[] = {
    IN(SluiceBrokerSteering, list_queued),
    IN(SluiceBrokerSteering, remove_queued),
    IN(SluiceBrokerSteering, list_scheduled),
    IN(SluiceBrokerSteering, set_paused),
    IN(SluiceBrokerSteering, list_paused),
    IN(SluiceBrokerSteering, reschedule),
    IN(SluiceBrokerSteering, purge),
    {"replace_payloads",
     G_STRUCT_OFFSET(SluiceBrokerSteering, replace_payloads), 2, SLOT_REQUIRED,
     0},
};
static const SlotDesc periodic_slots[] = {
    IN(SluiceBrokerPeriodic, claim_periodic),
    IN(SluiceBrokerPeriodic, last_periodic),
};
static const SlotDesc joins_slots[] = {
    IN(SluiceBrokerJoins, join_open),
    IN(SluiceBrokerJoins, join_arrive),
    IN(SluiceBrokerJoins, join_read),
    IN(SluiceBrokerJoins, join_grow),
};
static const SlotDesc events_slots[] = {
    IN(SluiceBrokerEvents, append_events),
    IN(SluiceBrokerEvents, read_events),
    IN(SluiceBrokerEvents, put_progress),
    IN(SluiceBrokerEvents, get_progress),
};
static const SlotDesc rates_slots[] = {
    IN(SluiceBrokerRates, rate_acquire),
};
static const SlotDesc slots_slots[] = {
    IN(SluiceBrokerSlots, slot_acquire),
    IN(SluiceBrokerSlots, slot_release),
    IN(SluiceBrokerSlots, list_slots),
};
static const SlotDesc unique_slots[] = {
    IN(SluiceBrokerUnique, unique_enqueue),
    IN(SluiceBrokerUnique, unique_update),
};

#undef IN

/* [0] is unused: version 0 is refused. A table that grows in a release
 * adds its new size here, at the index of its new version. */
static const gsize class_sizes[] = {0, sizeof(SluiceBrokerClass)};
static const gsize steering_sizes[] = {
    0, G_STRUCT_OFFSET(SluiceBrokerSteering, replace_payloads),
    sizeof(SluiceBrokerSteering)};
static const gsize periodic_sizes[] = {0, sizeof(SluiceBrokerPeriodic)};
static const gsize joins_sizes[] = {0, sizeof(SluiceBrokerJoins)};
static const gsize events_sizes[] = {0, sizeof(SluiceBrokerEvents)};
static const gsize rates_sizes[] = {0, sizeof(SluiceBrokerRates)};
static const gsize slots_sizes[] = {0, sizeof(SluiceBrokerSlots)};
static const gsize unique_sizes[] = {0, sizeof(SluiceBrokerUnique)};

#define TABLE(f, version)                                                      \
  {                                                                            \
    G_STRINGIFY(f), G_STRUCT_OFFSET(SluiceBrokerClass, f),                     \
        G_STRUCT_OFFSET(SluiceBrokerPrivate, f), version, #version, f##_sizes, \
        f##_slots, G_N_ELEMENTS(f##_slots)                                     \
  }

static const TableDesc tables[] = {
    TABLE(steering, SLUICE_BROKER_STEERING_VERSION),
    TABLE(periodic, SLUICE_BROKER_PERIODIC_VERSION),
    TABLE(joins, SLUICE_BROKER_JOINS_VERSION),
    TABLE(events, SLUICE_BROKER_EVENTS_VERSION),
    TABLE(rates, SLUICE_BROKER_RATES_VERSION),
    TABLE(slots, SLUICE_BROKER_SLOTS_VERSION),
    TABLE(unique, SLUICE_BROKER_UNIQUE_VERSION),
};

#undef TABLE

G_STATIC_ASSERT(G_N_ELEMENTS(class_sizes) == SLUICE_BROKER_CLASS_VERSION + 1);

static gboolean
check_version(const gchar *broker, const gchar *what, guint32 version,
              guint32 known, const gchar *macro, GError **error)
{
  if (version >= 1 && version <= known)
    return TRUE;
  if (version == 0)
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_VERSION,
                "broker “%s” declares no %s version (0): set its .version to "
                "%s",
                broker, what, macro);
  else
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_VERSION,
                "broker “%s” declares %s version %u, but this Sluice knows "
                "versions 1 to %u: rebuild the broker against this Sluice's "
                "sluice/sys/broker.h",
                broker, what, version, known);
  return FALSE;
}

/* Checks @n slots of @table (of @version) against their rules. @prefix is
 * "" for the class, "steering." for a table: the error names the slot as
 * a broker author finds it in the header. */
static gboolean
check_slots(const gchar *broker, const gchar *prefix, gconstpointer table,
            guint32 version, guint64 caps, const SlotDesc *slots, guint n,
            GError **error)
{
  for (guint i = 0; i < n; i++) {
    const SlotDesc *d = &slots[i];
    gboolean set;
    gboolean has_cap = d->cap != 0 && (caps & d->cap) == d->cap;

    if (d->since > version)
      continue; /* not in this version: read as NULL */
    set = G_STRUCT_MEMBER(gpointer, table, d->offset) != NULL;
    if (!set && (d->rule == SLOT_REQUIRED ||
                 (d->rule == SLOT_REQUIRED_WITH_CAP && has_cap))) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                  "broker “%s” is incomplete: the slot “%s%s” is NULL, but "
                  "%s (see sluice/sys/broker.h for its contract)",
                  broker, prefix, d->name,
                  d->rule == SLOT_REQUIRED_WITH_CAP
                      ? "the class declares a capability that needs it"
                  : prefix[0] != '\0'
                      ? "a table is absent or complete: set it, or leave the "
                        "whole table out"
                      : "it is required");
      return FALSE;
    }
    if (set && d->rule == SLOT_ONLY_WITH_CAP && !has_cap) {
      g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_INCOMPLETE,
                  "broker “%s” sets the slot “%s%s”, which the core only "
                  "calls with a capability the class does not declare "
                  "(see the slot in sluice/sys/broker.h): declare it, or "
                  "leave the slot NULL",
                  broker, prefix, d->name);
      return FALSE;
    }
  }
  return TRUE;
}

static gboolean
validate_class(const SluiceBrokerClass *klass, GError **error)
{
  const gchar *name = klass->name != NULL ? klass->name : "(unnamed)";

  if (!check_version(name, "contract", klass->version,
                     SLUICE_BROKER_CLASS_VERSION, "SLUICE_BROKER_CLASS_VERSION",
                     error))
    return FALSE;
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
  if (!check_slots(name, "", klass, klass->version, klass->caps, class_slots,
                   G_N_ELEMENTS(class_slots), error))
    return FALSE;
  for (gsize t = 0; t < G_N_ELEMENTS(tables); t++) {
    const TableDesc *d = &tables[t];
    const guint32 *table = G_STRUCT_MEMBER(const guint32 *, klass, d->field);
    g_autofree gchar *what = NULL;
    g_autofree gchar *prefix = NULL;

    if (table == NULL)
      continue;
    what = g_strdup_printf("%s table", d->name);
    prefix = g_strdup_printf("%s.", d->name);
    /* Every table starts with its guint32 version. */
    if (!check_version(name, what, *table, d->known_version, d->macro, error) ||
        !check_slots(name, prefix, table, *table, klass->caps, d->slots,
                     d->n_slots, error))
      return FALSE;
  }
  return TRUE;
}

/* Copies the class and each table it points at into @priv: only the
 * bytes their versions define, so that the slots a later version adds read
 * as NULL (their documented fallbacks), as Redis copies module type
 * methods. The copy's table pointers point at the core's own copies. */
static void
copy_class(SluiceBrokerPrivate *priv, const SluiceBrokerClass *klass)
{
  memcpy(&priv->klass, klass, class_sizes[klass->version]);
  for (gsize t = 0; t < G_N_ELEMENTS(tables); t++) {
    const TableDesc *d = &tables[t];
    const guint32 *table = G_STRUCT_MEMBER(const guint32 *, klass, d->field);
    gpointer copy = G_STRUCT_MEMBER_P(priv, d->copy);

    if (table != NULL)
      memcpy(copy, table, d->size_of_version[*table]);
    G_STRUCT_MEMBER(gconstpointer, &priv->klass, d->field) =
        table != NULL ? copy : NULL;
  }
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
  priv->registered = klass;
  copy_class(priv, klass);
  priv->clock =
      clock != NULL ? sluice_clock_ref(clock) : sluice_clock_new_real();

  broker = g_malloc0(klass->instance_size);
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
  return broker->priv->klass.name;
}

SluiceClock *
sluice_broker_get_clock(SluiceBroker *broker)
{
  g_return_val_if_fail(broker != NULL, NULL);
  return broker->priv->clock;
}

void
sluice_broker_log(SluiceBroker *broker, GLogLevelFlags level,
                  const gchar *format, ...)
{
  va_list ap;
  g_autofree gchar *message = NULL;

  g_return_if_fail((level & G_LOG_LEVEL_ERROR) == 0);
  va_start(ap, format);
  message = g_strdup_vprintf(format, ap);
  va_end(ap);
  sluice_log__broker(
      level, broker != NULL ? sluice_broker_get_name(broker) : NULL, message);
}

gboolean
sluice_broker_is_a(SluiceBroker *broker, const SluiceBrokerClass *klass)
{
  return broker != NULL && klass != NULL && broker->priv->registered == klass;
}

gboolean
sluice_broker_supports(SluiceBroker *broker, SluiceBrokerFeature feature)
{
  const SluiceBrokerClass *k;

  g_return_val_if_fail(broker != NULL, FALSE);
  k = &broker->priv->klass;
  switch (feature) {
  case SLUICE_BROKER_FEATURE_SHARED:
    return (k->caps & SLUICE_BROKER_CAP_SHARED) != 0;
  case SLUICE_BROKER_FEATURE_DURABLE:
    return (k->caps & SLUICE_BROKER_CAP_DURABLE) != 0;
  case SLUICE_BROKER_FEATURE_LEASES:
    return (k->caps & SLUICE_BROKER_CAP_LEASES) != 0;
  case SLUICE_BROKER_FEATURE_FENCING:
    return (k->caps & SLUICE_BROKER_CAP_FENCING) != 0;
  case SLUICE_BROKER_FEATURE_CLOCK_TTL:
    return (k->caps & SLUICE_BROKER_CAP_CLOCK_TTL) != 0;
  case SLUICE_BROKER_FEATURE_IN_FLIGHT:
    return (k->caps & SLUICE_BROKER_CAP_IN_FLIGHT) != 0;
  case SLUICE_BROKER_FEATURE_ORDERED:
    return (k->caps & SLUICE_BROKER_CAP_ORDERED) != 0;
  case SLUICE_BROKER_FEATURE_STEERING:
    return k->steering != NULL;
  case SLUICE_BROKER_FEATURE_PERIODIC:
    return k->periodic != NULL;
  case SLUICE_BROKER_FEATURE_JOINS:
    return k->joins != NULL;
  case SLUICE_BROKER_FEATURE_EVENTS:
    return k->events != NULL;
  case SLUICE_BROKER_FEATURE_RATES:
    return k->rates != NULL;
  case SLUICE_BROKER_FEATURE_SLOTS:
    return k->slots != NULL;
  case SLUICE_BROKER_FEATURE_UNIQUE:
    return k->unique != NULL;
  case SLUICE_BROKER_FEATURE_LOOKUP_TASK:
    return k->lookup_task != NULL;
  case SLUICE_BROKER_FEATURE_ANNOUNCE:
    return k->announce != NULL;
  case SLUICE_BROKER_FEATURE_COUNT_RECLAIMABLE:
    return k->count_reclaimable != NULL;
  }
  return FALSE;
}

const gchar *
sluice_broker_feature_name(SluiceBrokerFeature feature)
{
  static const gchar *const names[] = {
      [SLUICE_BROKER_FEATURE_SHARED] = "sharing between processes",
      [SLUICE_BROKER_FEATURE_DURABLE] = "durability",
      [SLUICE_BROKER_FEATURE_LEASES] = "leases",
      [SLUICE_BROKER_FEATURE_FENCING] = "fencing",
      [SLUICE_BROKER_FEATURE_CLOCK_TTL] = "TTLs on the broker's clock",
      [SLUICE_BROKER_FEATURE_IN_FLIGHT] = "in-flight counts",
      [SLUICE_BROKER_FEATURE_ORDERED] = "ordering",
      [SLUICE_BROKER_FEATURE_STEERING] = "steering",
      [SLUICE_BROKER_FEATURE_PERIODIC] = "periodic tasks",
      [SLUICE_BROKER_FEATURE_JOINS] = "joins",
      [SLUICE_BROKER_FEATURE_EVENTS] = "events",
      [SLUICE_BROKER_FEATURE_RATES] = "rate limits",
      [SLUICE_BROKER_FEATURE_SLOTS] = "concurrency slots",
      [SLUICE_BROKER_FEATURE_UNIQUE] = "uniqueness",
      [SLUICE_BROKER_FEATURE_LOOKUP_TASK] = "lookup_task",
      [SLUICE_BROKER_FEATURE_ANNOUNCE] = "announce",
      [SLUICE_BROKER_FEATURE_COUNT_RECLAIMABLE] = "count_reclaimable",
  };

  if ((guint)feature < G_N_ELEMENTS(names) && names[feature] != NULL)
    return names[feature];
  return "unknown";
}

/* The core's copy of @broker's class: what every dispatch function calls. */
#define K(broker) (&(broker)->priv->klass)

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
    /* Through the library's log, like every line of it (its charset). */
    sluice_log__message(G_LOG_LEVEL_CRITICAL,
                        "broker “%s”: slot %s returned TRUE but set an error "
                        "(%s); the error is dropped",
                        K(broker)->name, slot, local->message);
    g_error_free(local);
    return TRUE;
  }
  if (!ok && local == NULL) {
    sluice_log__message(G_LOG_LEVEL_CRITICAL,
                        "broker “%s”: slot %s returned FALSE without setting "
                        "an error",
                        K(broker)->name, slot);
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_FAILED,
                "broker “%s” failed in %s without saying why", K(broker)->name,
                slot);
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
              "the “%s” broker cannot %s", K(broker)->name, what);
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
  ok = K(broker)->enqueue(broker, items, n_items, &local);
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
  ok = K(broker)->fetch(broker, consumer, queues, max, MAX(block_ms, 0), out,
                        &local);
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
  ok = K(broker)->settle(broker, consumer, items, n_items, &local);
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
  if (K(broker)->heartbeat == NULL)
    return TRUE;
  ok = K(broker)->heartbeat(broker, consumer, lease_ms, held, n_held, &local);
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
  if (K(broker)->reclaim == NULL || max == 0)
    return TRUE;
  ok = K(broker)->reclaim(broker, consumer, queues, max, idle_ms, out, &local);
  return finish(broker, "reclaim", ok, local, error);
}

gboolean
sluice_broker_leave(SluiceBroker *broker, const gchar *consumer, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(consumer != NULL, FALSE);
  if (K(broker)->leave == NULL)
    return TRUE;
  ok = K(broker)->leave(broker, consumer, &local);
  return finish(broker, "leave", ok, local, error);
}

void
sluice_broker_wakeup(SluiceBroker *broker)
{
  g_return_if_fail(broker != NULL);
  if (K(broker)->wakeup != NULL)
    K(broker)->wakeup(broker);
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
  ok = K(broker)->promote_due(broker, now_ms, MAX(max, 1), &promoted, &next_due,
                              &local);
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
  ok = K(broker)->cancel_scheduled(broker, id, record, record_ttl_ms, &removed,
                                   &local);
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
  ok = K(broker)->get_record(broker, id, &record, &local);
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
  ok = K(broker)->put_record(broker, id, record, final, ttl_ms, &local);
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
  if (K(broker)->put_records != NULL) {
    ok = K(broker)->put_records(broker, items, n, &local);
    return finish(broker, "put_records", ok, local, error);
  }
  for (guint i = 0; ok && i < n; i++)
    ok = K(broker)->put_record(broker, items[i].id, items[i].record, FALSE,
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

  if (K(broker)->wait_record != NULL) {
    ok = K(broker)->wait_record(broker, id, timeout_ms, &record, &local);
  } else {
    /* Fallback for brokers without notifications: read every 50 ms of real
     * time. Documented in sluice/sys/broker.h as the cost of leaving it out. */
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000;
    for (;;) {
      ok = K(broker)->get_record(broker, id, &record, &local);
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
  ok = K(broker)->revoke(broker, id, expires_at, &local);
  return finish(broker, "revoke", ok, local, error);
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
  if (K(broker)->periodic == NULL)
    return unsupported(broker, "dispatch periodic tasks", error);
  item->existed = FALSE;
  ok = K(broker)->periodic->claim_periodic(broker, name, occurrence_at, item,
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
  if (K(broker)->periodic == NULL)
    return unsupported(broker, "dispatch periodic tasks", error);
  ok = K(broker)->periodic->last_periodic(broker, name, &last, &local);
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
  ok = K(broker)->dlq_list(broker, after, limit, out, &local);
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
  ok = K(broker)->dlq_get(broker, entry_id, &entry, &local);
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
  ok = K(broker)->dlq_replay(broker, entry_id, item, &found, &local);
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
  ok = K(broker)->dlq_delete(broker, entry_id, &found, &local);
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
  ok = K(broker)->stats(broker, queues, out, &local);
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
  if (K(broker)->steering == NULL)
    return unsupported(broker, "purge a queue", error);
  ok = K(broker)->steering->purge(broker, queue, &removed, &local);
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
  if (K(broker)->check == NULL)
    return TRUE;
  ok = K(broker)->check(broker, &local);
  return finish(broker, "check", ok, local, error);
}

gboolean
sluice_broker_list_revocations(SluiceBroker *broker, gint64 *inout_cursor,
                               gint64 now_ms, GPtrArray *out, GError **error)
{
  GError *local = NULL;
  gint64 next;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(inout_cursor != NULL && out != NULL, FALSE);
  next = *inout_cursor;
  ok = K(broker)->list_revocations(broker, *inout_cursor, now_ms, out, &next,
                                   &local);
  /* Cursors only grow: a broker that went back would make the caller read
   * every revocation again, or worse, skip some later. */
  if (ok && next >= *inout_cursor)
    *inout_cursor = next;
  return finish(broker, "list_revocations", ok, local, error);
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
  if (K(broker)->count_reclaimable == NULL)
    return unsupported(broker, "count what it could reclaim", error);
  ok = K(broker)->count_reclaimable(broker, consumer, queues, max, idle_ms, &n,
                                    &local);
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
  if (K(broker)->lookup_task == NULL)
    return TRUE;
  ok = K(broker)->lookup_task(broker, id, out, &local);
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
  if (K(broker)->announce == NULL)
    return TRUE;
  ok = K(broker)->announce(broker, consumer, info, MAX(ttl_ms, 1), &local);
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
  if (K(broker)->steering == NULL)
    return unsupported(broker, "list the messages waiting in a queue", error);
  if (limit == 0)
    return TRUE;
  ok = K(broker)->steering->list_queued(broker, queue, cursor, limit, out,
                                        &next, &local);
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
  if (K(broker)->steering == NULL)
    return unsupported(broker, "list the schedule", error);
  if (limit == 0)
    return TRUE;
  ok = K(broker)->steering->list_scheduled(broker, cursor, limit, out, &next,
                                           &local);
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
  if (K(broker)->steering == NULL)
    return unsupported(broker, "pause a queue", error);
  ok = K(broker)->steering->set_paused(broker, queue, paused, &local);
  return finish(broker, "set_paused", ok, local, error);
}

gboolean
sluice_broker_list_paused(SluiceBroker *broker, GPtrArray *out, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(out != NULL, FALSE);
  if (K(broker)->steering == NULL)
    return TRUE;
  ok = K(broker)->steering->list_paused(broker, out, &local);
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
  if (K(broker)->steering == NULL)
    return unsupported(broker, "move a task on the schedule", error);
  ok = K(broker)->steering->reschedule(broker, id, MAX(due_at, 0), &found,
                                       &local);
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
  if (K(broker)->steering == NULL)
    return unsupported(broker, "take a queued task out of its queue", error);
  if (n_items == 0)
    return TRUE;
  ok = K(broker)->steering->remove_queued(broker, items, n_items, &local);
  if (!ok)
    for (guint i = 0; i < n_items; i++)
      items[i].removed = FALSE;
  return finish(broker, "remove_queued", ok, local, error);
}

gboolean
sluice_broker_replace_payloads(SluiceBroker *broker, SluiceReplacement *items,
                               guint n_items, GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL, FALSE);
  g_return_val_if_fail(items != NULL || n_items == 0, FALSE);
  for (guint i = 0; i < n_items; i++) {
    g_return_val_if_fail(
        items[i].payload != NULL && items[i].replacement != NULL, FALSE);
    g_return_val_if_fail(items[i].place == SLUICE_WAITING_QUEUED
                             ? items[i].queue != NULL
                             : items[i].handle != NULL,
                         FALSE);
    items[i].replaced = FALSE;
  }
  if (K(broker)->steering == NULL ||
      K(broker)->steering->replace_payloads == NULL)
    return unsupported(broker, "rewrite a waiting message", error);
  if (n_items == 0)
    return TRUE;
  ok = K(broker)->steering->replace_payloads(broker, items, n_items, &local);
  if (!ok)
    for (guint i = 0; i < n_items; i++)
      items[i].replaced = FALSE;
  return finish(broker, "replace_payloads", ok, local, error);
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
  if (K(broker)->joins == NULL)
    return unsupported(broker, "run workflows (it has no joins)", error);
  ok = K(broker)->joins->join_open(broker, joins, n_joins, items, n_items,
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
  if (K(broker)->joins == NULL)
    return unsupported(broker, "run workflows (it has no joins)", error);
  ok = K(broker)->joins->join_arrive(broker, items, n_items, &local);
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
  if (K(broker)->joins == NULL)
    return unsupported(broker, "run workflows (it has no joins)", error);
  ok = K(broker)->joins->join_read(broker, join_id, with_outcomes, out, &found,
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
  if (K(broker)->events == NULL)
    return TRUE;
  ok = K(broker)->events->put_progress(broker, id, progress, MAX(ttl_ms, 1),
                                       &local);
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
  if (K(broker)->events == NULL)
    return unsupported(broker, "store task progress", error);
  ok = K(broker)->events->get_progress(broker, id, &progress, &local);
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
  if (n == 0 || K(broker)->events == NULL)
    return TRUE;
  ok = K(broker)->events->append_events(broker, events, n, MAX(max_len, 1),
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
  if (K(broker)->events == NULL)
    return unsupported(broker, "keep events", error);
  ok = K(broker)->events->read_events(broker, cursor, MAX(limit, 1),
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
  if (K(broker)->joins == NULL)
    return unsupported(broker, "add tasks to an open batch", error);
  ok = K(broker)->joins->join_grow(broker, join_id, expected_total, by, items,
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
  if (K(broker)->rates == NULL)
    return unsupported(broker, "apply a rate limit", error);
  if (n_items == 0)
    return TRUE;
  ok = K(broker)->rates->rate_acquire(broker, items, n_items, &local);
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
  if (K(broker)->slots == NULL)
    return unsupported(broker, "apply a concurrency limit", error);
  if (n_items == 0)
    return TRUE;
  ok = K(broker)->slots->slot_acquire(broker, items, n_items, &local);
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
  if (K(broker)->slots == NULL)
    return unsupported(broker, "apply a concurrency limit", error);
  if (n_items == 0)
    return TRUE;
  ok = K(broker)->slots->slot_release(broker, items, n_items, &local);
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
  if (K(broker)->unique == NULL)
    return unsupported(broker, "enqueue with a uniqueness key", error);
  if (n_items == 0)
    return TRUE;
  ok = K(broker)->unique->unique_enqueue(broker, items, n_items, &local);
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
  if (K(broker)->unique == NULL)
    return unsupported(broker, "enqueue with a uniqueness key", error);
  if (n_items == 0)
    return TRUE;
  ok = K(broker)->unique->unique_update(broker, items, n_items, &local);
  return finish(broker, "unique_update", ok, local, error);
}

gboolean
sluice_broker_list_slots(SluiceBroker *broker, guint limit, GPtrArray *out,
                         GError **error)
{
  GError *local = NULL;
  gboolean ok;

  g_return_val_if_fail(broker != NULL && out != NULL, FALSE);
  if (K(broker)->slots == NULL)
    return unsupported(broker, "list concurrency slots", error);
  if (limit == 0)
    return TRUE;
  ok = K(broker)->slots->list_slots(broker, limit, out, &local);
  return finish(broker, "list_slots", ok, local, error);
}
