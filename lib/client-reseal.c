/* client-reseal.c - sealing what waits again under the keyring's current
 * key: ready messages, the schedule and the dead letters.
 *
 * The core decides every byte: it lists each place, opens a message sealed
 * with an older key (or takes one in clear), seals it with the current key
 * and asks the broker to swap the bytes if they are still the ones listed
 * (`replace_payloads`). A message fetched, promoted or replayed in between
 * is not touched: the worker that holds it seals it again itself if it
 * goes back to wait (a retry), so nothing is left behind that a later run
 * would not reach. Running tasks are not touched at all.
 */
#include "config.h"

#include <string.h>

#include "lib/sluice-private.h"

/* How many messages one listing and one rewrite take at a time. */
#define RESEAL_PAGE 100

typedef struct {
  SluiceClient *client;
  SluiceKeyring *keyring;
  SluiceResealCounts *counts;
  /* Task ids already sealed with the current key by this run: a broker
   * that adds a rewritten message again at the end of its queue lists it a
   * second time, which is not a second message. */
  GHashTable *done;
} Reseal;

/* The payload @bytes sealed with the current key, or NULL when it needs
 * nothing (counted) or cannot be opened (counted). */
static GBytes *
resealed(Reseal *r, GBytes *bytes)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceEnvelope) env = sluice_envelope_decode(bytes, NULL, NULL);
  const gchar *current = sluice_keyring_get_current(r->keyring);
  const guint8 *first;
  gsize len = 0;

  if (env == NULL) {
    r->counts->unreadable++;
    return NULL;
  }
  if (g_hash_table_contains(r->done, env->id))
    return NULL;
  if (env->seal != NULL) {
    const gchar *key = strchr(env->seal, ':');
    GBytes *plain;

    if (key != NULL && strcmp(key + 1, current) == 0) {
      r->counts->current++;
      return NULL;
    }
    plain = sluice_seal__open(r->keyring, SLUICE_SEAL_ARGS, env->seal, env->id,
                              env->task, env->queue, env->args, NULL);
    if (plain == NULL) {
      r->counts->unreadable++;
      return NULL;
    }
    g_bytes_unref(env->args);
    env->args = plain;
    g_clear_pointer(&env->seal, g_free);
  }
  if (env->args == NULL || !sluice_client__seal_args(r->keyring, env, &error)) {
    r->counts->unreadable++;
    return NULL;
  }
  /* The codec the producer chose: a JSON envelope stays JSON. */
  first = g_bytes_get_data(bytes, &len);
  return sluice_envelope_encode(
      len > 0 && first[0] == '{' ? sluice_codec_json() : sluice_codec_msgpack(),
      env, NULL);
}

/* Rewrites what @items hold (their @replacement set, or NULL: nothing to
 * do), counts the outcome and frees the replacements. */
static gboolean
rewrite(Reseal *r, GArray *items, GError **error)
{
  g_autoptr(GArray) todo = g_array_new(FALSE, FALSE, sizeof(SluiceReplacement));
  gboolean ok;

  for (guint i = 0; i < items->len; i++) {
    SluiceReplacement *it = &g_array_index(items, SluiceReplacement, i);
    if (it->replacement != NULL)
      g_array_append_val(todo, *it);
  }
  ok = sluice_broker_replace_payloads(sluice_client_get_broker(r->client),
                                      (SluiceReplacement *)todo->data,
                                      todo->len, error);
  for (guint i = 0; i < todo->len; i++) {
    SluiceReplacement *it = &g_array_index(todo, SluiceReplacement, i);
    g_autoptr(SluiceEnvelope) env =
        sluice_envelope_decode(it->replacement, NULL, NULL);

    if (!ok) {
      /* counted by nobody: the run stops with the error */
    } else if (it->replaced) {
      r->counts->resealed++;
      g_hash_table_add(r->done, g_strdup(env->id));
    } else {
      r->counts->moved++;
    }
    g_bytes_unref(it->replacement);
  }
  return ok;
}

/* Adds an item for @payload to @items if it needs sealing again. */
static void
consider(Reseal *r, GArray *items, SluiceWaitingPlace place, const gchar *queue,
         const gchar *handle, GBytes *payload)
{
  SluiceReplacement it = {place, queue, handle, payload, NULL, FALSE};

  it.replacement = resealed(r, payload);
  if (it.replacement != NULL)
    g_array_append_val(items, it);
}

static gboolean
reseal_queue(Reseal *r, const gchar *queue, GError **error)
{
  g_autofree gchar *cursor = NULL;

  do {
    g_autoptr(GPtrArray) page = g_ptr_array_new_with_free_func(
        (GDestroyNotify)sluice_listed_message_free);
    g_autoptr(GArray) items =
        g_array_new(FALSE, FALSE, sizeof(SluiceReplacement));
    gchar *next = NULL;

    if (!sluice_broker_list_queued(sluice_client_get_broker(r->client), queue,
                                   cursor, RESEAL_PAGE, page, &next, error))
      return FALSE;
    g_free(cursor);
    cursor = next;
    for (guint i = 0; i < page->len; i++) {
      SluiceListedMessage *m = page->pdata[i];
      consider(r, items, SLUICE_WAITING_QUEUED, queue, m->handle, m->payload);
    }
    if (!rewrite(r, items, error))
      return FALSE;
  } while (cursor != NULL);
  return TRUE;
}

static gboolean
reseal_schedule(Reseal *r, GError **error)
{
  g_autofree gchar *cursor = NULL;

  do {
    g_autoptr(GPtrArray) page = g_ptr_array_new_with_free_func(
        (GDestroyNotify)sluice_listed_message_free);
    g_autoptr(GArray) items =
        g_array_new(FALSE, FALSE, sizeof(SluiceReplacement));
    gchar *next = NULL;

    if (!sluice_broker_list_scheduled(sluice_client_get_broker(r->client),
                                      cursor, RESEAL_PAGE, page, &next, error))
      return FALSE;
    g_free(cursor);
    cursor = next;
    for (guint i = 0; i < page->len; i++) {
      SluiceListedMessage *m = page->pdata[i];
      consider(r, items, SLUICE_WAITING_SCHEDULED, m->queue, m->id, m->payload);
    }
    if (!rewrite(r, items, error))
      return FALSE;
  } while (cursor != NULL);
  return TRUE;
}

/* Dead letters keep their reason, detail and time; only the bytes of the
 * message change, so a replay runs it under the current key. */
static gboolean
reseal_dead_letters(Reseal *r, GError **error)
{
  g_autofree gchar *after = NULL;
  guint got;

  do {
    g_autoptr(GPtrArray) page =
        g_ptr_array_new_with_free_func((GDestroyNotify)sluice_dead_letter_free);
    g_autoptr(GArray) items =
        g_array_new(FALSE, FALSE, sizeof(SluiceReplacement));

    if (!sluice_broker_dlq_list(sluice_client_get_broker(r->client), after,
                                RESEAL_PAGE, page, error))
      return FALSE;
    got = page->len;
    for (guint i = 0; i < page->len; i++) {
      SluiceDeadLetter *dl = page->pdata[i];
      consider(r, items, SLUICE_WAITING_DEAD, dl->source, dl->entry_id,
               dl->payload);
    }
    if (got > 0) {
      g_free(after);
      after =
          g_strdup(((SluiceDeadLetter *)page->pdata[page->len - 1])->entry_id);
    }
    if (!rewrite(r, items, error))
      return FALSE;
  } while (got == RESEAL_PAGE);
  return TRUE;
}

gboolean
sluice_client_reseal(SluiceClient *client, SluiceResealCounts *out_counts,
                     GError **error)
{
  SluiceBroker *broker;
  SluiceBrokerStats stats;
  SluiceResealCounts counts = {0};
  Reseal r = {client, NULL, &counts, NULL};
  gboolean ok = TRUE;

  g_return_val_if_fail(client != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);

  broker = sluice_client_get_broker(client);
  r.keyring = sluice_client__get_keyring(client);
  if (r.keyring == NULL) {
    g_set_error_literal(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_KEYRING,
                        "sealing waiting tasks again needs a keyring: give "
                        "the client one (SluiceClientOptions.keyring; the "
                        "command's --keyring FILE or SLUICE_KEYRING)");
    return FALSE;
  }
  if (!sluice_broker_supports(broker, SLUICE_BROKER_FEATURE_STEERING)) {
    g_set_error(error, SLUICE_BROKER_ERROR, SLUICE_BROKER_ERROR_UNSUPPORTED,
                "the “%s” broker cannot list waiting tasks, so they cannot "
                "be sealed again",
                sluice_broker_get_name(broker));
    return FALSE;
  }
  sluice_broker_stats_init(&stats);
  if (!sluice_broker_stats(broker, NULL, &stats, error)) {
    sluice_broker_stats_clear(&stats);
    return FALSE;
  }
  r.done = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; ok && i < stats.queues->len; i++)
    ok = reseal_queue(&r, ((SluiceQueueStats *)stats.queues->pdata[i])->name,
                      error);
  ok = ok && reseal_schedule(&r, error) && reseal_dead_letters(&r, error);
  g_hash_table_unref(r.done);
  sluice_broker_stats_clear(&stats);
  if (out_counts != NULL)
    *out_counts = counts;
  return ok;
}
