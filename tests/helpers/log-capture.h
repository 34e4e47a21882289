/* log-capture.h - what a test process logged, for tests that check that a
 * log line was written (a warning said once, a reconnection announced).
 *
 * sluice_test_log_capture_install() puts a writer in front of GLib's
 * structured log that keeps the MESSAGE of every record in memory and then
 * hands the record on to g_log_writer_default(), so stderr shows what it
 * would have shown anyway (warnings help when a test fails). GLib allows
 * one writer per process: install it once, in main(), before the runner
 * starts. Check forks each test from there, so each test starts with what
 * main() had logged; a test that counts lines calls _reset() first.
 * Thread-safe: brokers and workers log from their own threads.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

void sluice_test_log_capture_install(void);

/* Forgets what was captured so far. */
void sluice_test_log_capture_reset(void);

gboolean sluice_test_log_capture_contains(const gchar *needle);

/* How many times @needle occurs in what was captured. */
guint sluice_test_log_capture_count(const gchar *needle);

/* From now on, a record whose message contains @needle is held @ms before
 * it is captured (and written): widens the window between a line being
 * logged and its being seen, for tests of what waits for it. NULL stops. */
void sluice_test_log_capture_delay(const gchar *needle, guint ms);

G_END_DECLS
