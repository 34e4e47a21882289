/* fuzz-envelope.h - the body of the two envelope decoder targets
 * (fuzz-envelope-msgpack.c, fuzz-envelope-json.c), which differ only in
 * the codec they decode with.
 *
 * Oracles: a failure is a SLUICE_CODEC_ERROR with a printable message; a
 * success re-encodes with the same codec to bytes that decode to an equal
 * envelope; encodes with the other codec (when the args have a JSON form)
 * to an envelope equal in every field, which encodes back to the same
 * bytes (args apart), so the codecs agree and "unset" has one form; and
 * the args unpack (sluice_mp__unpack) into exactly one value, within the
 * cost the decoder promised.
 */
#pragma once

#include "fuzz/fuzz-common.h"
#include "serializers/codec-private.h"

#include <msgpack.h>

static void
fuzz_envelope(const SluiceCodec *codec, const guint8 *data, size_t size)
{
  g_autoptr(GBytes) bytes = g_bytes_new(data, size);
  g_autoptr(GError) error = NULL;
  g_autoptr(SluiceEnvelope) env = NULL;
  SluiceDecodeLimits limits;
  const SluiceCodec *other = codec == sluice_codec_msgpack()
                                 ? sluice_codec_json()
                                 : sluice_codec_msgpack();

  fuzz_init();
  sluice_decode_limits_init(&limits);
  env = codec->decode(codec, bytes, &limits, &error);
  if (env == NULL) {
    FUZZ_ASSERT(error != NULL && error->domain == SLUICE_CODEC_ERROR,
                "a decode failed without a codec error");
    fuzz_check_error(error);
    return;
  }

  /* The same codec: a round trip. */
  {
    g_autoptr(GBytes) again = sluice_envelope_encode(codec, env, &error);
    g_autoptr(SluiceEnvelope) back = NULL;

    FUZZ_ASSERT(again != NULL, "re-encoding failed: %s", error->message);
    back = codec->decode(codec, again, &limits, &error);
    FUZZ_ASSERT(back != NULL, "decoding the re-encoding failed: %s",
                error->message);
    FUZZ_ASSERT(fuzz_envelopes_equal(env, back, TRUE),
                "the re-encoding decodes to another envelope");
  }
  /* The other codec: they carry the same envelope, args JSON can say. */
  {
    g_autoptr(GBytes) across = sluice_envelope_encode(other, env, &error);

    if (across == NULL) {
      FUZZ_ASSERT(other == sluice_codec_json() &&
                      g_error_matches(error, SLUICE_CODEC_ERROR,
                                      SLUICE_CODEC_ERROR_INVALID),
                  "only JSON may refuse what msgpack carries: %s",
                  error->message);
      fuzz_check_error(error);
      g_clear_error(&error);
    } else {
      g_autoptr(SluiceEnvelope) back =
          other->decode(other, across, &limits, &error);

      FUZZ_ASSERT(back != NULL,
                  "the %s codec refuses the %s codec's "
                  "envelope: %s",
                  other->name, codec->name, error->message);
      FUZZ_ASSERT(fuzz_envelopes_equal(env, back, codec == sluice_codec_json()),
                  "the codecs disagree");
      /* Through the other codec and back, the same bytes (the args and
       * the carried keys apart, whose encodings may differ): every field
       * survives, and "unset" has one form in both codecs. */
      {
        g_autoptr(GBytes) mine = sluice_envelope_encode(codec, env, &error);
        g_autoptr(GBytes) returned = NULL;

        FUZZ_ASSERT(mine != NULL, "re-encoding failed: %s", error->message);
        g_bytes_unref(back->args);
        back->args = g_bytes_ref(env->args);
        FUZZ_ASSERT(
            (back->unknown_fields == NULL) == (env->unknown_fields == NULL) &&
                (back->unknown_opts == NULL) == (env->unknown_opts == NULL),
            "the %s codec lost or made up a key it does not know", other->name);
        g_clear_pointer(&back->unknown_fields, g_bytes_unref);
        g_clear_pointer(&back->unknown_opts, g_bytes_unref);
        if (env->unknown_fields != NULL)
          back->unknown_fields = g_bytes_ref(env->unknown_fields);
        if (env->unknown_opts != NULL)
          back->unknown_opts = g_bytes_ref(env->unknown_opts);
        returned = sluice_envelope_encode(codec, back, &error);
        FUZZ_ASSERT(returned != NULL && g_bytes_equal(mine, returned),
                    "through the %s codec and back, the %s bytes changed",
                    other->name, codec->name);
      }
    }
  }
  /* The args a task would see. */
  {
    gsize len;
    gconstpointer args = g_bytes_get_data(env->args, &len);
    msgpack_zone zone;
    msgpack_object root;
    SluiceMpReader r;
    guint64 n_values = 0;

    sluice_mp_reader_init(&r, args, len);
    FUZZ_ASSERT(sluice_mp_reader__skip_counting(&r, 2, SLUICE_DEFAULT_MAX_DEPTH,
                                                &n_values, NULL) &&
                    r.pos == len,
                "decoded args are not one value within the depth limit");
    FUZZ_ASSERT(SLUICE_MP_UNPACKED_BYTES(n_values) <=
                    (guint64)SLUICE_ARGS_COST_FACTOR * len +
                        SLUICE_ARGS_COST_BASE,
                "decoded args cost more to unpack than the bound");
    msgpack_zone_init(&zone, 4096);
    FUZZ_ASSERT(sluice_mp__unpack(args, len, &zone, &root, NULL),
                "decoded args do not unpack");
    msgpack_zone_destroy(&zone);
  }
}
