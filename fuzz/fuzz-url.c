/* fuzz-url.c - the Redis URL parser: the network layer's
 * (sluice_redis_url__parse) and the broker's parameters on top of it
 * (sluice_redis__parse_url).
 *
 * Oracles: no GLib critical or warning, whatever the text (fuzz_init);
 * the error message or the display URL is printable UTF-8; and no password
 * ever shows. For that last one the oracle must know the password for sure:
 * when the input holds a NUL byte, the text parsed is A ":" CANARY "@" C,
 * A and C being the input's two parts. Whatever A and C are, CANARY lies
 * between a ':' and an '@' after the scheme, so it is (part of) what the
 * user wrote as a password; no 5-byte piece of it may appear in what the
 * parser shows, unless the same piece is in A or C (then it is not known
 * to be the password's, nor if it is in A followed by the ':' or in the
 * '@' followed by C, raw or escaped, which a message may show around the
 * user).
 */
#include "fuzz/fuzz-common.h"

#include "brokers/redis/redis-broker.h"

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

#define CANARY "Pw/7?q@S#:k%2F"

int
LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *text = NULL;
  g_autofree gchar *before = NULL;
  g_autofree gchar *after = NULL;
  g_autofree gchar *shown = NULL;
  const guint8 *nul = memchr(data, 0, size);
  SluiceRedisUrl url;
  SluiceRedisUrlParams params;

  fuzz_init();
  if (nul != NULL) {
    before = fuzz_string(data, (size_t)(nul - data));
    after = fuzz_string(nul + 1, size - (size_t)(nul - data) - 1);
    text = g_strconcat(before, ":" CANARY "@", after, NULL);
  } else {
    text = fuzz_string(data, size);
  }
  if (sluice_redis__parse_url(text, &url, &params, &error)) {
    shown = g_strdup(url.display);
    FUZZ_ASSERT(url.is_sentinel
                    ? url.n_sentinels > 0 && url.master_name != NULL &&
                          url.master_name[0] != '\0'
                : url.is_unix ? url.path != NULL && url.path[0] == '/'
                              : url.host != NULL && url.host[0] != '\0',
                "accepted without a host, a path or sentinels and a master "
                "name: %s",
                shown);
    sluice_redis_url__clear(&url);
  } else {
    FUZZ_ASSERT(g_error_matches(error, SLUICE_BROKER_ERROR,
                                SLUICE_BROKER_ERROR_INVALID),
                "failed without SLUICE_BROKER_ERROR_INVALID");
    fuzz_check_error(error);
    shown = g_strdup(error->message);
  }
  FUZZ_ASSERT(fuzz_text_is_printable(shown), "not printable: %s", shown);
  if (nul != NULL) {
    const gsize n = strlen(CANARY);
    /* A piece may also be made of the end of A and the ':' after it (the
     * user shown as "user:***@"), or of the '@' and C, as messages show
     * them: escaped (a byte 0xb7 shows as \xb7). */
    g_autofree gchar *shown_before = sluice_text__escape(before, -1, 0);
    g_autofree gchar *shown_after = sluice_text__escape(after, -1, 0);
    g_autofree gchar *user = g_strconcat(before, ":", shown_before, ":", NULL);
    g_autofree gchar *rest = g_strconcat("@", after, "@", shown_after, NULL);

    for (gsize i = 0; i + 5 <= n; i++) {
      g_autofree gchar *piece = g_strndup(&CANARY[i], 5);

      if (strstr(user, piece) != NULL || strstr(rest, piece) != NULL)
        continue;
      FUZZ_ASSERT(strstr(shown, piece) == NULL,
                  "the password shows (“%s”) for “%s”: %s", piece, text, shown);
    }
  }
  return 0;
}
