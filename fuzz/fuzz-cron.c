/* fuzz-cron.c - sluice_cron_next(): the cron parser and the search.
 *
 * The input is 8 bytes of time (ms, little-endian, any int64) and the
 * expression. Oracles: no GLib critical (fuzz_init); a failure is
 * SLUICE_WORKER_ERROR_INVALID with a printable message; a success is a
 * whole minute strictly after the time, within the documented range
 * (0001-01-01T00:00Z to 9999-12-31T23:59Z), and asking again from just
 * before it finds it again.
 */
#include "fuzz/fuzz-common.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

#define FIRST_MS G_GINT64_CONSTANT(-62135596800000)
#define LAST_MS G_GINT64_CONSTANT(253402300740000)

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *cron = NULL;
  guint64 bits = 0;
  gint64 after, next = 0, again = 0;

  fuzz_init();
  if (size < 8)
    return 0;
  for (guint i = 0; i < 8; i++)
    bits |= (guint64)data[i] << (8 * i);
  after = (gint64)bits;
  /* Cron expressions are short; long inputs only slow the search down. */
  cron = fuzz_string(data + 8, MIN(size - 8, 200));
  if (!sluice_cron_next(cron, after, &next, &error)) {
    FUZZ_ASSERT(g_error_matches(error, SLUICE_WORKER_ERROR,
                                SLUICE_WORKER_ERROR_INVALID),
                "failed without SLUICE_WORKER_ERROR_INVALID");
    fuzz_check_error(error);
    return 0;
  }
  FUZZ_ASSERT(next > after,
              "%" G_GINT64_FORMAT " is not after %" G_GINT64_FORMAT, next,
              after);
  FUZZ_ASSERT(next >= FIRST_MS && next <= LAST_MS,
              "%" G_GINT64_FORMAT " is out of the range", next);
  FUZZ_ASSERT(next % 60000 == 0, "%" G_GINT64_FORMAT " is not a minute", next);
  FUZZ_ASSERT(sluice_cron_next(cron, next - 1, &again, &error) && again == next,
              "from just before %" G_GINT64_FORMAT
              " it finds %" G_GINT64_FORMAT,
              next, again);
  return 0;
}
