/* mp-reader.c - the bounded msgpack reader (see mp-reader.h).
 *
 * Every read goes through one length check against the bytes that remain,
 * written so that it cannot overflow: `len - pos < need` with pos <= len
 * always. Container counts are checked the same way before the caller is
 * told about them (one byte per element at least), which makes a huge
 * declared count fail at once rather than after a long loop or a huge
 * allocation.
 *
 * skip() keeps its own stack of "values left to read" per open container
 * instead of recursing: the depth limit is the caller's to choose, and a
 * large limit must not turn into a large C stack. The first levels of the
 * stack live in the frame, so shallow values (nearly all of them) cost no
 * allocation.
 */
#include "config.h"

#include "serializers/mp-reader.h"

#include <string.h>

static inline guint16
load16(const guint8 *p)
{
  return (guint16)((guint16)p[0] << 8 | p[1]);
}

static inline guint32
load32(const guint8 *p)
{
  return (guint32)p[0] << 24 | (guint32)p[1] << 16 | (guint32)p[2] << 8 |
         (guint32)p[3];
}

static inline guint64
load64(const guint8 *p)
{
  return (guint64)load32(p) << 32 | load32(p + 4);
}

const gchar *
sluice_mp__type_name(SluiceMpType type)
{
  switch (type) {
  case SLUICE_MP_NIL:
    return "nil";
  case SLUICE_MP_BOOL:
    return "boolean";
  case SLUICE_MP_UINT:
  case SLUICE_MP_INT:
    return "integer";
  case SLUICE_MP_FLOAT32:
  case SLUICE_MP_FLOAT64:
    return "float";
  case SLUICE_MP_STR:
    return "string";
  case SLUICE_MP_BIN:
    return "binary";
  case SLUICE_MP_ARRAY:
    return "array";
  case SLUICE_MP_MAP:
    return "map";
  case SLUICE_MP_EXT:
    return "ext";
  }
  return "unknown";
}

static gboolean
fail_truncated(const SluiceMpReader *r, gsize offset, const gchar *what,
               guint64 need, GError **error)
{
  g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TRUNCATED,
              "byte offset %" G_GSIZE_FORMAT ": the input ends inside %s "
              "(%" G_GUINT64_FORMAT " more bytes needed, %" G_GSIZE_FORMAT
              " left)",
              offset, what, need, sluice_mp_reader_remaining(r));
  return FALSE;
}

/* A string, binary or ext body of @len bytes starts at the reader's
 * position: check it is all there, point at it and step over it. */
static inline gboolean
take_body(SluiceMpReader *r, SluiceMpValue *out, guint32 len, const gchar *what,
          GError **error)
{
  if (sluice_mp_reader_remaining(r) < len)
    return fail_truncated(r, out->offset, what, len, error);
  out->raw.data = (const gchar *)r->data + r->pos;
  out->raw.len = len;
  r->pos += len;
  return TRUE;
}

/* Every element needs at least one byte: a count that cannot fit in what
 * is left is a truncated (or lying) input, reported before anyone loops. */
static inline gboolean
check_count(SluiceMpReader *r, SluiceMpValue *out, GError **error)
{
  guint64 min_bytes =
      out->type == SLUICE_MP_MAP ? 2 * (guint64)out->count : out->count;

  if (sluice_mp_reader_remaining(r) < min_bytes) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TRUNCATED,
                "byte offset %" G_GSIZE_FORMAT ": %s declares %u %s but only "
                "%" G_GSIZE_FORMAT " bytes are left",
                out->offset, out->type == SLUICE_MP_MAP ? "a map" : "an array",
                out->count, out->type == SLUICE_MP_MAP ? "pairs" : "elements",
                sluice_mp_reader_remaining(r));
    return FALSE;
  }
  return TRUE;
}

gboolean
sluice_mp_reader__next(SluiceMpReader *r, SluiceMpValue *out, GError **error)
{
  const guint8 *p;
  guint8 m;
  gsize need;

  out->offset = r->pos;
  if (r->pos >= r->len)
    return fail_truncated(r, r->pos, "a value", 1, error);

  m = r->data[r->pos++];
  if (m <= 0x7f) {
    out->type = SLUICE_MP_UINT;
    out->u = m;
    return TRUE;
  }
  if (m >= 0xe0) {
    out->type = SLUICE_MP_INT;
    out->i = (gint8)m;
    return TRUE;
  }
  if (m <= 0x8f) {
    out->type = SLUICE_MP_MAP;
    out->count = m & 0x0f;
    return check_count(r, out, error);
  }
  if (m <= 0x9f) {
    out->type = SLUICE_MP_ARRAY;
    out->count = m & 0x0f;
    return check_count(r, out, error);
  }
  if (m <= 0xbf) {
    out->type = SLUICE_MP_STR;
    return take_body(r, out, m & 0x1f, "a string", error);
  }

  /* 0xc0-0xdf: the marker says how many bytes follow before any body. */
  switch (m) {
  case 0xc0:
    out->type = SLUICE_MP_NIL;
    return TRUE;
  case 0xc1:
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
                "byte offset %" G_GSIZE_FORMAT
                ": 0xc1 is not a msgpack type marker (is this msgpack?)",
                out->offset);
    return FALSE;
  case 0xc2:
  case 0xc3:
    out->type = SLUICE_MP_BOOL;
    out->b = m == 0xc3;
    return TRUE;
  case 0xc4:
  case 0xd9:
    need = 1;
    break;
  case 0xc5:
  case 0xda:
  case 0xdc:
  case 0xde:
    need = 2;
    break;
  case 0xc6:
  case 0xdb:
  case 0xdd:
  case 0xdf:
    need = 4;
    break;
  case 0xc7: /* ext 8: length, type */
    need = 2;
    break;
  case 0xc8:
    need = 3;
    break;
  case 0xc9:
    need = 5;
    break;
  case 0xca:
    need = 4;
    break;
  case 0xcb:
    need = 8;
    break;
  case 0xcc:
  case 0xd0:
    need = 1;
    break;
  case 0xcd:
  case 0xd1:
    need = 2;
    break;
  case 0xce:
  case 0xd2:
    need = 4;
    break;
  case 0xcf:
  case 0xd3:
    need = 8;
    break;
  default: /* 0xd4-0xd8, fixext: type byte, then 1 << (m - 0xd4) bytes */
    need = 1;
    break;
  }

  if (sluice_mp_reader_remaining(r) < need)
    return fail_truncated(r, out->offset, "a value's header", need, error);
  p = r->data + r->pos;
  r->pos += need;

  switch (m) {
  case 0xc4:
    out->type = SLUICE_MP_BIN;
    return take_body(r, out, p[0], "a binary", error);
  case 0xc5:
    out->type = SLUICE_MP_BIN;
    return take_body(r, out, load16(p), "a binary", error);
  case 0xc6:
    out->type = SLUICE_MP_BIN;
    return take_body(r, out, load32(p), "a binary", error);
  case 0xc7:
    out->type = SLUICE_MP_EXT;
    out->raw.ext_type = (gint8)p[1];
    return take_body(r, out, p[0], "an ext", error);
  case 0xc8:
    out->type = SLUICE_MP_EXT;
    out->raw.ext_type = (gint8)p[2];
    return take_body(r, out, load16(p), "an ext", error);
  case 0xc9:
    out->type = SLUICE_MP_EXT;
    out->raw.ext_type = (gint8)p[4];
    return take_body(r, out, load32(p), "an ext", error);
  case 0xca: {
    guint32 bits = load32(p);
    gfloat f;
    memcpy(&f, &bits, sizeof f);
    out->type = SLUICE_MP_FLOAT32;
    out->f = f;
    return TRUE;
  }
  case 0xcb: {
    guint64 bits = load64(p);
    memcpy(&out->f, &bits, sizeof out->f);
    out->type = SLUICE_MP_FLOAT64;
    return TRUE;
  }
  case 0xcc:
    out->type = SLUICE_MP_UINT;
    out->u = p[0];
    return TRUE;
  case 0xcd:
    out->type = SLUICE_MP_UINT;
    out->u = load16(p);
    return TRUE;
  case 0xce:
    out->type = SLUICE_MP_UINT;
    out->u = load32(p);
    return TRUE;
  case 0xcf:
    out->type = SLUICE_MP_UINT;
    out->u = load64(p);
    return TRUE;
  case 0xd0:
  case 0xd1:
  case 0xd2:
  case 0xd3: {
    gint64 v;
    if (m == 0xd0)
      v = (gint8)p[0];
    else if (m == 0xd1)
      v = (gint16)load16(p);
    else if (m == 0xd2)
      v = (gint32)load32(p);
    else
      v = (gint64)load64(p);
    /* Signed markers may carry non-negative values; callers should not
     * have to care which marker a producer picked. */
    if (v >= 0) {
      out->type = SLUICE_MP_UINT;
      out->u = (guint64)v;
    } else {
      out->type = SLUICE_MP_INT;
      out->i = v;
    }
    return TRUE;
  }
  case 0xd4:
  case 0xd5:
  case 0xd6:
  case 0xd7:
  case 0xd8:
    out->type = SLUICE_MP_EXT;
    out->raw.ext_type = (gint8)p[0];
    return take_body(r, out, 1u << (m - 0xd4), "an ext", error);
  case 0xd9:
    out->type = SLUICE_MP_STR;
    return take_body(r, out, p[0], "a string", error);
  case 0xda:
    out->type = SLUICE_MP_STR;
    return take_body(r, out, load16(p), "a string", error);
  case 0xdb:
    out->type = SLUICE_MP_STR;
    return take_body(r, out, load32(p), "a string", error);
  case 0xdc:
    out->type = SLUICE_MP_ARRAY;
    out->count = load16(p);
    return check_count(r, out, error);
  case 0xdd:
    out->type = SLUICE_MP_ARRAY;
    out->count = load32(p);
    return check_count(r, out, error);
  case 0xde:
    out->type = SLUICE_MP_MAP;
    out->count = load16(p);
    return check_count(r, out, error);
  case 0xdf:
    out->type = SLUICE_MP_MAP;
    out->count = load32(p);
    return check_count(r, out, error);
  default:
    break;
  }
  g_assert_not_reached();
  return FALSE;
}

/* Frames kept in the C stack before skip() moves its stack to the heap. */
#define SKIP_INLINE_LEVELS 32

gboolean
sluice_mp_reader__skip(SluiceMpReader *r, guint depth, guint max_depth,
                       GError **error)
{
  return sluice_mp_reader__skip_counting(r, depth, max_depth, NULL, error);
}

gboolean
sluice_mp_reader__skip_counting(SluiceMpReader *r, guint depth, guint max_depth,
                                guint64 *n_values, GError **error)
{
  guint64 inline_stack[SKIP_INLINE_LEVELS];
  guint64 *stack = inline_stack;
  gsize capacity = SKIP_INLINE_LEVELS;
  gsize top = 0;    /* open containers */
  guint64 left = 1; /* values still to read at the current level */
  guint64 values = 0;
  gboolean ok = TRUE;

  for (;;) {
    SluiceMpValue v;

    while (left == 0 && top > 0)
      left = stack[--top];
    if (left == 0)
      break;

    if (!sluice_mp_reader__next(r, &v, error)) {
      ok = FALSE;
      break;
    }
    left--;
    values++;
    if (v.type != SLUICE_MP_ARRAY && v.type != SLUICE_MP_MAP)
      continue;

    /* depth + top is this container's depth; compare without overflow. */
    if (top >= max_depth || depth > max_depth - top) {
      g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_DEEP,
                  "byte offset %" G_GSIZE_FORMAT ": nesting deeper than the "
                  "limit of %u",
                  v.offset, max_depth);
      ok = FALSE;
      break;
    }
    if (v.count == 0)
      continue;
    if (top == capacity) {
      capacity *= 2;
      if (stack == inline_stack) {
        stack = g_new(guint64, capacity);
        memcpy(stack, inline_stack, sizeof inline_stack);
      } else {
        stack = g_renew(guint64, stack, capacity);
      }
    }
    stack[top++] = left;
    left = v.type == SLUICE_MP_MAP ? 2 * (guint64)v.count : v.count;
  }

  if (stack != inline_stack)
    g_free(stack);
  if (ok && n_values != NULL)
    *n_values = values;
  return ok;
}

gboolean
sluice_mp__check_one_value(const gchar *what, gconstpointer data, gsize len,
                           guint max_depth, GError **error)
{
  SluiceMpReader r;

  sluice_mp_reader_init(&r, data, len);
  if (!sluice_mp_reader__skip(&r, 1, max_depth, error))
    goto fail;
  if (r.pos != r.len) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TRAILING,
                "byte offset %" G_GSIZE_FORMAT ": %" G_GSIZE_FORMAT
                " bytes follow the value (exactly one value was expected)",
                r.pos, r.len - r.pos);
    goto fail;
  }
  return TRUE;

fail:
  if (what != NULL)
    g_prefix_error(error, "%s: ", what);
  return FALSE;
}

/* ---- Unpacking into msgpack objects -------------------------------------- */

/* One open container of the unpacker: where its next value goes. */
typedef struct {
  msgpack_object *items;    /* an array's elements, or NULL */
  msgpack_object_kv *pairs; /* a map's pairs, or NULL */
  guint64 total;            /* values it holds (two per pair) */
  guint64 next;             /* values filled so far */
} UnpackFrame;

static void
fill_scalar(msgpack_object *o, const SluiceMpValue *v)
{
  switch (v->type) {
  case SLUICE_MP_NIL:
    o->type = MSGPACK_OBJECT_NIL;
    break;
  case SLUICE_MP_BOOL:
    o->type = MSGPACK_OBJECT_BOOLEAN;
    o->via.boolean = v->b;
    break;
  case SLUICE_MP_UINT:
    o->type = MSGPACK_OBJECT_POSITIVE_INTEGER;
    o->via.u64 = v->u;
    break;
  case SLUICE_MP_INT:
    o->type = MSGPACK_OBJECT_NEGATIVE_INTEGER;
    o->via.i64 = v->i;
    break;
  case SLUICE_MP_FLOAT32:
    o->type = MSGPACK_OBJECT_FLOAT32;
    o->via.f64 = v->f;
    break;
  case SLUICE_MP_FLOAT64:
    o->type = MSGPACK_OBJECT_FLOAT64;
    o->via.f64 = v->f;
    break;
  case SLUICE_MP_STR:
    o->type = MSGPACK_OBJECT_STR;
    o->via.str.size = v->raw.len;
    o->via.str.ptr = v->raw.data;
    break;
  case SLUICE_MP_BIN:
    o->type = MSGPACK_OBJECT_BIN;
    o->via.bin.size = v->raw.len;
    o->via.bin.ptr = v->raw.data;
    break;
  case SLUICE_MP_EXT:
    o->type = MSGPACK_OBJECT_EXT;
    o->via.ext.type = v->raw.ext_type;
    o->via.ext.size = v->raw.len;
    o->via.ext.ptr = v->raw.data;
    break;
  case SLUICE_MP_ARRAY:
  case SLUICE_MP_MAP:
    g_assert_not_reached();
  }
}

static gpointer
zone_alloc(msgpack_zone *zone, gsize size)
{
  gpointer p = msgpack_zone_malloc(zone, size);

  if (p == NULL)
    g_error("sluice: out of memory (%" G_GSIZE_FORMAT " bytes)", size);
  return p;
}

gboolean
sluice_mp__unpack(gconstpointer data, gsize len, msgpack_zone *zone,
                  msgpack_object *out, GError **error)
{
  SluiceMpReader r;
  GArray *stack = g_array_new(FALSE, FALSE, sizeof(UnpackFrame));
  msgpack_object *slot = out;
  gboolean ok = FALSE;

  sluice_mp_reader_init(&r, data, len);
  out->type = MSGPACK_OBJECT_NIL;
  for (;;) {
    SluiceMpValue v;
    UnpackFrame *top;

    if (!sluice_mp_reader__next(&r, &v, error))
      goto out;
    if (v.type == SLUICE_MP_ARRAY) {
      UnpackFrame f = {NULL, NULL, v.count, 0};

      slot->type = MSGPACK_OBJECT_ARRAY;
      slot->via.array.size = v.count;
      slot->via.array.ptr = NULL;
      if (v.count > 0) {
        /* The reader checked the count against the bytes left. */
        f.items = zone_alloc(zone, (gsize)v.count * sizeof(msgpack_object));
        slot->via.array.ptr = f.items;
        g_array_append_val(stack, f);
      }
    } else if (v.type == SLUICE_MP_MAP) {
      UnpackFrame f = {NULL, NULL, 2 * (guint64)v.count, 0};

      slot->type = MSGPACK_OBJECT_MAP;
      slot->via.map.size = v.count;
      slot->via.map.ptr = NULL;
      if (v.count > 0) {
        f.pairs = zone_alloc(zone, (gsize)v.count * sizeof(msgpack_object_kv));
        slot->via.map.ptr = f.pairs;
        g_array_append_val(stack, f);
      }
    } else {
      fill_scalar(slot, &v);
    }

    /* The next slot to fill: in the innermost container not yet full. */
    while (stack->len > 0) {
      top = &g_array_index(stack, UnpackFrame, stack->len - 1);
      if (top->next < top->total)
        break;
      g_array_set_size(stack, stack->len - 1);
    }
    if (stack->len == 0)
      break;
    top = &g_array_index(stack, UnpackFrame, stack->len - 1);
    if (top->items != NULL)
      slot = &top->items[top->next];
    else if (top->next % 2 == 0)
      slot = &top->pairs[top->next / 2].key;
    else
      slot = &top->pairs[top->next / 2].val;
    top->next++;
  }
  if (r.pos != r.len) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TRAILING,
                "byte offset %" G_GSIZE_FORMAT ": %" G_GSIZE_FORMAT
                " bytes follow the value (exactly one value was expected)",
                r.pos, r.len - r.pos);
    goto out;
  }
  ok = TRUE;
out:
  g_array_unref(stack);
  return ok;
}
