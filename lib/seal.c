/* seal.c - keyrings, and sealing args and results with them.
 *
 * One algorithm, AES-256-GCM: OpenSSL has it in C, python3-cryptography
 * and Node's built-in crypto have it too, and the processors Sluice runs
 * on do it in hardware. Every seal takes a fresh random 96-bit nonce, so
 * one key may seal about 2^32 messages before the chance of a repeated
 * nonce stops being negligible (docs/limits.md): rotation is the answer,
 * and a keyring makes it cheap.
 */
#include "config.h"

#include <sluice/sluice.h>

#include "lib/sluice-private.h"

#include <glib/gstdio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <string.h>
#include <sys/random.h>

G_DEFINE_QUARK(sluice - seal - error - quark, sluice_seal_error)

#define KEY_BYTES 32
#define NONCE_BYTES 12
#define TAG_BYTES 16

typedef struct {
  gchar id[SLUICE_MAX_KEY_ID_BYTES + 1];
  guint8 key[KEY_BYTES];
} Key;

struct _SluiceKeyring {
  gint refs;
  GArray *keys; /* of Key, in file order */
  guint current;
  EVP_CIPHER *cipher;
};

/* ---- The file ------------------------------------------------------------ */

static gboolean
valid_id(const gchar *s, gsize len)
{
  if (len < 1 || len > SLUICE_MAX_KEY_ID_BYTES)
    return FALSE;
  for (gsize i = 0; i < len; i++)
    if (!g_ascii_isalnum(s[i]) && s[i] != '-' && s[i] != '.' && s[i] != '_')
      return FALSE;
  return TRUE;
}

static gint
find_key(const SluiceKeyring *keyring, const gchar *id)
{
  for (guint i = 0; i < keyring->keys->len; i++)
    if (strcmp(g_array_index(keyring->keys, Key, i).id, id) == 0)
      return (gint)i;
  return -1;
}

static void
keyring_free(SluiceKeyring *keyring)
{
  if (keyring->keys->len > 0)
    OPENSSL_cleanse(keyring->keys->data, keyring->keys->len * sizeof(Key));
  g_array_unref(keyring->keys);
  EVP_CIPHER_free(keyring->cipher);
  g_free(keyring);
}

static gboolean
fail_line(GError **error, const gchar *origin, guint line, const gchar *why)
{
  g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_KEYRING,
              "keyring %s, line %u: %s", origin, line, why);
  return FALSE;
}

/* A key is exactly 32 bytes in canonical base64 (44 characters with its
 * padding): GLib's decoder skips what it does not know, so the text is
 * checked, not only the length decoded. */
static gboolean
decode_key(const gchar *text, guint8 out[KEY_BYTES])
{
  static const gchar alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  guchar *raw;
  gsize len = 0;
  gchar *again;
  gboolean ok;

  if (strlen(text) != 44 || text[43] != '=' || text[42] == '=')
    return FALSE;
  for (gsize i = 0; i < 43; i++)
    if (strchr(alphabet, text[i]) == NULL)
      return FALSE;
  raw = g_base64_decode(text, &len);
  again = len == KEY_BYTES ? g_base64_encode(raw, len) : NULL;
  ok = again != NULL && strcmp(again, text) == 0;
  if (ok)
    memcpy(out, raw, KEY_BYTES);
  OPENSSL_cleanse(raw, len);
  g_free(raw);
  g_free(again);
  return ok;
}

static gboolean
parse_line(SluiceKeyring *keyring, gchar **words, const gchar *origin,
           guint line, gchar **current, GError **error)
{
  guint n = g_strv_length(words);

  if (strcmp(words[0], "key") == 0) {
    Key key;

    memset(&key, 0, sizeof key);
    if (n != 3)
      return fail_line(error, origin, line,
                       "a key line is “key ID BASE64-KEY”");
    if (!valid_id(words[1], strlen(words[1])))
      return fail_line(error, origin, line,
                       "a key id is 1 to 64 letters, digits, “-”, “.” or “_”");
    if (find_key(keyring, words[1]) >= 0)
      return fail_line(error, origin, line, "this key id is given twice");
    if (!decode_key(words[2], key.key))
      return fail_line(error, origin, line,
                       "a key is 32 random bytes in base64 (44 characters): "
                       "make one with sluice keys rotate");
    memcpy(key.id, words[1], strlen(words[1]));
    g_array_append_val(keyring->keys, key);
    OPENSSL_cleanse(&key, sizeof key);
    return TRUE;
  }
  if (strcmp(words[0], "current") == 0) {
    if (n != 2)
      return fail_line(error, origin, line, "a current line is “current ID”");
    if (*current != NULL)
      return fail_line(error, origin, line, "a second “current” line");
    *current = g_strdup(words[1]);
    return TRUE;
  }
  return fail_line(error, origin, line,
                   "a line is “key ID BASE64-KEY”, “current ID”, a comment "
                   "(#) or empty");
}

/* Splits on runs of spaces and tabs; the words are owned by the vector. */
static gchar **
split_words(const gchar *line)
{
  g_auto(GStrv) parts = g_strsplit_set(line, " \t", -1);
  GPtrArray *words = g_ptr_array_new();

  for (guint i = 0; parts[i] != NULL; i++)
    if (parts[i][0] != '\0')
      g_ptr_array_add(words, g_strdup(parts[i]));
  g_ptr_array_add(words, NULL);
  return (gchar **)g_ptr_array_free(words, FALSE);
}

static void
wipe_strv(gchar **v)
{
  for (guint i = 0; v != NULL && v[i] != NULL; i++)
    OPENSSL_cleanse(v[i], strlen(v[i]));
  g_strfreev(v);
}

SluiceKeyring *
sluice_keyring_new_from_text(const gchar *text, gssize len, const gchar *origin,
                             GError **error)
{
  SluiceKeyring *keyring;
  g_autofree gchar *copy = NULL;
  g_autofree gchar *current = NULL;
  gchar **lines;
  gboolean ok = TRUE;

  g_return_val_if_fail(text != NULL, NULL);
  if (origin == NULL)
    origin = "(in memory)";
  if (len < 0)
    len = (gssize)strlen(text);
  if (memchr(text, '\0', (gsize)len) != NULL ||
      !g_utf8_validate(text, len, NULL)) {
    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_KEYRING,
                "keyring %s is not text: it is “key ID BASE64-KEY” and "
                "“current ID” lines",
                origin);
    return NULL;
  }
  copy = g_strndup(text, (gsize)len);
  keyring = g_new0(SluiceKeyring, 1);
  keyring->refs = 1;
  keyring->keys = g_array_new(FALSE, TRUE, sizeof(Key));
  lines = g_strsplit(copy, "\n", -1);
  OPENSSL_cleanse(copy, (gsize)len);
  for (guint i = 0; ok && lines[i] != NULL; i++) {
    gchar *line = lines[i];
    gchar **words;

    g_strstrip(line);
    if (line[0] == '\0' || line[0] == '#')
      continue;
    words = split_words(line);
    ok = parse_line(keyring, words, origin, i + 1, &current, error);
    wipe_strv(words);
  }
  wipe_strv(lines);
  if (ok && current == NULL) {
    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_KEYRING,
                "keyring %s has no “current ID” line: name the key that "
                "seals",
                origin);
    ok = FALSE;
  }
  if (ok && find_key(keyring, current) < 0) {
    g_autofree gchar *shown = g_strescape(current, NULL);

    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_KEYRING,
                "keyring %s: the current key “%s” is not among its keys",
                origin, shown);
    ok = FALSE;
  }
  if (ok) {
    keyring->current = (guint)find_key(keyring, current);
    keyring->cipher = EVP_CIPHER_fetch(NULL, "AES-256-GCM", NULL);
    if (keyring->cipher == NULL) {
      g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_FAILED,
                  "this system's OpenSSL offers no AES-256-GCM");
      ok = FALSE;
    }
  }
  if (!ok) {
    keyring_free(keyring);
    return NULL;
  }
  return keyring;
}

static gboolean
path_is_under(const gchar *path, const gchar *dir)
{
  g_autofree gchar *real_path = g_canonicalize_filename(path, NULL);
  g_autofree gchar *real_dir = g_canonicalize_filename(dir, NULL);
  gsize n = strlen(real_dir);

  return strncmp(real_path, real_dir, n) == 0 &&
         (real_path[n] == '/' || real_dir[n - 1] == '/');
}

/* A keyring is every secret Sluice holds at once: like ssh with a private
 * key, refuse one that others may read rather than warn. */
static gboolean
check_private(const gchar *path, GError **error)
{
  const gchar *credentials = g_getenv("CREDENTIALS_DIRECTORY");
  GStatBuf st;

  if (g_stat(path, &st) != 0 || (st.st_mode & 0077) == 0)
    return TRUE; /* the read that follows says why it cannot be opened */
  if (credentials != NULL && credentials[0] != '\0' &&
      path_is_under(path, credentials))
    return TRUE;
  g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_KEYRING,
              "keyring %s can be read or written by other users (mode %04o): "
              "run: chmod 600 %s (under systemd, hand it over with "
              "LoadCredential=)",
              path, (unsigned)(st.st_mode & 07777), path);
  return FALSE;
}

static gchar *
read_file(const gchar *path, gsize *len, GError **error)
{
  g_autoptr(GError) local = NULL;
  gchar *text = NULL;

  if (!check_private(path, error))
    return NULL;
  if (!g_file_get_contents(path, &text, len, &local)) {
    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_KEYRING,
                "cannot read the keyring: %s", local->message);
    return NULL;
  }
  return text;
}

SluiceKeyring *
sluice_keyring_load(const gchar *path, GError **error)
{
  SluiceKeyring *keyring;
  gsize len = 0;
  gchar *text;

  g_return_val_if_fail(path != NULL, NULL);
  text = read_file(path, &len, error);
  if (text == NULL)
    return NULL;
  keyring = sluice_keyring_new_from_text(text, (gssize)len, path, error);
  OPENSSL_cleanse(text, len);
  g_free(text);
  return keyring;
}

SluiceKeyring *
sluice_keyring_ref(SluiceKeyring *keyring)
{
  g_return_val_if_fail(keyring != NULL, NULL);
  g_atomic_int_inc(&keyring->refs);
  return keyring;
}

void
sluice_keyring_unref(SluiceKeyring *keyring)
{
  if (keyring != NULL && g_atomic_int_dec_and_test(&keyring->refs))
    keyring_free(keyring);
}

const gchar *
sluice_keyring_get_current(const SluiceKeyring *keyring)
{
  g_return_val_if_fail(keyring != NULL, NULL);
  return g_array_index(keyring->keys, Key, keyring->current).id;
}

gboolean
sluice_keyring_has_key(const SluiceKeyring *keyring, const gchar *id)
{
  g_return_val_if_fail(keyring != NULL && id != NULL, FALSE);
  return find_key(keyring, id) >= 0;
}

gboolean
sluice_keyring_file_add_key(const gchar *path, const gchar *id, gchar **out_id,
                            GError **error)
{
  g_autoptr(SluiceKeyring) old = NULL;
  g_autoptr(GString) text = g_string_new(NULL);
  g_autofree gchar *chosen = NULL;
  g_autofree gchar *encoded = NULL;
  g_autoptr(GError) local = NULL;
  guint8 key[KEY_BYTES];
  gchar *contents = NULL;
  gsize len = 0;
  gboolean ok;

  g_return_val_if_fail(path != NULL, FALSE);
  if (g_file_test(path, G_FILE_TEST_EXISTS)) {
    contents = read_file(path, &len, error);
    if (contents == NULL)
      return FALSE;
    old = sluice_keyring_new_from_text(contents, (gssize)len, path, error);
    if (old == NULL) {
      OPENSSL_cleanse(contents, len);
      g_free(contents);
      return FALSE;
    }
  }
  if (id != NULL) {
    chosen = g_strdup(id);
  } else {
    g_autoptr(GDateTime) now = g_date_time_new_now_utc();

    g_autofree gchar *stamp = g_date_time_format(now, "%Y%m%d-%H%M%S");

    chosen = g_strdup(stamp);
    for (guint n = 2; old != NULL && sluice_keyring_has_key(old, chosen); n++) {
      g_free(chosen);
      chosen = g_strdup_printf("%s-%u", stamp, n);
    }
  }
  if (!valid_id(chosen, strlen(chosen)) ||
      (old != NULL && sluice_keyring_has_key(old, chosen))) {
    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_KEYRING,
                old != NULL && sluice_keyring_has_key(old, chosen)
                    ? "keyring %s already has a key “%s”: choose another id"
                    : "keyring %s: “%s” is not a key id (1 to 64 letters, "
                      "digits, “-”, “.” or “_”)",
                path, chosen);
    if (contents != NULL) {
      OPENSSL_cleanse(contents, len);
      g_free(contents);
    }
    return FALSE;
  }
  if (RAND_bytes(key, KEY_BYTES) != 1) {
    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_FAILED,
                "the system gave no randomness for a new key");
    g_free(contents);
    return FALSE;
  }
  encoded = g_base64_encode(key, KEY_BYTES);
  OPENSSL_cleanse(key, KEY_BYTES);

  /* The old lines but the current one, in their order, then the new key. */
  if (contents != NULL) {
    gchar **lines = g_strsplit(contents, "\n", -1);

    for (guint i = 0; lines[i] != NULL; i++) {
      gchar **words = split_words(lines[i]);
      gboolean is_current =
          words[0] != NULL && strcmp(words[0], "current") == 0;

      if (!is_current && (lines[i][0] != '\0' || lines[i + 1] != NULL))
        g_string_append_printf(text, "%s\n", lines[i]);
      wipe_strv(words);
    }
    wipe_strv(lines);
    OPENSSL_cleanse(contents, len);
    g_free(contents);
  } else {
    g_string_append(text, "# Sluice keyring: the keys that seal task "
                          "arguments and results.\n# Keep it private "
                          "(chmod 600); see docs/security.md.\n");
  }
  g_string_append_printf(text, "key %s %s\ncurrent %s\n", chosen, encoded,
                         chosen);
  OPENSSL_cleanse(encoded, strlen(encoded));
  ok = g_file_set_contents_full(path, text->str, (gssize)text->len,
                                G_FILE_SET_CONTENTS_CONSISTENT, 0600, &local);
  OPENSSL_cleanse(text->str, text->len);
  if (!ok) {
    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_KEYRING,
                "cannot write the keyring: %s", local->message);
    return FALSE;
  }
  if (out_id != NULL)
    *out_id = g_steal_pointer(&chosen);
  return TRUE;
}

/* ---- Sealing ------------------------------------------------------------- */

/* One cipher context per thread, reset for each message: making and
 * freeing one per message (and its provider state) was most of what a
 * seal cost. The GPrivate key is the thread-local storage GLib requires. */
static void
free_ctx(gpointer ctx)
{
  EVP_CIPHER_CTX_free(ctx);
}

static GPrivate thread_ctx_key = G_PRIVATE_INIT(free_ctx);

static EVP_CIPHER_CTX *
thread_ctx(void)
{
  EVP_CIPHER_CTX *ctx = g_private_get(&thread_ctx_key);

  if (G_UNLIKELY(ctx == NULL)) {
    ctx = EVP_CIPHER_CTX_new();
    g_private_set(&thread_ctx_key, ctx);
  }
  return ctx;
}

/* The task a ciphertext belongs to, and whether it is args or a result:
 * either changed, the tag no longer matches. Written into @out (names are
 * bounded, so it fits: AD_MAX); Returns: its length. */
#define AD_MAX                                                                 \
  (sizeof "sluice-result" + SLUICE_MAX_ID_BYTES + 2 * SLUICE_MAX_NAME_BYTES + 3)

static gsize
associated_data(SluiceSealDomain domain, const gchar *id, const gchar *task,
                const gchar *queue, guint8 out[AD_MAX])
{
  const gchar *parts[4] = {domain == SLUICE_SEAL_ARGS ? "sluice-args"
                                                      : "sluice-result",
                           id, task, queue};
  gsize len = 0;

  for (guint i = 0; i < G_N_ELEMENTS(parts); i++) {
    const gchar *s = parts[i] != NULL ? parts[i] : "";
    gsize n;

    if (i > 0 && len < AD_MAX)
      out[len++] = 0;
    n = MIN(strlen(s), AD_MAX - len);
    memcpy(out + len, s, n);
    len += n;
  }
  return len;
}

/* msgpack's bin header for @n bytes, at @out; Returns: its length. */
static gsize
bin_header(gsize n, guint8 out[5])
{
  if (n <= 0xff) {
    out[0] = 0xc4;
    out[1] = (guint8)n;
    return 2;
  }
  if (n <= 0xffff) {
    out[0] = 0xc5;
    out[1] = (guint8)(n >> 8);
    out[2] = (guint8)n;
    return 3;
  }
  out[0] = 0xc6;
  out[1] = (guint8)(n >> 24);
  out[2] = (guint8)(n >> 16);
  out[3] = (guint8)(n >> 8);
  out[4] = (guint8)n;
  return 5;
}

/* A nonce straight from the kernel: OpenSSL's generator cost twice as
 * much per message (its fork check and locking), and the kernel's is as
 * good and fork-safe. */
static gboolean
random_nonce(guint8 out[NONCE_BYTES])
{
  return getrandom(out, NONCE_BYTES, 0) == NONCE_BYTES ||
         RAND_bytes(out, NONCE_BYTES) == 1;
}

static gboolean
crypto_failed(GError **error)
{
  g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_FAILED,
              "the system's cryptography failed (OpenSSL)");
  return FALSE;
}

GBytes *
sluice_seal__close_with_nonce(SluiceKeyring *keyring, SluiceSealDomain domain,
                              const gchar *id, const gchar *task,
                              const gchar *queue, GBytes *plain,
                              const guint8 *nonce, gchar **out_label,
                              GError **error)
{
  const Key *key = &g_array_index(keyring->keys, Key, keyring->current);
  guint8 ad[AD_MAX];
  gsize ad_len = associated_data(domain, id, task, queue, ad);
  gsize plain_len = 0;
  const guint8 *p = g_bytes_get_data(plain, &plain_len);
  gsize sealed_len = NONCE_BYTES + plain_len + TAG_BYTES;
  guint8 head[5];
  gsize head_len = bin_header(sealed_len, head);
  guint8 *out = g_malloc(head_len + sealed_len);
  guint8 *ct = out + head_len + NONCE_BYTES;
  EVP_CIPHER_CTX *ctx = thread_ctx();
  gint n = 0;
  gboolean ok;

  memcpy(out, head, head_len);
  if (nonce != NULL)
    memcpy(out + head_len, nonce, NONCE_BYTES);
  ok = plain_len <= G_MAXINT / 2 && ctx != NULL &&
       (nonce != NULL || random_nonce(out + head_len)) &&
       EVP_EncryptInit_ex2(ctx, keyring->cipher, key->key, out + head_len,
                           NULL) == 1 &&
       EVP_EncryptUpdate(ctx, NULL, &n, ad, (gint)ad_len) == 1 &&
       (plain_len == 0 ||
        EVP_EncryptUpdate(ctx, ct, &n, p, (gint)plain_len) == 1) &&
       EVP_EncryptFinal_ex(ctx, ct + plain_len, &n) == 1 &&
       EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_BYTES,
                           ct + plain_len) == 1;
  if (!ok) {
    g_free(out);
    crypto_failed(error);
    return NULL;
  }
  if (out_label != NULL)
    *out_label = g_strdup_printf(SLUICE_SEAL_ALGORITHM ":%s", key->id);
  return g_bytes_new_take(out, head_len + sealed_len);
}

GBytes *
sluice_seal__close(SluiceKeyring *keyring, SluiceSealDomain domain,
                   const gchar *id, const gchar *task, const gchar *queue,
                   GBytes *plain, gchar **out_label, GError **error)
{
  return sluice_seal__close_with_nonce(keyring, domain, id, task, queue, plain,
                                       NULL, out_label, error);
}

/* The bytes inside one msgpack bin (the codecs checked its shape). */
static const guint8 *
bin_body(GBytes *bin, gsize *len)
{
  gsize size = 0;
  const guint8 *b = g_bytes_get_data(bin, &size);
  gsize head = size > 0 && b[0] == 0xc4   ? 2
               : size > 0 && b[0] == 0xc5 ? 3
               : size > 0 && b[0] == 0xc6 ? 5
                                          : 0;

  if (head == 0 || size < head + NONCE_BYTES + TAG_BYTES)
    return NULL;
  *len = size - head;
  return b + head;
}

GBytes *
sluice_seal__open(SluiceKeyring *keyring, SluiceSealDomain domain,
                  const gchar *label, const gchar *id, const gchar *task,
                  const gchar *queue, GBytes *sealed, GError **error)
{
  const gchar *colon = strchr(label, ':');
  const gchar *key_id = colon != NULL ? colon + 1 : "";
  guint8 ad[AD_MAX];
  gsize ad_len;
  const guint8 *body;
  gsize body_len = 0, plain_len;
  gint key_index, n = 0;
  guint8 *plain;
  EVP_CIPHER_CTX *ctx;
  gboolean ok;

  if (colon == NULL ||
      (gsize)(colon - label) != strlen(SLUICE_SEAL_ALGORITHM) ||
      strncmp(label, SLUICE_SEAL_ALGORITHM, (gsize)(colon - label)) != 0) {
    g_autofree gchar *alg =
        g_strndup(label, colon != NULL ? (gsize)(colon - label) : 32);

    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_UNKNOWN_KEY,
                "cannot decrypt: algorithm %s unknown (this build seals and "
                "opens " SLUICE_SEAL_ALGORITHM ")",
                alg);
    return NULL;
  }
  key_index = keyring != NULL ? find_key(keyring, key_id) : -1;
  if (key_index < 0) {
    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_UNKNOWN_KEY,
                "cannot decrypt: key %s unknown (%s)", key_id,
                keyring != NULL ? "not in this program's keyring"
                                : "this program was given no keyring");
    return NULL;
  }
  body = bin_body(sealed, &body_len);
  if (body == NULL) {
    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_AUTHENTICATION,
                "cannot decrypt: authentication failed (too short to be "
                "sealed)");
    return NULL;
  }
  plain_len = body_len - NONCE_BYTES - TAG_BYTES;
  plain = g_malloc(MAX(plain_len, 1));
  ad_len = associated_data(domain, id, task, queue, ad);
  ctx = thread_ctx();
  ok = plain_len <= G_MAXINT / 2 && ctx != NULL &&
       EVP_DecryptInit_ex2(ctx, keyring->cipher,
                           g_array_index(keyring->keys, Key, key_index).key,
                           body, NULL) == 1 &&
       EVP_DecryptUpdate(ctx, NULL, &n, ad, (gint)ad_len) == 1 &&
       (plain_len == 0 || EVP_DecryptUpdate(ctx, plain, &n, body + NONCE_BYTES,
                                            (gint)plain_len) == 1) &&
       EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_BYTES,
                           (void *)(body + NONCE_BYTES + plain_len)) == 1 &&
       EVP_DecryptFinal_ex(ctx, plain + plain_len, &n) == 1;
  if (!ok) {
    OPENSSL_cleanse(plain, plain_len);
    g_free(plain);
    g_set_error(error, SLUICE_SEAL_ERROR, SLUICE_SEAL_ERROR_AUTHENTICATION,
                "cannot decrypt: authentication failed (sealed with key %s, "
                "but the ciphertext or the task's id, name or queue was "
                "changed)",
                key_id);
    return NULL;
  }
  return g_bytes_new_take(plain, plain_len);
}
