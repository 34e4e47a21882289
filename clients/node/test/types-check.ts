// Compiled (not run) by types.test.js: the declarations of index.d.ts
// must describe the API as the README and the tests use it.
import {
  Client, DEAD_LETTER_REASONS, DeadLetter, EnqueueRequest, FullError, InvalidInputError, Keyring, KeyringError,
  Result, SealError, SluiceError, SluiceTimeoutError, UnavailableError, WrongModeError,
} from '..';

async function main(): Promise<void> {
  const c = new Client('redis://127.0.0.1:6379/0', { mode: 'reliable', namespace: 'sluice', trackState: true });
  const id: string = await c.enqueue('demo.echo', { to: 'world' }, {
    delayMs: 500, headers: { tenant: 'acme' }, options: { maxAttempts: 5, jitter: false },
  });
  const full: { id: string; existed: boolean } = await c.enqueueFull('demo.echo', 1, { id: 'order-42' });
  const reqs: EnqueueRequest[] = [{ task: 'demo.echo', args: [1], queue: 'q', etaMs: Date.now() }];
  const ids: string[] = await c.enqueueBatch(reqs);
  const r: Result = await c.getResult(id, { timeoutMs: 30000 });
  const state: string = r.state;
  const done: boolean = r.final;
  const how: 'removed' | 'revoked' = await c.cancel(full.id);
  const dead: DeadLetter[] = await c.dlqList({ reason: DEAD_LETTER_REASONS[0], limit: 10 });
  const back: string = await c.dlqReplay(dead[0].entryId, { keepAttempt: true });
  const seen: Result = await c.inspect(ids[0]);
  await c.close();
  const ring: Keyring = Keyring.load('/etc/sluice/keyring');
  const sealed = new Client(undefined, { keyring: ring });
  const other = new Client(undefined, { keyring: '/etc/sluice/keyring' });
  const opened: Result = await sealed.inspect(id);
  const key: string | null = opened.encryptedWith ?? dead[0].encryptedWith;
  const why: string | null = dead[0].hasArgs ? null : dead[0].argsError;
  const current: string = Keyring.fromText('key k 0\ncurrent k\n', 'x').current;
  const errs: SluiceError[] = [new KeyringError('x'), new SealError('x')];
  void [sealed, other, key, why, current, errs, ring.hasKey('k'), ring.keyIds()];
  for (const e of [new FullError('x'), new UnavailableError('x'), new WrongModeError('x'),
    new InvalidInputError('x'), new SluiceTimeoutError('x')]) {
    const base: SluiceError = e;
    void base;
  }
  void [state, done, how, back, seen];
}
void main;
