/* json-lex.h - the tokens of strict JSON (RFC 8259), shared by the check
 * and the cursor of json-reader.c (internal).
 *
 * The lexer reads one token at lx->i. Pass 1 runs it on any text; pass 2
 * runs the same functions on text pass 1 accepted, to decode strings.
 * Every error is a SLUICE_CODEC_ERROR with the line and column.
 */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  const gchar *t;
  gsize len;
  gsize i;
  GError **error;
} SluiceJsonLexer;

static inline gboolean
sluice_json_lex__is_space(gchar c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static inline gboolean
sluice_json_lex__is_digit(gchar c)
{
  return c >= '0' && c <= '9';
}

/* Sets @error (code @code) to "line L, column C: <format>" for byte
 * @offset of @text. Returns: FALSE. */
gboolean sluice_json_lex__error(GError **error, gint code, const gchar *text,
                                gsize offset, const gchar *format, ...)
    G_GNUC_PRINTF(5, 6);

/* "unexpected X, expected @expected" at @offset. Returns: FALSE. */
gboolean sluice_json_lex__unexpected(SluiceJsonLexer *lx, gsize offset,
                                     const gchar *expected);

/* A string token at lx->i (its opening quote); with @out, its decoded
 * bytes are appended to it. */
gboolean sluice_json_lex__string(SluiceJsonLexer *lx, GString *out);

/* A number token; integers must fit int64 and others be finite float64.
 * @out_is_float (optional) tells which. */
gboolean sluice_json_lex__number(SluiceJsonLexer *lx, gboolean *out_is_float);

/* true, false or null. */
gboolean sluice_json_lex__literal(SluiceJsonLexer *lx);

G_END_DECLS
