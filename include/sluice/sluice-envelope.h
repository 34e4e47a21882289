/* sluice-envelope.h - the message envelope and the codecs that carry it.
 *
 * Every message is one envelope: a map with the task's id, name, queue,
 * arguments (one msgpack value), attempt, timestamps, per-message options,
 * failure history and free headers. PROTOCOL.md documents the bytes so that
 * producers in other languages can enqueue.
 *
 * A codec turns an envelope into bytes and back. Two are built in: msgpack
 * (the default, used on every hot path) and JSON (for humans and producers
 * without a msgpack library). Workers accept both: the first byte of a
 * msgpack envelope is a map marker (0x80-0x8f, 0xde, 0xdf) and that of a
 * JSON envelope is '{' (0x7b), so sluice_envelope_decode() tells them apart.
 *
 * Decoding is strict and bounded: input larger than the limit, nesting deeper
 * than the limit, a truncated value, bytes after the envelope, a field of the
 * wrong type, a missing required field or an unknown format version is a
 * SLUICE_CODEC_ERROR, never a crash or a read past the buffer. Unknown keys
 * of format version 1 are skipped, so fields can be added without a version
 * bump; an envelope re-encoded by a worker (a retry) does not keep them.
 */
#pragma once

#include <sluice/sluice-macros.h>
#include <sluice/sluice-policy.h>

G_BEGIN_DECLS

/* The version written for a message whose args are in clear. */
#define SLUICE_ENVELOPE_VERSION 1
/* The version written for a message whose args are sealed (@seal set):
 * version 1 plus the `seal` key, so that a build reading only version 1
 * defers such a message instead of running it without its args. */
#define SLUICE_ENVELOPE_VERSION_SEALED 2
/* The newest version this build reads. */
#define SLUICE_ENVELOPE_VERSION_NEWEST 2
#define SLUICE_DEFAULT_MAX_MESSAGE_BYTES (1024 * 1024)

/**
 * SLUICE_DEFAULT_MAX_DEPTH:
 *
 * The one nesting limit: what workers decode (the envelope map is depth 1,
 * so its `args` may nest SLUICE_MAX_ARGS_DEPTH deep), what
 * sluice_envelope_encode() and so sluice_client_enqueue() accept in `args`,
 * what sluice_args_from_json() (and `sluice enqueue`, `sluice run`) accept,
 * and what a task's result value may hold. A msgpack bin is a scalar, and
 * so is its JSON form {"$bin": "..."}: it adds no level in either codec,
 * so both carry exactly the same values.
 */
#define SLUICE_DEFAULT_MAX_DEPTH 64
#define SLUICE_MAX_ARGS_DEPTH (SLUICE_DEFAULT_MAX_DEPTH - 1)
#define SLUICE_HISTORY_MAX_LINES 10
#define SLUICE_HISTORY_MAX_LINE_BYTES 256

/* The longest task id, in bytes (non-empty UTF-8). */
#define SLUICE_MAX_ID_BYTES 256
/* The longest task or queue name, in bytes. A task name is printable ASCII
 * without spaces ("mail.send"); a queue name is non-empty UTF-8. */
#define SLUICE_MAX_NAME_BYTES 200

/* An envelope carries at most this many headers (both codecs refuse more,
 * encoding and decoding). */
#define SLUICE_MAX_HEADERS 256

/* The longest workflow reference (SluiceEnvelope.wf), in bytes. */
#define SLUICE_MAX_WF_BYTES 1024
/** The longest uniqueness claim (`uq`) an envelope may carry. */
#define SLUICE_MAX_UNIQUE_BYTES 1024
/* A keyring's key id (sluice-seal.h), as `seal` names it. */
#define SLUICE_MAX_KEY_ID_BYTES 64
/* What sealing adds to the args: a 12-byte nonce and a 16-byte tag. */
#define SLUICE_SEAL_OVERHEAD 28

/**
 * SLUICE_ARGS_COST_FACTOR:
 *
 * Unpacked by sluice_task_context_get_args(), arguments take one 24-byte
 * msgpack_object per value. So that what a message costs a worker is
 * bounded by its size, arguments of n bytes may take at most
 * SLUICE_ARGS_COST_FACTOR * n + SLUICE_ARGS_COST_BASE bytes that way:
 * arguments that would take more (large arrays of one-byte values such as
 * small integers or nils) are refused (TOO_LARGE) by both encoders, and so
 * by sluice_client_enqueue(), and by both decoders. Dense data belongs in a
 * bin.
 */
#define SLUICE_ARGS_COST_FACTOR 16
#define SLUICE_ARGS_COST_BASE (64 * 1024)

#define SLUICE_CODEC_ERROR (sluice_codec_error_quark())
SLUICE_AVAILABLE_IN_0_1
GQuark sluice_codec_error_quark(void);

/**
 * SluiceCodecError:
 * @SLUICE_CODEC_ERROR_FAILED: anything else (also any unknown code)
 * @SLUICE_CODEC_ERROR_TOO_LARGE: input or output over the size limit
 * @SLUICE_CODEC_ERROR_TOO_DEEP: nesting over the depth limit
 * @SLUICE_CODEC_ERROR_TRUNCATED: the input ends inside a value
 * @SLUICE_CODEC_ERROR_TRAILING: bytes follow the envelope
 * @SLUICE_CODEC_ERROR_WRONG_TYPE: a field has the wrong type
 * @SLUICE_CODEC_ERROR_MISSING_FIELD: a required field is absent
 * @SLUICE_CODEC_ERROR_VERSION: a format version this build does not know
 * @SLUICE_CODEC_ERROR_INVALID: not msgpack/JSON at all, bad UTF-8, a value
 *   out of range, or a value the other codec cannot express
 */
typedef enum {
  SLUICE_CODEC_ERROR_FAILED,
  SLUICE_CODEC_ERROR_TOO_LARGE,
  SLUICE_CODEC_ERROR_TOO_DEEP,
  SLUICE_CODEC_ERROR_TRUNCATED,
  SLUICE_CODEC_ERROR_TRAILING,
  SLUICE_CODEC_ERROR_WRONG_TYPE,
  SLUICE_CODEC_ERROR_MISSING_FIELD,
  SLUICE_CODEC_ERROR_VERSION,
  SLUICE_CODEC_ERROR_INVALID,
} SluiceCodecError;

/**
 * SluiceMessageOptions:
 * @retry: the message's level of the retry policy (see sluice-policy.h);
 *   a multiplier of 0 is unset here, as on the wire (PROTOCOL.md): neither
 *   codec writes it
 * @timeout_ms: run time limit; 0 = unset (the task's, else none)
 * @expires_at: dead-letter `expired` instead of starting after this time
 *   (ms since epoch); 0 = never
 * @store_result: write the final record; UNSET = the task's, else on
 * @result_ttl_ms: lifetime of the record; 0 = unset (24 h by default)
 * @dead_letter: on exhausted attempts, bury (ON) or record `failed` and
 *   drop (OFF); UNSET = the task's, else on
 * @hard_timeout_ms: with process isolation, kill the child running it
 *   after this long (the attempt fails `timeout`); 0 = unset (the task's,
 *   else the worker's). Thread mode ignores it: a thread cannot be killed.
 *
 * Wire keys inside `opts`: max_attempts, initial_backoff_ms, multiplier,
 * max_backoff_ms, jitter, timeout_ms, expires_at, store_result,
 * result_ttl_ms, dead_letter, hard_timeout_ms. Unset fields are not
 * written.
 */
typedef struct {
  SluiceRetryPolicy retry;
  gint64 timeout_ms;
  gint64 expires_at;
  SluiceTristate store_result;
  gint64 result_ttl_ms;
  SluiceTristate dead_letter;
  gint64 hard_timeout_ms;
} SluiceMessageOptions;

/** sluice_message_options_init: sets every field of @opts to unset. */
SLUICE_AVAILABLE_IN_0_1
void sluice_message_options_init(SluiceMessageOptions *opts);

/**
 * SluiceEnvelope:
 * @version: format version (on encode: SLUICE_ENVELOPE_VERSION, or
 *   SLUICE_ENVELOPE_VERSION_SEALED with @seal)
 * @id: task id, the same across retries, redeliveries and replays
 * @task: registered task name
 * @queue: queue name
 * @args: msgpack bytes of exactly one value (0xc0, nil, when there are none)
 * @attempt: 1-based count of application attempts
 * @enqueued_at: when first enqueued (ms since epoch)
 * @eta: when due, for a scheduled message; 0 = ready now
 * @opts: per-message options
 * @unknown_since: when a worker first met the task name unregistered; 0 =
 *   never
 * @history: (element-type utf8): one line per failed attempt, oldest first,
 *   at most SLUICE_HISTORY_MAX_LINES lines of SLUICE_HISTORY_MAX_LINE_BYTES
 * @headers: (element-type utf8 utf8): free metadata
 * @wf: (nullable): the message's place in a workflow, written
 *   by sluice_client_enqueue_workflow() and read by the worker (its format
 *   is the core's, PROTOCOL.md "Workflows"); NULL for a plain task. Kept
 *   across retries, redeliveries and replays.
 * @snoozes: how many times the task snoozed (asked to run later without
 *   using an attempt: sluice_task_context_snooze()); wire name "snz"
 * @unique: (nullable): the uniqueness claim the message was
 *   enqueued with ("<scope letter>:<key>", the core's; PROTOCOL.md), read
 *   by the worker to end the claim; wire name "uq"
 * @unknown_fields: (nullable): the top-level keys this build does not
 *   know (written by a newer producer), as one msgpack map of their keys
 *   and values exactly as they came; NULL when there were none. Encoding
 *   writes them back after the known keys, so a retry, a deferral or a
 *   dead letter written by this build keeps them (PROTOCOL.md, "Keys this
 *   build does not know").
 * @unknown_opts: (nullable): the same for the keys of `opts`
 * @seal: (nullable): "ALGORITHM:KEY-ID" when @args are sealed (encrypted
 *   and authenticated with a key of a keyring, sluice-seal.h): @args then
 *   hold one msgpack bin, the nonce, ciphertext and tag, and the message
 *   is written in version SLUICE_ENVELOPE_VERSION_SEALED. NULL for args in
 *   clear. The worker opens them for the task and keeps them sealed in
 *   every message it writes back (PROTOCOL.md, "Sealed arguments").
 *
 * An envelope owns every field: sluice_envelope_free() frees them all.
 * Replace a string field with g_free() + g_strdup(). @history and @headers
 * are NULL while empty (most messages have neither, and envelopes are made
 * once per message on the worker's hot path): add to them with
 * sluice_envelope_add_history() and sluice_envelope_set_header().
 */
typedef struct {
  guint version;
  gchar *id;
  gchar *task;
  gchar *queue;
  GBytes *args;
  guint attempt;
  gint64 enqueued_at;
  gint64 eta;
  SluiceMessageOptions opts;
  gint64 unknown_since;
  GPtrArray *history;
  GHashTable *headers;
  gchar *wf;
  guint snoozes;
  gchar *unique;
  GBytes *unknown_fields;
  GBytes *unknown_opts;
  gchar *seal;
} SluiceEnvelope;

/**
 * sluice_envelope_new:
 * Returns: (transfer full): an empty envelope: version 1, attempt 1, args
 * nil, options unset, empty history and headers, every string NULL.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceEnvelope *sluice_envelope_new(void);

/** sluice_envelope_copy: Returns: (transfer full): a deep copy of @env. */
SLUICE_AVAILABLE_IN_0_1
SluiceEnvelope *sluice_envelope_copy(const SluiceEnvelope *env);

/** sluice_envelope_free: frees @env and all it owns. NULL-safe. */
SLUICE_AVAILABLE_IN_0_1
void sluice_envelope_free(SluiceEnvelope *env);

/**
 * sluice_envelope_set_header:
 * @name: (transfer none): copied
 * @value: (transfer none): copied; replaces a header of the same name
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_envelope_set_header(SluiceEnvelope *env, const gchar *name,
                                const gchar *value);

/**
 * sluice_envelope_get_header:
 * Returns: (transfer none) (nullable): the header @name, valid while @env is
 * and the header is not replaced.
 */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_envelope_get_header(const SluiceEnvelope *env,
                                        const gchar *name);

/**
 * sluice_envelope_add_history:
 * @env: the envelope
 * @line: (transfer none): a description of one failed attempt
 *
 * Appends @line cut to SLUICE_HISTORY_MAX_LINE_BYTES (at a UTF-8 character
 * boundary) and drops the oldest lines beyond SLUICE_HISTORY_MAX_LINES, so a
 * task failing in a loop cannot grow its own message.
 */
SLUICE_AVAILABLE_IN_0_1
void sluice_envelope_add_history(SluiceEnvelope *env, const gchar *line);

/**
 * SluiceDecodeLimits:
 * @max_bytes: reject input longer than this
 * @max_depth: reject nesting deeper than this (the envelope map is depth 1)
 */
typedef struct {
  gsize max_bytes;
  guint max_depth;
} SluiceDecodeLimits;

/** sluice_decode_limits_init: the defaults: 1 MiB, depth 64. */
SLUICE_AVAILABLE_IN_0_1
void sluice_decode_limits_init(SluiceDecodeLimits *limits);

/**
 * SluiceCodec:
 *
 * A wire format of the envelope: sluice_codec_msgpack() (the default) or
 * sluice_codec_json(). Opaque and static (not reference counted). There is
 * no third: a decoder tells the two apart by the first byte, so a codec of
 * one's own could write bytes no worker reads.
 */
typedef struct _SluiceCodec SluiceCodec;

/** sluice_codec_get_name: Returns: "msgpack" or "json". */
SLUICE_AVAILABLE_IN_0_1
const gchar *sluice_codec_get_name(const SluiceCodec *codec);

/** sluice_codec_msgpack: Returns: (transfer none): the msgpack codec. */
SLUICE_AVAILABLE_IN_0_1
const SluiceCodec *sluice_codec_msgpack(void);

/** sluice_codec_json: Returns: (transfer none): the JSON codec. */
SLUICE_AVAILABLE_IN_0_1
const SluiceCodec *sluice_codec_json(void);

/**
 * sluice_envelope_encode:
 * @codec: (nullable): NULL means msgpack
 * Returns: (transfer full): the encoded envelope, or NULL and @error (for
 * instance a field the codec cannot express, or a missing id/task/queue).
 */
SLUICE_AVAILABLE_IN_0_1
GBytes *sluice_envelope_encode(const SluiceCodec *codec,
                               const SluiceEnvelope *env, GError **error);

/**
 * sluice_envelope_decode:
 * @bytes: (transfer none): an encoded envelope, msgpack or JSON
 * @limits: (nullable): NULL means the defaults
 *
 * Picks the codec by the first byte (see the top of this file). Decoding
 * @bytes allocates at most 8 times their size plus 64 KiB at its peak, in
 * either encoding (PROTOCOL.md, "What a message costs"); a history longer
 * than SLUICE_HISTORY_MAX_LINES keeps its newest lines.
 * Returns: (transfer full): the envelope, or NULL and a SLUICE_CODEC_ERROR.
 */
SLUICE_AVAILABLE_IN_0_1
SluiceEnvelope *sluice_envelope_decode(GBytes *bytes,
                                       const SluiceDecodeLimits *limits,
                                       GError **error);

/**
 * sluice_args_from_json:
 * @json: a JSON text (one value)
 * @length: its length, or -1 if NUL-terminated
 *
 * Converts JSON to msgpack: integers stay integers, other numbers become
 * float64, strings stay strings, null/true/false/arrays/objects map 1:1.
 * A JSON syntax error names its line and column. The value may nest at
 * most SLUICE_MAX_ARGS_DEPTH (63) deep (the envelope around it takes one
 * level of the 64 a decoder accepts; {"$bin": ...} takes none). The size
 * limit is the client's (max_message_bytes), on the whole message.
 * Returns: (transfer full): msgpack bytes, or NULL and @error.
 */
SLUICE_AVAILABLE_IN_0_1
GBytes *sluice_args_from_json(const gchar *json, gssize length, GError **error);

/**
 * sluice_args_to_json:
 * @msgpack: (transfer none): msgpack bytes of exactly one value
 *
 * The inverse of sluice_args_from_json(). msgpack `bin` becomes
 * {"$bin": "<base64>"}; `ext` types cannot be expressed and are an error.
 * Returns: (transfer full): a NUL-terminated compact JSON text, or NULL and
 * @error.
 */
SLUICE_AVAILABLE_IN_0_1
gchar *sluice_args_to_json(GBytes *msgpack, GError **error);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(SluiceEnvelope, sluice_envelope_free)

G_END_DECLS
