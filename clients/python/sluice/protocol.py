"""What a Sluice producer writes and reads, without any I/O.

The sync client (sluice.client) and the asyncio one (sluice.aio) share
everything here: the checks the C client makes before it sends anything
(the same rules and limits), the envelope and result-record encodings
(byte for byte those of the C library, PROTOCOL.md), the scripts
(assembled from the Lua files the C broker compiles in) and the argument
lists and replies of the scripts a producer calls.
"""

import base64
import binascii
import dataclasses
import datetime
import hashlib
import json
import math
import os
import uuid
from typing import Any, Dict, List, Mapping, Optional, Tuple

import msgpack

from . import seal
from .errors import InvalidInput, MalformedReply, SealError, TooLarge, \
    WrongMode, WrongVersion

# The limits of include/sluice/sluice-envelope.h and sluice-client.h.
MAX_ID_BYTES = 256
MAX_NAME_BYTES = 200
MAX_HEADERS = 256
MAX_ARGS_DEPTH = 63
ARGS_COST_FACTOR = 16
ARGS_COST_BASE = 64 * 1024
UNPACKED_VALUE_BYTES = 24
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024
DEFAULT_QUEUE = "default"
DEFAULT_RESULT_TTL_MS = 24 * 3600 * 1000
DEFAULT_REVOKE_TTL_MS = 3600 * 1000
DEFAULT_DEDUP_TTL_MS = 24 * 3600 * 1000
SAFETY_POLL_MS = 5000
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
MODES = ("fast", "reliable")

FINAL_STATES = ("succeeded", "failed", "dead_lettered", "cancelled")
STATES = ("queued", "scheduled", "running", "retrying") + FINAL_STATES

# ---- Names ----------------------------------------------------------------

_WHAT = {"id": "task id", "task": "task name", "queue": "queue name"}


def _utf8(value: str) -> Optional[bytes]:
    """The UTF-8 bytes of value, or None when it cannot be sent (a lone
    surrogate, a NUL)."""
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return None if b"\0" in data else data


def name_problem(kind: str, value: Any) -> Optional[str]:
    """What is wrong with a task id, task name or queue name (kind "id",
    "task", "queue"), as sluice_name__problem() says it, or None."""
    what = _WHAT[kind]
    if value is None or value == "":
        return "the %s cannot be empty" % what
    if not isinstance(value, str):
        return "the %s must be a str, not %s" % (what, type(value).__name__)
    data = _utf8(value)
    limit = MAX_ID_BYTES if kind == "id" else MAX_NAME_BYTES
    if data is None:
        # Length first, as the C client: count what can be counted.
        if len(value.encode("utf-8", "surrogatepass")) > limit:
            return "the %s “%s” is %d bytes long; the limit is %d" % (
                what, value[:40], len(value.encode("utf-8", "surrogatepass")),
                limit)
        return "the %s is not valid UTF-8 (or holds a NUL byte)" % what
    if len(data) > limit:
        return "the %s “%s” is %d bytes long; the limit is %d" % (
            what, value[:40], len(data), limit)
    if kind == "task":
        for i, b in enumerate(data):
            if not 0x21 <= b <= 0x7E:
                return ("the task name “%s” has a space or a character that "
                        "is not printable ASCII at byte %d; use names such "
                        "as “mail.send”" % (value, i))
    return None


def check_name(kind: str, value: Any) -> None:
    problem = name_problem(kind, value)
    if problem is not None:
        raise InvalidInput(problem)


def check_namespace(ns: Any) -> None:
    """The rule of sluice_redis_keys__valid_namespace()."""
    if not isinstance(ns, str) or ns == "":
        raise InvalidInput("the Redis namespace is empty: use a short name "
                           "such as “sluice”")
    if len(ns.encode("utf-8", "surrogatepass")) > 256:
        raise InvalidInput("the Redis namespace is longer than 256 bytes: "
                           "every key carries it, so choose a short one")
    for c in ns:
        if c in "{}#" or ord(c) < 0x20 or ord(c) == 0x7F:
            raise InvalidInput(
                "the Redis namespace “%s” contains %r, which is not allowed "
                "(braces make the hash tag, “#” is reserved for partitions, "
                "control characters are refused): choose another name"
                % (ns, c))


# ---- Trace context (lib/trace-context.c) ------------------------------------

_HEX = "0123456789abcdef"
_FORM = ("expected 00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lower "
         "case, e.g. 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")


def _hex(s: str, nonzero: bool = False) -> bool:
    return (all(c in _HEX for c in s)
            and not (nonzero and s.strip("0") == ""))


def _trace_invalid(what: str, value: str, why: str) -> InvalidInput:
    shown = value[:80] + ("…" if len(value) > 80 else "")
    return InvalidInput("header %s “%s” is not a W3C trace context: %s"
                        % (what, shown, why))


def _check_traceparent(tp: str) -> None:
    if (len(tp) < 55 or tp[2] != "-" or tp[35] != "-" or tp[52] != "-"
            or not _hex(tp[0:2]) or not _hex(tp[3:35])
            or not _hex(tp[36:52]) or not _hex(tp[53:55])):
        raise _trace_invalid("traceparent", tp, _FORM)
    if tp.startswith("ff"):
        raise _trace_invalid("traceparent", tp, "version ff is forbidden")
    if not _hex(tp[3:35], True):
        raise _trace_invalid("traceparent", tp, "the trace id is all zeros")
    if not _hex(tp[36:52], True):
        raise _trace_invalid("traceparent", tp, "the parent id is all zeros")
    if (len(tp) != 55 if tp.startswith("00")
            else len(tp) > 55 and tp[55] != "-"):
        raise _trace_invalid("traceparent", tp,
                             "extra characters after the flags")


def _key_char(c: str) -> bool:
    return ("a" <= c <= "z") or ("0" <= c <= "9") or c in "_-*/"


def _valid_key(key: str) -> bool:
    at = key.find("@")
    first = key if at < 0 else key[:at]
    if (len(first) == 0 or len(first) > (241 if at >= 0 else 256)
            or not (first[0].isascii() and first[0].isalnum())
            or first[0].isupper()):
        return False
    if not all(_key_char(c) for c in first[1:]):
        return False
    if at >= 0:
        system = key[at + 1:]
        if (len(system) == 0 or len(system) > 14
                or not ("a" <= system[0] <= "z")):
            return False
        if not all(_key_char(c) for c in system[1:]):
            return False
    return True


def _valid_value(value: str) -> bool:
    if len(value) == 0 or len(value) > 256 or value[-1] == " ":
        return False
    return all(0x20 <= ord(c) <= 0x7E and c not in ",=" for c in value)


def _check_tracestate(ts: str) -> None:
    n = 0
    for member in ts.split(","):
        m = member.strip(" \t")
        if m == "":
            continue
        n += 1
        if n > 32:
            raise _trace_invalid("tracestate", ts, "more than 32 members")
        eq = m.find("=")
        if eq < 0 or not _valid_key(m[:eq]) or not _valid_value(m[eq + 1:]):
            raise _trace_invalid(
                "tracestate", ts,
                "member “%s” is not key=value (a key of lower-case letters, "
                "digits and _-*/, optionally tenant@system; a value of "
                "printable ASCII without , and =)" % m[:80])


def check_trace_context(headers: Mapping[str, str]) -> None:
    tp = headers.get("traceparent")
    ts = headers.get("tracestate")
    if tp is not None:
        _check_traceparent(tp)
    if ts is None:
        return
    if tp is None:
        raise InvalidInput(
            "header tracestate without a traceparent: a trace state belongs "
            "to the trace a traceparent names; set both, or neither")
    _check_tracestate(ts)


def check_headers(headers: Any) -> Dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise InvalidInput("headers must be a mapping of str to str")
    if len(headers) > MAX_HEADERS:
        raise InvalidInput("headers: %d names, more than the limit of %d"
                           % (len(headers), MAX_HEADERS))
    out = {}
    for k, v in headers.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidInput("headers: names and values must be str")
        if _utf8(k) is None:
            raise InvalidInput("headers (a name): not valid UTF-8 (or holds "
                               "a NUL byte)")
        if _utf8(v) is None:
            raise InvalidInput("headers (a value): not valid UTF-8 (or holds "
                               "a NUL byte)")
        out[k] = v
    check_trace_context(out)
    return out


# ---- Options --------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Options:
    """Per-message options (PROTOCOL.md, `opts`); None leaves a setting to
    the task's registration, the worker, then Sluice's default."""

    max_attempts: Optional[int] = None
    initial_backoff_ms: Optional[int] = None
    multiplier: Optional[float] = None
    max_backoff_ms: Optional[int] = None
    jitter: Optional[bool] = None
    timeout_ms: Optional[int] = None
    expires_at: Optional[int] = None
    store_result: Optional[bool] = None
    result_ttl_ms: Optional[int] = None
    dead_letter: Optional[bool] = None


_OPTION_NAMES = [f.name for f in dataclasses.fields(Options)]
# What the C library knows; anything else is a newer producer's key, which
# a re-encoding carries through (PROTOCOL.md, "Keys this build does not
# know").
_KNOWN_KEYS = frozenset(("v", "id", "task", "queue", "args", "attempt",
                         "enqueued_at", "eta", "opts", "unknown_since",
                         "history", "headers", "wf", "snz", "uq",
                         "seal"))
_KNOWN_OPTIONS = frozenset(_OPTION_NAMES + ["hard_timeout_ms"])


def _int(field: str, value: Any, low: int, high: int = INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput("%s: must be an integer, not %r" % (field, value))
    if value < low or value > high:
        raise InvalidInput("%s: must be in [%d, %d], found %d"
                           % (field, low, high, value))
    return value


def _bool(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput("%s: must be a bool, not %r" % (field, value))
    return value


def check_options(options: Any) -> Options:
    """Options from an Options, a mapping of its field names, or None."""
    if options is None:
        return Options()
    if isinstance(options, Mapping):
        unknown = set(options) - set(_OPTION_NAMES)
        if unknown:
            raise InvalidInput("unknown option(s) %s; known: %s"
                               % (", ".join(sorted(map(str, unknown))),
                                  ", ".join(_OPTION_NAMES)))
        options = Options(**options)
    if not isinstance(options, Options):
        raise InvalidInput("options must be a sluice.Options or a dict")
    o = options
    if o.max_attempts is not None:
        if o.max_attempts == 0 and not isinstance(o.max_attempts, bool):
            raise InvalidInput("opts: max_attempts must be at least 1 (or "
                               "None to leave it to the level below)")
        _int("opts.max_attempts", o.max_attempts, 1, INT32_MAX)
    for f in ("initial_backoff_ms", "max_backoff_ms", "timeout_ms",
              "expires_at", "result_ttl_ms"):
        if getattr(o, f) is not None:
            _int("opts." + f, getattr(o, f), 0)
    if o.multiplier is not None:
        m = o.multiplier
        if isinstance(m, bool) or not isinstance(m, (int, float)):
            raise InvalidInput("opts.multiplier: must be a number")
        if not math.isfinite(m) or m < 0:
            raise InvalidInput("opts.multiplier: must be a finite number "
                               ">= 0, found %r" % m)
    for f in ("jitter", "store_result", "dead_letter"):
        if getattr(o, f) is not None:
            _bool("opts." + f, getattr(o, f))
    return o


# ---- Encoding ---------------------------------------------------------------


def _packer() -> msgpack.Packer:
    return msgpack.Packer(use_bin_type=True, autoreset=True)


def _walk_args(value: Any) -> int:
    """Checks args as the C encoder does (nesting, unpacking cost) and
    returns how many msgpack values they are."""
    count = 0
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        count += 1
        if isinstance(v, (list, tuple, dict)):
            if depth > MAX_ARGS_DEPTH:
                raise InvalidInput(
                    "args: nested deeper than %d levels, the limit (workers "
                    "decode messages nested at most %d deep, the envelope "
                    "taking one level)" % (MAX_ARGS_DEPTH, MAX_ARGS_DEPTH + 1))
            if isinstance(v, dict):
                for k, x in v.items():
                    stack.append((k, depth + 1))
                    stack.append((x, depth + 1))
            else:
                stack.extend((x, depth + 1) for x in v)
    return count


def pack_args(args: Any) -> bytes:
    """The msgpack bytes of args (b"" for None, which is left out)."""
    if args is None:
        return b""
    n_values = _walk_args(args)
    try:
        data = _packer().pack(args)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidInput("args cannot be encoded as msgpack: %s" % e)
    cost = (n_values - 1) * UNPACKED_VALUE_BYTES
    if cost > ARGS_COST_FACTOR * len(data) + ARGS_COST_BASE:
        raise TooLarge(
            "args: %d values in %d bytes would take %d bytes once unpacked "
            "(24 bytes per value), more than %d times their size plus %d "
            "KiB; pack dense data as bytes (bin) instead"
            % (n_values, len(data), cost, ARGS_COST_FACTOR,
               ARGS_COST_BASE // 1024))
    return data


def encode_envelope(id: str, task: str, queue: str, args: bytes = b"",
                    attempt: int = 1, enqueued_at: int = 0, eta: int = 0,
                    opts: Options = Options(),
                    headers: Optional[Mapping[str, str]] = None,
                    unknown_since: int = 0,
                    history: Optional[List[str]] = None,
                    unknown: Optional[List[bytes]] = None,
                    unknown_opts: Optional[List[bytes]] = None,
                    seal_label: Optional[str] = None) -> bytes:
    """The envelope as the C library encodes it: keys in PROTOCOL.md's
    order, optional ones only when set, headers sorted by name, the
    smallest encoding of every value. args: already msgpack (pack_args).
    unknown, unknown_opts: the msgpack key/value pairs of the keys this
    build does not know, written after the known ones as they came.
    seal_label: "ALGORITHM:KEY-ID" when args are sealed (one msgpack bin):
    then version 2, and `seal` after the other known keys."""
    unknown = unknown or []
    unknown_opts = unknown_opts or []
    pk = _packer()
    if args == b"\xc0":
        args = b""
    o = opts
    opt_items = []
    if o.max_attempts is not None and o.max_attempts >= 0:
        opt_items.append(("max_attempts", o.max_attempts))
    if o.initial_backoff_ms is not None and o.initial_backoff_ms >= 0:
        opt_items.append(("initial_backoff_ms", o.initial_backoff_ms))
    # 0 is "unset" on the wire (PROTOCOL.md): never written, as in C.
    if o.multiplier is not None and o.multiplier > 0:
        opt_items.append(("multiplier", float(o.multiplier)))
    if o.max_backoff_ms is not None and o.max_backoff_ms >= 0:
        opt_items.append(("max_backoff_ms", o.max_backoff_ms))
    if o.jitter is not None:
        opt_items.append(("jitter", o.jitter))
    if o.timeout_ms:
        opt_items.append(("timeout_ms", o.timeout_ms))
    if o.expires_at:
        opt_items.append(("expires_at", o.expires_at))
    if o.store_result is not None:
        opt_items.append(("store_result", o.store_result))
    if o.result_ttl_ms:
        opt_items.append(("result_ttl_ms", o.result_ttl_ms))
    if o.dead_letter is not None:
        opt_items.append(("dead_letter", o.dead_letter))
    names = sorted(headers or {}, key=lambda k: k.encode("utf-8"))

    parts = [pk.pack("v"), pk.pack(1 if seal_label is None else 2),
             pk.pack("id"), pk.pack(id),
             pk.pack("task"), pk.pack(task), pk.pack("queue"), pk.pack(queue)]
    if args:
        parts += [pk.pack("args"), args]
    parts += [pk.pack("attempt"), pk.pack(attempt)]
    if enqueued_at > 0:
        parts += [pk.pack("enqueued_at"), pk.pack(enqueued_at)]
    if eta > 0:
        parts += [pk.pack("eta"), pk.pack(eta)]
    if opt_items or unknown_opts:
        parts += [pk.pack("opts"),
                  pk.pack_map_header(len(opt_items) + len(unknown_opts))]
        for k, v in opt_items:
            parts += [pk.pack(k), pk.pack(v)]
        parts += unknown_opts
    if unknown_since > 0:
        parts += [pk.pack("unknown_since"), pk.pack(unknown_since)]
    if history:
        parts += [pk.pack("history"), pk.pack(list(history))]
    if names:
        parts += [pk.pack("headers"), pk.pack_map_header(len(names))]
        for k in names:
            parts += [pk.pack(k), pk.pack(headers[k])]
    if seal_label is not None:
        parts += [pk.pack("seal"), pk.pack(seal_label)]
    parts += unknown
    n_keys = (5 + bool(args) + (enqueued_at > 0) + (eta > 0)
              + bool(opt_items or unknown_opts) + (unknown_since > 0)
              + bool(history) + bool(names) + (seal_label is not None)
              + len(unknown))
    return pk.pack_map_header(n_keys) + b"".join(parts)


def _carried(name: Any) -> bool:
    """A key the C library carries: UTF-8 text without U+0000."""
    return isinstance(name, str) and name != "" and "\x00" not in name


_JSON_WS = b" \t\r\n"
HISTORY_MAX_LINES = 10


def _json_object(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    if len({k for k, _ in pairs}) != len(pairs):
        raise ValueError("a key given twice")
    return dict(pairs)


def _json_constant(name: str) -> Any:
    raise ValueError("%s is not JSON" % name)


def _json_args(v: Any) -> Any:
    """PROTOCOL.md's JSON form of args as the value msgpack packs to the
    bytes Sluice converts it to ({"$bin": base64} is a bin)."""
    if isinstance(v, dict):
        if list(v) == ["$bin"] and isinstance(v["$bin"], str):
            return base64.b64decode(v["$bin"], validate=True)
        return {_json_text(k): _json_args(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_args(x) for x in v]
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int) and not -2**63 <= v <= INT64_MAX:
        raise ValueError("an integer beyond 64 bits")
    if isinstance(v, float) and not math.isfinite(v):
        raise ValueError("not a finite number")
    if isinstance(v, str):
        return _json_text(v)
    return v


def _json_text(s: str) -> str:
    if _utf8(s) is None:
        raise ValueError("a string that is not UTF-8 or holds U+0000")
    return s


def _decode_json_envelope(data: bytes) -> Dict[str, Any]:
    env = json.loads(data.decode("utf-8"), object_pairs_hook=_json_object,
                     parse_constant=_json_constant)
    if not isinstance(env, dict):
        raise ValueError("not an object")
    if "args" in env:
        env["args"] = _packer().pack(_json_args(env["args"]))
    for k, v in env.items():
        if isinstance(v, str):
            _json_text(v)
    # Converted to msgpack as args are, as the C decoder keeps them.
    pk = _packer()
    env["__unknown__"] = [pk.pack(k) + pk.pack(_json_args(v))
                          for k, v in env.items()
                          if k not in _KNOWN_KEYS and not k.startswith("__")
                          and _carried(k)]
    if isinstance(env.get("opts"), dict):
        env["__unknown_opts__"] = [
            pk.pack(k) + pk.pack(_json_args(v))
            for k, v in env["opts"].items()
            if k not in _KNOWN_OPTIONS and _carried(k)]
    return env


def _decode_msgpack_envelope(data: bytes) -> Dict[str, Any]:
    up = msgpack.Unpacker(raw=False, strict_map_key=False)
    up.feed(data)
    n = up.read_map_header()
    env: Dict[str, Any] = {}
    unknown: List[bytes] = []
    seen = set()
    for _ in range(n):
        pair = up.tell()
        key = up.unpack()
        if key == "args":
            # Kept as its bytes, as the C decoder keeps a slice.
            start = up.tell()
            up.skip()
            env["args"] = bytes(data[start:up.tell()])
        elif key == "opts":
            env["opts"], env["__unknown_opts__"] = _read_opts(up, data)
        elif not isinstance(key, str):
            raise ValueError("envelope keys are strings")
        elif key not in _KNOWN_KEYS:
            # A newer producer's key: its bytes, carried as they came;
            # only the first of a repeated one, as in C.
            up.skip()
            if _carried(key) and key not in seen:
                unknown.append(bytes(data[pair:up.tell()]))
            seen.add(key)
        elif key in env and isinstance(key, str):
            raise ValueError("a key given twice")
        else:
            env[key] = up.unpack()
    env["__unknown__"] = unknown
    if up.tell() != len(data):
        raise ValueError("bytes after the envelope")
    return env


def _read_opts(up: Any, data: bytes) -> Tuple[Dict[str, Any], List[bytes]]:
    """`opts`, and the bytes of the options this build does not know."""
    opts: Dict[str, Any] = {}
    unknown: List[bytes] = []
    seen = set()
    for _ in range(up.read_map_header()):
        pair = up.tell()
        key = up.unpack()
        if not isinstance(key, str):
            raise ValueError("option keys are strings")
        if key in _KNOWN_OPTIONS:
            if key in opts:
                raise ValueError("a key given twice")
            opts[key] = up.unpack()
        else:
            up.skip()
            if _carried(key) and key not in seen:
                unknown.append(bytes(data[pair:up.tell()]))
            seen.add(key)
    return opts, unknown


def decode_envelope(data: bytes) -> Optional[Dict[str, Any]]:
    """The fields of an envelope, msgpack or JSON (told apart by the first
    byte, as workers do), `args` as msgpack bytes (with `seal`: the bin of
    the sealed args), or None when it is not one (a worker buries such a
    message `malformed`). history keeps its newest 10 lines, as the C
    decoder does."""
    try:
        if data.lstrip(_JSON_WS)[:1] == b"{":
            env = _decode_json_envelope(data)
        else:
            env = _decode_msgpack_envelope(data)
        for k in ("id", "task", "queue"):
            if not isinstance(env.get(k), str):
                return None
        if type(env.get("attempt")) is not int or \
                env.get("v") not in (1, 2) or type(env.get("v")) is not int:
            return None
        # Sealed args (PROTOCOL.md): version 2, a well-formed label, and
        # one bin of at least a nonce and a tag. One form per message:
        # version 2 without `seal` is refused, as the C decoder does.
        if env["v"] == 2 and "seal" not in env:
            return None
        if "seal" in env:
            if env["v"] != 2 or not seal.valid_label(env["seal"]) or \
                    seal.bin_body(env.get("args", b"")) is None:
                return None
        if isinstance(env.get("history"), list):
            env["history"] = env["history"][-HISTORY_MAX_LINES:]
        return env
    except (ValueError, TypeError, UnicodeDecodeError, binascii.Error,
            msgpack.UnpackException, msgpack.OutOfData):
        return None


# ---- Result records ---------------------------------------------------------

@dataclasses.dataclass
class Result:
    """A task's result record (PROTOCOL.md, "The result record")."""

    id: str
    state: str
    task: Optional[str] = None
    queue: Optional[str] = None
    attempt: int = 0
    value: Any = None
    has_value: bool = False
    error: Optional[str] = None
    dead_letter_reason: Optional[str] = None
    worker: Optional[str] = None
    enqueued_at: int = 0
    started_at: int = 0
    finished_at: int = 0
    due_at: int = 0
    # "aes-256-gcm:KEY-ID" while the value is sealed and could not be
    # opened (inspect without the key): value is then None.
    seal: Optional[str] = None
    _sealed: bytes = dataclasses.field(default=b"", repr=False,
                                       compare=False)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def encrypted_with(self) -> Optional[str]:
        """The id of the key the value is still sealed with, or None."""
        return None if self.seal is None else seal.key_id_of(self.seal)


_RECORD_KEYS = ("v", "id", "state", "task", "queue", "attempt", "value",
                "error", "dlq_reason", "worker", "enqueued_at", "started_at",
                "finished_at")
# The Result attribute of a wire key, where they differ: the API says
# dead_letter_reason everywhere (C, the command's JSON, Node's
# deadLetterReason); the record's wire key stays dlq_reason (PROTOCOL.md).
_RECORD_ATTRS = {"dlq_reason": "dead_letter_reason"}


def encode_record(r: Result) -> bytes:
    """A record as sluice_result_encode() writes it."""
    pk = _packer()
    parts = [pk.pack("v"), pk.pack(1)]
    for k in _RECORD_KEYS[1:]:
        if k == "attempt":
            if r.attempt > 0:
                parts += [pk.pack(k), pk.pack(r.attempt)]
        elif k == "value":
            if r.has_value:
                parts += [pk.pack(k), pk.pack(r.value)]
        elif k in ("enqueued_at", "started_at", "finished_at"):
            if getattr(r, k) > 0:
                parts += [pk.pack(k), pk.pack(getattr(r, k))]
        elif getattr(r, _RECORD_ATTRS.get(k, k)) is not None:
            parts += [pk.pack(k), pk.pack(getattr(r, _RECORD_ATTRS.get(k, k)))]
    return pk.pack_map_header(len(parts) // 2) + b"".join(parts)


def decode_record(data: bytes, id: str) -> Result:
    try:
        m = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types
        raise MalformedReply("the record of task %s cannot be read: %s"
                             % (id, e))
    if (not isinstance(m, dict) or m.get("v") not in (1, 2)
            or type(m.get("v")) is not int
            or not isinstance(m.get("id"), str)
            or not isinstance(m.get("state"), str)):
        raise MalformedReply("the record of task %s is not a Sluice result "
                             "record (format version 1 or 2)" % id)
    # A sealed value (version 2): one bin of at least a nonce and a tag.
    label = m.get("seal")
    if "seal" in m and (m["v"] != 2 or not seal.valid_label(label)
                        or not isinstance(m.get("value"), bytes)
                        or len(m["value"]) < seal.OVERHEAD):
        raise MalformedReply("the record of task %s has a malformed seal "
                             "(version 2, “ALGORITHM:KEY-ID”, a value of at "
                             "least %d bytes)" % (id, seal.OVERHEAD))
    r = Result(id=m["id"], state=m["state"] if m["state"] in STATES
               else "unknown")
    for k in ("task", "queue", "error", "dlq_reason", "worker"):
        if isinstance(m.get(k), str):
            setattr(r, _RECORD_ATTRS.get(k, k), m[k])
    for k in ("attempt", "enqueued_at", "started_at", "finished_at"):
        if isinstance(m.get(k), int):
            setattr(r, k, m[k])
    if "value" in m:
        r.value, r.has_value = m["value"], True
    if label is not None:
        r.seal, r._sealed, r.value = label, r.value, None
    return r


def open_result(r: Result, keyring: Optional[seal.Keyring]) -> Result:
    """Opens @r's sealed value in place with @keyring; raises SealError
    (the value stays sealed). A value in clear is left as it is."""
    if r.seal is None:
        return r
    try:
        plain = seal.open_sealed(
            keyring, seal.RESULT, r.seal, r.id, r.task, r.queue,
            seal.bin_header(len(r._sealed)) + r._sealed)
    except SealError as e:
        key_id = seal.key_id_of(r.seal)
        if r.seal.startswith(seal.ALGORITHM + ":") and (
                keyring is None or not keyring.has_key(key_id)):
            raise SealError("the result of task %s is encrypted with key %s: "
                            "give the client the keyring" % (r.id, key_id)) \
                from None
        raise SealError("the result of task %s is sealed: %s" % (r.id, e)) \
            from None
    try:
        r.value = msgpack.unpackb(plain, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several unrelated types
        raise MalformedReply("the opened result of task %s cannot be read: "
                             "%s" % (r.id, e)) from None
    r.seal, r._sealed = None, b""
    return r


# ---- Scripts ----------------------------------------------------------------

_LUA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lua")


def _lua(name: str) -> bytes:
    with open(os.path.join(_LUA_DIR, name), "rb") as f:
        return f.read()


class Script:
    """One script as the C broker assembles it (brokers/redis/
    redis-scripts.h): the step file's shebang line, prelude, hooks, the
    mode's transport, library, then the rest of the step file (a bare one,
    whose second line starts "-- bare:": the shebang line, prelude, then
    the rest)."""

    def __init__(self, mode: str, name: str):
        source = _lua(name + ".lua")
        nl = source.index(b"\n") + 1
        self.name = name
        if source[nl:].startswith(b"-- bare:"):
            # Its second line says it needs the prelude alone.
            self.text = source[:nl] + _lua("prelude.lua") + source[nl:]
        else:
            self.text = (source[:nl] + _lua("prelude.lua") + _lua("hooks.lua")
                         + _lua("transport-%s.lua" % mode)
                         + _lua("library.lua") + source[nl:])
        self.sha = hashlib.sha1(self.text).hexdigest()


# The scripts a producer calls.
PRODUCER_SCRIPTS = ("enqueue", "cancel_scheduled", "revoke", "lookup_task",
                    "dlq_replay")


def scripts_for(mode: str) -> Dict[str, Script]:
    return {n: Script(mode, n) for n in PRODUCER_SCRIPTS}


# ---- What a namespace records ({ns}:meta) ----------------------------------

# The version of the key layout these scripts use (SLUICE_REDIS_LAYOUT_VERSION
# of brokers/redis/redis-keys.h); a namespace of a newer one is refused.
LAYOUT_VERSION = 1

# The fields of {ns}:meta a client reads on every new connection, in order.
META_FIELDS = ("mode", "layout", "scripts")


def _script_set() -> Tuple[int, str]:
    """The version lua/VERSION gives the script set, and the SHA-1 of the
    .lua files this package ships: every file in byte order of its path,
    as path NUL length NUL bytes (PROTOCOL.md, "Versions of a namespace")."""
    version = 0
    for line in _lua("VERSION").decode().splitlines():
        if line.startswith("version "):
            version = int(line.split()[1])
    paths = []
    for root, _, files in os.walk(_LUA_DIR):
        for f in files:
            if f.endswith(".lua"):
                paths.append(os.path.relpath(os.path.join(root, f), _LUA_DIR)
                             .replace(os.sep, "/"))
    h = hashlib.sha1()
    for path in sorted(paths, key=lambda s: s.encode()):
        data = _lua(path)
        h.update(path.encode() + b"\0" + str(len(data)).encode() + b"\0"
                 + data)
    return version, h.hexdigest()


SCRIPTS_VERSION, SCRIPTS_SHA1 = _script_set()
# As {ns}:meta's field scripts holds it.
SCRIPTS = "%d:%s" % (SCRIPTS_VERSION, SCRIPTS_SHA1)


def meta_writes(meta: str, mode: str,
                fields: List[Optional[bytes]]) -> List[Tuple[str, ...]]:
    """What to record in @meta given the META_FIELDS read from it, as the C
    client does (brokers/redis/redis-broker.c): a new namespace gets the
    layout version, the script set and the mode, in that order with
    HSETNX (so a client that reads a mode reads the layout written before
    it); one with a mode and no layout was made before layouts were
    recorded and is version 1. Only what is read back afterwards decides
    (a read-only user's writes are refused)."""
    recorded_mode, layout, scripts = fields
    if recorded_mode is None:
        return [("HSETNX", meta, "layout", str(LAYOUT_VERSION)),
                ("HSETNX", meta, "scripts", SCRIPTS),
                ("HSETNX", meta, "mode", mode)]
    if layout is None or scripts is None:
        return [("HSETNX", meta, "layout", "1"),
                ("HSETNX", meta, "scripts", SCRIPTS)]
    return []


def check_meta(settings: "Settings", fields: List[Optional[bytes]],
               checking: bool = False) -> Tuple[List[Tuple[str, ...]],
                                                Optional[str]]:
    """Refuses a namespace of the other mode (WrongMode), of a newer
    layout, or whose script set has this client's version and other bytes
    (WrongVersion). Returns what to write after (a newer client records
    its set) and a warning to give once (a namespace with newer clients),
    or None. With @checking, only the mode and the layout: what is checked
    before anything is written."""
    recorded_mode, layout, scripts = fields
    ns, mode = settings.namespace, settings.mode
    if recorded_mode is not None and recorded_mode != mode.encode():
        theirs = recorded_mode.decode("utf-8", "replace")
        raise WrongMode(
            "the namespace “%s” is used in %s mode, but this client is set "
            "up for %s mode: producers, workers and commands of one "
            "namespace must use the same mode; pass mode=%r, or use another "
            "namespace" % (ns, theirs, mode, theirs))
    if layout is not None:
        text = layout.decode("utf-8", "replace")
        if not text.isdigit() or int(text) < 1:
            raise WrongVersion(
                "%smeta records layout “%s”, which is not a layout version: "
                "it was written by hand, or not by Sluice"
                % (settings.prefix, text))
        if int(text) > LAYOUT_VERSION:
            raise WrongVersion(
                "the namespace “%s” has layout version %s, newer than this "
                "program's (%d): upgrade this program (the sluice package) "
                "to the Sluice that migrated it, or a later one"
                % (ns, text, LAYOUT_VERSION))
    if checking or scripts is None:
        return [], None
    text = scripts.decode("utf-8", "replace")
    version, _, sha1 = text.partition(":")
    if not version.isdigit() or int(version) < 1 or len(sha1) != 40:
        raise WrongVersion(
            "%smeta records scripts “%s”, which is not a script set "
            "(VERSION:SHA1): delete the field (HDEL %smeta scripts) and the "
            "next client records its own"
            % (settings.prefix, text, settings.prefix))
    if int(version) == SCRIPTS_VERSION and sha1 != SCRIPTS_SHA1:
        raise WrongVersion(
            "the namespace “%s” runs script set %d with SHA-1 %s, but this "
            "client's set %d has SHA-1 %s: one of them runs scripts that "
            "differ from its release's; install every client from released "
            "Sluice packages" % (ns, SCRIPTS_VERSION, sha1, SCRIPTS_VERSION,
                                 SCRIPTS_SHA1))
    if int(version) < SCRIPTS_VERSION:
        return [("HSET", settings.prefix + "meta", "scripts", SCRIPTS)], None
    if int(version) > SCRIPTS_VERSION:
        return [], ("the namespace “%s” has clients of a newer script set "
                    "(%s) than this one's (%d): upgrade this program when "
                    "you can" % (ns, version, SCRIPTS_VERSION))
    return [], None


# ---- Requests ---------------------------------------------------------------


@dataclasses.dataclass
class Request:
    """One message of a batch: the arguments of Client.enqueue()."""

    task: str
    args: Any = None
    queue: Optional[str] = None
    id: Optional[str] = None
    delay_ms: int = 0
    eta_ms: int = 0
    headers: Optional[Mapping[str, str]] = None
    options: Any = None


@dataclasses.dataclass
class Prepared:
    id: str
    queue: str
    payload: bytes
    due: int
    dedup: bool
    record: bytes  # with its flag byte, or b""
    record_ttl_ms: int


@dataclasses.dataclass
class Settings:
    """A client's settings (the fields of SluiceClientOptions)."""

    namespace: str = "sluice"
    # The C library's and the command's default: a producer that reaches a
    # fresh namespace first records its mode, and every worker of another
    # mode is then refused.
    mode: str = "reliable"
    track_state: bool = False
    result_ttl_ms: int = DEFAULT_RESULT_TTL_MS
    revoke_ttl_ms: int = DEFAULT_REVOKE_TTL_MS
    dedup_ttl_ms: int = DEFAULT_DEDUP_TTL_MS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    result_poll_interval_ms: int = SAFETY_POLL_MS
    # A sluice.Keyring, or the path of a keyring file: every message is
    # sealed with it, and sealed results are opened (sluice/seal.py).
    keyring: Any = None

    def __post_init__(self):
        self.keyring = seal.as_keyring(self.keyring)
        check_namespace(self.namespace)
        if self.mode not in MODES:
            raise InvalidInput("mode must be “fast” or “reliable”, not %r"
                               % (self.mode,))
        for f in ("result_ttl_ms", "revoke_ttl_ms", "dedup_ttl_ms",
                  "max_message_bytes", "result_poll_interval_ms"):
            _int(f, getattr(self, f), 1)

    @property
    def prefix(self) -> str:
        return "{%s}:" % self.namespace


def new_id() -> str:
    return str(uuid.uuid4())


def prepare(s: Settings, r: Request, now: int) -> Prepared:
    """The checks and encoding of sluice_client_enqueue(), in its order."""
    check_name("task", r.task)
    queue = DEFAULT_QUEUE if r.queue is None else r.queue
    check_name("queue", queue)
    if r.id is not None:
        check_name("id", r.id)
    for f in ("delay_ms", "eta_ms"):
        v = getattr(r, f)
        if isinstance(v, bool) or not isinstance(v, int) or v > INT64_MAX:
            raise InvalidInput("%s must be an integer" % f)
    if r.delay_ms < 0 or r.eta_ms < 0:
        raise InvalidInput("delay_ms and eta_ms cannot be negative")
    headers = check_headers(r.headers)
    opts = check_options(r.options)
    args = pack_args(r.args)
    id = r.id if r.id is not None else new_id()
    eta = (r.eta_ms if r.eta_ms > 0
           else now + r.delay_ms if r.delay_ms > 0 else 0)
    if eta <= now:
        eta = 0  # an ETA in the past is simply due
    label = None
    if s.keyring is not None:
        # Everything is sealed, nil args included: the worker seals the
        # result of a sealed message only, and this client can open it.
        args, label = s.keyring.seal(seal.ARGS, id, r.task, queue,
                                     args or b"\xc0")
    payload = encode_envelope(id, r.task, queue, args, 1, now, eta, opts,
                              headers, seal_label=label)
    if len(payload) > s.max_message_bytes:
        raise TooLarge(
            "cannot enqueue “%s”: the message is %d bytes, over the limit of "
            "%d (max_message_bytes); keep large data elsewhere and pass a "
            "reference to it" % (r.task, len(payload), s.max_message_bytes))
    record = b""
    if s.track_state:
        record = b"P" + encode_record(Result(
            id=id, state="scheduled" if eta > 0 else "queued", task=r.task,
            queue=queue, enqueued_at=now))
    ttl = opts.result_ttl_ms if opts.result_ttl_ms else s.result_ttl_ms
    return Prepared(id, queue, payload, eta, r.id is not None, record, ttl)


def as_request(item: Any) -> Request:
    if isinstance(item, Request):
        return item
    if isinstance(item, Mapping):
        try:
            return Request(**item)
        except TypeError as e:
            raise InvalidInput("a request of the batch: %s" % e)
    raise InvalidInput("a batch holds sluice.Request objects or dicts")


def enqueue_argv(s: Settings, items: List[Prepared]) -> List[bytes]:
    """ARGV of enqueue.lua: token, the distinct queues, then the items."""
    queues: List[str] = []
    for p in items:
        if p.queue not in queues:
            queues.append(p.queue)
    argv: List[Any] = [uuid.uuid4().hex, len(queues)] + queues
    for p in items:
        if p.due <= 0 and not p.dedup and not p.record:
            argv += ["r", p.queue, p.payload]
        else:
            argv += ["s", p.id, p.queue, p.payload, p.due,
                     s.dedup_ttl_ms if p.dedup else 0, p.record,
                     p.record_ttl_ms]
    return argv


def enqueue_reply(reply: Any, n: int) -> List[bool]:
    """Whether each item's id was claimed already (nothing written)."""
    if not isinstance(reply, bytes) or len(reply) != n or \
            any(c not in b"01" for c in reply):
        raise MalformedReply("enqueue: Redis answered %r, not one 0/1 per "
                             "message" % (reply,))
    return [c == ord("1") for c in reply]


def int_reply(what: str, reply: Any) -> int:
    if isinstance(reply, bool) or not isinstance(reply, int):
        raise MalformedReply("%s: Redis answered %r, not an integer"
                             % (what, reply))
    return reply


def pair_reply(what: str, reply: Any) -> Tuple[int, int]:
    if not isinstance(reply, list) or len(reply) != 2:
        raise MalformedReply("%s: Redis answered %r, not a pair" % (what,
                                                                    reply))
    return int_reply(what, reply[0]), int_reply(what, reply[1])


def cancel_record(id: str, now: int) -> bytes:
    return b"F" + encode_record(Result(id=id, state="cancelled",
                                       error="cancelled before it ran",
                                       finished_at=now))


def split_record(data: Optional[bytes]) -> Tuple[Optional[bytes], bool]:
    """The record bytes and whether they are final (flag byte F)."""
    if data is None:
        return None, False
    if data[:1] in (b"F", b"P"):
        return data[1:], data[:1] == b"F"
    return data, False


# ---- Dead letters -----------------------------------------------------------


@dataclasses.dataclass
class DeadLetter:
    """An entry of the dead-letter stream (PROTOCOL.md, {ns}:dlq)."""

    entry_id: str
    payload: bytes = b""
    reason: Optional[str] = None
    source: Optional[str] = None
    deliveries: int = 0
    at: int = 0
    task_id: Optional[str] = None
    task: Optional[str] = None
    detail: Optional[str] = None
    # The message's args, decoded (opened with the client's keyring when
    # they are sealed); has_args False when it has none or they could not
    # be read or opened.
    args: Any = None
    has_args: bool = False
    # "aes-256-gcm:KEY-ID" when the message's args are sealed; args_error
    # says why they are not shown, e.g. "encrypted with key K: give the
    # client the keyring".
    seal: Optional[str] = None
    args_error: Optional[str] = None

    @property
    def encrypted_with(self) -> Optional[str]:
        """The id of the key the args are sealed with, or None."""
        return None if self.seal is None else seal.key_id_of(self.seal)


# Every reason the C library buries a message for, in its order: a copy of
# its one list, sluice_dead_letter_reasons() (sluice-brokers.h), which
# tests/test_encoding.py compares with the C build's (tests/c-oracle).
DEAD_LETTER_REASONS = ("max_attempts", "non_retryable", "malformed",
                       "unknown_task", "expired", "max_deliveries",
                       "snoozed_too_often")


def check_reason(reason: Optional[str]) -> None:
    """A dlq_list reason filter: None, or one of DEAD_LETTER_REASONS (as
    `sluice dlq list --reason` takes it)."""
    if reason is not None and reason not in DEAD_LETTER_REASONS:
        raise InvalidInput("unknown dead-letter reason %r; the reasons are %s"
                           % (reason, ", ".join(DEAD_LETTER_REASONS)))


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def dead_letter_from_entry(entry: Any,
                           keyring: Optional[seal.Keyring] = None
                           ) -> DeadLetter:
    if (not isinstance(entry, (list, tuple)) or len(entry) != 2
            or not isinstance(entry[0], bytes)):
        raise MalformedReply("dead letter: %r is not a stream entry"
                             % (entry,))
    fields = entry[1]
    if isinstance(fields, dict):
        pairs = list(fields.items())
    elif isinstance(fields, (list, tuple)):
        pairs = list(zip(fields[0::2], fields[1::2]))
    else:
        raise MalformedReply("dead letter: %r is not a stream entry"
                             % (entry,))
    dl = DeadLetter(entry_id=_text(entry[0]))
    for k, v in pairs:
        k = _text(k)
        if k == "payload":
            dl.payload = v
        elif k in ("reason", "source", "task_id", "task", "detail"):
            setattr(dl, k, _text(v))
        elif k in ("deliveries", "at"):
            try:
                setattr(dl, k, int(v))
            except ValueError:
                pass
    _read_dead_letter_args(dl, keyring)
    return dl


def _read_dead_letter_args(dl: DeadLetter,
                           keyring: Optional[seal.Keyring]) -> None:
    env = decode_envelope(dl.payload) if isinstance(dl.payload, bytes) \
        else None
    if env is None:
        return
    data = env.get("args", b"")
    if "seal" in env:
        dl.seal = env["seal"]
        key_id = seal.key_id_of(dl.seal)
        if dl.seal.startswith(seal.ALGORITHM + ":") and (
                keyring is None or not keyring.has_key(key_id)):
            dl.args_error = ("encrypted with key %s: give the client the "
                             "keyring" % key_id)
            return
        try:
            data = seal.open_sealed(keyring, seal.ARGS, dl.seal, env["id"],
                                    env["task"], env["queue"], data)
        except SealError as e:
            dl.args_error = str(e)
            return
    if data in (b"", b"\xc0"):
        return
    try:
        dl.args = msgpack.unpackb(data, raw=False, strict_map_key=False)
        dl.has_args = True
    except Exception as e:  # msgpack raises several unrelated types
        dl.args_error = "the args cannot be read: %s" % e


def valid_entry_id(entry_id: Any) -> bool:
    if not isinstance(entry_id, str):
        return False
    ms, dash, seq = entry_id.partition("-")
    return dash == "-" and ms.isdigit() and seq.isdigit() and \
        ms.isascii() and seq.isascii()


def replay_submit(s: Settings, dl: DeadLetter, keep_attempt: bool,
                  now: int) -> Prepared:
    """What sluice_client_dlq_replay() submits for a dead letter."""
    env = decode_envelope(dl.payload)
    if env is None:
        # A malformed message goes back byte for byte: maybe a newer
        # worker can read it.
        id = dl.task_id if dl.task_id else "replay:%s" % dl.entry_id
        return Prepared(id, dl.source or DEFAULT_QUEUE, dl.payload, 0, False,
                        b"", s.result_ttl_ms)
    try:
        # 0 is "unset" on the wire for these two (PROTOCOL.md).
        opts = check_options({
            k: (None if v == 0 and k in ("max_attempts", "multiplier") else v)
            for k, v in (env.get("opts") or {}).items() if k in _OPTION_NAMES})
        headers = check_headers(env.get("headers"))
        history = env.get("history") or []
        if not all(isinstance(h, str) for h in history):
            raise InvalidInput("history")
        payload = encode_envelope(
            env["id"], env["task"], env["queue"], env.get("args", b""),
            env["attempt"] if keep_attempt else 1, env.get("enqueued_at", 0),
            0, opts, headers, 0, history, env.get("__unknown__"),
            env.get("__unknown_opts__"), env.get("seal"))
    except (InvalidInput, TypeError, ValueError):
        id = dl.task_id if dl.task_id else "replay:%s" % dl.entry_id
        return Prepared(id, dl.source or DEFAULT_QUEUE, dl.payload, 0, False,
                        b"", s.result_ttl_ms)
    record = b"P" + encode_record(Result(id=env["id"], state="queued",
                                         task=env["task"], queue=env["queue"],
                                         enqueued_at=now))
    return Prepared(env["id"], env["queue"], payload, 0, False, record,
                    s.result_ttl_ms)


def replay_argv(entry_id: str, p: Prepared) -> List[Any]:
    return [entry_id, p.id, p.queue, p.payload, 0, 0, p.record,
            p.record_ttl_ms]


# ---- Inspect ----------------------------------------------------------------


def result_of_lookup(id: str, reply: Any) -> Optional[Result]:
    """What inspect says of a task lookup_task.lua found, without a record:
    {1, due, queue, payload} scheduled, {2, entry} dead, {0} nowhere."""
    if not isinstance(reply, list) or not reply:
        raise MalformedReply("lookup_task: Redis answered %r" % (reply,))
    place = int_reply("lookup_task", reply[0])
    if place == 0:
        return None
    if place == 1 and len(reply) == 4:
        due = int(float(reply[1]))
        env = decode_envelope(reply[3])
        if env is None:
            return Result(id=id, state="scheduled", queue=_text(reply[2]),
                          error="its message on the schedule cannot be "
                          "decoded; it is buried `malformed` when due",
                          due_at=due)
        r = Result(id=id, state="retrying" if env["attempt"] > 1
                   else "scheduled", task=env["task"], queue=env["queue"],
                   attempt=env["attempt"],
                   enqueued_at=env.get("enqueued_at", 0), due_at=due)
        if env.get("unknown_since"):
            r.error = ("deferred: no worker knows a task named “%s” (since "
                       "%s); it is buried unknown_task if none does by "
                       "unknown_task_timeout" % (env["task"],
                                                 _iso8601(env["unknown_since"])))
        elif env.get("history"):
            r.error = env["history"][-1]
        return r
    if place == 2 and len(reply) == 2:
        dl = dead_letter_from_entry(reply[1])
        env = decode_envelope(dl.payload)
        r = Result(id=id, state="dead_lettered", task=dl.task,
                   queue=dl.source, error=dl.detail,
                   dead_letter_reason=dl.reason)
        if env is not None:
            r.attempt = env["attempt"]
            r.enqueued_at = env.get("enqueued_at", 0)
            r.finished_at = dl.at
        return r
    raise MalformedReply("lookup_task: Redis answered %r" % (reply,))


def _iso8601(ms: Any) -> str:
    """As g_date_time_format_iso8601() writes a UTC time of whole seconds."""
    try:
        return datetime.datetime.fromtimestamp(
            int(ms) // 1000, datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
    except (TypeError, ValueError, OverflowError, OSError):
        return "an unknown time"


def due_of_lookup(reply: Any) -> int:
    if isinstance(reply, list) and len(reply) == 4 and reply[0] == 1:
        return int(float(reply[1]))
    return 0
