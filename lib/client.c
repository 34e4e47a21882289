/* client.c - the producer side (see sluice-client.h).
 *
 * The client turns a request into an envelope, encodes it once, and hands
 * the bytes to the broker with everything the broker must do in the same
 * atomic step (the idempotency claim, the queued/scheduled record). It never
 * decides anything a worker decides: attempts start at 1 and the retry
 * policy travels in the message's options.
 *
 * get_result() leans on the broker's wait_record(), which is driven by the
 * notification written with the final record; the client re-reads the record
 * at least every SAFETY_POLL_MS in case a notification was lost.
 */
#include "config.h"

#include <string.h>
#include <sys/random.h>

#include "lib/sluice-private.h"
#include "serializers/codec-private.h"

/* The first argument is the quark's name, not an expression. */
/* clang-format off */
G_DEFINE_QUARK(sluice-client-error-quark, sluice_client_error)
/* clang-format on */

#define SAFETY_POLL_MS 5000
/* How soon get_result notices its cancellable: a broker's wait cannot be
 * interrupted, so with one it waits in steps this long. */
#define CANCEL_CHECK_MS 200

struct _SluiceClient {
  gatomicrefcount ref_count;
  SluiceBroker *broker;
  SluiceClock *clock; /* the broker's; not owned separately */
  SluiceClientOptions options;
  SluiceHooks *hooks; /* producer hooks (middleware.c) */
};

void
sluice_client_options_init(SluiceClientOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  options->result_ttl_ms = SLUICE_DEFAULT_RESULT_TTL_MS;
  options->revoke_ttl_ms = SLUICE_DEFAULT_REVOKE_TTL_MS;
  options->dedup_ttl_ms = SLUICE_DEFAULT_DEDUP_TTL_MS;
  options->max_message_bytes = SLUICE_DEFAULT_MAX_MESSAGE_BYTES;
}

void
sluice_enqueue_options_init(SluiceEnqueueOptions *options)
{
  g_return_if_fail(options != NULL);
  memset(options, 0, sizeof *options);
  sluice_message_options_init(&options->options);
}

SluiceClient *
sluice_client_new(SluiceBroker *broker, const SluiceClientOptions *options,
                  GError **error)
{
  SluiceClient *client;

  g_return_val_if_fail(broker != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  client = g_new0(SluiceClient, 1);
  g_atomic_ref_count_init(&client->ref_count);
  client->broker = sluice_broker_ref(broker);
  client->clock = sluice_broker_get_clock(broker);
  if (options != NULL)
    client->options = *options;
  else
    sluice_client_options_init(&client->options);
  /* Zero means "the default" for every limit, so a zero-filled struct
   * works too. */
  if (client->options.result_ttl_ms <= 0)
    client->options.result_ttl_ms = SLUICE_DEFAULT_RESULT_TTL_MS;
  if (client->options.revoke_ttl_ms <= 0)
    client->options.revoke_ttl_ms = SLUICE_DEFAULT_REVOKE_TTL_MS;
  if (client->options.dedup_ttl_ms <= 0)
    client->options.dedup_ttl_ms = SLUICE_DEFAULT_DEDUP_TTL_MS;
  if (client->options.max_message_bytes == 0)
    client->options.max_message_bytes = SLUICE_DEFAULT_MAX_MESSAGE_BYTES;
  if (client->options.result_poll_interval_ms <= 0)
    client->options.result_poll_interval_ms = SAFETY_POLL_MS;
  if (client->options.codec == NULL)
    client->options.codec = sluice_codec_msgpack();
  if (client->options.registry != NULL)
    sluice_registry_ref(client->options.registry);
  if (client->options.keyring != NULL)
    sluice_keyring_ref(client->options.keyring);
  return client;
}

SluiceClient *
sluice_client_ref(SluiceClient *client)
{
  g_return_val_if_fail(client != NULL, NULL);
  g_atomic_ref_count_inc(&client->ref_count);
  return client;
}

void
sluice_client_unref(SluiceClient *client)
{
  if (client == NULL || !g_atomic_ref_count_dec(&client->ref_count))
    return;
  g_clear_pointer(&client->options.registry, sluice_registry_unref);
  g_clear_pointer(&client->options.keyring, sluice_keyring_unref);
  g_clear_pointer(&client->hooks, sluice_hooks__free);
  sluice_broker_unref(client->broker);
  g_free(client);
}

SluiceKeyring *
sluice_client__get_keyring(SluiceClient *client)
{
  return client->options.keyring;
}

SluiceBroker *
sluice_client_get_broker(SluiceClient *client)
{
  g_return_val_if_fail(client != NULL, NULL);
  return client->broker;
}

/* ---- Task ids ---------------------------------------------------------------
 *
 * A task id is a random (version 4) UUID. g_uuid_string_random() formats
 * through printf and draws from GLib's global, locked generator: that was
 * the largest cost of an enqueue. Here each thread has its own xoshiro256**
 * generator, seeded from the kernel, and the digits are written by hand.
 * The GPrivate key is the thread-local storage GLib requires.
 */

typedef struct {
  guint64 s[4];
} IdGenerator;

static GPrivate id_generator_key = G_PRIVATE_INIT(g_free);

static guint64
rotl64(guint64 x, int k)
{
  return (x << k) | (x >> (64 - k));
}

static guint64
id_generator_next(IdGenerator *g)
{
  guint64 result = rotl64(g->s[1] * 5, 7) * 9;
  guint64 t = g->s[1] << 17;

  g->s[2] ^= g->s[0];
  g->s[3] ^= g->s[1];
  g->s[1] ^= g->s[2];
  g->s[0] ^= g->s[3];
  g->s[2] ^= t;
  g->s[3] = rotl64(g->s[3], 45);
  return result;
}

static IdGenerator *
thread_id_generator(void)
{
  IdGenerator *g = g_private_get(&id_generator_key);

  if (G_UNLIKELY(g == NULL)) {
    g = g_new0(IdGenerator, 1);
    if (getrandom(g->s, sizeof g->s, 0) != (ssize_t)sizeof g->s) {
      /* No getrandom(): GLib's generator is seeded from /dev/urandom. */
      for (guint i = 0; i < 4; i++)
        g->s[i] = ((guint64)g_random_int() << 32) | g_random_int();
    }
    if ((g->s[0] | g->s[1] | g->s[2] | g->s[3]) == 0)
      g->s[0] = 1; /* the one state xoshiro cannot leave */
    g_private_set(&id_generator_key, g);
  }
  return g;
}

gchar *
sluice_client__new_id(void)
{
  static const gchar digits[] = "0123456789abcdef";
  IdGenerator *g = thread_id_generator();
  guint8 bytes[16];
  guint64 hi = id_generator_next(g), lo = id_generator_next(g);
  gchar *id = g_malloc(37);
  gchar *p = id;

  for (guint i = 0; i < 8; i++) {
    bytes[i] = (guint8)(hi >> (8 * i));
    bytes[8 + i] = (guint8)(lo >> (8 * i));
  }
  bytes[6] = (bytes[6] & 0x0f) | 0x40; /* version 4 */
  bytes[8] = (bytes[8] & 0x3f) | 0x80; /* RFC 4122 variant */
  for (guint i = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      *p++ = '-';
    *p++ = digits[bytes[i] >> 4];
    *p++ = digits[bytes[i] & 0x0f];
  }
  *p = '\0';
  return id;
}

/* ---- Enqueue ------------------------------------------------------------- */

typedef SluicePrepared Prepared;

gboolean
sluice_client__seal_args(SluiceKeyring *keyring, SluiceEnvelope *env,
                         GError **error)
{
  SluiceDecodeLimits limits;
  GBytes *sealed;
  gchar *label = NULL;

  /* Sealed, the args escape the encoder's checks: what a worker would
   * refuse once it opened them is refused here, as in clear. */
  sluice_decode_limits_init(&limits);
  limits.max_depth--;
  if (!sluice_envelope__check_opened_args(env->args, &limits, error))
    return FALSE;
  sealed = sluice_seal__close(keyring, SLUICE_SEAL_ARGS, env->id, env->task,
                              env->queue, env->args, &label, error);
  if (sealed == NULL)
    return FALSE;
  g_bytes_unref(env->args);
  env->args = sealed;
  g_free(env->seal);
  env->seal = label;
  return TRUE;
}

gboolean
sluice_client_open_args(SluiceClient *client, SluiceEnvelope *env,
                        GError **error)
{
  GBytes *plain;

  g_return_val_if_fail(client != NULL && env != NULL, FALSE);
  if (env->seal == NULL)
    return TRUE;
  plain =
      sluice_seal__open(client->options.keyring, SLUICE_SEAL_ARGS, env->seal,
                        env->id, env->task, env->queue, env->args, error);
  if (plain == NULL)
    return FALSE;
  g_bytes_unref(env->args);
  env->args = plain;
  g_clear_pointer(&env->seal, g_free);
  env->version = SLUICE_ENVELOPE_VERSION;
  return TRUE;
}

void
sluice_client__prepared_clear(Prepared *p)
{
  g_clear_pointer(&p->env, sluice_envelope_free);
  g_clear_pointer(&p->payload, g_bytes_unref);
  g_clear_pointer(&p->record, g_bytes_unref);
  g_clear_pointer(&p->unique_key, g_free);
}

gboolean
sluice_client__check_name(SluiceNameKind kind, const gchar *value,
                          GError **error)
{
  g_autofree gchar *problem =
      sluice_name__problem(kind, value, value != NULL ? strlen(value) : 0);

  if (problem == NULL)
    return TRUE;
  g_set_error_literal(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                      problem);
  return FALSE;
}

gboolean
sluice_client__prepare(SluiceClient *client, const gchar *task, GBytes *args,
                       const SluiceEnqueueOptions *options, const gchar *id,
                       const gchar *wf, gint64 now, Prepared *out,
                       GError **error)
{
  SluiceEnqueueOptions defaults;
  const gchar *queue;
  SluiceEnvelope *env;
  gint64 eta;
  gsize size;
  GError *local = NULL;

  memset(out, 0, sizeof *out);
  if (options == NULL) {
    sluice_enqueue_options_init(&defaults);
    options = &defaults;
  }

  if (!sluice_task__name_is_valid(task, &local)) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID, "%s",
                local->message);
    g_error_free(local);
    return FALSE;
  }
  queue = options->queue;
  if (queue == NULL && client->options.registry != NULL) {
    SluiceTaskOptions task_options;
    if (sluice_registry_get_options(client->options.registry, task,
                                    &task_options))
      queue = task_options.queue;
  }
  if (queue == NULL)
    queue = SLUICE_DEFAULT_QUEUE;
  if (!sluice_client__check_name(SLUICE_NAME_QUEUE, queue, error))
    return FALSE;
  if (options->id != NULL &&
      !sluice_client__check_name(SLUICE_NAME_ID, options->id, error))
    return FALSE;
  if (options->delay_ms < 0 || options->eta_ms < 0) {
    g_set_error_literal(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                        "delay_ms and eta_ms cannot be negative");
    return FALSE;
  }

  env = sluice_envelope_new();
  env->id = id != NULL            ? g_strdup(id)
            : options->id != NULL ? g_strdup(options->id)
                                  : sluice_client__new_id();
  env->wf = g_strdup(wf);
  env->task = g_strdup(task);
  env->queue = g_strdup(queue);
  if (args != NULL) {
    g_bytes_unref(env->args);
    env->args = g_bytes_ref(args);
  }
  env->attempt = 1;
  env->enqueued_at = now;
  env->opts = options->options;
  eta = options->eta_ms > 0     ? options->eta_ms
        : options->delay_ms > 0 ? now + options->delay_ms
                                : 0;
  /* An ETA in the past is simply due: send it straight to its queue. */
  if (eta > now)
    env->eta = eta;
  if (client->options.headers_hook != NULL)
    client->options.headers_hook(env, client->options.headers_hook_data);
  if (options->headers != NULL) {
    GHashTableIter iter;
    gpointer k, v;
    g_hash_table_iter_init(&iter, options->headers);
    while (g_hash_table_iter_next(&iter, &k, &v))
      sluice_envelope_set_header(env, k, v);
  }
  if (g_atomic_pointer_get(&client->hooks) != NULL &&
      !sluice_hooks__run_producer(client->hooks, env, error)) {
    g_prefix_error(error,
                   "cannot enqueue “%s”: rejected by a producer hook: ", task);
    sluice_envelope_free(env);
    return FALSE;
  }
  /* A malformed trace context would break every trace it joined. */
  if (!sluice_trace__check_envelope(env, error)) {
    g_prefix_error(error, "cannot enqueue “%s”: ", task);
    sluice_envelope_free(env);
    return FALSE;
  }

  out->env = env;
  out->due_at = env->eta;
  if (options->unique != NULL && wf != NULL) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_INVALID,
                "cannot enqueue “%s”: a task of a workflow cannot have a "
                "uniqueness key (the workflow runs each of its tasks once)",
                task);
    sluice_client__prepared_clear(out);
    return FALSE;
  }
  if (options->unique != NULL &&
      !sluice_unique__prepare(options->unique, client->options.dedup_ttl_ms,
                              now, out, error)) {
    g_prefix_error(error, "cannot enqueue “%s”: ", task);
    sluice_client__prepared_clear(out);
    return FALSE;
  }
  if (client->options.keyring == NULL ||
      sluice_client__seal_args(client->options.keyring, env, &local))
    out->payload = sluice_envelope_encode(client->options.codec, env, &local);
  if (out->payload == NULL) {
    /* Arguments that would cost too much to unpack are refused by the
     * encoder: the same kind of refusal as a message over
     * max_message_bytes, so the same code (the Python and Node clients
     * raise TooLarge for both too). */
    if (g_error_matches(local, SLUICE_CODEC_ERROR,
                        SLUICE_CODEC_ERROR_TOO_LARGE)) {
      g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_TOO_LARGE,
                  "cannot enqueue “%s”: %s", task, local->message);
      g_error_free(local);
    } else
      g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                 "cannot enqueue “%s”: ", task);
    sluice_client__prepared_clear(out);
    return FALSE;
  }
  size = g_bytes_get_size(out->payload);
  if (size > client->options.max_message_bytes) {
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_TOO_LARGE,
                "cannot enqueue “%s”: the message is %" G_GSIZE_FORMAT
                " bytes, over the limit of %" G_GSIZE_FORMAT
                " (max_message_bytes); keep large data elsewhere and pass a "
                "reference to it",
                task, size, client->options.max_message_bytes);
    sluice_client__prepared_clear(out);
    return FALSE;
  }
  out->due_at = env->eta;
  out->dedup = options->id != NULL;
  if (client->options.track_state) {
    g_autoptr(SluiceResult) r = sluice_result_new(
        env->id, env->eta > 0 ? SLUICE_STATE_SCHEDULED : SLUICE_STATE_QUEUED);
    sluice_result_set_task(r, env->task, env->queue);
    sluice_result_set_times(r, now, 0, 0);
    out->record = sluice_result_encode(r);
  }
  return TRUE;
}

static gint64
record_ttl(SluiceClient *client, const SluiceEnvelope *env)
{
  return env->opts.result_ttl_ms > 0 ? env->opts.result_ttl_ms
                                     : client->options.result_ttl_ms;
}

void
sluice_client__fill_submit(SluiceClient *client, Prepared *p, SluiceSubmit *s)
{
  memset(s, 0, sizeof *s);
  s->id = p->env->id;
  s->queue = p->env->queue;
  s->payload = p->payload;
  s->due_at = p->due_at;
  s->dedup_ttl_ms = p->dedup ? client->options.dedup_ttl_ms : 0;
  s->record = p->record;
  s->record_ttl_ms = record_ttl(client, p->env);
}

/* The replaced task never runs: say so in its record now (it may have
 * been taken off the schedule, where no worker would ever write one, and
 * someone may wait for its result).
 * Best effort, after the enqueue: the worker that meets a replaced task in
 * its queue writes the same. */
static void
record_replaced(SluiceClient *client, const SluiceEnvelope *by,
                const gchar *holder)
{
  const SluiceClientOptions *options = sluice_client__options(client);
  g_autoptr(SluiceResult) r = sluice_result_new(holder, SLUICE_STATE_CANCELLED);
  g_autofree gchar *why = g_strdup_printf(
      "replaced by task %s of the same uniqueness key before it started",
      by->id);
  g_autoptr(GBytes) bytes = NULL;
  g_autoptr(GError) error = NULL;
  gint64 now = sluice_clock_now_ms(sluice_client__clock(client));

  sluice_result_set_task(r, by->task, by->queue);
  sluice_result_set_error(r, why);
  sluice_result_set_times(r, 0, 0, now);
  bytes = sluice_result_encode(r);
  if (!sluice_broker_put_record(sluice_client_get_broker(client), holder, bytes,
                                TRUE, options->result_ttl_ms, &error))
    sluice_log__message(G_LOG_LEVEL_WARNING,
                        "could not record that task %s was replaced: %s",
                        holder, error->message);
}

/* Enqueues @n prepared messages that carry a uniqueness key, in one broker
 * call. Sets out_holders[i] (transfer full) to the holder's id of each
 * refused one, NULL for one written. */
static gboolean
unique_enqueue(SluiceClient *client, SluicePrepared *p, guint n,
               gchar **out_holders, GError **error)
{
  g_autofree SluiceUniqueSubmit *items = g_new0(SluiceUniqueSubmit, MAX(n, 1));
  gboolean ok;

  for (guint i = 0; i < n; i++) {
    sluice_client__fill_submit(client, &p[i], &items[i].submit);
    items[i].key = p[i].unique_key;
    items[i].claim_ttl_ms = p[i].unique_ttl_ms;
    items[i].replace = p[i].unique_replace;
    out_holders[i] = NULL;
  }
  ok = sluice_broker_unique_enqueue(sluice_client_get_broker(client), items, n,
                                    error);
  for (guint i = 0; i < n; i++) {
    /* A repeat of a call whose reply was lost finds its own claim. */
    if (ok && items[i].existed && items[i].holder != NULL &&
        !g_str_equal(items[i].holder, p[i].env->id))
      out_holders[i] = g_steal_pointer(&items[i].holder);
    else if (ok && items[i].submit.existed)
      out_holders[i] = g_strdup(p[i].env->id);
    else if (ok && items[i].replaced && items[i].holder != NULL)
      record_replaced(client, p[i].env, items[i].holder);
    g_free(items[i].holder);
  }
  return ok;
}

/* Consumes @p. A key held by another task is the holder's id with
 * @out_existed, or SLUICE_CLIENT_ERROR_DUPLICATE without. */
static gchar *
enqueue_unique(SluiceClient *client, Prepared *p, gboolean *out_existed,
               GError **error)
{
  gchar *holder = NULL;
  gchar *id = NULL;

  if (unique_enqueue(client, p, 1, &holder, error)) {
    /* The id's own idempotency claim (a caller-chosen id enqueued
     * before) is what a plain enqueue reports: the id, not an error. */
    if (holder != NULL && g_str_equal(holder, p->env->id)) {
      if (out_existed != NULL)
        *out_existed = TRUE;
      id = g_steal_pointer(&p->env->id);
      g_clear_pointer(&holder, g_free);
      sluice_client__prepared_clear(p);
      return id;
    }
    if (out_existed != NULL)
      *out_existed = holder != NULL;
    if (holder == NULL) {
      if (client->options.events)
        sluice_events__enqueued(client->broker, &p->env, 1,
                                sluice_clock_now_ms(client->clock));
      id = g_steal_pointer(&p->env->id);
    } else if (out_existed != NULL) {
      id = g_steal_pointer(&holder);
    } else {
      g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_DUPLICATE,
                  "cannot enqueue “%s”: its uniqueness key “%s” is held by "
                  "task %s; nothing was enqueued (wait for that task, or "
                  "enqueue with replace to supersede it)",
                  p->env->task, p->unique_key, holder);
    }
  }
  g_free(holder);
  sluice_client__prepared_clear(p);
  return id;
}

gchar *
sluice_client_enqueue_full(SluiceClient *client, const gchar *task,
                           GBytes *args, const SluiceEnqueueOptions *options,
                           gboolean *out_existed, GError **error)
{
  Prepared p;
  SluiceSubmit submit;
  gchar *id;

  g_return_val_if_fail(client != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  if (!sluice_client__prepare(client, task, args, options, NULL, NULL,
                              sluice_clock_now_ms(client->clock), &p, error))
    return NULL;
  if (p.unique_key != NULL)
    return enqueue_unique(client, &p, out_existed, error);
  sluice_client__fill_submit(client, &p, &submit);
  if (client->options.events)
    sluice_events__enqueued(client->broker, &p.env, 1,
                            sluice_clock_now_ms(client->clock));
  if (!sluice_broker_enqueue(client->broker, &submit, 1, error)) {
    sluice_client__prepared_clear(&p);
    return NULL;
  }
  if (out_existed != NULL)
    *out_existed = submit.existed;
  id = g_steal_pointer(&p.env->id);
  sluice_client__prepared_clear(&p);
  return id;
}

gchar *
sluice_client_enqueue(SluiceClient *client, const gchar *task, GBytes *args,
                      const SluiceEnqueueOptions *options, GError **error)
{
  return sluice_client_enqueue_full(client, task, args, options, NULL, error);
}

GPtrArray *
sluice_client_enqueue_batch(SluiceClient *client,
                            const SluiceEnqueueRequest *requests,
                            guint n_requests, GError **error)
{
  g_autofree Prepared *prepared = NULL;
  g_autofree SluiceSubmit *submits = NULL;
  GPtrArray *ids = NULL;
  gint64 now;
  guint n_ok = 0;

  g_return_val_if_fail(client != NULL, NULL);
  g_return_val_if_fail(requests != NULL || n_requests == 0, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  now = sluice_clock_now_ms(client->clock);
  prepared = g_new0(Prepared, MAX(n_requests, 1));
  submits = g_new0(SluiceSubmit, MAX(n_requests, 1));
  for (; n_ok < n_requests; n_ok++) {
    if (!sluice_client__prepare(client, requests[n_ok].task,
                                requests[n_ok].args, requests[n_ok].options,
                                NULL, NULL, now, &prepared[n_ok], error)) {
      g_prefix_error(error, "request %u of the batch: ", n_ok);
      goto out;
    }
    if (prepared[n_ok].unique_key != NULL) {
      g_set_error_literal(error, SLUICE_CLIENT_ERROR,
                          SLUICE_CLIENT_ERROR_INVALID,
                          "request %u of the batch: a task with a uniqueness "
                          "key is enqueued on its own, with "
                          "sluice_client_enqueue()");
      n_ok++;
      goto out;
    }
    sluice_client__fill_submit(client, &prepared[n_ok], &submits[n_ok]);
  }
  if (client->options.events) {
    g_autofree SluiceEnvelope **envs = g_new0(SluiceEnvelope *, n_requests + 1);
    for (guint i = 0; i < n_requests; i++)
      envs[i] = prepared[i].env;
    sluice_events__enqueued(client->broker, envs, n_requests, now);
  }
  if (!sluice_broker_enqueue(client->broker, submits, n_requests, error))
    goto out;

  ids = g_ptr_array_new_full(n_requests, g_free);
  for (guint i = 0; i < n_requests; i++)
    g_ptr_array_add(ids, g_steal_pointer(&prepared[i].env->id));
out:
  for (guint i = 0; i < n_ok; i++)
    sluice_client__prepared_clear(&prepared[i]);
  return ids;
}

/* ---- Results ------------------------------------------------------------- */

static SluiceResult *
decode_record(GBytes *bytes, const gchar *id, GError **error)
{
  SluiceResult *result = sluice_result_decode(bytes, error);

  if (result == NULL)
    g_prefix_error(error, "the record of task %s cannot be read: ", id);
  return result;
}

/* Replaces a sealed value by the value in clear; a value in clear is left
 * as it is. */
static gboolean
open_result(SluiceClient *client, SluiceResult *result, GError **error)
{
  const gchar *seal = sluice_result_get_seal(result);
  g_autoptr(GBytes) plain = NULL;

  if (seal == NULL)
    return TRUE;
  plain = sluice_seal__open(
      client->options.keyring, SLUICE_SEAL_RESULT, seal,
      sluice_result_get_id(result), sluice_result_get_task(result),
      sluice_result_get_queue(result), sluice_result_get_value(result), error);
  if (plain == NULL) {
    g_prefix_error(error, "the result of task %s is sealed: ",
                   sluice_result_get_id(result));
    return FALSE;
  }
  sluice_result_set_value(result, plain);
  sluice_result__set_seal(result, NULL);
  return TRUE;
}

SluiceResult *
sluice_client_get_result(SluiceClient *client, const gchar *id,
                         gint64 timeout_ms, GCancellable *cancellable,
                         GError **error)
{
  gint64 deadline;
  SluiceTaskState last_state = SLUICE_STATE_UNKNOWN;

  g_return_val_if_fail(client != NULL, NULL);
  g_return_val_if_fail(id != NULL, NULL);
  g_return_val_if_fail(cancellable == NULL || G_IS_CANCELLABLE(cancellable),
                       NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  /* Waiting is measured in real time even with a fake clock: a test that
   * waits for a result waits for threads, not for due times. */
  deadline =
      timeout_ms < 0 ? G_MAXINT64 : g_get_monotonic_time() / 1000 + timeout_ms;
  for (;;) {
    g_autoptr(GBytes) bytes = NULL;
    gint64 now = g_get_monotonic_time() / 1000;
    gint64 wait =
        MIN(MAX(deadline - now, 0), client->options.result_poll_interval_ms);

    /* A broker's wait cannot be interrupted: with a cancellable, wait in
     * short steps and look between them. */
    if (g_cancellable_set_error_if_cancelled(cancellable, error))
      return NULL;
    if (cancellable != NULL)
      wait = MIN(wait, CANCEL_CHECK_MS);
    if (!sluice_broker_wait_record(client->broker, id, wait, &bytes, error))
      return NULL;
    if (bytes != NULL) {
      g_autoptr(SluiceResult) result = decode_record(bytes, id, error);
      if (result == NULL)
        return NULL;
      last_state = sluice_result_get_state(result);
      if (sluice_task_state_is_final(last_state))
        return open_result(client, result, error) ? g_steal_pointer(&result)
                                                  : NULL;
    }
    if (g_get_monotonic_time() / 1000 >= deadline)
      break;
  }
  g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_TIMEOUT,
              "task %s did not finish within %" G_GINT64_FORMAT " ms (its "
              "record says: %s)",
              id, MAX(timeout_ms, 0),
              last_state == SLUICE_STATE_UNKNOWN
                  ? "nothing yet"
                  : sluice_task_state_to_string(last_state));
  return NULL;
}

/* What inspect says of a task it found on the schedule: scheduled (a delay
 * or an ETA), retrying (waiting for its next attempt), or deferred because
 * no worker knows its name. */
static SluiceResult *
result_of_scheduled(const gchar *id, const SluiceTaskLocation *loc)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceEnvelope) env =
      sluice_envelope_decode(loc->payload, NULL, &error);
  g_autoptr(SluiceEnvelope) newer = NULL;
  SluiceResult *r;

  if (env == NULL &&
      g_error_matches(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_VERSION) &&
      (newer = sluice_envelope__decode_header(loc->payload, NULL, NULL)) !=
          NULL &&
      newer->version > SLUICE_ENVELOPE_VERSION_NEWEST) {
    g_autofree gchar *note = sluice_envelope__newer_note(newer->version);

    r = sluice_result_new(id, SLUICE_STATE_SCHEDULED);
    sluice_result_set_task(r, newer->task, newer->queue);
    sluice_result_set_error(r, note);
  } else if (env == NULL) {
    r = sluice_result_new(id, SLUICE_STATE_SCHEDULED);
    sluice_result_set_task(r, NULL, loc->queue);
    sluice_result_set_error(r, "its message on the schedule cannot be "
                               "decoded; it is buried `malformed` when due");
  } else {
    r = sluice_result_new(id, env->attempt > 1 ? SLUICE_STATE_RETRYING
                                               : SLUICE_STATE_SCHEDULED);
    sluice_result_set_task(r, env->task, env->queue);
    sluice_result_set_attempt(r, env->attempt);
    sluice_result_set_times(r, env->enqueued_at, 0, 0);
    if (env->unknown_since > 0) {
      g_autoptr(GDateTime) since =
          g_date_time_new_from_unix_utc(env->unknown_since / 1000);
      g_autofree gchar *when =
          since != NULL ? g_date_time_format_iso8601(since) : NULL;
      g_autofree gchar *note = g_strdup_printf(
          "deferred: no worker knows a task named “%s” (since %s); it is "
          "buried unknown_task if none does by unknown_task_timeout",
          env->task, when != NULL ? when : "an unknown time");
      sluice_result_set_error(r, note);
    } else if (env->history != NULL && env->history->len > 0) {
      sluice_result_set_error(
          r, g_ptr_array_index(env->history, env->history->len - 1));
    }
  }
  sluice_result_set_due_at(r, loc->due_at);
  return r;
}

static SluiceResult *
result_of_dead_letter(const gchar *id, const SluiceDeadLetter *dl)
{
  g_autoptr(SluiceEnvelope) env =
      sluice_envelope_decode(dl->payload, NULL, NULL);
  SluiceResult *r = sluice_result_new(id, SLUICE_STATE_DEAD_LETTERED);

  sluice_result_set_task(r, dl->task, dl->source);
  if (env != NULL) {
    sluice_result_set_attempt(r, env->attempt);
    sluice_result_set_times(r, env->enqueued_at, 0, dl->at);
  }
  sluice_result_set_error(r, dl->detail);
  sluice_result_set_dead_letter_reason(r, dl->reason);
  return r;
}

SluiceResult *
sluice_client_inspect(SluiceClient *client, const gchar *id, GError **error)
{
  g_autoptr(GBytes) bytes = NULL;
  SluiceTaskLocation loc;
  SluiceResult *found = NULL;

  g_return_val_if_fail(client != NULL, NULL);
  g_return_val_if_fail(id != NULL, NULL);

  if (!sluice_broker_get_record(client->broker, id, &bytes, error))
    return NULL;
  if (bytes != NULL) {
    found = decode_record(bytes, id, error);
    /* A record says "scheduled" or "retrying"; the schedule says when. */
    if (found != NULL &&
        (sluice_result_get_state(found) == SLUICE_STATE_SCHEDULED ||
         sluice_result_get_state(found) == SLUICE_STATE_RETRYING) &&
        sluice_broker_lookup_task(client->broker, id, &loc, NULL)) {
      if (loc.place == SLUICE_TASK_PLACE_SCHEDULED)
        sluice_result_set_due_at(found, loc.due_at);
      sluice_task_location_clear(&loc);
    }
    /* Inspecting is for operators, who may hold no keyring: a value that
     * does not open stays sealed, and says with which key. */
    if (found != NULL && client->options.keyring != NULL)
      open_result(client, found, NULL);
    return found;
  }
  /* Without track_state a waiting task has no record, but it is still
   * somewhere a lookup by id finds it. */
  if (!sluice_broker_lookup_task(client->broker, id, &loc, error))
    return NULL;
  if (loc.place == SLUICE_TASK_PLACE_SCHEDULED)
    found = result_of_scheduled(id, &loc);
  else if (loc.place == SLUICE_TASK_PLACE_DEAD)
    found = result_of_dead_letter(id, loc.dead_letter);
  sluice_task_location_clear(&loc);
  if (found == NULL)
    g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_NOT_FOUND,
                "no record of task %s: it does not exist, its record "
                "expired, or it is queued or running with track_state off",
                id);
  return found;
}

GBytes *
sluice_client__cancelled_record(SluiceClient *client, const gchar *id,
                                GBytes *payload, const gchar *why)
{
  g_autoptr(SluiceEnvelope) env =
      payload != NULL ? sluice_envelope_decode(payload, NULL, NULL) : NULL;

  return sluice_client__cancelled_record_of(client, id, env, why);
}

GBytes *
sluice_client__cancelled_record_of(SluiceClient *client, const gchar *id,
                                   const SluiceEnvelope *env, const gchar *why)
{
  g_autoptr(SluiceResult) record =
      sluice_result_new(id, SLUICE_STATE_CANCELLED);
  g_autoptr(SluiceResult) stored = NULL;
  g_autoptr(GBytes) bytes = NULL;
  gint64 now = sluice_clock_now_ms(client->clock);

  if (env != NULL) {
    sluice_result_set_task(record, env->task, env->queue);
    sluice_result_set_attempt(record, env->attempt);
    sluice_result_set_times(record, env->enqueued_at, 0, now);
  } else {
    /* Best effort: without it the record is only less informative. */
    if (sluice_broker_get_record(client->broker, id, &bytes, NULL) &&
        bytes != NULL)
      stored = sluice_result_decode(bytes, NULL);
    if (stored != NULL) {
      sluice_result_set_task(record, sluice_result_get_task(stored),
                             sluice_result_get_queue(stored));
      sluice_result_set_attempt(record, sluice_result_get_attempt(stored));
    }
    sluice_result_set_times(
        record, stored != NULL ? sluice_result_get_enqueued_at(stored) : 0, 0,
        now);
  }
  sluice_result_set_error(record, why);
  return sluice_result_encode(record);
}

gboolean
sluice_client__scheduled_payload(SluiceClient *client, const gchar *id,
                                 GBytes **out_payload, GError **error)
{
  SluiceTaskLocation loc = {0};

  *out_payload = NULL;
  if (!sluice_broker_lookup_task(client->broker, id, &loc, error))
    return FALSE;
  if (loc.place == SLUICE_TASK_PLACE_SCHEDULED && loc.payload != NULL)
    *out_payload = g_bytes_ref(loc.payload);
  sluice_task_location_clear(&loc);
  return TRUE;
}

SluiceCancelOutcome
sluice_client_cancel(SluiceClient *client, const gchar *id, GError **error)
{
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GBytes) bytes = NULL;
  gboolean removed = FALSE;
  gint64 now;

  g_return_val_if_fail(client != NULL, SLUICE_CANCEL_FAILED);
  g_return_val_if_fail(id != NULL, SLUICE_CANCEL_FAILED);
  g_return_val_if_fail(error == NULL || *error == NULL, SLUICE_CANCEL_FAILED);

  now = sluice_clock_now_ms(client->clock);
  /* The record keeps the task's name, queue and enqueue time: they are in
   * its scheduled message (or its record), not in the cancellation. */
  if (!sluice_client__scheduled_payload(client, id, &payload, error))
    return SLUICE_CANCEL_FAILED;
  bytes = sluice_client__cancelled_record(client, id, payload,
                                          "cancelled before it ran");
  if (!sluice_broker_cancel_scheduled(client->broker, id, bytes,
                                      client->options.result_ttl_ms, &removed,
                                      error))
    return SLUICE_CANCEL_FAILED;
  if (removed)
    return SLUICE_CANCEL_REMOVED;
  if (!sluice_broker_revoke(client->broker, id,
                            now + client->options.revoke_ttl_ms, error))
    return SLUICE_CANCEL_FAILED;
  return SLUICE_CANCEL_REVOKED;
}

/* Marks the paused queues of @out; with every queue asked for, a paused
 * queue nothing was enqueued to yet is listed too. Pauses are the core's
 * business, so brokers' stats know nothing of them. */
static gboolean
mark_paused(SluiceClient *client, gboolean every_queue, SluiceBrokerStats *out,
            GError **error)
{
  g_autoptr(GPtrArray) paused = g_ptr_array_new_with_free_func(g_free);

  if (!sluice_broker_list_paused(client->broker, paused, error))
    return FALSE;
  for (guint i = 0; i < paused->len; i++) {
    gboolean listed = FALSE;

    for (guint k = 0; k < out->queues->len; k++) {
      SluiceQueueStats *q = out->queues->pdata[k];
      if (g_strcmp0(q->name, paused->pdata[i]) == 0)
        q->paused = listed = TRUE;
    }
    if (!listed && every_queue) {
      sluice_broker_stats_add_queue(out, paused->pdata[i], 0);
      ((SluiceQueueStats *)out->queues->pdata[out->queues->len - 1])->paused =
          TRUE;
    }
  }
  return TRUE;
}

gboolean
sluice_client_get_stats(SluiceClient *client, const gchar *const *queues,
                        SluiceBrokerStats *out, GError **error)
{
  g_return_val_if_fail(client != NULL, FALSE);
  g_return_val_if_fail(out != NULL, FALSE);
  sluice_broker_stats_init(out);
  if (!sluice_broker_stats(client->broker, queues, out, error) ||
      !mark_paused(client, queues == NULL, out, error)) {
    sluice_broker_stats_clear(out);
    return FALSE;
  }
  for (guint i = 0; i < out->workers->len; i++)
    sluice_worker_info__decode(out->workers->pdata[i]);
  return TRUE;
}

const SluiceClientOptions *
sluice_client__options(SluiceClient *client)
{
  return &client->options;
}

SluiceClock *
sluice_client__clock(SluiceClient *client)
{
  return client->clock;
}

void
sluice_client_add_producer_hook(SluiceClient *client, SluiceProducerHook hook,
                                gpointer user_data, GDestroyNotify destroy)
{
  g_return_if_fail(client != NULL && hook != NULL);
  /* Made on first use; the pointer is set once, before it is shared with
   * hooks, under the hooks' own lock from then on. */
  if (g_once_init_enter(&client->hooks))
    g_once_init_leave(&client->hooks, sluice_hooks__new());
  sluice_hooks__add(client->hooks, hook, user_data, destroy);
}

gboolean
sluice_client_count_servers(SluiceClient *client, const gchar *task,
                            guint *out_serving, guint *out_announced,
                            GError **error)
{
  static const gchar *const no_queues[] = {NULL};
  SluiceBrokerStats stats;
  guint serving = 0, announced = 0;

  g_return_val_if_fail(client != NULL && task != NULL, FALSE);
  if (!sluice_client_get_stats(client, no_queues, &stats, error))
    return FALSE;
  for (guint i = 0; i < stats.workers->len; i++) {
    SluiceWorkerInfo *w = stats.workers->pdata[i];
    if (!w->alive || w->info == NULL)
      continue;
    announced++;
    if (w->tasks != NULL &&
        g_strv_contains((const gchar *const *)w->tasks, task))
      serving++;
  }
  sluice_broker_stats_clear(&stats);
  if (out_serving != NULL)
    *out_serving = serving;
  if (out_announced != NULL)
    *out_announced = announced;
  return TRUE;
}

/* ---- Dead letters -------------------------------------------------------- */

#define DLQ_PAGE 256

GPtrArray *
sluice_client_dlq_list(SluiceClient *client, const gchar *after, guint limit,
                       const gchar *reason, const gchar *task, GError **error)
{
  g_autoptr(GPtrArray) out = NULL;
  g_autofree gchar *cursor = g_strdup(after);

  g_return_val_if_fail(client != NULL, NULL);
  if (limit == 0)
    limit = 100;
  out = g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);

  /* Filters are applied here, page by page, so a broker only has to list. */
  while (out->len < limit) {
    g_autoptr(GPtrArray) page =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
    guint want = (reason == NULL && task == NULL) ? limit - out->len : DLQ_PAGE;

    if (!sluice_broker_dlq_list(client->broker, cursor, want, page, error))
      return NULL;
    for (guint i = 0; i < page->len && out->len < limit; i++) {
      SluiceDeadLetter *entry = page->pdata[i];
      if (reason != NULL && g_strcmp0(entry->reason, reason) != 0)
        continue;
      if (task != NULL && g_strcmp0(entry->task, task) != 0)
        continue;
      g_ptr_array_add(out, sluice_dead_letter_copy(entry));
    }
    if (page->len < want)
      break;
    g_free(cursor);
    cursor =
        g_strdup(((SluiceDeadLetter *)page->pdata[page->len - 1])->entry_id);
  }
  return g_steal_pointer(&out);
}

static void
not_found(const gchar *entry_id, GError **error)
{
  g_set_error(error, SLUICE_CLIENT_ERROR, SLUICE_CLIENT_ERROR_NOT_FOUND,
              "no dead letter with entry id %s (list them with "
              "sluice_client_dlq_list or `sluice dlq list`)",
              entry_id);
}

SluiceDeadLetter *
sluice_client_dlq_get(SluiceClient *client, const gchar *entry_id,
                      GError **error)
{
  SluiceDeadLetter *entry = NULL;
  GError *local = NULL;

  g_return_val_if_fail(client != NULL, NULL);
  g_return_val_if_fail(entry_id != NULL, NULL);
  if (!sluice_broker_dlq_get(client->broker, entry_id, &entry, &local)) {
    if (g_error_matches(local, SLUICE_BROKER_ERROR,
                        SLUICE_BROKER_ERROR_NOT_FOUND)) {
      g_error_free(local);
      not_found(entry_id, error);
    } else {
      g_propagate_error(error, local);
    }
    return NULL;
  }
  return entry;
}

gboolean
sluice_client_dlq_replay(SluiceClient *client, const gchar *entry_id,
                         gboolean keep_attempt, gchar **out_task_id,
                         GError **error)
{
  g_autoptr(SluiceDeadLetter) entry = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  g_autoptr(GBytes) payload = NULL;
  g_autoptr(GBytes) record = NULL;
  g_autofree gchar *id = NULL;
  const gchar *queue;
  SluiceSubmit submit;
  gboolean found = FALSE;

  g_return_val_if_fail(client != NULL, FALSE);
  g_return_val_if_fail(entry_id != NULL, FALSE);

  entry = sluice_client_dlq_get(client, entry_id, error);
  if (entry == NULL)
    return FALSE;

  env = sluice_envelope_decode(entry->payload, NULL, NULL);
  if (env != NULL) {
    g_autoptr(SluiceResult) r = NULL;
    /* The original message, with its budget restored unless asked to keep
     * it. Its id, arguments, options and history stay as they were. */
    if (!keep_attempt) {
      env->attempt = 1;
      env->snoozes = 0;
    }
    env->unknown_since = 0;
    env->eta = 0;
    payload = sluice_envelope_encode(sluice_codec_msgpack(), env, error);
    if (payload == NULL)
      return FALSE;
    id = g_strdup(env->id);
    queue = env->queue;
    /* A queued record replaces the dead_lettered one, so that get_result()
     * waits for the new run instead of returning the old outcome. */
    r = sluice_result_new(id, SLUICE_STATE_QUEUED);
    sluice_result_set_task(r, env->task, env->queue);
    sluice_result_set_attempt(r, 0);
    sluice_result_set_times(r, sluice_clock_now_ms(client->clock), 0, 0);
    record = sluice_result_encode(r);
  } else {
    /* A malformed message goes back byte for byte: maybe a newer worker
     * can read it. It has no id of its own, so it gets one. */
    payload = g_bytes_ref(entry->payload);
    id = entry->task_id != NULL ? g_strdup(entry->task_id)
                                : g_strdup_printf("replay:%s", entry_id);
    queue = entry->source != NULL ? entry->source : SLUICE_DEFAULT_QUEUE;
  }

  memset(&submit, 0, sizeof submit);
  submit.id = id;
  submit.queue = queue;
  submit.payload = payload;
  submit.record = record;
  submit.record_ttl_ms = client->options.result_ttl_ms;
  if (!sluice_broker_dlq_replay(client->broker, entry_id, &submit, &found,
                                error))
    return FALSE;
  if (!found) {
    not_found(entry_id, error);
    return FALSE;
  }
  if (out_task_id != NULL)
    *out_task_id = g_steal_pointer(&id);
  return TRUE;
}

gboolean
sluice_client_dlq_delete(SluiceClient *client, const gchar *entry_id,
                         GError **error)
{
  gboolean found = FALSE;

  g_return_val_if_fail(client != NULL, FALSE);
  g_return_val_if_fail(entry_id != NULL, FALSE);
  if (!sluice_broker_dlq_delete(client->broker, entry_id, &found, error))
    return FALSE;
  if (!found) {
    not_found(entry_id, error);
    return FALSE;
  }
  return TRUE;
}

GPtrArray *
sluice_client_list_slots(SluiceClient *client, guint limit, GError **error)
{
  g_autoptr(GPtrArray) out =
      g_ptr_array_new_with_free_func((GDestroyNotify)sluice_slot_state_free);

  g_return_val_if_fail(client != NULL, NULL);
  if (!sluice_broker_list_slots(client->broker, limit, out, error))
    return NULL;
  return g_steal_pointer(&out);
}
