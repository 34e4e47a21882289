/* codec.c - the front door of the envelope codecs.
 *
 * sluice_envelope_decode() picks the codec by the first byte: msgpack map
 * markers (0x80-0x8f, 0xde, 0xdf) and '{' (or JSON whitespace) cannot be
 * confused, so no guessing or retrying with the other codec is ever needed.
 */
#include "config.h"

#include <sluice/sluice.h>

#include "serializers/text.h"
#include "serializers/codec-private.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- The front door ------------------------------------------------------ */

GBytes *
sluice_envelope_encode(const SluiceCodec *codec, const SluiceEnvelope *env,
                       GError **error)
{
  g_return_val_if_fail(env != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  if (codec == NULL)
    codec = sluice_codec_msgpack();
  return codec->encode(codec, env, error);
}

static inline gboolean
is_json_space(guint8 c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The codec that reads @bytes, or NULL and @error when none does. */
static const SluiceCodec *
codec_for(GBytes *bytes, const SluiceDecodeLimits *limits, GError **error)
{
  const guint8 *data;
  gsize len;

  data = g_bytes_get_data(bytes, &len);
  if (len > limits->max_bytes) {
    g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TOO_LARGE,
                "the envelope is %" G_GSIZE_FORMAT
                " bytes long, over the limit of %" G_GSIZE_FORMAT,
                len, limits->max_bytes);
    return NULL;
  }
  if (len == 0) {
    g_set_error_literal(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_TRUNCATED,
                        "empty input: an envelope is a msgpack map or a JSON "
                        "object");
    return NULL;
  }

  if ((data[0] >= 0x80 && data[0] <= 0x8f) || data[0] == 0xde ||
      data[0] == 0xdf)
    return sluice_codec_msgpack();
  if (data[0] == '{' || is_json_space(data[0]))
    return sluice_codec_json();
  g_set_error(error, SLUICE_CODEC_ERROR, SLUICE_CODEC_ERROR_INVALID,
              "byte offset 0: 0x%02x starts neither a msgpack map (0x80-0x8f, "
              "0xde, 0xdf) nor a JSON object ('{')",
              data[0]);
  return NULL;
}

SluiceEnvelope *
sluice_envelope_decode(GBytes *bytes, const SluiceDecodeLimits *limits,
                       GError **error)
{
  SluiceDecodeLimits defaults;
  const SluiceCodec *codec;

  g_return_val_if_fail(bytes != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);

  if (limits == NULL) {
    sluice_decode_limits_init(&defaults);
    limits = &defaults;
  }
  codec = codec_for(bytes, limits, error);
  return codec != NULL ? codec->decode(codec, bytes, limits, error) : NULL;
}

SluiceEnvelope *
sluice_envelope__decode_header(GBytes *bytes, const SluiceDecodeLimits *limits,
                               GError **error)
{
  SluiceDecodeLimits defaults;
  const SluiceCodec *codec;

  if (limits == NULL) {
    sluice_decode_limits_init(&defaults);
    limits = &defaults;
  }
  codec = codec_for(bytes, limits, error);
  return codec != NULL ? codec->decode_header(codec, bytes, limits, error)
                       : NULL;
}

const gchar *
sluice_codec_get_name(const SluiceCodec *codec)
{
  g_return_val_if_fail(codec != NULL, NULL);
  return codec->name;
}
