"""Sealing: task arguments and results encrypted at rest (PROTOCOL.md,
"Keyrings" and "Sealed arguments"; the C library's sluice-seal.h).

A producer given a keyring seals the args of every message it sends with
the keyring's current key (AES-256-GCM, the task's id, name and queue bound
as associated data, so a ciphertext moved to another task does not open),
and opens the results a worker sealed with any key of the keyring. Names,
queues, ids, timings and headers stay readable.

    ring = sluice.Keyring.load("/etc/sluice/keyring")
    c = sluice.Client(url, keyring=ring)        # or keyring="/etc/..."

The key bytes never leave this module: no message, repr or str shows them.
"""

import base64
import binascii
import os
import re
from typing import Dict, Optional, Tuple

from .errors import KeyringError, SealError

ALGORITHM = "aes-256-gcm"
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
OVERHEAD = NONCE_BYTES + TAG_BYTES
MAX_KEY_ID_BYTES = 64

# What the associated data starts with: the same key seals both, and an
# args ciphertext must not open as a result, nor the other way round.
ARGS = b"sluice-args\0"
RESULT = b"sluice-result\0"

_ID = re.compile(r"[A-Za-z0-9._-]{1,%d}\Z" % MAX_KEY_ID_BYTES)
# ALGORITHM as a message's `seal` may name it (serializers/envelope-fields.c
# check_seal): letters, digits and "-", 1 to 32 bytes.
_ALG = re.compile(r"[A-Za-z0-9-]{1,32}\Z")
_WORDS = re.compile(r"[ \t]+")


def valid_key_id(s: object) -> bool:
    return isinstance(s, str) and _ID.match(s) is not None


def valid_label(label: object) -> bool:
    """Whether @label has the shape of a `seal` value, "ALGORITHM:KEY-ID"
    (the algorithm need not be one this build knows)."""
    if not isinstance(label, str):
        return False
    alg, colon, key_id = label.partition(":")
    return colon == ":" and _ALG.match(alg) is not None and \
        valid_key_id(key_id)


def key_id_of(label: str) -> str:
    """The key id a `seal` value names."""
    return label.partition(":")[2]


def _aesgcm(key: bytes):
    # Imported here: a client without a keyring does not need the package.
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError:  # pragma: no cover - the scripts check for it
        raise KeyringError("sealing needs the cryptography package: "
                           "apt-get install python3-cryptography (or pip "
                           "install cryptography)") from None
    return AESGCM(key)


def _decode_key(text: str) -> Optional[bytes]:
    """32 bytes from canonical standard base64 with its padding, or None."""
    if len(text) != 44:
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != KEY_BYTES or base64.b64encode(raw).decode() != text:
        return None
    return raw


def _under(path: str, directory: str) -> bool:
    real_path = os.path.realpath(path)
    real_dir = os.path.realpath(directory)
    return real_path.startswith(real_dir.rstrip("/") + "/")


def bin_header(n: int) -> bytes:
    """The smallest msgpack bin header for @n bytes."""
    if n < 1 << 8:
        return bytes((0xC4, n))
    if n < 1 << 16:
        return bytes((0xC5,)) + n.to_bytes(2, "big")
    return bytes((0xC6,)) + n.to_bytes(4, "big")


def bin_body(data: bytes) -> Optional[bytes]:
    """The bytes of the one msgpack bin @data is, when it is one of at least
    OVERHEAD bytes (nonce and tag); else None."""
    head = n = 0
    if len(data) >= 2 and data[0] == 0xC4:
        head, n = 2, data[1]
    elif len(data) >= 3 and data[0] == 0xC5:
        head, n = 3, int.from_bytes(data[1:3], "big")
    elif len(data) >= 5 and data[0] == 0xC6:
        head, n = 5, int.from_bytes(data[1:5], "big")
    if head == 0 or head + n != len(data) or n < OVERHEAD:
        return None
    return bytes(data[head:])


def associated_data(domain: bytes, id: Optional[str], task: Optional[str],
                    queue: Optional[str]) -> bytes:
    return (domain + (id or "").encode() + b"\0" + (task or "").encode()
            + b"\0" + (queue or "").encode())


class Keyring:
    """Named AES-256 keys, one of them current: the current key seals,
    every key opens. Load one with Keyring.load(path) (or from_text);
    the file format is PROTOCOL.md's "Keyrings"."""

    def __init__(self, keys: Dict[str, bytes], current: str):
        # Private: Keyring.load() and from_text() check what they build.
        self._keys = dict(keys)
        self._current = current

    @classmethod
    def load(cls, path: "os.PathLike[str] | str") -> "Keyring":
        """Reads and checks the whole file. A file that others than its
        owner can read or write (mode & 0o077) is refused, unless it lies
        under $CREDENTIALS_DIRECTORY (systemd's LoadCredential=). Raises
        KeyringError naming the file (and the line); never quotes a key."""
        path = os.fspath(path)
        try:
            st = os.stat(path)
        except OSError:
            st = None  # the read below says why it cannot be opened
        if st is not None and st.st_mode & 0o077:
            creds = os.environ.get("CREDENTIALS_DIRECTORY")
            if not (creds and _under(path, creds)):
                raise KeyringError(
                    "keyring %s can be read or written by other users (mode "
                    "%04o): run: chmod 600 %s (under systemd, hand it over "
                    "with LoadCredential=)" % (path, st.st_mode & 0o7777,
                                                path))
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise KeyringError("cannot read the keyring: %s: %s"
                               % (path, e.strerror or e)) from None
        return cls.from_text(data, path)

    @classmethod
    def from_text(cls, text: "bytes | str",
                  origin: str = "(in memory)") -> "Keyring":
        """The same as load() for a keyring held in memory (a test, a
        secret manager's answer); origin names it in error messages."""
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        if not isinstance(text, str) or "\0" in text:
            raise KeyringError(
                "keyring %s is not text: it is “key ID BASE64-KEY” and "
                "“current ID” lines" % origin)
        keys: Dict[str, bytes] = {}
        current = None

        def fail(line: int, why: str) -> KeyringError:
            return KeyringError("keyring %s, line %d: %s" % (origin, line, why))

        for n, line in enumerate(text.split("\n"), 1):
            line = line.strip(" \t\r\n\v\f")
            if line == "" or line.startswith("#"):
                continue
            words = _WORDS.split(line)
            if words[0] == "key":
                if len(words) != 3:
                    raise fail(n, "a key line is “key ID BASE64-KEY”")
                if not valid_key_id(words[1]):
                    raise fail(n, "a key id is 1 to 64 letters, digits, "
                               "“-”, “.” or “_”")
                if words[1] in keys:
                    raise fail(n, "this key id is given twice")
                key = _decode_key(words[2])
                if key is None:
                    raise fail(n, "a key is 32 random bytes in base64 (44 "
                               "characters): make one with sluice keys "
                               "rotate")
                keys[words[1]] = key
            elif words[0] == "current":
                if len(words) != 2:
                    raise fail(n, "a current line is “current ID”")
                if current is not None:
                    raise fail(n, "a second “current” line")
                current = words[1]
            else:
                raise fail(n, "a line is “key ID BASE64-KEY”, “current ID”, "
                           "a comment (#) or empty")
        if current is None:
            raise KeyringError("keyring %s has no “current ID” line: name "
                               "the key that seals" % origin)
        if current not in keys:
            raise KeyringError("keyring %s: the current key “%s” is not "
                               "among its keys" % (origin, current[:80]))
        return cls(keys, current)

    @property
    def current(self) -> str:
        """The id of the key that seals."""
        return self._current

    def key_ids(self):
        """The ids of every key, in the file's order."""
        return list(self._keys)

    def has_key(self, key_id: str) -> bool:
        return key_id in self._keys

    def __repr__(self) -> str:
        return "<sluice.Keyring current=%s keys=%d>" % (self._current,
                                                         len(self._keys))

    __str__ = __repr__

    def seal(self, domain: bytes, id: str, task: str, queue: str,
             plain: bytes) -> Tuple[bytes, str]:
        """@plain sealed with the current key and a new random nonce, as the
        msgpack bin that `args` (or a result's `value`) holds, and the
        label for `seal`. domain: ARGS or RESULT."""
        return self._seal(domain, id, task, queue, plain,
                          os.urandom(NONCE_BYTES))

    def _seal(self, domain: bytes, id: str, task: str, queue: str,
              plain: bytes, nonce: bytes) -> Tuple[bytes, str]:
        # The nonce is a parameter for the tests' fixed vector only: a
        # nonce used twice with one key gives the key away.
        assert len(nonce) == NONCE_BYTES
        body = nonce + _aesgcm(self._keys[self._current]).encrypt(
            nonce, bytes(plain), associated_data(domain, id, task, queue))
        return (bin_header(len(body)) + body,
                "%s:%s" % (ALGORITHM, self._current))


def open_sealed(keyring: Optional[Keyring], domain: bytes, label: str,
                id: Optional[str], task: Optional[str],
                queue: Optional[str], sealed: bytes) -> bytes:
    """The plaintext of @sealed (a msgpack bin: nonce, ciphertext, tag)
    that `seal` value @label names; raises SealError "cannot decrypt: ..."
    (an algorithm or key this keyring lacks, or a ciphertext, id, task or
    queue that was changed). keyring None: no keyring was given."""
    alg, _, key_id = label.partition(":")
    if alg != ALGORITHM:
        raise SealError("cannot decrypt: algorithm %s unknown (this build "
                        "seals and opens %s)" % (alg[:32], ALGORITHM))
    if keyring is None or not keyring.has_key(key_id):
        raise SealError("cannot decrypt: key %s unknown (%s)" % (
            key_id, "not in this program's keyring" if keyring is not None
            else "this program was given no keyring"))
    body = bin_body(sealed)
    if body is None:
        raise SealError("cannot decrypt: authentication failed (too short "
                        "to be sealed)")
    try:
        from cryptography.exceptions import InvalidTag
    except ImportError:  # pragma: no cover
        InvalidTag = Exception
    try:
        return _aesgcm(keyring._keys[key_id]).decrypt(
            body[:NONCE_BYTES], body[NONCE_BYTES:],
            associated_data(domain, id, task, queue))
    except InvalidTag:
        raise SealError("cannot decrypt: authentication failed (sealed with "
                        "key %s, but the ciphertext or the task's id, name "
                        "or queue was changed)" % key_id) from None


def as_keyring(value: object) -> Optional[Keyring]:
    """A client's keyring option: None, a Keyring, or a path to load."""
    if value is None or isinstance(value, Keyring):
        return value
    if isinstance(value, (str, bytes, os.PathLike)):
        return Keyring.load(os.fsdecode(value))
    raise KeyringError("keyring must be a path or a sluice.Keyring, not %s"
                       % type(value).__name__)
