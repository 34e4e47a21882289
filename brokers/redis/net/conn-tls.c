/* conn-tls.c - the "tls" connection type: Redis over TLS (rediss://), on
 * OpenSSL 3 (see conn-type-private.h for what a type is, tls-private.h for
 * the settings).
 *
 *   settings   SluiceRedisTls: what the URL said (CA file or directory,
 *              client certificate and key, server name, minimum version,
 *              insecure) and the one SSL_CTX built from it, shared by
 *              every copy of the URL: one per broker, not per connection
 *   connect    the TCP connect of conn-tcp.c, then a non-blocking
 *              SSL_connect() poll()ed until the same deadline: a server
 *              that does not finish the handshake costs the connect
 *              timeout, as one that does not answer the SYN does
 *   read/write SSL_read_ex()/SSL_write_ex(), which say WANT_READ or
 *              WANT_WRITE as they need (a read may have to send, a write
 *              may have to receive); partial writes are on, so a large
 *              pipeline moves a record at a time
 *   pending    SSL_pending() and, with read-ahead on (one recv() per
 *              batch of records, not two per record), records received
 *              and not decrypted yet: what poll() cannot see
 *   close      one close_notify (never waited for), then the socket
 *
 * Verification is on unless the URL says tls_insecure=1: the chain up to
 * a CA of tls_ca_file / tls_ca_dir, or of the system's trust store when
 * neither is given, and the host name (or IP address) the connection was
 * made to, or tls_server_name, against the certificate's names
 * (SSL_set1_host(), X509_VERIFY_PARAM_set1_ip_asc()). SNI carries that
 * name unless it is an address (RFC 6066 forbids literals). TLS 1.2 is the
 * minimum by default; OpenSSL prefers 1.3 when the server has it.
 *
 * WHY OPENSSL AND NOT GIO'S TLS. redis-server on Debian links OpenSSL 3,
 * so both ends run one library, one set of defaults and one reading of
 * the PEM files an operator gives both. GIO's GTlsConnection is a
 * GIOStream, whose backend (glib-networking) is a module loaded at run
 * time that a host may lack; this layer moves bytes on non-blocking
 * descriptors with poll() and a deadline per call, which SSL_read_ex()
 * and SSL_write_ex() fit as they are.
 *
 * THE SOCKET BIO. OpenSSL's own socket BIO writes with write(), which
 * raises SIGPIPE when the server is gone; a library must not kill its
 * host. Our BIO sends with MSG_NOSIGNAL and counts the bytes received, so
 * a handshake that timed out can tell a server that said nothing (a plain
 * Redis port waits, silent, for the end of a line that a TLS hello never
 * sends) from one that stopped half-way.
 *
 * ERRORS are one line naming the cause, built from what the handshake
 * saw: the first verification failure (its X509_V_ERR_* code, the
 * certificate's dates or names), the alert the server sent (certificate
 * required, unknown CA, protocol version), or the record layer's complaint
 * (a server that does not speak TLS). Every one starts with "TLS" and ends
 * with what to do; none quotes a key, a password or what a file holds.
 *
 * Not done here: session resumption across connections (a reconnection
 * makes a full handshake; connections are long-lived), certificate
 * revocation lists, and TLS over unix sockets.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "brokers/redis/net/conn-fd-private.h"
#include "brokers/redis/net/log-private.h"
#include "brokers/redis/net/tls-private.h"
#include "serializers/text.h"

/* What a diagnosis of a silent or closed port may add to a failing call. */
#define PROBE_MAX_US (500 * 1000)

/* ---- Settings ------------------------------------------------------------ */

struct _SluiceRedisTls {
  gatomicrefcount ref;
  SluiceRedisTlsConfig config; /* its strings are owned */
  GMutex lock;                 /* guards what follows */
  SSL_CTX *ctx;
  gchar *failure; /* why ctx could not be built: the same answer each time */
};

SluiceRedisTls *
sluice_redis_tls__new(const SluiceRedisTlsConfig *config)
{
  SluiceRedisTls *tls = g_new0(SluiceRedisTls, 1);

  g_atomic_ref_count_init(&tls->ref);
  g_mutex_init(&tls->lock);
  tls->config.ca_file = g_strdup(config->ca_file);
  tls->config.ca_dir = g_strdup(config->ca_dir);
  tls->config.cert = g_strdup(config->cert);
  tls->config.key = g_strdup(config->key);
  tls->config.server_name = g_strdup(config->server_name);
  tls->config.min_version = config->min_version;
  tls->config.insecure = config->insecure;
  return tls;
}

SluiceRedisTls *
sluice_redis_tls__ref(SluiceRedisTls *tls)
{
  if (tls != NULL)
    g_atomic_ref_count_inc(&tls->ref);
  return tls;
}

void
sluice_redis_tls__unref(SluiceRedisTls *tls)
{
  if (tls == NULL || !g_atomic_ref_count_dec(&tls->ref))
    return;
  if (tls->ctx != NULL)
    SSL_CTX_free(tls->ctx);
  g_free(tls->failure);
  g_free((gchar *)tls->config.ca_file);
  g_free((gchar *)tls->config.ca_dir);
  g_free((gchar *)tls->config.cert);
  g_free((gchar *)tls->config.key);
  g_free((gchar *)tls->config.server_name);
  g_mutex_clear(&tls->lock);
  g_free(tls);
}

const SluiceRedisTlsConfig *
sluice_redis_tls__get_config(SluiceRedisTls *tls)
{
  return &tls->config;
}

/* OpenSSL's reason for the latest failure of this thread, or @otherwise. */
static const gchar *
openssl_reason(const gchar *otherwise)
{
  unsigned long e = ERR_peek_last_error();
  const char *text = e != 0 ? ERR_reason_error_string(e) : NULL;

  return text != NULL ? text : otherwise;
}

/* NULL when @path can be read as a file (or a directory with @dir), else
 * why not (transfer full). */
static gchar *
unreadable(const gchar *path, gboolean dir)
{
  if (dir) {
    if (!g_file_test(path, G_FILE_TEST_IS_DIR))
      return g_strdup("not a directory");
    return access(path, R_OK | X_OK) == 0 ? NULL : g_strdup(g_strerror(errno));
  }
  {
    FILE *f = fopen(path, "r");

    if (f == NULL)
      return g_strdup(g_strerror(errno));
    fclose(f);
  }
  return NULL;
}

/* Called when a key is encrypted: Sluice has no passphrase to give, and
 * OpenSSL must not ask on the terminal. */
static int
refuse_passphrase(char *buf, int size, int rwflag, void *userdata)
{
  *(gboolean *)userdata = TRUE;
  return 0;
}

static int verify_cb(int ok, X509_STORE_CTX *store);

/* "cannot use tls_<what> “path”: why" (transfer full). */
static gchar *
file_failure(const gchar *what, const gchar *path, const gchar *why)
{
  g_autofree gchar *shown = sluice_text__escape(path, -1, 200);

  return g_strdup_printf("cannot use %s “%s”: %s", what, shown, why);
}

static SSL_CTX *
build_context(const SluiceRedisTlsConfig *c, gchar **reason)
{
  SSL_CTX *ctx;
  gchar *why = NULL;
  gboolean asked = FALSE;

  if ((c->cert == NULL) != (c->key == NULL)) {
    *reason = g_strdup(c->cert != NULL
                           ? "tls_cert needs tls_key: give the certificate's "
                             "private key too (mutual TLS)"
                           : "tls_key needs tls_cert: give the certificate "
                             "of the key too (mutual TLS)");
    return NULL;
  }
  ERR_clear_error();
  ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == NULL) {
    *reason = g_strdup_printf("cannot make a TLS context: %s",
                              openssl_reason("out of memory?"));
    return NULL;
  }
  SSL_CTX_set_min_proto_version(ctx, c->min_version == 13 ? TLS1_3_VERSION
                                                          : TLS1_2_VERSION);
  /* Partial writes: a pipeline larger than a record moves as it can, and
   * a retried write may start at a moved buffer (the caller's obuf is an
   * sds that may be reallocated between calls). Buffers released while
   * idle: a pool keeps idle connections. */
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                            SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                            SSL_MODE_RELEASE_BUFFERS);
  /* A server that closes without close_notify (Redis on CLIENT KILL, on a
   * crash) is an end of stream like any other, not a protocol error. */
  SSL_CTX_set_options(ctx,
                      SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_COMPRESSION);
  /* One recv() for what is there, not one for each record's header and
   * one for its body: what it buffers ahead is reported by pending(). */
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_passwd_cb(ctx, refuse_passphrase);
  SSL_CTX_set_default_passwd_cb_userdata(ctx, &asked);

  if (c->insecure) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_cb);
    if (c->ca_file != NULL) {
      if ((why = unreadable(c->ca_file, FALSE)) != NULL ||
          !SSL_CTX_load_verify_file(ctx, c->ca_file)) {
        *reason = file_failure(
            "tls_ca_file", c->ca_file,
            why != NULL ? why : "it holds no PEM certificate OpenSSL can read");
        goto fail;
      }
    }
    if (c->ca_dir != NULL) {
      if ((why = unreadable(c->ca_dir, TRUE)) != NULL ||
          !SSL_CTX_load_verify_dir(ctx, c->ca_dir)) {
        *reason = file_failure("tls_ca_dir", c->ca_dir,
                               why != NULL ? why : openssl_reason("unusable"));
        goto fail;
      }
    }
    if (c->ca_file == NULL && c->ca_dir == NULL &&
        !SSL_CTX_set_default_verify_paths(ctx)) {
      *reason = g_strdup_printf("cannot read the system's trust store (%s): "
                                "give the servers' CA with tls_ca_file",
                                openssl_reason("unknown reason"));
      goto fail;
    }
  }

  if (c->cert != NULL) {
    if ((why = unreadable(c->cert, FALSE)) != NULL ||
        SSL_CTX_use_certificate_chain_file(ctx, c->cert) != 1) {
      *reason = file_failure(
          "tls_cert", c->cert,
          why != NULL ? why : "it holds no PEM certificate OpenSSL can read");
      goto fail;
    }
    gboolean mismatch = FALSE;

    if ((why = unreadable(c->key, FALSE)) == NULL &&
        SSL_CTX_use_PrivateKey_file(ctx, c->key, SSL_FILETYPE_PEM) != 1)
      /* OpenSSL checks the key against the certificate as it loads it. */
      mismatch =
          ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    if (!mismatch && (why != NULL || SSL_CTX_get0_privatekey(ctx) == NULL)) {
      *reason = file_failure(
          "tls_key", c->key,
          why != NULL ? why
          : asked     ? "the key is encrypted with a passphrase, which Sluice "
                        "cannot ask for: give it unencrypted (openssl pkey -in "
                        "KEY -out KEY.plain) and protect the file by its "
                        "permissions (chmod 600)"
                      : "it holds no PEM private key OpenSSL can read");
      goto fail;
    }
    if (mismatch || SSL_CTX_check_private_key(ctx) != 1) {
      g_autofree gchar *cert = sluice_text__escape(c->cert, -1, 200);
      g_autofree gchar *key = sluice_text__escape(c->key, -1, 200);

      *reason = g_strdup_printf("tls_key “%s” is not the key of the "
                                "certificate tls_cert “%s”: give the pair "
                                "that was issued together",
                                key, cert);
      goto fail;
    }
  }
  g_free(why);
  ERR_clear_error();
  return ctx;

fail:
  g_free(why);
  ERR_clear_error();
  SSL_CTX_free(ctx);
  return NULL;
}

gboolean
sluice_redis_tls__prepare(SluiceRedisTls *tls, const gchar *shown,
                          gchar **reason)
{
  gboolean ok;

  g_mutex_lock(&tls->lock);
  if (tls->ctx == NULL && tls->failure == NULL) {
    tls->ctx = build_context(&tls->config, &tls->failure);
    if (tls->ctx != NULL && tls->config.insecure)
      sluice_redis_net__log(
          G_LOG_LEVEL_WARNING,
          "TLS WITHOUT VERIFICATION for %s (tls_insecure): this client "
          "accepts any certificate, so anyone on the network path can pose "
          "as the server and read or change every task and its password; "
          "use it for a test only, and give the server's CA with "
          "tls_ca_file instead",
          shown);
  }
  ok = tls->ctx != NULL;
  if (!ok)
    *reason = g_strdup(tls->failure);
  g_mutex_unlock(&tls->lock);
  return ok;
}

/* ---- The socket ---------------------------------------------------------- */

typedef struct {
  SluiceRedisSocket base;
  SSL *ssl;
  const SluiceRedisTlsConfig *config; /* borrowed from the URL's settings:
                                         valid during connect() only */
  gchar *name; /* what the certificate is checked against */
  guint64 bytes_in;
  guchar head[2]; /* the first bytes received: what the port speaks */
  gboolean eof;
  int io_errno;     /* of the last failed send() or recv() */
  gboolean failed;  /* a fatal TLS error: no close_notify */
  gboolean starved; /* the last read wanted bytes the socket did not have */
  /* What the handshake saw, for the messages. */
  gboolean cert_requested;
  gboolean sent_cert;
  int alert; /* the description of a fatal alert the server sent, or -1 */
  long verify_error;
  int verify_depth;
  gchar *cert_names; /* of the certificate that failed, for a mismatch */
  gchar *not_before, *not_after;
} TlsSocket;

/* ---- The BIO: send(MSG_NOSIGNAL) and recv() on our descriptor ------------ */

static int
bio_write_ex(BIO *bio, const char *buf, size_t len, size_t *written)
{
  TlsSocket *s = BIO_get_data(bio);
  ssize_t n;

  BIO_clear_retry_flags(bio);
  do
    n = send(s->base.fd, buf, len, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n >= 0) {
    *written = (size_t)n;
    return 1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK)
    BIO_set_retry_write(bio);
  else
    s->io_errno = errno;
  return 0;
}

static int
bio_read_ex(BIO *bio, char *buf, size_t len, size_t *readbytes)
{
  TlsSocket *s = BIO_get_data(bio);
  ssize_t n;

  BIO_clear_retry_flags(bio);
  do
    n = recv(s->base.fd, buf, len, 0);
  while (n < 0 && errno == EINTR);
  if (n > 0) {
    for (gsize i = 0; s->bytes_in + i < sizeof s->head && i < (gsize)n; i++)
      s->head[s->bytes_in + i] = (guchar)buf[i];
    s->bytes_in += (guint64)n;
    *readbytes = (size_t)n;
    return 1;
  }
  if (n == 0)
    s->eof = TRUE;
  else if (errno == EAGAIN || errno == EWOULDBLOCK)
    BIO_set_retry_read(bio);
  else
    s->io_errno = errno;
  return 0;
}

static long
bio_ctrl(BIO *bio, int cmd, long num, void *ptr)
{
  TlsSocket *s = BIO_get_data(bio);

  switch (cmd) {
  case BIO_CTRL_FLUSH:
    return 1; /* nothing is buffered here */
  case BIO_CTRL_EOF:
    return s != NULL && s->eof;
  default:
    return 0;
  }
}

static int
bio_create(BIO *bio)
{
  BIO_set_init(bio, 1);
  return 1;
}

static const BIO_METHOD *
bio_method(void)
{
  static gsize once = 0;
  static BIO_METHOD *method;

  if (g_once_init_enter(&once)) {
    method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK |
                              BIO_TYPE_DESCRIPTOR,
                          "sluice socket");
    BIO_meth_set_write_ex(method, bio_write_ex);
    BIO_meth_set_read_ex(method, bio_read_ex);
    BIO_meth_set_ctrl(method, bio_ctrl);
    BIO_meth_set_create(method, bio_create);
    g_once_init_leave(&once, 1);
  }
  return method;
}

/* ---- What the handshake saw ---------------------------------------------- */

static gchar *
time_text(const ASN1_TIME *t)
{
  BIO *bio = BIO_new(BIO_s_mem());
  char *data = NULL;
  long len;
  gchar *text;

  if (bio == NULL)
    return g_strdup("?");
  if (ASN1_TIME_print_ex(bio, t, ASN1_DTFLGS_ISO8601) != 1) {
    BIO_free(bio);
    return g_strdup("?");
  }
  len = BIO_get_mem_data(bio, &data);
  text = sluice_text__escape(data, len, 64);
  BIO_free(bio);
  return text;
}

/* "DNS:a, IP:1.2.3.4" of @cert's subjectAltName (at most 5), else its
 * common name, else "no name". */
static gchar *
names_of(X509 *cert)
{
  GString *s = g_string_new(NULL);
  GENERAL_NAMES *names =
      X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
  int shown = 0;

  for (int i = 0; names != NULL && i < sk_GENERAL_NAME_num(names); i++) {
    const GENERAL_NAME *n = sk_GENERAL_NAME_value(names, i);
    g_autofree gchar *text = NULL;

    if (n->type == GEN_DNS) {
      g_autofree gchar *dns = sluice_text__escape(
          (const gchar *)ASN1_STRING_get0_data(n->d.dNSName),
          ASN1_STRING_length(n->d.dNSName), 100);
      text = g_strdup_printf("DNS:%s", dns);
    } else if (n->type == GEN_IPADD) {
      gchar addr[INET6_ADDRSTRLEN] = "?";
      int len = ASN1_STRING_length(n->d.iPAddress);
      const unsigned char *bytes = ASN1_STRING_get0_data(n->d.iPAddress);

      if (len == 4 || len == 16)
        inet_ntop(len == 4 ? AF_INET : AF_INET6, bytes, addr, sizeof addr);
      text = g_strdup_printf("IP:%s", addr);
    }
    if (text == NULL)
      continue;
    if (shown == 5) {
      g_string_append(s, ", ...");
      break;
    }
    g_string_append_printf(s, "%s%s", shown > 0 ? ", " : "", text);
    shown++;
  }
  GENERAL_NAMES_free(names);
  if (shown == 0) {
    X509_NAME *subject = X509_get_subject_name(cert);
    int at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);

    if (at >= 0) {
      const ASN1_STRING *cn =
          X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at));
      g_autofree gchar *text =
          sluice_text__escape((const gchar *)ASN1_STRING_get0_data(cn),
                              ASN1_STRING_length(cn), 100);
      g_string_append_printf(s, "CN=%s only", text);
    } else {
      g_string_append(s, "no name");
    }
  }
  return g_string_free(s, FALSE);
}

/* Keeps the first failure of the chain's verification; the verdict stays
 * OpenSSL's. */
static int
verify_cb(int ok, X509_STORE_CTX *store)
{
  SSL *ssl =
      X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
  TlsSocket *s = ssl != NULL ? SSL_get_app_data(ssl) : NULL;
  X509 *cert = X509_STORE_CTX_get_current_cert(store);

  if (ok || s == NULL || s->verify_error != X509_V_OK)
    return ok;
  s->verify_error = X509_STORE_CTX_get_error(store);
  s->verify_depth = X509_STORE_CTX_get_error_depth(store);
  if (cert != NULL) {
    s->cert_names = names_of(cert);
    s->not_before = time_text(X509_get0_notBefore(cert));
    s->not_after = time_text(X509_get0_notAfter(cert));
  }
  return ok;
}

static void
info_cb(const SSL *ssl, int where, int ret)
{
  TlsSocket *s = SSL_get_app_data(ssl);

  /* ret: the alert's level (high byte) and description (low byte); a
   * close_notify is an end of stream, not a refusal. */
  if (s != NULL && (where & SSL_CB_READ_ALERT) && (ret & 0xff) != 0 &&
      s->alert < 0)
    s->alert = ret & 0xff;
}

/* The server asked for a client certificate (a CertificateRequest). */
static int
cert_cb(SSL *ssl, void *data)
{
  TlsSocket *s = data;

  s->cert_requested = TRUE;
  return 1;
}

static gchar *
describe_verify(TlsSocket *s)
{
  const SluiceRedisTlsConfig *c = s->config;
  const gchar *whose = s->verify_depth > 0 ? "a CA certificate in the "
                                             "server's chain"
                                           : "the server's certificate";
  g_autofree gchar *name = sluice_text__escape(s->name, -1, 100);

  switch (s->verify_error) {
  case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
  case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
  case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
  case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
  case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
  case X509_V_ERR_CERT_UNTRUSTED: {
    g_autofree gchar *path = NULL;
    g_autofree gchar *store = NULL;

    if (c != NULL && (c->ca_file != NULL || c->ca_dir != NULL)) {
      path = sluice_text__escape(c->ca_file != NULL ? c->ca_file : c->ca_dir,
                                 -1, 200);
      store = g_strdup_printf(
          "%s “%s”", c->ca_file != NULL ? "tls_ca_file" : "tls_ca_dir", path);
    } else {
      store = g_strdup("the system's trust store");
    }
    return g_strdup_printf(
        "TLS: unknown CA: the server's certificate is not signed by a CA of "
        "%s (%s): give the CA that signed it with tls_ca_file",
        store, X509_verify_cert_error_string(s->verify_error));
  }
  case X509_V_ERR_CERT_HAS_EXPIRED:
    return g_strdup_printf("TLS: %s expired on %s: renew it on the server "
                           "(tls-cert-file), or check this machine's clock",
                           whose, s->not_after != NULL ? s->not_after : "?");
  case X509_V_ERR_CERT_NOT_YET_VALID:
    return g_strdup_printf("TLS: %s is not yet valid (not before %s): check "
                           "the clock of this machine and of the one that "
                           "issued it",
                           whose, s->not_before != NULL ? s->not_before : "?");
  case X509_V_ERR_HOSTNAME_MISMATCH:
  case X509_V_ERR_IP_ADDRESS_MISMATCH:
    return g_strdup_printf(
        "TLS: host-name mismatch: the server's certificate is not valid for "
        "“%s” (it names %s): connect by a name it holds, or set "
        "tls_server_name to one",
        name, s->cert_names != NULL ? s->cert_names : "?");
  default:
    return g_strdup_printf("TLS: the server's certificate was refused: %s "
                           "(OpenSSL verify error %ld)",
                           X509_verify_cert_error_string(s->verify_error),
                           s->verify_error);
  }
}

static gchar *
describe_alert(TlsSocket *s)
{
  const gchar *said = SSL_alert_desc_string_long(s->alert);

  switch (s->alert) {
  case SSL_AD_CERTIFICATE_REQUIRED:
    return g_strdup(
        "TLS: the server requires a client certificate (mutual TLS, "
        "tls-auth-clients): give this client's certificate and key with "
        "tls_cert and tls_key");
  case SSL_AD_HANDSHAKE_FAILURE:
    if (s->cert_requested && !s->sent_cert)
      return g_strdup(
          "TLS: the server requires a client certificate (mutual TLS, "
          "tls-auth-clients): give this client's certificate and key with "
          "tls_cert and tls_key");
    return g_strdup("TLS: the server refused the handshake (handshake "
                    "failure): it shares no cipher or protocol version with "
                    "this client");
  case SSL_AD_UNKNOWN_CA:
    if (s->sent_cert)
      return g_strdup("TLS: the server does not trust this client's "
                      "certificate (unknown CA): it must be signed by a CA "
                      "of the server's tls-ca-cert-file");
    break;
  case SSL_AD_BAD_CERTIFICATE:
  case SSL_AD_UNSUPPORTED_CERTIFICATE:
  case SSL_AD_CERTIFICATE_REVOKED:
  case SSL_AD_CERTIFICATE_EXPIRED:
  case SSL_AD_CERTIFICATE_UNKNOWN:
  case SSL_AD_ACCESS_DENIED:
    if (s->sent_cert)
      return g_strdup_printf("TLS: the server refused this client's "
                             "certificate (%s): check tls_cert against the "
                             "server's tls-ca-cert-file",
                             said);
    break;
  case SSL_AD_PROTOCOL_VERSION:
    return g_strdup_printf(
        "TLS: the server speaks no protocol version this client accepts "
        "(TLS %s or newer): lower tls_min_version, or enable TLS 1.3 on the "
        "server (tls-protocols)",
        s->config != NULL && s->config->min_version == 13 ? "1.3" : "1.2");
  case SSL_AD_UNRECOGNIZED_NAME:
    return g_strdup("TLS: the server does not know the name this client "
                    "sent by SNI: set tls_server_name to its name");
  default:
    break;
  }
  return g_strdup_printf("TLS: the server ended the connection with the "
                         "alert “%s”",
                         said);
}

/* Why the TLS exchange failed with @err (SSL_get_error()), as one line. */
static gchar *
describe_failure(TlsSocket *s, int err)
{
  unsigned long e = ERR_peek_error();
  int reason = ERR_GET_LIB(e) == ERR_LIB_SSL ? ERR_GET_REASON(e) : 0;

  if (s->verify_error == X509_V_OK && reason == SSL_R_CERTIFICATE_VERIFY_FAILED)
    s->verify_error = SSL_get_verify_result(s->ssl);
  if (s->verify_error != X509_V_OK)
    return describe_verify(s);
  if (s->alert >= 0)
    return describe_alert(s);
  switch (reason) {
  case SSL_R_WRONG_VERSION_NUMBER:
  case SSL_R_PACKET_LENGTH_TOO_LONG:
  case SSL_R_HTTP_REQUEST:
  case SSL_R_RECORD_LENGTH_MISMATCH:
    return g_strdup("TLS: the server does not answer in TLS on this port: "
                    "if it is a plain Redis port, use redis://");
  case SSL_R_UNSUPPORTED_PROTOCOL:
  case SSL_R_NO_PROTOCOLS_AVAILABLE:
    return g_strdup("TLS: the server speaks no protocol version this client "
                    "accepts: lower tls_min_version");
  default:
    break;
  }
  if (err == SSL_ERROR_SYSCALL || e == 0) {
    if (s->io_errno != 0)
      return g_strdup_printf("TLS: %s", g_strerror(s->io_errno));
    if (s->eof)
      return g_strdup(SSL_is_init_finished(s->ssl)
                          ? "the server closed the connection"
                          : "TLS: the server closed the connection during "
                            "the handshake");
  }
  return g_strdup_printf("TLS: %s", openssl_reason("the connection failed"));
}

/* ---- Probes: what a silent or closed port speaks ------------------------- */

/* A plain Redis answers "PING" at once (+PONG, or -NOAUTH, -DENIED). */
static gboolean
port_speaks_resp(const SluiceRedisEndpoint *endpoint, gint64 deadline_us)
{
  g_autofree gchar *why = NULL;
  int fd = sluice_redis_tcp__connect_fd(endpoint, deadline_us, &why);
  gchar c = 0;
  gboolean resp = FALSE;

  if (fd < 0)
    return FALSE;
  if (send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6 &&
      sluice_redis_fd__wait(fd, POLLIN, deadline_us) > 0 &&
      recv(fd, &c, 1, 0) == 1)
    resp = c == '+' || c == '-';
  close(fd);
  return resp;
}

static SSL_CTX *
probe_context(void)
{
  static gsize once = 0;
  static SSL_CTX *ctx;

  if (g_once_init_enter(&once)) {
    ctx = SSL_CTX_new(TLS_client_method());
    if (ctx != NULL)
      SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    g_once_init_leave(&once, 1);
  }
  return ctx;
}

gboolean
sluice_redis_tls__port_speaks_tls(const SluiceRedisEndpoint *endpoint,
                                  gint64 deadline_us)
{
  g_autofree gchar *why = NULL;
  SSL_CTX *ctx = probe_context();
  TlsSocket s = {0};
  BIO *bio;
  gboolean tls = FALSE;

  if (ctx == NULL)
    return FALSE;
  s.base.fd = sluice_redis_tcp__connect_fd(endpoint, deadline_us, &why);
  if (s.base.fd < 0)
    return FALSE;
  s.ssl = SSL_new(ctx);
  bio = s.ssl != NULL ? BIO_new(bio_method()) : NULL;
  if (bio != NULL) {
    BIO_set_data(bio, &s);
    SSL_set_bio(s.ssl, bio, bio);
    /* The hello, then whatever comes back until the first two bytes: the
     * BIO keeps them, however OpenSSL reads. */
    while (s.bytes_in < 2) {
      int rc = SSL_connect(s.ssl);
      int err = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(s.ssl, rc);

      if (s.bytes_in >= 2 ||
          (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) ||
          sluice_redis_fd__wait(s.base.fd,
                                err == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN,
                                deadline_us) <= 0)
        break;
    }
    /* A handshake (22) or an alert (21) record of TLS 1.x. */
    tls = s.bytes_in >= 2 && (s.head[0] == 22 || s.head[0] == 21) &&
          s.head[1] == 3;
  }
  ERR_clear_error();
  if (s.ssl != NULL)
    SSL_free(s.ssl);
  close(s.base.fd);
  return tls;
}

/* ---- The type ------------------------------------------------------------ */

static void tls_close(SluiceRedisSocket *socket);

static gchar *
handshake_timeout(TlsSocket *s, const SluiceRedisEndpoint *endpoint,
                  gint64 started_us, gint64 deadline_us)
{
  gint64 ms = (MAX(deadline_us - started_us, 0) + 999) / 1000;

  if (s->bytes_in > 0)
    return g_strdup_printf("TLS: handshake timeout: the handshake did not "
                           "finish within %" G_GINT64_FORMAT " ms (the server "
                           "stopped answering half-way)",
                           ms);
  if (port_speaks_resp(endpoint, g_get_monotonic_time() + PROBE_MAX_US))
    return g_strdup_printf("this port speaks plain Redis, not TLS: use "
                           "redis:// (the TLS hello got no answer within "
                           "%" G_GINT64_FORMAT " ms)",
                           ms);
  return g_strdup_printf("TLS: handshake timeout: no answer to the TLS hello "
                         "within %" G_GINT64_FORMAT " ms (a stalled server, "
                         "or a port that speaks neither TLS nor Redis)",
                         ms);
}

static SluiceRedisSocket *
tls_connect(const SluiceRedisEndpoint *endpoint, gint64 deadline_us,
            gchar **reason)
{
  SluiceRedisTls *tls = (SluiceRedisTls *)endpoint->settings;
  gint64 started = g_get_monotonic_time();
  const SluiceRedisTlsConfig *c;
  TlsSocket *s;
  SSL_CTX *ctx;
  BIO *bio;
  int fd;

  g_return_val_if_fail(tls != NULL && endpoint->host != NULL, NULL);
  if (!sluice_redis_tls__prepare(tls, endpoint->host, reason))
    return NULL;
  g_mutex_lock(&tls->lock);
  ctx = tls->ctx;
  g_mutex_unlock(&tls->lock);
  c = &tls->config;

  fd = sluice_redis_tcp__connect_fd(endpoint, deadline_us, reason);
  if (fd < 0)
    return NULL;
  s = g_new0(TlsSocket, 1);
  s->base.type = &sluice_redis_conn_type__tls;
  s->base.fd = fd;
  s->config = c;
  s->alert = -1;
  s->verify_error = X509_V_OK;
  s->sent_cert = c->cert != NULL;
  s->name = g_strdup(c->server_name != NULL ? c->server_name : endpoint->host);
  ERR_clear_error();
  s->ssl = SSL_new(ctx);
  bio = s->ssl != NULL ? BIO_new(bio_method()) : NULL;
  if (bio == NULL) {
    *reason = g_strdup_printf("TLS: %s", openssl_reason("out of memory"));
    goto fail;
  }
  BIO_set_data(bio, s);
  SSL_set_bio(s->ssl, bio, bio);
  SSL_set_app_data(s->ssl, s);
  SSL_set_info_callback(s->ssl, info_cb);
  SSL_set_cert_cb(s->ssl, cert_cb, s);
  if (g_hostname_is_ip_address(s->name)) {
    if (!c->insecure &&
        !X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s->ssl), s->name)) {
      *reason = g_strdup("TLS: cannot check the certificate against that "
                         "address");
      goto fail;
    }
  } else {
    if (!c->insecure) {
      X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(s->ssl),
                                      X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      if (!SSL_set1_host(s->ssl, s->name)) {
        *reason = g_strdup("TLS: cannot check the certificate against that "
                           "name");
        goto fail;
      }
    }
    SSL_set_tlsext_host_name(s->ssl, s->name);
  }

  for (;;) {
    int rc, err, w;

    ERR_clear_error();
    rc = SSL_connect(s->ssl);
    if (rc == 1)
      break;
    err = SSL_get_error(s->ssl, rc);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      *reason = describe_failure(s, err);
      goto fail;
    }
    w = sluice_redis_fd__wait(fd, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                              deadline_us);
    if (w == 0) {
      *reason = handshake_timeout(s, endpoint, started, deadline_us);
      goto fail;
    }
    if (w < 0) {
      *reason = g_strdup_printf("poll: %s", g_strerror(errno));
      goto fail;
    }
  }
  ERR_clear_error();
  /* What follows is read and written without the URL's settings. */
  s->config = NULL;
  return &s->base;

fail:
  ERR_clear_error();
  s->failed = TRUE;
  tls_close(&s->base);
  return NULL;
}

static SluiceRedisIo
tls_read(SluiceRedisSocket *socket, void *buf, gsize len, gsize *out_n,
         gchar **reason)
{
  TlsSocket *s = (TlsSocket *)socket;
  size_t n = 0;
  int rc, err;

  ERR_clear_error();
  rc = SSL_read_ex(s->ssl, buf, len, &n);
  if (rc == 1) {
    s->starved = FALSE;
    *out_n = n;
    return SLUICE_REDIS_IO_DONE;
  }
  err = SSL_get_error(s->ssl, rc);
  switch (err) {
  case SSL_ERROR_WANT_READ:
    /* What read-ahead holds now is part of a record: the rest is on the
     * socket, so poll() must see it (pending() says 0 until then). */
    s->starved = TRUE;
    return SLUICE_REDIS_IO_WANT_READ;
  case SSL_ERROR_WANT_WRITE:
    return SLUICE_REDIS_IO_WANT_WRITE;
  case SSL_ERROR_ZERO_RETURN:
    /* close_notify, or (SSL_OP_IGNORE_UNEXPECTED_EOF) a plain close. */
    return SLUICE_REDIS_IO_EOF;
  default:
    break;
  }
  s->failed = TRUE;
  if (err == SSL_ERROR_SYSCALL && s->io_errno == 0 && ERR_peek_error() == 0)
    return SLUICE_REDIS_IO_EOF;
  *reason = describe_failure(s, err);
  ERR_clear_error();
  return SLUICE_REDIS_IO_ERROR;
}

/* A server that refuses a client after the handshake (TLS 1.3: the
 * client's certificate is checked once the client has finished) sends an
 * alert and closes; the client's next write then meets a reset. The alert
 * may still wait in the receive queue: read it, so the message can say
 * what the server said rather than "Connection reset by peer". */
static void
read_parting_alert(TlsSocket *s)
{
  gchar buf[512];

  for (int i = 0; i < 8 && s->alert < 0; i++) {
    size_t n = 0;

    ERR_clear_error();
    if (SSL_read_ex(s->ssl, buf, sizeof buf, &n) != 1)
      break;
  }
  ERR_clear_error();
}

static SluiceRedisIo
tls_write(SluiceRedisSocket *socket, const void *buf, gsize len, gsize *out_n,
          gchar **reason)
{
  TlsSocket *s = (TlsSocket *)socket;
  size_t n = 0;
  int rc, err;

  ERR_clear_error();
  rc = SSL_write_ex(s->ssl, buf, len, &n);
  if (rc == 1) {
    *out_n = n;
    return SLUICE_REDIS_IO_DONE;
  }
  err = SSL_get_error(s->ssl, rc);
  if (err == SSL_ERROR_WANT_WRITE)
    return SLUICE_REDIS_IO_WANT_WRITE;
  if (err == SSL_ERROR_WANT_READ)
    return SLUICE_REDIS_IO_WANT_READ;
  s->failed = TRUE;
  if (s->io_errno == ECONNRESET || s->io_errno == EPIPE) {
    int saved = s->io_errno;

    read_parting_alert(s);
    s->io_errno = saved;
  }
  *reason = err == SSL_ERROR_ZERO_RETURN && s->alert < 0
                ? g_strdup("the server closed the connection")
                : describe_failure(s, err);
  ERR_clear_error();
  return SLUICE_REDIS_IO_ERROR;
}

/* Decrypted bytes not read yet, or (read-ahead) records received and not
 * decrypted yet: either way poll() would not see them. After a read that
 * starved, what is buffered is an incomplete record, and only the socket
 * can finish it. */
static gsize
tls_pending(SluiceRedisSocket *socket)
{
  TlsSocket *s = (TlsSocket *)socket;
  int n = SSL_pending(s->ssl);

  if (n > 0)
    return (gsize)n;
  return !s->starved && SSL_has_pending(s->ssl) ? 1 : 0;
}

static void
tls_close(SluiceRedisSocket *socket)
{
  TlsSocket *s = (TlsSocket *)socket;

  if (s == NULL)
    return;
  if (s->ssl != NULL) {
    /* One close_notify, not waited for; never after a fatal error
     * (OpenSSL forbids it) nor before the handshake ended. */
    if (!s->failed && SSL_is_init_finished(s->ssl))
      (void)SSL_shutdown(s->ssl);
    ERR_clear_error();
    SSL_free(s->ssl);
  }
  if (s->base.fd >= 0)
    close(s->base.fd);
  g_free(s->name);
  g_free(s->cert_names);
  g_free(s->not_before);
  g_free(s->not_after);
  g_free(s);
}

const SluiceRedisConnType sluice_redis_conn_type__tls = {
    .name = "tls",
    .connect = tls_connect,
    .read = tls_read,
    .write = tls_write,
    .pending = tls_pending,
    .close = tls_close,
};
