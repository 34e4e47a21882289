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

/** Every reason a message is buried for, in the C library's order (its
 * sluice_dead_letter_reasons()): dlqList's `reason` takes these only. */
export const DEAD_LETTER_REASONS: readonly string[];

/** The encoder, checks and scripts, without I/O (lib/protocol.js). */
export const protocol: Record<string, unknown>;
