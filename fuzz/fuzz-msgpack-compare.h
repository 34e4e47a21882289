/* fuzz-msgpack-compare.h - whether two msgpack values say the same thing,
 * for the targets that convert between msgpack and JSON. The encodings
 * may differ (a uint 8 for 5, a float32 that JSON turns into a float64);
 * the values may not.
 */
#pragma once

#include "fuzz/fuzz-common.h"
#include "serializers/mp-reader.h"

/* Compares one value of each reader, recursively (the callers bound the
 * depth). */
static gboolean
fuzz_same_value(SluiceMpReader *a, SluiceMpReader *b)
{
  SluiceMpValue x, y;

  if (!sluice_mp_reader__next(a, &x, NULL) ||
      !sluice_mp_reader__next(b, &y, NULL))
    return FALSE;
  if ((x.type == SLUICE_MP_FLOAT32 || x.type == SLUICE_MP_FLOAT64) &&
      (y.type == SLUICE_MP_FLOAT32 || y.type == SLUICE_MP_FLOAT64))
    return x.f == y.f || (x.f != x.f && y.f != y.f);
  if (x.type != y.type)
    return FALSE;
  switch (x.type) {
  case SLUICE_MP_NIL:
    return TRUE;
  case SLUICE_MP_BOOL:
    return x.b == y.b;
  case SLUICE_MP_UINT:
    return x.u == y.u;
  case SLUICE_MP_INT:
    return x.i == y.i;
  case SLUICE_MP_STR:
  case SLUICE_MP_BIN:
  case SLUICE_MP_EXT:
    return x.raw.len == y.raw.len &&
           (x.type != SLUICE_MP_EXT || x.raw.ext_type == y.raw.ext_type) &&
           memcmp(x.raw.data, y.raw.data, x.raw.len) == 0;
  case SLUICE_MP_ARRAY:
  case SLUICE_MP_MAP: {
    guint64 n = x.type == SLUICE_MP_MAP ? 2 * (guint64)x.count : x.count;

    if (x.count != y.count)
      return FALSE;
    for (guint64 i = 0; i < n; i++)
      if (!fuzz_same_value(a, b))
        return FALSE;
    return TRUE;
  }
  default:
    return FALSE;
  }
}

static gboolean
fuzz_same_msgpack(GBytes *a, GBytes *b)
{
  SluiceMpReader ra, rb;
  gsize la, lb;
  gconstpointer da = g_bytes_get_data(a, &la), db = g_bytes_get_data(b, &lb);

  sluice_mp_reader_init(&ra, da, la);
  sluice_mp_reader_init(&rb, db, lb);
  return fuzz_same_value(&ra, &rb) && ra.pos == la && rb.pos == lb;
}
