// Types of sluice-client (index.js).
import type Redis from 'ioredis';

export type Mode = 'fast' | 'reliable';

export type TaskState =
  | 'queued' | 'scheduled' | 'running' | 'retrying'
  | 'succeeded' | 'failed' | 'dead_lettered' | 'cancelled' | 'unknown';

/** Settings of a client (SluiceClientOptions); every one optional. */
export interface ClientOptions {
  namespace?: string;
  /** "reliable" (the default, as in C and the sluice command) or "fast". */
  mode?: Mode;
  trackState?: boolean;
  resultTtlMs?: number;
  revokeTtlMs?: number;
  dedupTtlMs?: number;
  maxMessageBytes?: number;
  resultPollIntervalMs?: number;
  /** An ioredis client to use instead of the URL (not closed by close()). */
  redis?: Redis;
  /** A Keyring, or the path of a keyring file: every message's args are
   * sealed with its current key, and sealed results are opened. */
  keyring?: Keyring | string | null;
}

/** Named AES-256 keys, one current (seals), all open (PROTOCOL.md,
 * "Keyrings"). The key bytes are not reachable from outside. */
export class Keyring {
  private constructor();
  /** Throws KeyringError (file and line; never a key). A file readable
   * or writable by others is refused unless under $CREDENTIALS_DIRECTORY. */
  static load(path: string): Keyring;
  static fromText(text: string | Buffer, origin?: string): Keyring;
  /** The id of the key that seals. */
  readonly current: string;
  keyIds(): string[];
  hasKey(id: string): boolean;
}

/** Per-message options (PROTOCOL.md, opts); unset leaves each setting to
 * the task's registration, the worker, then Sluice's default. */
export interface MessageOptions {
  maxAttempts?: number;
  initialBackoffMs?: number;
  multiplier?: number;
  maxBackoffMs?: number;
  jitter?: boolean;
  timeoutMs?: number;
  expiresAt?: number;
  storeResult?: boolean;
  resultTtlMs?: number;
  deadLetter?: boolean;
}

export interface EnqueueOptions {
  queue?: string;
  /** A caller-chosen id: the enqueue is idempotent for dedupTtlMs. */
  id?: string;
  delayMs?: number;
  /** ms since the epoch; wins over delayMs. */
  etaMs?: number;
  headers?: Record<string, string>;
  options?: MessageOptions;
}

export interface EnqueueRequest extends EnqueueOptions {
  task: string;
  args?: unknown;
}

export interface Result {
  id: string;
  state: TaskState;
  final: boolean;
  task: string | null;
  queue: string | null;
  attempt: number;
  value: unknown;
  hasValue: boolean;
  error: string | null;
  deadLetterReason: string | null;
  worker: string | null;
  enqueuedAt: number;
  startedAt: number;
  finishedAt: number;
  dueAt: number;
  /** "aes-256-gcm:KEY-ID" while the value is sealed and was not opened
   * (inspect without the key): value is then null. */
  seal: string | null;
  /** The id of the key the value is still sealed with, or null. */
  encryptedWith: string | null;
}

export interface DeadLetter {
  entryId: string;
  payload: Buffer;
  reason: string | null;
  source: string | null;
  deliveries: number;
  at: number;
  taskId: string | null;
  task: string | null;
  detail: string | null;
  /** The message's args, decoded (opened with the keyring when sealed). */
  args: unknown;
  hasArgs: boolean;
  /** "aes-256-gcm:KEY-ID" when the args are sealed. */
  seal: string | null;
  encryptedWith: string | null;
  /** Why args are not shown, e.g. "encrypted with key K: give the client
   * the keyring". */
  argsError: string | null;
}

export class Client {
  constructor(url?: string, options?: ClientOptions);
  enqueue(task: string, args?: unknown, options?: EnqueueOptions): Promise<string>;
  enqueueFull(task: string, args?: unknown, options?: EnqueueOptions):
    Promise<{ id: string; existed: boolean }>;
  enqueueBatch(requests: EnqueueRequest[]): Promise<string[]>;
  getResult(id: string, options?: { timeoutMs?: number }): Promise<Result>;
  inspect(id: string): Promise<Result>;
  cancel(id: string): Promise<'removed' | 'revoked'>;
  dlqList(options?: { after?: string; limit?: number; reason?: string; task?: string }):
    Promise<DeadLetter[]>;
  dlqGet(entryId: string): Promise<DeadLetter>;
  dlqReplay(entryId: string, options?: { keepAttempt?: boolean }): Promise<string>;
  close(): Promise<void>;
}

export class SluiceError extends Error {}
export class InvalidInputError extends SluiceError {}
export class TooLargeError extends InvalidInputError {}
export class WrongModeError extends InvalidInputError {}
export class WrongVersionError extends SluiceError {}
export class FullError extends SluiceError {}
export class UnavailableError extends SluiceError {}
export class MalformedReplyError extends SluiceError {}
export class NotFoundError extends SluiceError {}
export class SluiceTimeoutError extends SluiceError {}
export class KeyringError extends InvalidInputError {}
export class SealError extends SluiceError {}

/** Every reason a message is buried for, in the C library's order (its
 * sluice_dead_letter_reasons()): dlqList's `reason` takes these only. */
export const DEAD_LETTER_REASONS: readonly string[];

/** The encoder, checks and scripts, without I/O (lib/protocol.js). */
export const protocol: Record<string, unknown>;
