/* sluice-macros.h - visibility and versioning macros shared by every header.
 *
 * Every public symbol carries SLUICE_AVAILABLE_IN_x_y so that a later
 * release can mark what it adds, as GLib does with GLIB_AVAILABLE_IN_x_y.
 * A macro exists for each version up to the one configure.ac names and no
 * further: until 0.1.0 is released everything is SLUICE_AVAILABLE_IN_0_1
 * (and no "(since x.y)" note is newer than it); the next release adds its
 * own. tests/api-versions.sh checks the markers against configure.ac.
 * Symbols of the backend-author API (sluice/sys/broker.h) carry
 * SLUICE_BROKER_API instead: that API is stable only within a minor release,
 * like libgit2's git2/sys headers.
 */
#pragma once

#if !defined(SLUICE_INSIDE) && !defined(SLUICE_COMPILATION) &&                 \
    !defined(SLUICE_BROKER_INSIDE)
#error                                                                         \
    "Only <sluice/sluice.h> or <sluice/sys/broker.h> can be included directly."
#endif

#include <glib.h>

#define SLUICE_VERSION_MAJOR 0
#define SLUICE_VERSION_MINOR 1
#define SLUICE_VERSION_MICRO 0

#if defined(SLUICE_COMPILATION) && defined(__GNUC__)
#define _SLUICE_EXPORT __attribute__((visibility("default"))) extern
#else
#define _SLUICE_EXPORT extern
#endif

#define SLUICE_AVAILABLE_IN_0_1 _SLUICE_EXPORT
#define SLUICE_BROKER_API _SLUICE_EXPORT
