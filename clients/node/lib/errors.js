'use strict';
// The errors a Sluice producer raises; every one is a SluiceError whose
// message says what to do.

class SluiceError extends Error {
  constructor(message) {
    super(message);
    this.name = this.constructor.name;
  }
}
/** An argument the C client would refuse too; nothing was sent. */
class InvalidInputError extends SluiceError {}
/** The message is over maxMessageBytes, or its args too costly to unpack. */
class TooLargeError extends InvalidInputError {}
/** The namespace is used in the other mode (fast or reliable). */
class WrongModeError extends InvalidInputError {}
/** The namespace has a newer layout version than this client, or runs a
 * script set of this client's version with other bytes. */
class WrongVersionError extends SluiceError {}
/** Redis is out of memory (maxmemory, noeviction) and refuses new work. */
class FullError extends SluiceError {}
/** Redis cannot be reached, or the connection was lost. */
class UnavailableError extends SluiceError {}
/** Redis answered something no Sluice script or record looks like. */
class MalformedReplyError extends SluiceError {}
/** No such task record or dead letter. */
class NotFoundError extends SluiceError {}
/** getResult: the task did not finish in time. */
class SluiceTimeoutError extends SluiceError {}
/** A keyring file that cannot be used (unreadable, not a keyring, or
 * readable by other users); the message names the file and the line,
 * never a key. */
class KeyringError extends InvalidInputError {}
/** Sealed args or a sealed result this client cannot open: a key or
 * algorithm its keyring lacks, or a ciphertext (or the task it is bound
 * to) that was changed. */
class SealError extends SluiceError {}

module.exports = {
  SluiceError, InvalidInputError, TooLargeError, WrongModeError,
  WrongVersionError, FullError, UnavailableError, MalformedReplyError,
  NotFoundError, SluiceTimeoutError, KeyringError, SealError,
};
