/* envelope-fields.c - every field rule of the wire format.
 *
 * The two codecs differ only in how they walk their input and write their
 * output. What a field may hold (its type, range, length, UTF-8) is decided
 * here, once: each decoder hands every known field over as a SluiceMpValue
 * (the JSON codec converts its nodes to that shape), and both encoders call
 * sluice_envelope__validate() before writing, so that an encoder never
 * produces bytes that a decoder refuses. PROTOCOL.md is the prose form of
 * the rules below; keep them in step. The codecs call into this file and
 * envelope.c calls the codecs, so nothing here calls back.
 */
#include "config.h"

#include <sluice/sluice.h>

#include "serializers/text.h"
#include "serializers/codec-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Wire names, in the order the encoders write them. */
static const gchar *const key_names[SLUICE_N_KEYS] = {
    "v",           "id",  "task", "queue",         "args",    "attempt",
    "enqueued_at", "eta", "opts", "unknown_since", "history", "headers",
    "wf",          "snz", "uq",   "seal",
};

static const gchar *const option_names[SLUICE_N_OPTS] = {
    "max_attempts",  "initial_backoff_ms", "multiplier",      "max_backoff_ms",
    "jitter",        "timeout_ms",         "expires_at",      "store_result",
    "result_ttl_ms", "dead_letter",        "hard_timeout_ms",
};

/* The same, as error messages name them; static so that decoding a valid
 * `opts` map allocates nothing. */
static const gchar *const option_fields[SLUICE_N_OPTS] = {
    "opts.max_attempts",    "opts.initial_backoff_ms",
    "opts.multiplier",      "opts.max_backoff_ms",
    "opts.jitter",          "opts.timeout_ms",
    "opts.expires_at",      "opts.store_result",
    "opts.result_ttl_ms",   "opts.dead_letter",
    "opts.hard_timeout_ms",
};

/* The keys without which an envelope cannot be run. */
#define REQUIRED_KEYS                                                          \
  (1u << SLUICE_KEY_V | 1u << SLUICE_KEY_ID | 1u << SLUICE_KEY_TASK |          \
   1u << SLUICE_KEY_QUEUE | 1u << SLUICE_KEY_ATTEMPT)

/* ---- Keys ---------------------------------------------------------------- */

const gchar *
sluice_envelope__key_name(SluiceEnvelopeKey key)
{
  g_return_val_if_fail(key >= 0 && key < SLUICE_N_KEYS, "?");
  return key_names[key];
}

const gchar *
sluice_envelope__option_name(SluiceOptionKey key)
{
  g_return_val_if_fail(key >= 0 && key < SLUICE_N_OPTS, "?");
  return option_names[key];
}

/* Runs for every key of every envelope decoded: the first byte rules out
 * most names before any length is taken. */
static gint
lookup(const gchar *const *names, gint n, const gchar *name, gsize len)
{
  if (len == 0)
    return -1;
  for (gint i = 0; i < n; i++) {
    if (names[i][0] != name[0])
      continue;
    if (strlen(names[i]) == len && memcmp(names[i], name, len) == 0)
      return i;
  }
  return -1;
}

SluiceEnvelopeKey
sluice_envelope__key_lookup(const gchar *name, gsize len)
{
  return (SluiceEnvelopeKey)lookup(key_names, SLUICE_N_KEYS, name, len);
}

SluiceOptionKey
sluice_envelope__option_lookup(const gchar *name, gsize len)
{
  return (SluiceOptionKey)lookup(option_names, SLUICE_N_OPTS, name, len);
}

/* ---- Field rules ----------------------------------------------------------
 *
 * Error messages follow one shape: "<field>: <what is wrong> (byte offset
 * N)", the offset only when the value came from msgpack bytes.
 */

static gchar *
where(const SluiceMpValue *v)
{
  if (v->offset == G_MAXSIZE)
    return g_strdup("");
  return g_strdup_printf(" (byte offset %" G_GSIZE_FORMAT ")", v->offset);
}

static gboolean
wrong_type(const gchar *field, const gchar *expected, const SluiceMpValue *v,
           GError **error)
{
  g_autofree gchar *at = where(v);

  g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_WRONG_TYPE,
              "%s: expected %s, found %s%s", field, expected,
              sluice_mp__type_name(v->type), at);
  return FALSE;
}

static gboolean
ascii_without_nul(const gchar *s, gsize len)
{
  const guint64 ones = G_GUINT64_CONSTANT(0x0101010101010101);
  const guint64 highs = G_GUINT64_CONSTANT(0x8080808080808080);
  gsize i = 0;

  for (; i + 8 <= len; i += 8) {
    guint64 w;
    memcpy(&w, s + i, 8);
    /* (w - ones) & ~w & highs is non-zero iff some byte of w is zero. */
    if ((w & highs) != 0 || ((w - ones) & ~w & highs) != 0)
      return FALSE;
  }
  for (; i < len; i++)
    if ((guchar)s[i] >= 0x80 || s[i] == '\0')
      return FALSE;
  return TRUE;
}

gboolean
sluice_codec__check_text(const gchar *what, const gchar *s, gsize len,
                         GError **error)
{
  const gchar *end;

  /* Ids, task names and queue names are nearly always ASCII: check eight
   * bytes at a time for "no byte >= 0x80 and no NUL", and leave anything
   * else to g_utf8_validate_len(), which walks byte by byte. */
  if (G_LIKELY(ascii_without_nul(s, len)))
    return TRUE;
  if (!g_utf8_validate_len(s, len, &end)) {
    g_set_error(
        error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
        "%s: not valid UTF-8 (or holds a NUL byte) at byte %" G_GSIZE_FORMAT
        " of the string",
        what, (gsize)(end - s));
    return FALSE;
  }
  return TRUE;
}

gchar *
sluice_name__problem(SluiceNameKind kind, const gchar *s, gsize len)
{
  static const gchar *const what[] = {"task id", "task name", "queue name"};
  gsize max =
      kind == SLUICE_NAME_ID ? SLUICE_MAX_ID_BYTES : SLUICE_MAX_NAME_BYTES;
  g_autoptr(GError) text = NULL;

  if (s == NULL || len == 0)
    return g_strdup_printf("the %s cannot be empty", what[kind]);
  if (len > max) {
    g_autofree gchar *shown = sluice_text__escape(s, (gssize)len, 40);
    return g_strdup_printf("the %s “%s” is %" G_GSIZE_FORMAT
                           " bytes long; the limit is %" G_GSIZE_FORMAT,
                           what[kind], shown, len, max);
  }
  /* Printable ASCII is valid UTF-8 without NUL: a task name needs one
   * pass (this runs several times per message, at enqueue and decode). */
  if (kind != SLUICE_NAME_TASK &&
      !sluice_codec__check_text(what[kind], s, len, &text))
    return g_strdup_printf("the %s is not valid UTF-8 (or holds a NUL byte)",
                           what[kind]);
  if (kind == SLUICE_NAME_TASK)
    for (gsize i = 0; i < len; i++)
      if (!g_ascii_isgraph(s[i])) {
        g_autofree gchar *shown = sluice_text__escape(s, (gssize)len, 0);
        return g_strdup_printf(
            "the task name “%s” has a space or a character that is not "
            "printable ASCII at byte %" G_GSIZE_FORMAT
            "; use names such as “mail.send”",
            shown, i);
      }
  return NULL;
}

static gboolean
check_name(const gchar *field, SluiceNameKind kind, const gchar *s, gsize len,
           GError **error)
{
  g_autofree gchar *problem = sluice_name__problem(kind, s, len);

  if (problem == NULL)
    return TRUE;
  g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID, "%s: %s",
              field, problem);
  return FALSE;
}

/* Any integer in [@min, G_MAXINT64]. */
static gboolean
get_int64(const gchar *field, const SluiceMpValue *v, gint64 min, gint64 *out,
          GError **error)
{
  gint64 value;

  if (v->type == SLUICE_MP_UINT) {
    if (v->u > G_MAXINT64) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "%s: %" G_GUINT64_FORMAT
                  " does not fit a signed 64-bit integer",
                  field, v->u);
      return FALSE;
    }
    value = (gint64)v->u;
  } else if (v->type == SLUICE_MP_INT) {
    value = v->i;
  } else {
    return wrong_type(field, "an integer", v, error);
  }
  if (value < min) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "%s: must be >= %" G_GINT64_FORMAT ", found %" G_GINT64_FORMAT,
                field, min, value);
    return FALSE;
  }
  *out = value;
  return TRUE;
}

/* Any integer in [@min, G_MAXUINT32]. */
static gboolean
get_uint32(const gchar *field, const SluiceMpValue *v, guint32 min,
           guint32 *out, GError **error)
{
  gint64 value = 0;

  if (v->type == SLUICE_MP_UINT && v->u > G_MAXUINT32) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "%s: %" G_GUINT64_FORMAT " is above the limit of %u", field,
                v->u, G_MAXUINT32);
    return FALSE;
  }
  if (!get_int64(field, v, min, &value, error))
    return FALSE;
  *out = (guint32)value;
  return TRUE;
}

static gboolean
get_bool(const gchar *field, const SluiceMpValue *v, SluiceTristate *out,
         GError **error)
{
  if (v->type != SLUICE_MP_BOOL)
    return wrong_type(field, "a boolean", v, error);
  *out = v->b ? SLUICE_ON : SLUICE_OFF;
  return TRUE;
}

static gboolean
get_string(const gchar *field, const SluiceMpValue *v, SluiceNameKind kind,
           gchar **out, GError **error)
{
  if (v->type != SLUICE_MP_STR)
    return wrong_type(field, "a string", v, error);
  if (!check_name(field, kind, v->raw.data, v->raw.len, error))
    return FALSE;
  g_free(*out);
  *out = g_strndup(v->raw.data, v->raw.len);
  return TRUE;
}

/* The workflow reference is the core's (lib/workflow-run.c reads it): here
 * only its size and its text are checked. */
static gboolean
check_wf(const gchar *s, gsize len, GError **error)
{
  if (len == 0 || len > SLUICE_MAX_WF_BYTES) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "wf: must be 1 to %d bytes long, found %" G_GSIZE_FORMAT,
                SLUICE_MAX_WF_BYTES, len);
    return FALSE;
  }
  return sluice_codec__check_text("wf", s, len, error);
}

/* The uniqueness claim is the core's ("<scope letter>:<key>", read by
 * lib/unique.c): here only its size and its text are checked. */
static gboolean
check_unique(const gchar *s, gsize len, GError **error)
{
  if (len < 3 || len > SLUICE_MAX_UNIQUE_BYTES || s[1] != ':') {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "uq: must be a scope letter, “:” and a key, 3 to %d bytes "
                "long, found %" G_GSIZE_FORMAT " bytes",
                SLUICE_MAX_UNIQUE_BYTES, len);
    return FALSE;
  }
  return sluice_codec__check_text("uq", s, len, error);
}

/* "ALGORITHM:KEY-ID": which algorithm and which key of a keyring sealed
 * the args (lib/seal.c opens them). Only its shape is checked here, so
 * that a message naming an algorithm or key this worker lacks still
 * decodes and is buried with that reason instead of as unreadable. */
static gboolean
check_seal(const gchar *s, gsize len, GError **error)
{
  const gchar *colon = memchr(s, ':', len);
  gsize alg_len = colon != NULL ? (gsize)(colon - s) : 0;
  gsize id_len = colon != NULL ? len - alg_len - 1 : 0;
  gboolean ok = alg_len >= 1 && alg_len <= 32 && id_len >= 1 &&
                id_len <= SLUICE_MAX_KEY_ID_BYTES;

  for (gsize i = 0; ok && i < len; i++) {
    if (i == alg_len)
      continue;
    ok = g_ascii_isalnum(s[i]) || s[i] == '-' ||
         (i > alg_len && (s[i] == '.' || s[i] == '_'));
  }
  if (!ok) {
    g_autofree gchar *found = sluice_text__escape(s, len, 80);

    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "seal: must be “ALGORITHM:KEY-ID” (letters, digits, “-”; "
                "the key id also “.” and “_”, 1 to %d bytes), found “%s”",
                SLUICE_MAX_KEY_ID_BYTES, found);
    return FALSE;
  }
  return TRUE;
}

/* Sealed args are one msgpack bin of at least a nonce and a tag. */
static gboolean
check_sealed_args(GBytes *args, GError **error)
{
  gsize len = 0;
  const guint8 *b = args != NULL ? g_bytes_get_data(args, &len) : NULL;
  gsize head = 0, n = 0;

  if (len >= 2 && b[0] == 0xc4) {
    head = 2;
    n = b[1];
  } else if (len >= 3 && b[0] == 0xc5) {
    head = 3;
    n = (gsize)b[1] << 8 | b[2];
  } else if (len >= 5 && b[0] == 0xc6) {
    head = 5;
    n = (gsize)b[1] << 24 | (gsize)b[2] << 16 | (gsize)b[3] << 8 | b[4];
  }
  if (head == 0 || head + n != len || n < SLUICE_SEAL_OVERHEAD) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "args: with “seal”, args must be one bin of at least %d "
                "bytes (nonce, ciphertext and tag)",
                SLUICE_SEAL_OVERHEAD);
    return FALSE;
  }
  return TRUE;
}

guint
sluice_envelope__version_to_write(const SluiceEnvelope *env)
{
  return env->seal != NULL ? SLUICE_ENVELOPE_VERSION_SEALED
                           : SLUICE_ENVELOPE_VERSION;
}

gboolean
sluice_envelope__set_field(SluiceEnvelope *env, SluiceEnvelopeKey key,
                           const SluiceMpValue *v, GError **error)
{
  const gchar *field = key_names[key];
  guint32 u32;

  switch (key) {
  case SLUICE_KEY_V:
    if (v->type != SLUICE_MP_UINT && v->type != SLUICE_MP_INT)
      return wrong_type(field, "an integer (the format version)", v, error);
    if (v->type != SLUICE_MP_UINT || v->u < SLUICE_ENVELOPE_VERSION ||
        v->u > SLUICE_ENVELOPE_VERSION_NEWEST) {
      g_autofree gchar *version =
          v->type == SLUICE_MP_UINT
              ? g_strdup_printf("%" G_GUINT64_FORMAT, v->u)
              : g_strdup_printf("%" G_GINT64_FORMAT, v->i);
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_VERSION,
                  "v: envelope format version %s is not supported (this "
                  "build reads versions %d to %d)",
                  version, SLUICE_ENVELOPE_VERSION,
                  SLUICE_ENVELOPE_VERSION_NEWEST);
      return FALSE;
    }
    env->version = (guint)v->u;
    return TRUE;
  case SLUICE_KEY_ID:
    return get_string(field, v, SLUICE_NAME_ID, &env->id, error);
  case SLUICE_KEY_TASK:
    return get_string(field, v, SLUICE_NAME_TASK, &env->task, error);
  case SLUICE_KEY_QUEUE:
    return get_string(field, v, SLUICE_NAME_QUEUE, &env->queue, error);
  case SLUICE_KEY_ATTEMPT:
    if (!get_uint32(field, v, 1, &u32, error))
      return FALSE;
    env->attempt = u32;
    return TRUE;
  case SLUICE_KEY_ENQUEUED_AT:
    return get_int64(field, v, 0, &env->enqueued_at, error);
  case SLUICE_KEY_ETA:
    return get_int64(field, v, 0, &env->eta, error);
  case SLUICE_KEY_UNKNOWN_SINCE:
    return get_int64(field, v, 0, &env->unknown_since, error);
  case SLUICE_KEY_WF:
    if (v->type != SLUICE_MP_STR)
      return wrong_type(field, "a string", v, error);
    if (!check_wf(v->raw.data, v->raw.len, error))
      return FALSE;
    g_free(env->wf);
    env->wf = g_strndup(v->raw.data, v->raw.len);
    return TRUE;
  case SLUICE_KEY_UNIQUE:
    if (v->type != SLUICE_MP_STR)
      return wrong_type(field, "a string", v, error);
    if (!check_unique(v->raw.data, v->raw.len, error))
      return FALSE;
    g_free(env->unique);
    env->unique = g_strndup(v->raw.data, v->raw.len);
    return TRUE;
  case SLUICE_KEY_SEAL:
    if (v->type != SLUICE_MP_STR)
      return wrong_type(field, "a string", v, error);
    if (!check_seal(v->raw.data, v->raw.len, error))
      return FALSE;
    g_free(env->seal);
    env->seal = g_strndup(v->raw.data, v->raw.len);
    return TRUE;
  case SLUICE_KEY_SNOOZES:
    if (!get_uint32(field, v, 0, &u32, error))
      return FALSE;
    env->snoozes = u32;
    return TRUE;
  default:
    break;
  }
  g_return_val_if_reached(FALSE);
}

gboolean
sluice_envelope__set_option(SluiceMessageOptions *opts, SluiceOptionKey key,
                            const SluiceMpValue *v, GError **error)
{
  const gchar *field = option_fields[key];
  guint32 u32;

  switch (key) {
  case SLUICE_OPT_MAX_ATTEMPTS:
    if (!get_uint32(field, v, 0, &u32, error))
      return FALSE;
    if (u32 > G_MAXINT32) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "%s: %u is above the limit of %d", field, u32, G_MAXINT32);
      return FALSE;
    }
    /* 0 on the wire is "unset" (PROTOCOL.md), as absent is. */
    opts->retry.max_attempts = u32 == 0 ? SLUICE_RETRY_UNSET : (gint)u32;
    return TRUE;
  case SLUICE_OPT_INITIAL_BACKOFF_MS:
    return get_int64(field, v, 0, &opts->retry.initial_backoff_ms, error);
  case SLUICE_OPT_MULTIPLIER: {
    gdouble m;

    /* Hand-written producers often write 2 for 2.0; accept it. */
    if (v->type == SLUICE_MP_FLOAT64 || v->type == SLUICE_MP_FLOAT32)
      m = v->f;
    else if (v->type == SLUICE_MP_UINT)
      m = (gdouble)v->u;
    else if (v->type == SLUICE_MP_INT)
      m = (gdouble)v->i;
    else
      return wrong_type(field, "a float", v, error);
    if (!isfinite(m) || m < 0.0) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "%s: must be a finite number >= 0, found %g", field, m);
      return FALSE;
    }
    /* 0 on the wire is "unset" (PROTOCOL.md), as absent is. */
    opts->retry.multiplier = m == 0.0 ? SLUICE_RETRY_UNSET : m;
    return TRUE;
  }
  case SLUICE_OPT_MAX_BACKOFF_MS:
    return get_int64(field, v, 0, &opts->retry.max_backoff_ms, error);
  case SLUICE_OPT_JITTER:
    return get_bool(field, v, &opts->retry.jitter, error);
  case SLUICE_OPT_TIMEOUT_MS:
    return get_int64(field, v, 0, &opts->timeout_ms, error);
  case SLUICE_OPT_EXPIRES_AT:
    return get_int64(field, v, 0, &opts->expires_at, error);
  case SLUICE_OPT_STORE_RESULT:
    return get_bool(field, v, &opts->store_result, error);
  case SLUICE_OPT_RESULT_TTL_MS:
    return get_int64(field, v, 0, &opts->result_ttl_ms, error);
  case SLUICE_OPT_DEAD_LETTER:
    return get_bool(field, v, &opts->dead_letter, error);
  case SLUICE_OPT_HARD_TIMEOUT_MS:
    return get_int64(field, v, 0, &opts->hard_timeout_ms, error);
  default:
    break;
  }
  g_return_val_if_reached(FALSE);
}

gboolean
sluice_envelope__add_history_value(SluiceEnvelope *env, guint index,
                                   const SluiceMpValue *v, gboolean keep,
                                   GError **error)
{
  /* The field's name is only built on the way to an error. */
  if (v->type != SLUICE_MP_STR) {
    g_autofree gchar *field = g_strdup_printf("history[%u]", index);
    return wrong_type(field, "a string", v, error);
  }
  if (G_UNLIKELY(!g_utf8_validate_len(v->raw.data, v->raw.len, NULL))) {
    g_autofree gchar *field = g_strdup_printf("history[%u]", index);
    return sluice_codec__check_text(field, v->raw.data, v->raw.len, error);
  }
  if (!keep)
    return TRUE;
  if (env->history == NULL)
    env->history = g_ptr_array_new_full(SLUICE_HISTORY_MAX_LINES, g_free);
  g_ptr_array_add(env->history, g_strndup(v->raw.data, v->raw.len));
  return TRUE;
}

guint32
sluice_envelope__history_first_kept(guint32 count)
{
  return count > SLUICE_HISTORY_MAX_LINES ? count - SLUICE_HISTORY_MAX_LINES
                                          : 0;
}

gboolean
sluice_envelope__check_header_count(guint64 count, GError **error)
{
  if (count > SLUICE_MAX_HEADERS) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "headers: %" G_GUINT64_FORMAT
                " names, more than the limit of %d",
                count, SLUICE_MAX_HEADERS);
    return FALSE;
  }
  return TRUE;
}

gboolean
sluice_envelope__check_args_cost(gsize args_len, guint64 n_values,
                                 GError **error)
{
  guint64 cost = SLUICE_MP_UNPACKED_BYTES(n_values);
  guint64 limit =
      (guint64)SLUICE_ARGS_COST_FACTOR * args_len + SLUICE_ARGS_COST_BASE;

  if (cost > limit) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_LARGE,
                "args: %" G_GUINT64_FORMAT " values in %" G_GSIZE_FORMAT
                " bytes would take %" G_GUINT64_FORMAT
                " bytes once unpacked (24 bytes per value), more than %d "
                "times their size plus %d KiB; pack dense data as a "
                "binary (bin) instead",
                n_values, args_len, cost, SLUICE_ARGS_COST_FACTOR,
                SLUICE_ARGS_COST_BASE / 1024);
    return FALSE;
  }
  return TRUE;
}

gboolean
sluice_envelope__add_header_value(SluiceEnvelope *env,
                                  const SluiceMpValue *name,
                                  const SluiceMpValue *value, GError **error)
{
  gchar *key;

  if (name->type != SLUICE_MP_STR)
    return wrong_type("headers", "string names", name, error);
  if (!sluice_codec__check_text("headers (a name)", name->raw.data,
                                name->raw.len, error))
    return FALSE;
  key = g_strndup(name->raw.data, name->raw.len);
  if (env->headers == NULL)
    env->headers =
        g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  if (g_hash_table_contains(env->headers, key)) {
    g_autofree gchar *at = where(name);
    g_autofree gchar *shown = sluice_text__escape(key, -1, 64);
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "headers: duplicate name \"%s\"%s", shown, at);
    g_free(key);
    return FALSE;
  }
  if (value->type != SLUICE_MP_STR) {
    g_autofree gchar *shown = sluice_text__escape(key, -1, 64);
    g_autofree gchar *field = g_strdup_printf("headers[\"%s\"]", shown);
    g_free(key);
    return wrong_type(field, "a string", value, error);
  }
  if (!sluice_codec__check_text("headers (a value)", value->raw.data,
                                value->raw.len, error)) {
    g_free(key);
    return FALSE;
  }
  g_hash_table_insert(env->headers, key,
                      g_strndup(value->raw.data, value->raw.len));
  return TRUE;
}

/* ---- What every envelope version keeps ---------------------------------
 *
 * `v`, `id`, `task` and `queue` keep their names, types and meaning in
 * every format version (PROTOCOL.md, "Envelope versions"), so a worker can
 * name and defer a message of a version newer than it reads. */

#define HEADER_KEYS                                                            \
  ((1u << SLUICE_KEY_V) | (1u << SLUICE_KEY_ID) | (1u << SLUICE_KEY_TASK) |    \
   (1u << SLUICE_KEY_QUEUE))

gboolean
sluice_envelope__is_header_key(SluiceEnvelopeKey key)
{
  return key != SLUICE_KEY_UNKNOWN && (HEADER_KEYS & (1u << key)) != 0;
}

gboolean
sluice_envelope__set_any_version(SluiceEnvelope *env, const SluiceMpValue *v,
                                 GError **error)
{
  if (v->type != SLUICE_MP_UINT || v->u < 1 || v->u > G_MAXUINT32) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_VERSION,
                "v: an envelope format version is a positive integer");
    return FALSE;
  }
  env->version = (guint)v->u;
  return TRUE;
}

gchar *
sluice_envelope__newer_note(guint version)
{
  return g_strdup_printf("deferred: written in envelope format version %u, "
                         "newer than this build reads (version %d); a worker "
                         "of a newer Sluice runs it",
                         version, SLUICE_ENVELOPE_VERSION_NEWEST);
}

gboolean
sluice_envelope__finish_header(SluiceEnvelope *env, guint32 seen,
                               GError **error)
{
  for (gint key = 0; key < SLUICE_N_KEYS; key++) {
    if ((HEADER_KEYS & (1u << key)) && !(seen & (1u << key))) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_MISSING_FIELD,
                  "%s: required key is missing", key_names[key]);
      return FALSE;
    }
  }
  return TRUE;
}

gboolean
sluice_envelope__finish_decode(SluiceEnvelope *env, guint32 seen,
                               GError **error)
{
  if ((seen & REQUIRED_KEYS) != REQUIRED_KEYS) {
    for (gint key = 0; key < SLUICE_N_KEYS; key++) {
      if ((REQUIRED_KEYS & (1u << key)) && !(seen & (1u << key))) {
        g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_MISSING_FIELD,
                    "%s: required key is missing", key_names[key]);
        return FALSE;
      }
    }
  }
  if (env->args == NULL)
    env->args = sluice_envelope__nil_args();
  if (env->seal != NULL && env->version < SLUICE_ENVELOPE_VERSION_SEALED) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "seal: sealed args need envelope format version %d, the "
                "message says %u",
                SLUICE_ENVELOPE_VERSION_SEALED, env->version);
    return FALSE;
  }
  /* One form per message: sealed is version 2, in clear version 1, so
   * that decoding and encoding again gives the same bytes. */
  if (env->seal == NULL && env->version == SLUICE_ENVELOPE_VERSION_SEALED) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "v: envelope format version %d is the sealed form, and the "
                "message has no seal (args in clear are version %d)",
                SLUICE_ENVELOPE_VERSION_SEALED, SLUICE_ENVELOPE_VERSION);
    return FALSE;
  }
  if (env->seal != NULL && !check_sealed_args(env->args, error))
    return FALSE;
  return TRUE;
}

/* ---- Validation before encoding ------------------------------------------ */

gboolean
sluice_message_options__any_set(const SluiceMessageOptions *o)
{
  return sluice_retry__writes_max_attempts(&o->retry) ||
         o->retry.initial_backoff_ms >= 0 ||
         sluice_retry__writes_multiplier(&o->retry) ||
         o->retry.max_backoff_ms >= 0 || o->retry.jitter != SLUICE_UNSET ||
         o->timeout_ms > 0 || o->expires_at > 0 ||
         o->store_result != SLUICE_UNSET || o->result_ttl_ms > 0 ||
         o->dead_letter != SLUICE_UNSET || o->hard_timeout_ms > 0;
}

static gint
compare_names(gconstpointer a, gconstpointer b)
{
  return strcmp(*(const gchar *const *)a, *(const gchar *const *)b);
}

const gchar **
sluice_envelope__sorted_header_names(const SluiceEnvelope *env, guint *n)
{
  const gchar **names;

  *n = env->headers != NULL ? g_hash_table_size(env->headers) : 0;
  if (*n == 0)
    return NULL;
  names = (const gchar **)g_hash_table_get_keys_as_array(env->headers, NULL);
  if (*n > 1)
    qsort(names, *n, sizeof *names, compare_names);
  return names;
}

static gboolean
validate_name(const gchar *field, SluiceNameKind kind, const gchar *s,
              GError **error)
{
  if (s == NULL) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_MISSING_FIELD,
                "%s: required, but the envelope has none", field);
    return FALSE;
  }
  return check_name(field, kind, s, strlen(s), error);
}

static gboolean
validate_not_negative(const gchar *field, gint64 value, GError **error)
{
  if (value < 0) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "%s: must be >= 0, found %" G_GINT64_FORMAT, field, value);
    return FALSE;
  }
  return TRUE;
}

static gboolean
validate_tristate(const gchar *field, SluiceTristate t, GError **error)
{
  if (t != SLUICE_UNSET && t != SLUICE_ON && t != SLUICE_OFF) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "%s: %d is not a SluiceTristate", field, (gint)t);
    return FALSE;
  }
  return TRUE;
}

const gchar *
sluice_retry_policy__problem(const SluiceRetryPolicy *policy)
{
  if (policy->max_attempts == 0)
    return "max_attempts must be at least 1 (or SLUICE_RETRY_UNSET to leave "
           "it to the level below)";
  if (policy->jitter != SLUICE_UNSET && policy->jitter != SLUICE_ON &&
      policy->jitter != SLUICE_OFF)
    return "jitter must be SLUICE_ON, SLUICE_OFF or SLUICE_UNSET";
  return NULL;
}

gboolean
sluice_envelope__validate(const SluiceEnvelope *env, GError **error)
{
  const SluiceMessageOptions *o = &env->opts;

  if (!validate_name("id", SLUICE_NAME_ID, env->id, error) ||
      !validate_name("task", SLUICE_NAME_TASK, env->task, error) ||
      !validate_name("queue", SLUICE_NAME_QUEUE, env->queue, error))
    return FALSE;
  if (env->attempt < 1) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "attempt: must be >= 1 (it counts from 1), found %u",
                env->attempt);
    return FALSE;
  }
  if (!validate_not_negative("enqueued_at", env->enqueued_at, error) ||
      !validate_not_negative("eta", env->eta, error) ||
      !validate_not_negative("unknown_since", env->unknown_since, error) ||
      (env->wf != NULL && !check_wf(env->wf, strlen(env->wf), error)) ||
      (env->unique != NULL &&
       !check_unique(env->unique, strlen(env->unique), error)) ||
      (env->seal != NULL && (!check_seal(env->seal, strlen(env->seal), error) ||
                             !check_sealed_args(env->args, error))) ||
      !validate_not_negative("opts.timeout_ms", o->timeout_ms, error) ||
      !validate_not_negative("opts.expires_at", o->expires_at, error) ||
      !validate_not_negative("opts.result_ttl_ms", o->result_ttl_ms, error) ||
      !validate_not_negative("opts.hard_timeout_ms", o->hard_timeout_ms,
                             error) ||
      !validate_tristate("opts.jitter", o->retry.jitter, error) ||
      !validate_tristate("opts.store_result", o->store_result, error) ||
      !validate_tristate("opts.dead_letter", o->dead_letter, error))
    return FALSE;
  if (!isfinite(o->retry.multiplier)) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "opts.multiplier: must be finite, found %g",
                o->retry.multiplier);
    return FALSE;
  }
  {
    const gchar *problem = sluice_retry_policy__problem(&o->retry);
    if (problem != NULL) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "opts: %s", problem);
      return FALSE;
    }
  }

  if (env->history != NULL) {
    for (guint i = 0; i < env->history->len; i++) {
      const gchar *line = g_ptr_array_index(env->history, i);

      if (line == NULL) {
        g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                    "history[%u]: NULL line", i);
        return FALSE;
      }
      if (G_UNLIKELY(!g_utf8_validate(line, -1, NULL))) {
        g_autofree gchar *field = g_strdup_printf("history[%u]", i);
        return sluice_codec__check_text(field, line, strlen(line), error);
      }
    }
  }
  if (env->headers != NULL) {
    GHashTableIter iter;
    gpointer k, v;

    if (!sluice_envelope__check_header_count(g_hash_table_size(env->headers),
                                             error))
      return FALSE;
    g_hash_table_iter_init(&iter, env->headers);
    while (g_hash_table_iter_next(&iter, &k, &v)) {
      if (k == NULL || v == NULL) {
        g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                    "headers: NULL name or value");
        return FALSE;
      }
      if (!sluice_codec__check_text("headers (a name)", k, strlen(k), error) ||
          !sluice_codec__check_text("headers (a value)", v, strlen(v), error))
        return FALSE;
    }
  }
  if (env->args != NULL) {
    gsize len;
    gconstpointer data = g_bytes_get_data(env->args, &len);
    SluiceMpReader r;
    guint64 n_values = 0;
    GError *local = NULL;

    /* What no worker would take is refused here, at the producer: args
     * deeper than SLUICE_MAX_ARGS_DEPTH (the envelope map is depth 1) or
     * too costly to unpack. */
    sluice_mp_reader_init(&r, data, len);
    if (!sluice_mp_reader__skip_counting(&r, 1, SLUICE_MAX_ARGS_DEPTH,
                                         &n_values, &local)) {
      if (g_error_matches(local, SLUICE_CODEC_ERROR,
                          SLUICE_CODEC_ERROR_TOO_DEEP)) {
        g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_DEEP,
                    "args: nested deeper than %d levels, the limit "
                    "(SLUICE_MAX_ARGS_DEPTH: workers decode messages nested "
                    "at most %d deep, the envelope taking one level)",
                    SLUICE_MAX_ARGS_DEPTH, SLUICE_DEFAULT_MAX_DEPTH);
        g_error_free(local);
        return FALSE;
      }
      /* Whatever the reader said (TRUNCATED, 0xc1), args that are not one
       * msgpack value are the caller's invalid value, not bad input. */
      local->code = SLUICE_CODEC_ERROR_INVALID;
      g_prefix_error(&local, "args: ");
      g_propagate_error(error, local);
      return FALSE;
    }
    if (r.pos != len) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                  "args: byte offset %" G_GSIZE_FORMAT ": %" G_GSIZE_FORMAT
                  " bytes follow the value (exactly one value was expected)",
                  r.pos, len - r.pos);
      return FALSE;
    }
    if (!sluice_envelope__check_args_cost(len, n_values, error))
      return FALSE;
  }
  return TRUE;
}
