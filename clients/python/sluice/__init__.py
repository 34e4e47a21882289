"""Sluice producers for Python: enqueue tasks for Sluice's C workers,
await, inspect and cancel them, list and replay dead letters.

sluice.Client is blocking; sluice.aio.Client is the same for asyncio. The
bytes they write are those of the C library (PROTOCOL.md), and the Redis
scripts they run are the files the C broker compiles in.
"""

from .client import Client
from .errors import (Full, InvalidInput, KeyringError, MalformedReply,
                     NotFound, SealError, SluiceError, Timeout, TooLarge,
                     Unavailable, WrongMode, WrongVersion)
from .protocol import (DEAD_LETTER_REASONS, DeadLetter, Options, Request,
                       Result)
from .seal import Keyring

__all__ = ["Client", "DEAD_LETTER_REASONS", "DeadLetter", "Full",
           "InvalidInput", "Keyring", "KeyringError", "MalformedReply",
           "NotFound", "Options", "Request", "Result", "SealError",
           "SluiceError",
           "Timeout", "TooLarge", "Unavailable", "WrongMode", "WrongVersion"]
__version__ = "0.1.0"
