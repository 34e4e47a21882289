"""rediss:// URLs for the Python producers: the tls_* parameters of the C
library's URLs, mapped onto redis-py's own TLS connections.

    sluice.Client("rediss://redis.example:6380/0?tls_ca_file=/etc/ca.pem")

The parameters are those of docs/redis.md ("TLS"), with the same
defaults: the server's certificate chain and host name are verified
(against tls_ca_file / tls_ca_dir, else the system's trust store), TLS 1.2
is the minimum, tls_cert and tls_key give a client certificate (mutual
TLS), tls_server_name the name checked and sent by SNI, and tls_insecure=1
turns verification off, with a warning. They are taken out of the URL
before redis-py sees it (it would pass them on as connection arguments);
a tls_* parameter on a redis:// URL is refused, as in C, rather than
ignored.
"""

import ssl
import warnings
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

import redis.connection

from .errors import InvalidInput

PARAMS = ("tls_ca_file", "tls_ca_dir", "tls_cert", "tls_key",
          "tls_server_name", "tls_min_version", "tls_insecure")


@dataclass(frozen=True)
class TlsSettings:
    ca_file: Optional[str] = None
    ca_dir: Optional[str] = None
    cert: Optional[str] = None
    key: Optional[str] = None
    server_name: Optional[str] = None
    min_version: str = "1.2"
    insecure: bool = False

    def context(self) -> ssl.SSLContext:
        """The SSLContext every connection of a client shares."""
        ctx = ssl.create_default_context(cafile=self.ca_file,
                                         capath=self.ca_dir)
        ctx.minimum_version = (ssl.TLSVersion.TLSv1_3
                               if self.min_version == "1.3"
                               else ssl.TLSVersion.TLSv1_2)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert is not None:
            ctx.load_cert_chain(certfile=self.cert, keyfile=self.key)
        return ctx


def split_url(url: str) -> Tuple[str, Optional[TlsSettings]]:
    """The URL without its tls_* parameters, and the TLS settings they
    and the scheme give (None for a plain URL). Raises InvalidInput."""
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise InvalidInput("the Redis URL cannot be used: %s" % e) from None
    scheme = parts.scheme.lower()
    kept, tls = [], {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if not name.startswith("tls_"):
            kept.append((name, value))
            continue
        if scheme != "rediss":
            raise InvalidInput("the tls_* parameters are for TLS: write "
                               "rediss:// (parameter %s)" % name)
        if name not in PARAMS:
            raise InvalidInput("unknown query parameter %r: the TLS ones are "
                               "%s" % (name, ", ".join(PARAMS)))
        if name in tls:
            raise InvalidInput("%s is given twice: give it once" % name)
        if value == "" and name != "tls_insecure":
            raise InvalidInput("%s has no value" % name)
        tls[name] = value
    if scheme != "rediss":
        return url, None
    version = tls.get("tls_min_version", "1.2")
    if version not in ("1.2", "1.3"):
        raise InvalidInput("tls_min_version is 1.2 (the default) or 1.3")
    insecure = tls.get("tls_insecure", "0")
    if insecure not in ("0", "1", "true", "false", "yes", "no"):
        raise InvalidInput("tls_insecure is 1 (no verification of the "
                           "server: for tests only) or 0")
    if ("tls_cert" in tls) != ("tls_key" in tls):
        raise InvalidInput("tls_cert and tls_key go together (mutual TLS)")
    settings = TlsSettings(
        ca_file=tls.get("tls_ca_file"), ca_dir=tls.get("tls_ca_dir"),
        cert=tls.get("tls_cert"), key=tls.get("tls_key"),
        server_name=tls.get("tls_server_name"), min_version=version,
        insecure=insecure in ("1", "true", "yes"))
    query = "&".join("%s=%s" % (quote(k, safe=""), quote(v, safe=""))
                     for k, v in kept)
    return urlunsplit(parts._replace(query=query)), settings


def warn_insecure(shown: str) -> None:
    warnings.warn("TLS WITHOUT VERIFICATION for %s (tls_insecure): anyone on "
                  "the network path can pose as the server and read every "
                  "task; use it for a test only, and give the server's CA "
                  "with tls_ca_file instead" % shown, RuntimeWarning,
                  stacklevel=3)


class SSLConnection(redis.connection.SSLConnection):
    """redis-py's TLS connection, with Sluice's settings: the same context
    for every connection of a client, the server name of tls_server_name
    (SNI and the host-name check) and the minimum version."""

    def __init__(self, *, sluice_tls: TlsSettings,
                 sluice_context: ssl.SSLContext, **kwargs: Any):
        super().__init__(**kwargs)
        self._sluice_tls = sluice_tls
        self._sluice_context = sluice_context

    def _connect(self) -> Any:
        sock = redis.connection.Connection._connect(self)
        name = self._sluice_tls.server_name or self.host
        return self._sluice_context.wrap_socket(sock, server_hostname=name)


def redis_kwargs(tls: TlsSettings) -> Dict[str, Any]:
    """What Redis.from_url() takes for @tls (blocking redis-py)."""
    return {"connection_class": SSLConnection, "sluice_tls": tls,
            "sluice_context": tls.context()}


def shown_url(url: str) -> str:
    """@url as a message may quote it: the password masked."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.netloc.rsplit("@", 1)[1]
        user = parts.username or ""
        return urlunsplit(parts._replace(netloc="%s:***@%s" % (user, host)))
    except ValueError:
        return "(a malformed URL)"


class _FixedContext:
    """What redis.asyncio's SSLConnection asks its context of."""

    def __init__(self, context: ssl.SSLContext):
        self.context = context

    def get(self) -> ssl.SSLContext:
        return self.context


def aio_redis_kwargs(tls: TlsSettings) -> Dict[str, Any]:
    """What redis.asyncio.Redis.from_url() takes for @tls."""
    import asyncio
    import socket

    import redis.asyncio.connection as aconn

    class AioSSLConnection(aconn.SSLConnection):
        def __init__(self, *, sluice_tls: TlsSettings,
                     sluice_context: ssl.SSLContext, **kwargs: Any):
            super().__init__(**kwargs)
            self._sluice_tls = sluice_tls
            self.ssl_context = _FixedContext(sluice_context)

        async def _connect(self) -> None:
            # redis.asyncio's own, with the server name of tls_server_name.
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    host=self.host, port=self.port,
                    ssl=self.ssl_context.get(),
                    server_hostname=self._sluice_tls.server_name
                    or self.host),
                self.socket_connect_timeout)
            self._reader, self._writer = reader, writer
            sock = writer.transport.get_extra_info("socket")
            if sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    return {"connection_class": AioSSLConnection, "sluice_tls": tls,
            "sluice_context": tls.context()}
