/* text.c - outside bytes made safe to quote in an error message or a log
 * line.
 *
 * A message is read by people, on terminals, in journals and in JSON logs,
 * so whatever it quotes from outside (a key of a hostile message, a cron
 * expression, a URL, a token that failed to parse) must be valid UTF-8 and
 * must not carry control characters: an ESC or a BEL copied into a message
 * is a terminal escape sequence waiting for someone to `cat` a log.
 * g_utf8_make_valid() would fix the first but hides which byte was wrong;
 * here every byte that is not a printable UTF-8 character is spelled out,
 * so the reader can still tell what the input held.
 */
#include "config.h"

#include <string.h>

#include "serializers/text.h"

/* Appends the escape of one byte or character that may not be shown. */
static void
append_escape(GString *out, gunichar c)
{
  switch (c) {
  case '\n':
    g_string_append(out, "\\n");
    return;
  case '\r':
    g_string_append(out, "\\r");
    return;
  case '\t':
    g_string_append(out, "\\t");
    return;
  default:
    break;
  }
  if (c < 0x100 && !(c >= 0x80 && c <= 0x9f))
    g_string_append_printf(out, "\\x%02x", c);
  else
    g_string_append_printf(out, "\\u%04x", c);
}

gchar *
sluice_text__escape(const gchar *bytes, gssize length, gsize max_bytes)
{
  const guchar *p = (const guchar *)bytes;
  gsize len, i = 0;
  GString *out;

  if (bytes == NULL)
    return g_strdup("(null)");
  len = length < 0 ? strlen(bytes) : (gsize)length;
  out = g_string_sized_new(MIN(len, max_bytes > 0 ? max_bytes : len) + 8);
  while (i < len) {
    gunichar c;
    gsize n;

    if (max_bytes > 0 && i >= max_bytes) {
      g_string_append(out, "…");
      break;
    }
    if (p[i] < 0x80) {
      if (p[i] < 0x20 || p[i] == 0x7f)
        append_escape(out, p[i]);
      else
        g_string_append_c(out, (gchar)p[i]);
      i++;
      continue;
    }
    c = g_utf8_get_char_validated((const gchar *)p + i, (gssize)(len - i));
    if (c == (gunichar)-1 || c == (gunichar)-2) {
      /* Not UTF-8, or a character cut short by the end of the input. */
      g_string_append_printf(out, "\\x%02x", p[i]);
      i++;
      continue;
    }
    n = (gsize)g_unichar_to_utf8(c, NULL);
    /* C1 controls (U+0080-U+009F) are terminal controls too. */
    if (c <= 0x9f)
      append_escape(out, c);
    else
      g_string_append_len(out, (const gchar *)p + i, (gssize)n);
    i += n;
  }
  return g_string_free(out, FALSE);
}
