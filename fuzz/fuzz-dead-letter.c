/* fuzz-dead-letter.c - a dead-letter entry as Redis returns it, and what
 * `sluice dlq show` does with it.
 *
 * The input is RESP, read by hiredis's own reader into replies as the
 * broker gets them from XRANGE; each is turned into a SluiceDeadLetter
 * (sluice_redis_broker__dead_letter_from_reply), its payload decoded as an
 * envelope, and its fields rendered the way the command renders them.
 * Oracles: decoding errors are codec errors with printable messages; every
 * field, as a table shows it (cli_terminal_text), is printable UTF-8; as
 * the JSON output writes it, it is a string the strict JSON reader accepts;
 * the args' JSON is valid JSON.
 */
#include "fuzz/fuzz-common.h"

#include "brokers/redis/redis-broker.h"
#include "cli/cli.h"
#include "serializers/codec-private.h"

#include <hiredis/hiredis.h>

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

static void
check_json_value(const gchar *json)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceJsonDoc) doc =
      sluice_json__scan(json, strlen(json), SLUICE_JSON_MAX_DEPTH, &error);

  FUZZ_ASSERT(doc != NULL, "not JSON (%s): %s",
              error != NULL ? error->message : "", json);
}

static void
check_field(const gchar *value)
{
  g_autofree gchar *cell = NULL;
  g_autoptr(GString) json = g_string_new(NULL);

  if (value == NULL)
    return;
  cell = cli_terminal_text(value, -1);
  FUZZ_ASSERT(fuzz_text_is_printable(cell), "a table shows: %s", cell);
  cli_json_append_string(json, value, -1);
  check_json_value(json->str);
}

static void
check_entry(SluiceDeadLetter *dl)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;

  check_field(dl->entry_id);
  check_field(dl->task_id);
  check_field(dl->task);
  check_field(dl->reason);
  check_field(dl->detail);
  check_field(dl->source);
  env = sluice_envelope_decode(dl->payload, NULL, &error);
  if (env == NULL) {
    FUZZ_ASSERT(error->domain == SLUICE_CODEC_ERROR, "not a codec error");
    fuzz_check_error(error);
    check_field(error->message);
    return;
  }
  check_field(env->id);
  check_field(env->task);
  check_field(env->queue);
  for (guint i = 0; env->history != NULL && i < env->history->len; i++)
    check_field(env->history->pdata[i]);
  {
    g_autofree gchar *args = cli_msgpack_to_json(env->args);

    check_json_value(args);
    check_field(args);
  }
}

/* hiredis 0.14 allocates an array reply's element pointers as soon as it
 * reads its header, however many the server declares ("*1943116755"), so
 * a hostile server could make it allocate gigabytes (the network layer's
 * reader refuses such a header first: docs/limits.md, "Security"). That
 * is hiredis's, not what this target is after: inputs that declare more
 * elements than they have bytes are skipped. */
static gboolean
declares_too_much(const guint8 *data, size_t size)
{
  for (size_t i = 0; i < size; i++) {
    guint64 n = 0;

    /* Any '*': a bulk string of the wrong length puts the next header
     * anywhere. */
    if (data[i] != '*')
      continue;
    for (size_t k = i + 1; k < size && g_ascii_isdigit(data[k]) && n <= size;
         k++)
      n = n * 10 + (guint64)(data[k] - '0');
    if (n > size)
      return TRUE;
  }
  return FALSE;
}

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  redisReader *reader;
  void *reply = NULL;

  fuzz_init();
  if (declares_too_much(data, size))
    return 0;
  reader = redisReaderCreate();
  if (redisReaderFeed(reader, (const char *)data, size) != REDIS_OK)
    goto out;
  while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply != NULL) {
    redisReply *r = reply;

    /* An XRANGE reply is an array of entries; accept a lone entry too. */
    if (r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements; i++) {
        SluiceDeadLetter *dl =
            sluice_redis_broker__dead_letter_from_reply(r->element[i]);
        if (dl != NULL) {
          check_entry(dl);
          sluice_dead_letter_free(dl);
        }
      }
      {
        SluiceDeadLetter *dl = sluice_redis_broker__dead_letter_from_reply(r);
        if (dl != NULL) {
          check_entry(dl);
          sluice_dead_letter_free(dl);
        }
      }
    }
    freeReplyObject(r);
    reply = NULL;
  }
out:
  redisReaderFree(reader);
  return 0;
}
