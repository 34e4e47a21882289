/* fixtures.h - what the codec tests share: error assertions, a msgpack
 * packer for fixtures, envelopes to start from, and the field lists that
 * malformed-input tests edit (fixtures.c).
 */
#pragma once

#include "lib/sluice-private.h"
#include "serializers/codec-private.h"

#include <check.h>
#include <msgpack.h>

typedef struct {
  msgpack_sbuffer sb;
  msgpack_packer pk;
} Pk;

typedef struct {
  gchar *key;
  gchar *json;
  GBytes *mp;
} Field;

#define assert_error(err, expected_code, substr)                               \
  do {                                                                         \
    ck_assert_msg((err) != NULL, "expected an error, got success");            \
    ck_assert_msg((err)->domain == SLUICE_CODEC_ERROR &&                       \
                      (err)->code == (gint)(expected_code),                    \
                  "expected code %d, got %s %d: %s", (gint)(expected_code),    \
                  g_quark_to_string((err)->domain), (err)->code,               \
                  (err)->message);                                             \
    ck_assert_msg(mentions((err)->message, (substr)),                          \
                  "message \"%s\" does not mention \"%s\"", (err)->message,    \
                  (substr) != NULL ? (const gchar *)(substr) : "");            \
    g_clear_error(&(err));                                                     \
  } while (0)

#define assert_no_error(err)                                                   \
  ck_assert_msg((err) == NULL, "unexpected error: %s",                         \
                (err) != NULL ? (err)->message : "")

gboolean mentions(const gchar *message, const gchar *substr);
void pk_init(Pk *p);
GBytes *pk_finish(Pk *p);
void pk_str(Pk *p, const gchar *s);
void pk_raw(Pk *p, const void *data, gsize len);
GBytes *hex_bytes(const gchar *hex);
GBytes *text_bytes(const gchar *s);
SluiceEnvelope *codec_decode(const SluiceCodec *codec, GBytes *bytes,
                             GError **error);
SluiceEnvelope *decode_with(GBytes *bytes, gsize max_bytes, guint max_depth,
                            GError **error);
void assert_opts_equal(const SluiceMessageOptions *a,
                       const SluiceMessageOptions *b);
guint history_len(const SluiceEnvelope *env);
guint header_count(const SluiceEnvelope *env);
void assert_envelope_equal(const SluiceEnvelope *a, const SluiceEnvelope *b);
SluiceEnvelope *minimal_envelope(void);
GBytes *full_args(void);
SluiceEnvelope *full_envelope(void);
const SluiceCodec *codec_at(guint i);
SluiceEnvelope *round_trip(const SluiceCodec *codec, const SluiceEnvelope *env);
void field_free(gpointer data);
GPtrArray *fields_new(void);
void fields_add_json(GPtrArray *fields, const gchar *key, const gchar *json);
void fields_add_raw(GPtrArray *fields, const gchar *key, GBytes *mp);
void fields_add_both(GPtrArray *fields, const gchar *key, const gchar *json,
                     const gchar *hex);
void fields_remove(GPtrArray *fields, const gchar *key);
void fields_set_json(GPtrArray *fields, const gchar *key, const gchar *json);
void fields_set_raw(GPtrArray *fields, const gchar *key, GBytes *mp);
GPtrArray *fields_valid(void);
gboolean fields_have_json(GPtrArray *fields);
GBytes *fields_msgpack(GPtrArray *fields);
GBytes *fields_json(GPtrArray *fields);
void assert_fields_fail(GPtrArray *fields, gint code, const gchar *substr);
void assert_fields_decode(GPtrArray *fields);
GBytes *J(const gchar *json);
/* @depth empty arrays, nested. */
gchar *nested_json(guint depth);
GBytes *nested_msgpack(guint depth);

/* The topics, one file each; the runner is tests/test-codec.c. */
void codec_add_envelope_tests(Suite *s);
void codec_add_malformed_tests(Suite *s);
void codec_add_args_json_tests(Suite *s);
void codec_add_mutation_tests(Suite *s);
void codec_add_result_tests(Suite *s);
