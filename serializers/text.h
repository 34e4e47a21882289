/* text.h - outside bytes made safe to quote in messages (text.c).
 * Internal to libsluice. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/**
 * sluice_text__escape:
 * @bytes: (nullable): any bytes: a key from a message, a URL, a cron
 *   expression
 * @length: their length, or -1 if NUL-terminated
 * @max_bytes: show at most this many bytes of @bytes (cut at a character,
 *   then "…"); 0 = all
 *
 * What every message that quotes outside bytes uses: printable UTF-8 is
 * kept, control characters (C0, DEL, C1) become \n, \t, \xNN or \uNNNN,
 * and every byte that is not part of a valid UTF-8 character becomes \xNN.
 * Returns: (transfer full): valid UTF-8 without control characters.
 */
gchar *sluice_text__escape(const gchar *bytes, gssize length, gsize max_bytes);

G_END_DECLS
