/* alloc-counter.h - how many bytes a test process has allocated.
 *
 * A test of a memory bound measures instead of trusting the code under
 * test to report its own cost:
 *
 *     sluice_test_alloc_reset_peak ();
 *     gint64 before = sluice_test_alloc_current ();
 *     env = sluice_envelope_decode (bytes, NULL, &error);
 *     gint64 cost = sluice_test_alloc_peak () - before;
 *
 * Bytes are usable sizes of the blocks (malloc_usable_size), so malloc's
 * rounding is counted too. Link this file into one test program only: it
 * replaces malloc for the whole process.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Call first thing in main(): re-executes the program with
 * G_SLICE=always-malloc unless it runs with it, so that GLib's slice
 * allocator does not hide allocations. */
void sluice_test_alloc_require_plain_malloc(char **argv);

/* Starts counting (under ASan, installs its hooks). Returns: FALSE if the
 * counter cannot work in this build. */
gboolean sluice_test_alloc_start(void);

/* Bytes allocated and not freed now. */
gint64 sluice_test_alloc_current(void);

/* The peak is set to the current count... */
void sluice_test_alloc_reset_peak(void);
/* ...and is the highest count seen since. */
gint64 sluice_test_alloc_peak(void);

G_END_DECLS
