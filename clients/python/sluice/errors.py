"""The errors a Sluice producer raises.

Every one derives from SluiceError; the message says what to do.
"""


class SluiceError(Exception):
    """Base of every error raised by this package."""


class InvalidInput(SluiceError, ValueError):
    """An argument the C client would refuse too (a name, a size, an
    option out of range); nothing was sent."""


class TooLarge(InvalidInput):
    """The message is larger than max_message_bytes, or its arguments
    would cost a worker too much to unpack."""


class WrongMode(InvalidInput):
    """The namespace is used in the other mode (fast or reliable)."""


class WrongVersion(SluiceError):
    """The namespace has a newer layout version than this client, or runs
    a script set of this client's version with other bytes: upgrade this
    client, or install it from a release."""


class Full(SluiceError):
    """Redis is out of memory (maxmemory with noeviction) and refuses new
    work; workers can still drain it."""


class Unavailable(SluiceError):
    """Redis cannot be reached, or the connection was lost."""


class MalformedReply(SluiceError):
    """Redis answered something no Sluice script or record looks like."""


class NotFound(SluiceError, LookupError):
    """No such task record or dead letter."""


class Timeout(SluiceError, TimeoutError):
    """get_result: the task did not finish in time."""


class KeyringError(InvalidInput):
    """A keyring file that cannot be used (unreadable, not a keyring, or
    readable by other users); the message names the file and the line,
    never a key."""


class SealError(SluiceError):
    """Sealed args or a sealed result that this client cannot open: a key
    or algorithm its keyring lacks, or a ciphertext (or the task it is
    bound to) that was changed."""
