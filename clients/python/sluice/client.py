"""The blocking Sluice producer, on redis-py (python3-redis).

    import sluice
    c = sluice.Client("redis://127.0.0.1:6379/0")   # reliable mode
    id = c.enqueue("email.send", ["ann@example.com", 3])
    print(c.get_result(id, timeout_ms=30000).value)

One Client holds one redis-py connection pool and may be shared by
threads; get_result subscribes on a connection of its own while it waits.
"""

import contextlib
import logging
import ssl
import time
from typing import Any, Iterable, List, Mapping, Optional, Tuple

import redis

from . import protocol as p
from . import tls
from .errors import (Full, InvalidInput, MalformedReply, NotFound,
                     SealError, SluiceError, Timeout, Unavailable, WrongMode,
                     WrongVersion)


def now_ms() -> int:
    return int(time.time() * 1000)


def translate(what: str, e: Exception) -> SluiceError:
    """The typed error for what redis-py raised."""
    if isinstance(e, (redis.exceptions.ConnectionError,
                      redis.exceptions.TimeoutError)):
        return Unavailable("%s: Redis is unreachable or the connection was "
                           "lost (%s); check the URL and that Redis runs"
                           % (what, e))
    text = str(e)
    if text.startswith("OOM"):
        return Full("%s: Redis is out of memory and refuses new work (%s); "
                    "let workers drain it, or raise maxmemory" % (what, text))
    return SluiceError("%s: Redis refused the command: %s" % (what, text))


@contextlib.contextmanager
def redis_errors(what: str):
    try:
        yield
    except redis.exceptions.RedisError as e:
        raise translate(what, e) from e


_log = logging.getLogger("sluice")
_told: set = set()


def tell_once(warning: Optional[str]) -> None:
    """Logs @warning once per process (each new connection checks)."""
    if warning is not None and warning not in _told:
        _told.add(warning)
        _log.warning(warning)


def try_writes(command: Any, writes: Iterable[Tuple[str, ...]]) -> None:
    for w in writes:
        try:
            command(*w)
        except redis.exceptions.ResponseError:
            pass  # a read-only user: what is read back decides


def read_meta(command: Any, settings: p.Settings) -> None:
    """Checks the namespace's {ns}:meta as the C client does on every new
    connection: its mode, layout version and script set, recording what a
    new namespace (or one made before versions were recorded) lacks; a
    refusal comes before anything is written (p.check_meta)."""
    meta = settings.prefix + "meta"
    fields = [command("HGET", meta, f) for f in p.META_FIELDS]
    p.check_meta(settings, fields, checking=True)
    writes = p.meta_writes(meta, settings.mode, fields)
    if writes:
        try_writes(command, writes)
        fields = [command("HGET", meta, f) for f in p.META_FIELDS]
    after, warning = p.check_meta(settings, fields)
    try_writes(command, after)
    tell_once(warning)


class Client:
    """A producer for one namespace of one Redis.

    url: a redis://, rediss:// (TLS, with the C library's tls_*
    parameters: sluice/tls.py) or unix:// URL for redis-py; or pass redis=
    an existing redis.Redis (made with decode_responses=False).
    mode: "reliable" (the default, as for the C library and the sluice
    command) or "fast", as the workers; the namespace's recorded mode is
    checked (and recorded if new) before the first command.
    track_state: write a queued/scheduled record at enqueue.
    The *_ttl_ms, max_message_bytes and result_poll_interval_ms settings
    are those of SluiceClientOptions, with the same defaults.
    keyring: a sluice.Keyring or the path of a keyring file (KeyringError
    if it cannot be used): the args of every message are then sealed with
    its current key, sealed results are opened by get_result (SealError
    when the keyring lacks their key), inspect and dead letters show what
    it opens (docs/clients.md, "Sealing").
    """

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", *,
                 redis: Optional["redis.Redis"] = None, **settings: Any):
        try:
            self.settings = p.Settings(**settings)
        except TypeError as e:
            raise InvalidInput(str(e)) from None
        self._scripts = p.scripts_for(self.settings.mode)
        if redis is not None:
            # Someone else's connections: checked once, before the first
            # command.
            self.redis = redis
            self._mode_checked = False
        else:
            # Checked on every new connection, as the C client does, so
            # that a namespace wiped by a restart is recorded again.
            self.redis = _redis_from_url(url, self._on_connect)
            self._mode_checked = True

    # ---- plumbing ----------------------------------------------------------

    def close(self) -> None:
        self.redis.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _key(self, suffix: str, name: str = "") -> str:
        return self.settings.prefix + suffix + name

    def _check_mode(self) -> None:
        if self._mode_checked:
            return
        with redis_errors("reading the namespace's meta"):
            read_meta(self.redis.execute_command, self.settings)
        self._mode_checked = True

    def _on_connect(self, conn: Any) -> None:
        conn.on_connect()

        def command(*args: Any) -> Any:
            conn.send_command(*args)
            return conn.read_response()

        try:
            read_meta(command, self.settings)
        except (WrongMode, WrongVersion):
            conn.disconnect()  # not left connected, so checked again
            raise

    def _eval(self, name: str, argv: List[Any]) -> Any:
        """EVALSHA, and on NOSCRIPT the text once, as the C broker does."""
        self._check_mode()
        script = self._scripts[name]
        with redis_errors(name):
            try:
                return self.redis.execute_command(
                    "EVALSHA", script.sha, 1, self.settings.prefix, *argv)
            except redis.exceptions.NoScriptError:
                self.redis.execute_command("SCRIPT", "LOAD", script.text)
                return self.redis.execute_command(
                    "EVALSHA", script.sha, 1, self.settings.prefix, *argv)

    def _command(self, what: str, *args: Any) -> Any:
        self._check_mode()
        with redis_errors(what):
            return self.redis.execute_command(*args)

    # ---- enqueue -----------------------------------------------------------

    def enqueue(self, task: str, args: Any = None, *,
                queue: Optional[str] = None, id: Optional[str] = None,
                delay_ms: int = 0, eta_ms: int = 0,
                headers: Optional[Mapping[str, str]] = None,
                options: Any = None) -> str:
        """Enqueues one message; returns its task id.

        args: any value msgpack encodes (bytes become bin). id: a
        caller-chosen id makes the enqueue idempotent for dedup_ttl_ms.
        delay_ms / eta_ms (ms since the epoch, wins): run no earlier.
        options: a sluice.Options or a dict of its fields.
        """
        return self.enqueue_full(task, args, queue=queue, id=id,
                                 delay_ms=delay_ms, eta_ms=eta_ms,
                                 headers=headers, options=options)[0]

    def enqueue_full(self, task: str, args: Any = None,
                     **request: Any) -> Tuple[str, bool]:
        """enqueue(), also telling whether a caller-chosen id had been
        enqueued already (then nothing was written)."""
        ids, existed = self._enqueue([p.Request(task, args, **request)])
        return ids[0], existed[0]

    def enqueue_batch(self, requests: Iterable[Any]) -> List[str]:
        """Enqueues many messages in one script call, each atomic on its
        own; nothing is sent if any request is invalid. requests: Request
        objects or dicts of enqueue()'s arguments."""
        return self._enqueue([p.as_request(r) for r in requests])[0]

    def _enqueue(self, requests: List[p.Request]) -> Tuple[List[str],
                                                             List[bool]]:
        now = now_ms()
        prepared = []
        for i, r in enumerate(requests):
            try:
                prepared.append(p.prepare(self.settings, r, now))
            except InvalidInput as e:
                if len(requests) == 1:
                    raise
                raise type(e)("request %d of the batch: %s" % (i, e)) \
                    from None
        if not prepared:
            return [], []
        argv = p.enqueue_argv(self.settings, prepared)
        try:
            reply = self._eval("enqueue", argv)
        except Unavailable:
            # Every claim holds this call's token: a batch of ids only is
            # safe to send again, and recognises its own claims.
            if not all(x.dedup for x in prepared):
                raise
            reply = self._eval("enqueue", argv)
        existed = p.enqueue_reply(reply, len(prepared))
        return [x.id for x in prepared], existed

    # ---- results -----------------------------------------------------------

    def _read_record(self, id: str) -> Tuple[Optional[p.Result], bool]:
        raw = self._command("get_record", "GET", self._key("r:", id))
        data, final = p.split_record(raw)
        if data is None:
            return None, False
        r = p.decode_record(data, id)
        return r, final or r.final

    def get_result(self, id: str, timeout_ms: Optional[int] = None) -> p.Result:
        """Waits for task id's final record and returns it (timeout_ms None
        waits forever). Woken by the notification published with the final
        record, and re-reads it every result_poll_interval_ms in case a
        notification was lost. Raises Timeout."""
        p.check_name("id", id)
        deadline = None if timeout_ms is None else \
            time.monotonic() + max(timeout_ms, 0) / 1000
        poll = self.settings.result_poll_interval_ms / 1000
        last = None
        self._check_mode()
        pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        try:
            with redis_errors("get_result"):
                # Subscribed before reading: a final record written after
                # the read is announced to this subscription.
                pubsub.subscribe(self._key("done:", id))
                while True:
                    r, final = self._read_record(id)
                    if r is not None:
                        last = r.state
                        if final:
                            # A sealed result is opened, or SealError.
                            return p.open_result(r, self.settings.keyring)
                    wait = poll if deadline is None else \
                        min(poll, deadline - time.monotonic())
                    if wait <= 0:
                        break
                    self._wait_message(pubsub, wait)
        finally:
            with contextlib.suppress(redis.exceptions.RedisError):
                pubsub.close()
        raise Timeout("task %s did not finish within %d ms (its record says: "
                      "%s)" % (id, max(timeout_ms or 0, 0),
                               last or "nothing yet"))

    @staticmethod
    def _wait_message(pubsub: Any, wait: float) -> None:
        end = time.monotonic() + wait
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            # None on a subscription confirmation: wait on for the rest.
            if pubsub.get_message(timeout=left) is not None:
                return

    def inspect(self, id: str) -> p.Result:
        """The task's record, or what the schedule or the dead letters say
        of it; raises NotFound."""
        p.check_name("id", id)
        r, _ = self._read_record(id)
        if r is not None:
            # Inspecting is for operators, who may hold no keyring: a value
            # that does not open stays sealed (r.seal says with which key).
            with contextlib.suppress(SealError):
                p.open_result(r, self.settings.keyring)
            if r.state in ("scheduled", "retrying"):
                r.due_at = p.due_of_lookup(self._eval("lookup_task", [id]))
            return r
        r = p.result_of_lookup(id, self._eval("lookup_task", [id]))
        if r is None:
            raise NotFound("no record of task %s: it does not exist, its "
                           "record expired, or it is queued or running with "
                           "track_state off" % id)
        return r

    def cancel(self, id: str) -> str:
        """Cancels task id: "removed" when it was still scheduled (gone,
        its record says cancelled), else "revoked" (workers skip it, or
        interrupt it if it runs)."""
        p.check_name("id", id)
        now = now_ms()
        n = p.int_reply("cancel_scheduled", self._eval(
            "cancel_scheduled",
            [id, p.cancel_record(id, now), self.settings.result_ttl_ms]))
        if n == 1:
            return "removed"
        p.int_reply("revoke", self._eval(
            "revoke", [id, now + self.settings.revoke_ttl_ms]))
        return "revoked"

    # ---- dead letters --------------------------------------------------------

    def dlq_list(self, after: Optional[str] = None, limit: int = 100,
                 reason: Optional[str] = None,
                 task: Optional[str] = None) -> List[p.DeadLetter]:
        """Dead letters oldest first, after entry id `after`, at most
        limit, optionally only of one reason or task."""
        if after is not None and not p.valid_entry_id(after):
            raise InvalidInput("“%s” is not a dead-letter entry id (they look "
                               "like 1700000000000-0)" % (after,))
        p._int("limit", limit, 0)
        p.check_reason(reason)
        limit = limit or 100
        out: List[p.DeadLetter] = []
        cursor = after
        while len(out) < limit:
            want = limit - len(out) if reason is None and task is None \
                else 256
            page = self._command(
                "dlq_list", "XRANGE", self._key("dlq"),
                "-" if cursor is None else "(" + cursor, "+", "COUNT", want)
            if not isinstance(page, list):
                raise MalformedReply("dlq_list: Redis answered %r" % (page,))
            entries = [p.dead_letter_from_entry(e, self.settings.keyring)
                       for e in page]
            out += [e for e in entries
                    if (reason is None or e.reason == reason)
                    and (task is None or e.task == task)][:limit - len(out)]
            if len(entries) < want:
                break
            cursor = entries[-1].entry_id
        return out

    def dlq_get(self, entry_id: str) -> p.DeadLetter:
        if p.valid_entry_id(entry_id):
            page = self._command("dlq_get", "XRANGE", self._key("dlq"),
                                 entry_id, entry_id, "COUNT", 1)
            if isinstance(page, list) and page:
                return p.dead_letter_from_entry(page[0],
                                                self.settings.keyring)
        raise NotFound("no dead letter with entry id %s (list them with "
                       "dlq_list or `sluice dlq list`)" % entry_id)

    def dlq_replay(self, entry_id: str, keep_attempt: bool = False) -> str:
        """Sends a dead letter back to its queue (attempts restored unless
        keep_attempt) and returns its task id; raises NotFound."""
        dl = self.dlq_get(entry_id)
        sub = p.replay_submit(self.settings, dl, keep_attempt, now_ms())
        found, _ = p.pair_reply("dlq_replay", self._eval(
            "dlq_replay", p.replay_argv(entry_id, sub)))
        if found != 1:
            raise NotFound("no dead letter with entry id %s (replayed or "
                           "deleted meanwhile)" % entry_id)
        return sub.id


def _redis_from_url(url: str, on_connect: Any) -> "redis.Redis":
    # rediss://: the tls_* parameters are Sluice's (sluice/tls.py).
    plain, tls_settings = tls.split_url(url)
    try:
        extra = tls.redis_kwargs(tls_settings) if tls_settings else {}
        r = redis.Redis.from_url(plain, decode_responses=False,
                                 redis_connect_func=on_connect, **extra)
    except (ValueError, OSError, ssl.SSLError) as e:
        raise InvalidInput("the Redis URL %r cannot be used: %s"
                           % (tls.shown_url(url), e)) from None
    if tls_settings is not None and tls_settings.insecure:
        tls.warn_insecure(tls.shown_url(url))
    return r
