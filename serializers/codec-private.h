/* codec-private.h - what the envelope module and the two codecs share.
 *
 * Both decoders walk their input and hand every known field to the
 * sluice_envelope__* functions, so the type, range and UTF-8 rules are
 * written once; the JSON helpers serve the JSON codec and args-json.c.
 * Never installed.
 */
#pragma once

#include "serializers/mp-reader.h"

G_BEGIN_DECLS

/* A codec: a static, immutable table of its two operations (private:
 * codec.c picks one by the first byte, so there are only these two). */
#define SLUICE_CODEC_VERSION 1
struct _SluiceCodec {
  guint32 version;
  const gchar *name;
  /* Returns: (transfer full): the bytes of @env, or NULL and @error. */
  GBytes *(*encode)(const SluiceCodec *codec, const SluiceEnvelope *env,
                    GError **error);
  /* Returns: (transfer full): a new envelope, or NULL and @error. @bytes is
   * borrowed; @limits is never NULL. */
  SluiceEnvelope *(*decode)(const SluiceCodec *codec, GBytes *bytes,
                            const SluiceDecodeLimits *limits, GError **error);
  /* As decode, reading only the keys every version keeps (`v` of any
   * version, `id`, `task`, `queue`): see sluice_envelope__decode_header(). */
  SluiceEnvelope *(*decode_header)(const SluiceCodec *codec, GBytes *bytes,
                                   const SluiceDecodeLimits *limits,
                                   GError **error);
};

/**
 * sluice_envelope__decode_header:
 *
 * Reads what every envelope version keeps, for a worker to name and defer
 * a message whose `v` is newer than this build reads: the envelope's
 * @version (any positive integer), @id, @task and @queue, every other key
 * only checked well-formed and skipped. Returns: (transfer full): an
 * envelope with only those set, or NULL and a SLUICE_CODEC_ERROR.
 */
SluiceEnvelope *sluice_envelope__decode_header(GBytes *bytes,
                                               const SluiceDecodeLimits *limits,
                                               GError **error);

/* ---- Envelope fields (serializers/envelope.c) -----------------------------
 *
 * Both decoders walk their input and hand every known field to these
 * functions as a SluiceMpValue (the JSON codec converts its nodes), so the
 * type, range and UTF-8 rules are written once.
 */

/* What a name is, for the one rule every layer checks names by. */
typedef enum {
  SLUICE_NAME_ID,    /* a task id */
  SLUICE_NAME_TASK,  /* a task name */
  SLUICE_NAME_QUEUE, /* a queue name */
} SluiceNameKind;

/**
 * sluice_name__problem:
 * @s: (nullable): the name; NULL counts as empty
 *
 * The one rule for ids, task names and queue names (SLUICE_MAX_ID_BYTES,
 * SLUICE_MAX_NAME_BYTES): the codecs, the client, the registry and the
 * worker's options all check names here.
 * Returns: (transfer full) (nullable): why @s is not a valid name of
 * @kind, quoting it safely; NULL when it is.
 */
gchar *sluice_name__problem(SluiceNameKind kind, const gchar *s, gsize len);

typedef enum {
  SLUICE_KEY_UNKNOWN = -1,
  SLUICE_KEY_V = 0,
  SLUICE_KEY_ID,
  SLUICE_KEY_TASK,
  SLUICE_KEY_QUEUE,
  SLUICE_KEY_ARGS,
  SLUICE_KEY_ATTEMPT,
  SLUICE_KEY_ENQUEUED_AT,
  SLUICE_KEY_ETA,
  SLUICE_KEY_OPTS,
  SLUICE_KEY_UNKNOWN_SINCE,
  SLUICE_KEY_HISTORY,
  SLUICE_KEY_HEADERS,
  SLUICE_KEY_WF,
  SLUICE_KEY_SNOOZES,
  SLUICE_KEY_UNIQUE,
  SLUICE_KEY_SEAL,
  SLUICE_N_KEYS
} SluiceEnvelopeKey;

typedef enum {
  SLUICE_OPT_UNKNOWN = -1,
  SLUICE_OPT_MAX_ATTEMPTS = 0,
  SLUICE_OPT_INITIAL_BACKOFF_MS,
  SLUICE_OPT_MULTIPLIER,
  SLUICE_OPT_MAX_BACKOFF_MS,
  SLUICE_OPT_JITTER,
  SLUICE_OPT_TIMEOUT_MS,
  SLUICE_OPT_EXPIRES_AT,
  SLUICE_OPT_STORE_RESULT,
  SLUICE_OPT_RESULT_TTL_MS,
  SLUICE_OPT_DEAD_LETTER,
  SLUICE_OPT_HARD_TIMEOUT_MS,
  SLUICE_N_OPTS
} SluiceOptionKey;

/* Returns: (transfer none): the wire name of @key ("enqueued_at"). */
const gchar *sluice_envelope__key_name(SluiceEnvelopeKey key);
const gchar *sluice_envelope__option_name(SluiceOptionKey key);
/* Returns: the key spelled by @name[0..@len), or the UNKNOWN value. */
SluiceEnvelopeKey sluice_envelope__key_lookup(const gchar *name, gsize len);
SluiceOptionKey sluice_envelope__option_lookup(const gchar *name, gsize len);

/* Returns: (nullable): what is wrong with a level of retry policy (a set
 * value out of range), for an error message; NULL if nothing is. */
const gchar *sluice_retry_policy__problem(const SluiceRetryPolicy *policy);

/**
 * sluice_envelope__check_opened_args:
 * @args: (transfer none): args just opened from their seal
 *
 * The rules the decoders apply to args in clear (one value, the depth
 * limit, the cost of unpacking), for args that were sealed when decoded.
 * Returns: TRUE, or FALSE and a SluiceCodecError.
 */
gboolean sluice_envelope__check_opened_args(GBytes *args,
                                            const SluiceDecodeLimits *limits,
                                            GError **error);

/* Marks @result's value as sealed with @seal ("ALGORITHM:KEY-ID"), or in
 * clear with NULL; sluice_result_encode() then writes version 2 and `seal`. */
void sluice_result__set_seal(SluiceResult *result, const gchar *seal);

/* Returns: the version an encoder writes for @env: sealed args need the
 * version that knows `seal`, args in clear keep the oldest. */
guint sluice_envelope__version_to_write(const SluiceEnvelope *env);

/* Returns: (transfer full): the args of an envelope without any (nil). */
GBytes *sluice_envelope__nil_args(void);

/**
 * sluice_envelope__new_for_decode:
 * Returns: (transfer full): an envelope like sluice_envelope_new() but with
 * version 0, attempt 0 and args NULL, for a decoder to fill in and hand to
 * sluice_envelope__finish_decode().
 */
SluiceEnvelope *sluice_envelope__new_for_decode(void);

/**
 * sluice_envelope__set_field:
 * @key: any key but ARGS, OPTS, HISTORY and HEADERS (the decoders walk those
 *   containers themselves)
 * @value: (transfer none): the value found for it
 *
 * Checks @value's type and range for @key and stores it in @env. Errors
 * name the key: WRONG_TYPE, VERSION (for `v`), INVALID (range, UTF-8).
 */
gboolean sluice_envelope__set_field(SluiceEnvelope *env, SluiceEnvelopeKey key,
                                    const SluiceMpValue *value, GError **error);

/* Whether @key is one of those every format version keeps. */
gboolean sluice_envelope__is_header_key(SluiceEnvelopeKey key);
/* Stores `v` of any version (a positive integer): VERSION otherwise. */
gboolean sluice_envelope__set_any_version(SluiceEnvelope *env,
                                          const SluiceMpValue *value,
                                          GError **error);
/* Returns: (transfer full): what a record or inspect says of a message
 * deferred for its newer envelope @version. */
gchar *sluice_envelope__newer_note(guint version);
/* The end of a header-only decode: MISSING_FIELD unless @seen holds
 * `v`, `id`, `task` and `queue`. */
gboolean sluice_envelope__finish_header(SluiceEnvelope *env, guint32 seen,
                                        GError **error);

/** sluice_envelope__set_option: as set_field, for one key inside `opts`. */
gboolean sluice_envelope__set_option(SluiceMessageOptions *opts,
                                     SluiceOptionKey key,
                                     const SluiceMpValue *value,
                                     GError **error);

/**
 * sluice_envelope__add_history_value:
 * @index: for messages
 * @keep: FALSE to check the element only
 *
 * Checks one `history` element (a UTF-8 string) and appends it. Decoders
 * keep the newest SLUICE_HISTORY_MAX_LINES lines of a longer history (see
 * sluice_envelope__history_first_kept()), the ones a worker would keep
 * anyway on its next append, so that what a decoded history costs is
 * bounded by the lines' bytes whatever their number.
 */
gboolean sluice_envelope__add_history_value(SluiceEnvelope *env, guint index,
                                            const SluiceMpValue *value,
                                            gboolean keep, GError **error);

/** Returns: the index of the first element a decoder keeps of a history of
 * @count elements. */
guint32 sluice_envelope__history_first_kept(guint32 count);

/** Fails with INVALID when @count is above SLUICE_MAX_HEADERS. */
gboolean sluice_envelope__check_header_count(guint64 count, GError **error);

/**
 * sluice_envelope__check_args_cost:
 * @args_len: the size of the args' msgpack bytes
 * @n_values: what they are made of (sluice_mp_reader__skip_counting())
 *
 * Fails with TOO_LARGE when unpacking the args into msgpack objects would
 * take more than SLUICE_ARGS_COST_FACTOR times their size plus
 * SLUICE_ARGS_COST_BASE (see sluice-envelope.h).
 */
gboolean sluice_envelope__check_args_cost(gsize args_len, guint64 n_values,
                                          GError **error);

/** Adds one `headers` pair: both strings, the name not yet present. */
gboolean sluice_envelope__add_header_value(SluiceEnvelope *env,
                                           const SluiceMpValue *name,
                                           const SluiceMpValue *value,
                                           GError **error);

/**
 * sluice_envelope__finish_decode:
 * @seen: bit (1 << key) set for every key the decoder met
 *
 * Fails with MISSING_FIELD naming the first absent required key; otherwise
 * gives @env nil args if it had none. On failure @env is left to the
 * caller to free.
 */
gboolean sluice_envelope__finish_decode(SluiceEnvelope *env, guint32 seen,
                                        GError **error);

/**
 * sluice_envelope__validate:
 *
 * What both encoders check before writing a byte: id/task/queue present,
 * non-empty, valid UTF-8 and within their lengths (MISSING_FIELD when NULL),
 * attempt >= 1, timestamps >= 0, options in range, history and headers valid
 * UTF-8, and args (NULL meaning nil) exactly one well-formed msgpack value
 * (INVALID). An encoder never writes what a decoder would refuse, except for
 * the size and depth limits, which belong to the consumer.
 */
gboolean sluice_envelope__validate(const SluiceEnvelope *env, GError **error);

/**
 * sluice_envelope__sorted_header_names:
 * @n: (out): how many
 *
 * Both encoders write headers sorted by name, so that one envelope always
 * encodes to the same bytes whatever the hash table's order.
 * Returns: (transfer container) (nullable): the names, NULL when there are
 * none; free with g_free().
 */
const gchar **sluice_envelope__sorted_header_names(const SluiceEnvelope *env,
                                                   guint *n);

/** Returns: TRUE when some option of @opts is set (so `opts` is written). */
gboolean sluice_message_options__any_set(const SluiceMessageOptions *opts);

/* Whether the encoders write max_attempts and multiplier. On the wire 0 is
 * "unset" for both, as absent is (PROTOCOL.md), and the decoders read it
 * so: neither encoder writes a 0, so that an envelope decoded and encoded
 * again, by either codec, gives the same bytes. */
static inline gboolean
sluice_retry__writes_max_attempts(const SluiceRetryPolicy *retry)
{
  return retry->max_attempts > 0;
}

static inline gboolean
sluice_retry__writes_multiplier(const SluiceRetryPolicy *retry)
{
  return retry->multiplier > 0.0;
}

/**
 * sluice_codec__check_text:
 * @what: the field, for the message
 *
 * Fails with INVALID unless @s[0..@len) is valid UTF-8 without NUL bytes.
 */
gboolean sluice_codec__check_text(const gchar *what, const gchar *s, gsize len,
                                  GError **error);

/* ---- JSON (json-reader.c reads, args-json.c converts) ------------------- */

/* The reader keeps its own stack, but the args converter recurses once per
 * level: no JSON input may nest deeper than this, whatever a
 * SluiceDecodeLimits says. */
#define SLUICE_JSON_MAX_DEPTH 1000

/**
 * SluiceJsonDoc:
 * A JSON text that sluice_json__scan() accepted, with the element count of
 * each of its containers. Borrows the text.
 */
typedef struct _SluiceJsonDoc SluiceJsonDoc;

/**
 * sluice_json__scan:
 * @text: (transfer none): @len bytes, not necessarily NUL-terminated; must
 *   outlive the result
 * @max_depth: nesting limit (the outermost container is depth 1), at most
 *   SLUICE_JSON_MAX_DEPTH; an object {"$bin": "<string>"} stands for a
 *   scalar and may sit one level beyond it
 *
 * Checks strict RFC 8259 JSON without building a tree: no comments, single
 * quotes, hexadecimal or leading-zero numbers, raw control characters,
 * \u0000 or lone surrogates, no integers beyond 64 bits or numbers beyond
 * float64, no duplicate keys in any object; input that ends early is
 * TRUNCATED, input that goes on after the value TRAILING, nesting beyond
 * @max_depth TOO_DEEP. Errors name the line and column.
 * Costs 4 bytes per container, plus 24 bytes and the decoded bytes per key
 * of the objects open at a time.
 * Returns: (transfer full): the checked text, or NULL and @error.
 */
SluiceJsonDoc *sluice_json__scan(const gchar *text, gsize len, guint max_depth,
                                 GError **error);
void sluice_json__doc_free(SluiceJsonDoc *doc);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceJsonDoc, sluice_json__doc_free)

/**
 * SluiceJsonCursor:
 * Walks a checked text value by value. Strings it hands out live in
 * @scratch until the next call.
 */
typedef struct {
  const SluiceJsonDoc *doc;
  gsize i;
  guint next_container;
  GString *scratch;
} SluiceJsonCursor;

void sluice_json__cursor_init(SluiceJsonCursor *cur, const SluiceJsonDoc *doc);
void sluice_json__cursor_clear(SluiceJsonCursor *cur);

/**
 * sluice_json__cursor_value:
 * @v: (out caller-allocates): the value at the cursor, as the msgpack value
 *   it stands for (offset G_MAXSIZE): for an object or an array, MAP or
 *   ARRAY with its count, the cursor then being inside it; a string points
 *   into the cursor's scratch buffer
 *
 * Reads one value (a {"$bin"} object reads as the MAP it is written as).
 */
void sluice_json__cursor_value(SluiceJsonCursor *cur, SluiceMpValue *v);

/**
 * sluice_json__cursor_key:
 * Inside an object, reads the next member's key.
 * Returns: (transfer none): the decoded key (in the scratch buffer).
 */
const gchar *sluice_json__cursor_key(SluiceJsonCursor *cur, gsize *out_len);

/**
 * sluice_json__cursor_take_bin:
 * @out_offset: (out): where the object starts in the text, for a message
 *
 * At an object of one member "$bin" whose value is a string, steps over
 * it, leaves the string decoded in cur->scratch and returns TRUE (what the
 * string holds is the caller's to check); at anything else returns FALSE
 * and leaves the cursor where it was.
 */
gboolean sluice_json__cursor_take_bin(SluiceJsonCursor *cur, gsize *out_offset);

/**
 * sluice_json__cursor_fail:
 * Sets @error (SLUICE_CODEC_ERROR, @code) to "line L, column C: <format>"
 * for byte @offset of the cursor's text, as every error of the reader.
 * Returns: FALSE.
 */
gboolean sluice_json__cursor_fail(const SluiceJsonCursor *cur, gsize offset,
                                  gint code, GError **error,
                                  const gchar *format, ...) G_GNUC_PRINTF(5, 6);

/** sluice_json__cursor_skip: steps over one value, however nested. */
void sluice_json__cursor_skip(SluiceJsonCursor *cur);

/**
 * sluice_json__cursor_to_msgpack:
 * @out_n_values: (out) (optional): how many msgpack values the result is
 *   made of (see sluice_mp_reader__skip_counting())
 *
 * Converts the value at the cursor (see the table of PROTOCOL.md).
 * Returns: (transfer full): msgpack bytes, or NULL and INVALID (an
 * unreadable {"$bin": ...}).
 */
GBytes *sluice_json__cursor_to_msgpack(SluiceJsonCursor *cur,
                                       guint64 *out_n_values, GError **error);

/**
 * sluice_args__append_json:
 * @out: where the JSON text goes; on failure it may hold a partial text
 * @data: (transfer none): msgpack bytes holding exactly one value
 *
 * Writes @data as compact JSON. Fails with INVALID for what JSON cannot
 * carry (ext, non-string or duplicate map keys, a map that would read back
 * as {"$bin"}, integers above 2^63-1, NaN/infinity, strings that are not
 * UTF-8 or hold U+0000), TOO_DEEP beyond @max_depth, and the reader's errors
 * for malformed msgpack.
 */
gboolean sluice_args__append_json(GString *out, gconstpointer data, gsize len,
                                  guint max_depth, GError **error);

/** Appends @s (valid UTF-8, @len bytes) as a JSON string literal. */
void sluice_json__append_string(GString *out, const gchar *s, gsize len);

/** Appends a finite @d so that it reads back as the same float64. */
void sluice_json__append_double(GString *out, gdouble d);

/* ---- Keys this build does not know (serializers/envelope-unknown.c) -----
 *
 * The decoders collect them, the encoders write them back: the envelope's
 * unknown_fields and unknown_opts (PROTOCOL.md, "Keys this build does not
 * know").
 */
typedef struct {
  GByteArray *pairs; /* msgpack key/value pairs, in the order met */
  GHashTable *names; /* the keys of @pairs, to keep the first of a key */
  guint32 count;
} SluiceUnknownKeys;

/* Adds one pair whose msgpack bytes (key and value) are @pair[0..@len);
 * @name is the key's text. A key that is not UTF-8 text is not carried,
 * nor a key met again (msgpack maps may repeat a key; JSON objects, and so
 * every encoding a carried key may go into, may not). */
void sluice_unknown_keys__add_pair(SluiceUnknownKeys *keys, const gchar *name,
                                   gsize name_len, gconstpointer pair,
                                   gsize len);
/* Adds the key @name with @value (borrowed; msgpack bytes of one value). */
void sluice_unknown_keys__add(SluiceUnknownKeys *keys, const gchar *name,
                              gsize name_len, GBytes *value);
/* Returns: (transfer full) (nullable): the map of what was added, NULL if
 * nothing was; @keys is empty again. */
GBytes *sluice_unknown_keys__finish(SluiceUnknownKeys *keys);
void sluice_unknown_keys__clear(SluiceUnknownKeys *keys);

/**
 * sluice_unknown_keys__open:
 * @field: the envelope field, for messages
 * @map: an envelope's unknown_fields or unknown_opts (set by a decoder or by
 *   a program)
 * @pairs: (out caller-allocates): a reader at the first key, over @map
 * @count: (out): how many pairs follow
 *
 * Checks that @map is what an encoder may write back: one msgpack map with
 * UTF-8 string keys, none a key this build knows, each value well-formed
 * within the depth limit. Returns: TRUE, or FALSE with INVALID, WRONG_TYPE,
 * TRAILING or the reader's error.
 */
gboolean sluice_unknown_keys__open(const gchar *field, GBytes *map,
                                   gboolean in_opts, SluiceMpReader *pairs,
                                   guint32 *count, GError **error);

/* Appends @map's pairs as JSON members, each after a comma unless @first;
 * fails where JSON cannot carry a value (an ext, say). */
gboolean sluice_unknown_keys__append_json(GString *out, GBytes *map,
                                          gboolean in_opts, gboolean first,
                                          GError **error);

G_END_DECLS
