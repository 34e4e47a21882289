/* mp-reader.h - a bounded msgpack reader, and the internals the codecs share.
 *
 * Never installed. The reader is a cursor over one borrowed byte buffer; it
 * never allocates and never reads past the buffer's end. msgpack-c's own
 * unpacker is not used for untrusted input because it allocates from the
 * lengths a message declares (a 6-byte input can ask for a 4 GiB array).
 * Here a declared length is always checked against the bytes that remain
 * first: a string needs its length in bytes, and every array element or map
 * key/value needs at least one byte, so a lie is caught before any work is
 * done for it.
 *
 * API tour:
 *   sluice_mp_reader_init()   point a reader at a buffer.
 *   sluice_mp_reader__next()  read the header of one value. Scalars, strings,
 *       binaries and exts are consumed whole; for an array or a map only the
 *       header is consumed and the caller reads the elements next.
 *   sluice_mp_reader__skip()  validate and step over one whole value,
 *       enforcing a nesting limit, without recursion; the value's bytes are
 *       [start, reader->pos), which is how the codecs keep `args` and a
 *       result's `value` as zero-copy slices of the input.
 *
 * Depth convention (the same in both codecs): a container's depth is the
 * number of containers it sits in, plus one. The envelope map is depth 1,
 * `opts` is depth 2, an array inside `args` is at least depth 2. Scalars add
 * no depth.
 *
 * The second half of this header declares the semi-private functions that
 * envelope.c, the two codecs, args-json.c and result.c share, so that
 * every validation rule of the wire format lives in exactly one place.
 */
#pragma once

#include <sluice/sluice.h>

#include "serializers/text.h"

G_BEGIN_DECLS

/* ---- The reader ---------------------------------------------------------- */

typedef enum {
  SLUICE_MP_NIL,
  SLUICE_MP_BOOL,
  SLUICE_MP_UINT, /* any integer >= 0, whichever marker carried it */
  SLUICE_MP_INT,  /* any integer < 0 */
  SLUICE_MP_FLOAT32,
  SLUICE_MP_FLOAT64,
  SLUICE_MP_STR,
  SLUICE_MP_BIN,
  SLUICE_MP_ARRAY,
  SLUICE_MP_MAP,
  SLUICE_MP_EXT,
} SluiceMpType;

/**
 * SluiceMpValue:
 * @type: what was read
 * @offset: where the value's first byte is in the reader's buffer, or
 *   G_MAXSIZE when the value did not come from a buffer (the JSON codec
 *   builds values too, to share the field rules below)
 * @b: BOOL
 * @u: UINT
 * @i: INT
 * @f: FLOAT32 (widened) and FLOAT64
 * @count: ARRAY elements or MAP pairs, not yet read
 * @raw: STR, BIN, EXT: (transfer none) pointer into the buffer, length, and
 *   for EXT the application type
 *
 * A plain value; it owns nothing and points into the reader's buffer.
 */
typedef struct {
  SluiceMpType type;
  gsize offset;
  union {
    gboolean b;
    guint64 u;
    gint64 i;
    gdouble f;
    guint32 count;
    struct {
      const gchar *data;
      guint32 len;
      gint8 ext_type;
    } raw;
  };
} SluiceMpValue;

/**
 * SluiceMpReader:
 * @data: (transfer none): the buffer; the caller keeps it alive
 * @len: its length
 * @pos: offset of the next unread byte; 0 <= @pos <= @len always
 */
typedef struct {
  const guint8 *data;
  gsize len;
  gsize pos;
} SluiceMpReader;

static inline void
sluice_mp_reader_init(SluiceMpReader *reader, gconstpointer data, gsize len)
{
  reader->data = data;
  reader->len = len;
  reader->pos = 0;
}

static inline gsize
sluice_mp_reader_remaining(const SluiceMpReader *reader)
{
  return reader->len - reader->pos;
}

/**
 * sluice_mp_reader__next:
 * @out: (out caller-allocates): the value read
 *
 * Reads one value's header (see the top of this file). On failure the
 * reader's position is unspecified and @error is a SLUICE_CODEC_ERROR naming
 * the byte offset: TRUNCATED when the input ends inside the value (or an
 * array/map declares more elements than bytes remain), INVALID for the
 * never-used marker 0xc1.
 */
gboolean sluice_mp_reader__next(SluiceMpReader *reader, SluiceMpValue *out,
                                GError **error);

/**
 * sluice_mp_reader__skip:
 * @depth: the depth a container at the reader's position would have
 * @max_depth: fail with TOO_DEEP beyond this depth
 *
 * Validates and steps over exactly one value, however nested, using a
 * small explicit stack instead of recursion, so no input and no limit can
 * exhaust the C stack. Errors as sluice_mp_reader__next(), plus TOO_DEEP.
 */
gboolean sluice_mp_reader__skip(SluiceMpReader *reader, guint depth,
                                guint max_depth, GError **error);

/**
 * sluice_mp_reader__skip_counting:
 * @n_values: (out) (optional): on success, how many values the skipped one
 *   is made of: 1 for a scalar, 1 + its elements' for an array, 1 + its
 *   keys' and values' for a map
 *
 * sluice_mp_reader__skip(), counting values on the way: what unpacking the
 * value into msgpack objects will cost (sluice_mp__unpack()).
 */
gboolean sluice_mp_reader__skip_counting(SluiceMpReader *reader, guint depth,
                                         guint max_depth, guint64 *n_values,
                                         GError **error);

/**
 * sluice_mp__unpack:
 * @data: (transfer none): exactly one msgpack value; strings, binaries and
 *   exts of @out point into it, so it must outlive @out
 * @zone: where the objects are allocated: exactly sizeof (msgpack_object)
 *   (24 bytes) per value below the root, in allocations of a container's
 *   size each
 * @out: (out caller-allocates): the root object
 *
 * What msgpack_unpack() does, without its fixed 32-level stack and without
 * recursion: any value the bounded reader accepts unpacks, however deep.
 * Returns: TRUE, or FALSE with the reader's error (and @out partial).
 */
gboolean sluice_mp__unpack(gconstpointer data, gsize len, msgpack_zone *zone,
                           msgpack_object *out, GError **error);

/* Bytes of msgpack objects sluice_mp__unpack() allocates for a value made
 * of @n_values values (the root is the caller's). */
#define SLUICE_MP_UNPACKED_BYTES(n_values)                                     \
  ((n_values) > 0 ? ((n_values)-1) * (guint64)sizeof(msgpack_object) : 0)

/**
 * sluice_mp__check_one_value:
 * @what: (nullable): the name put in front of an error message ("args")
 *
 * Returns: TRUE when @data holds exactly one well-formed value nested no
 * deeper than @max_depth (the value's own depth being 1). No trailing bytes
 * are allowed (TRAILING), nor an empty buffer (TRUNCATED).
 */
gboolean sluice_mp__check_one_value(const gchar *what, gconstpointer data,
                                    gsize len, guint max_depth, GError **error);

/** sluice_mp__type_name: Returns: (transfer none): "string", "map", ... */
const gchar *sluice_mp__type_name(SluiceMpType type);

/* The one msgpack nil, for `args` when there are none. */
#define SLUICE_MP_NIL_BYTE 0xc0

G_END_DECLS
