"""The asyncio Sluice producer, on redis.asyncio (python3-redis).

    import sluice.aio
    c = sluice.aio.Client("redis://127.0.0.1:6379/0", mode="reliable")
    id = await c.enqueue("email.send", ["ann@example.com", 3])
    print((await c.get_result(id, timeout_ms=30000)).value)

The same methods, checks and bytes as sluice.Client, as coroutines.
"""

import asyncio
import contextlib
import ssl
import time
from typing import Any, Iterable, List, Mapping, Optional, Tuple

import redis
import redis.asyncio

from . import protocol as p
from . import tls
from .client import now_ms, tell_once, translate
from .errors import InvalidInput, MalformedReply, NotFound, SealError, \
    Timeout, Unavailable, WrongMode, WrongVersion


async def read_meta(command: Any, settings: p.Settings) -> None:
    """sluice.client.read_meta, awaiting each command."""
    meta = settings.prefix + "meta"

    async def try_writes(writes: Any) -> None:
        for w in writes:
            try:
                await command(*w)
            except redis.exceptions.ResponseError:
                pass  # a read-only user: what is read back decides

    fields = [await command("HGET", meta, f) for f in p.META_FIELDS]
    p.check_meta(settings, fields, checking=True)
    writes = p.meta_writes(meta, settings.mode, fields)
    if writes:
        await try_writes(writes)
        fields = [await command("HGET", meta, f) for f in p.META_FIELDS]
    after, warning = p.check_meta(settings, fields)
    await try_writes(after)
    tell_once(warning)


class Client:
    """sluice.Client for asyncio: see there for the settings."""

    def __init__(self, url: str = "redis://127.0.0.1:6379/0", *,
                 redis: Optional["redis.asyncio.Redis"] = None,
                 **settings: Any):
        try:
            self.settings = p.Settings(**settings)
        except TypeError as e:
            raise InvalidInput(str(e)) from None
        self._scripts = p.scripts_for(self.settings.mode)
        # Someone else's connections are checked once; ours on every new
        # connection, as the C client does.
        self._mode_checked = redis is None
        if redis is None:
            # rediss://: the tls_* parameters are Sluice's (sluice/tls.py).
            plain, settings = tls.split_url(url)
            if settings is not None:
                # redis.asyncio lets a rediss:// URL's own connection class
                # win over ours: the scheme has said what it had to.
                plain = "redis" + plain[len("rediss"):]
            try:
                extra = tls.aio_redis_kwargs(settings) if settings else {}
                redis = _aioredis.Redis.from_url(
                    plain, decode_responses=False,
                    redis_connect_func=self._on_connect, **extra)
            except (ValueError, OSError, ssl.SSLError) as e:
                raise InvalidInput("the Redis URL %r cannot be used: %s"
                                   % (tls.shown_url(url), e)) from None
            if settings is not None and settings.insecure:
                tls.warn_insecure(tls.shown_url(url))
        self.redis = redis

    async def close(self) -> None:
        await self.redis.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def _key(self, suffix: str, name: str = "") -> str:
        return self.settings.prefix + suffix + name

    async def _check_mode(self) -> None:
        if self._mode_checked:
            return
        try:
            await read_meta(self.redis.execute_command, self.settings)
        except _exc.RedisError as e:
            raise translate("reading the namespace's meta", e) from e
        self._mode_checked = True

    async def _on_connect(self, conn: Any) -> None:
        await conn.on_connect()

        async def command(*args: Any) -> Any:
            await conn.send_command(*args)
            return await conn.read_response()

        try:
            await read_meta(command, self.settings)
        except (WrongMode, WrongVersion):
            await conn.disconnect()  # not left connected: checked again
            raise

    async def _eval(self, name: str, argv: List[Any]) -> Any:
        await self._check_mode()
        script = self._scripts[name]
        try:
            try:
                return await self.redis.execute_command(
                    "EVALSHA", script.sha, 1, self.settings.prefix, *argv)
            except _exc.NoScriptError:
                await self.redis.execute_command("SCRIPT", "LOAD",
                                                 script.text)
                return await self.redis.execute_command(
                    "EVALSHA", script.sha, 1, self.settings.prefix, *argv)
        except _exc.RedisError as e:
            raise translate(name, e) from e

    async def _command(self, what: str, *args: Any) -> Any:
        await self._check_mode()
        try:
            return await self.redis.execute_command(*args)
        except _exc.RedisError as e:
            raise translate(what, e) from e

    # ---- enqueue -----------------------------------------------------------

    async def enqueue(self, task: str, args: Any = None, *,
                      queue: Optional[str] = None, id: Optional[str] = None,
                      delay_ms: int = 0, eta_ms: int = 0,
                      headers: Optional[Mapping[str, str]] = None,
                      options: Any = None) -> str:
        return (await self.enqueue_full(
            task, args, queue=queue, id=id, delay_ms=delay_ms, eta_ms=eta_ms,
            headers=headers, options=options))[0]

    async def enqueue_full(self, task: str, args: Any = None,
                           **request: Any) -> Tuple[str, bool]:
        ids, existed = await self._enqueue([p.Request(task, args, **request)])
        return ids[0], existed[0]

    async def enqueue_batch(self, requests: Iterable[Any]) -> List[str]:
        return (await self._enqueue([p.as_request(r) for r in requests]))[0]

    async def _enqueue(self, requests: List[p.Request]) -> Tuple[List[str],
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
            reply = await self._eval("enqueue", argv)
        except Unavailable:
            if not all(x.dedup for x in prepared):
                raise
            reply = await self._eval("enqueue", argv)
        existed = p.enqueue_reply(reply, len(prepared))
        return [x.id for x in prepared], existed

    # ---- results -----------------------------------------------------------

    async def _read_record(self, id: str) -> Tuple[Optional[p.Result], bool]:
        raw = await self._command("get_record", "GET", self._key("r:", id))
        data, final = p.split_record(raw)
        if data is None:
            return None, False
        r = p.decode_record(data, id)
        return r, final or r.final

    async def get_result(self, id: str,
                         timeout_ms: Optional[int] = None) -> p.Result:
        """See sluice.Client.get_result."""
        p.check_name("id", id)
        deadline = None if timeout_ms is None else \
            time.monotonic() + max(timeout_ms, 0) / 1000
        poll = self.settings.result_poll_interval_ms / 1000
        last = None
        await self._check_mode()
        pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
        try:
            try:
                await pubsub.subscribe(self._key("done:", id))
                while True:
                    r, final = await self._read_record(id)
                    if r is not None:
                        last = r.state
                        if final:
                            # A sealed result is opened, or SealError.
                            return p.open_result(r, self.settings.keyring)
                    wait = poll if deadline is None else \
                        min(poll, deadline - time.monotonic())
                    if wait <= 0:
                        break
                    await self._wait_message(pubsub, wait)
            except _exc.RedisError as e:
                raise translate("get_result", e) from e
        finally:
            with contextlib.suppress(_exc.RedisError):
                await pubsub.close()
        raise Timeout("task %s did not finish within %d ms (its record says: "
                      "%s)" % (id, max(timeout_ms or 0, 0),
                               last or "nothing yet"))

    @staticmethod
    async def _wait_message(pubsub: Any, wait: float) -> None:
        end = time.monotonic() + wait
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            msg = await pubsub.get_message(timeout=left)
            if msg is not None:
                return
            # redis.asyncio returns None at once when nothing is
            # subscribed yet or on a confirmation: never spin on it.
            await asyncio.sleep(min(left, 0.05))

    async def inspect(self, id: str) -> p.Result:
        p.check_name("id", id)
        r, _ = await self._read_record(id)
        if r is not None:
            # Inspecting is for operators, who may hold no keyring: a value
            # that does not open stays sealed (r.seal says with which key).
            with contextlib.suppress(SealError):
                p.open_result(r, self.settings.keyring)
            if r.state in ("scheduled", "retrying"):
                r.due_at = p.due_of_lookup(await self._eval("lookup_task",
                                                            [id]))
            return r
        r = p.result_of_lookup(id, await self._eval("lookup_task", [id]))
        if r is None:
            raise NotFound("no record of task %s: it does not exist, its "
                           "record expired, or it is queued or running with "
                           "track_state off" % id)
        return r

    async def cancel(self, id: str) -> str:
        p.check_name("id", id)
        now = now_ms()
        n = p.int_reply("cancel_scheduled", await self._eval(
            "cancel_scheduled",
            [id, p.cancel_record(id, now), self.settings.result_ttl_ms]))
        if n == 1:
            return "removed"
        p.int_reply("revoke", await self._eval(
            "revoke", [id, now + self.settings.revoke_ttl_ms]))
        return "revoked"

    # ---- dead letters --------------------------------------------------------

    async def dlq_list(self, after: Optional[str] = None, limit: int = 100,
                       reason: Optional[str] = None,
                       task: Optional[str] = None) -> List[p.DeadLetter]:
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
            page = await self._command(
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

    async def dlq_get(self, entry_id: str) -> p.DeadLetter:
        if p.valid_entry_id(entry_id):
            page = await self._command("dlq_get", "XRANGE", self._key("dlq"),
                                       entry_id, entry_id, "COUNT", 1)
            if isinstance(page, list) and page:
                return p.dead_letter_from_entry(page[0],
                                                self.settings.keyring)
        raise NotFound("no dead letter with entry id %s (list them with "
                       "dlq_list or `sluice dlq list`)" % entry_id)

    async def dlq_replay(self, entry_id: str,
                         keep_attempt: bool = False) -> str:
        dl = await self.dlq_get(entry_id)
        sub = p.replay_submit(self.settings, dl, keep_attempt, now_ms())
        found, _ = p.pair_reply("dlq_replay", await self._eval(
            "dlq_replay", p.replay_argv(entry_id, sub)))
        if found != 1:
            raise NotFound("no dead letter with entry id %s (replayed or "
                           "deleted meanwhile)" % entry_id)
        return sub.id


_aioredis = redis.asyncio
_exc = redis.exceptions
