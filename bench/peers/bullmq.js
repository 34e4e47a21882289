'use strict';
// bullmq.js - BullMQ for bench/compare.sh.
//
//   node bullmq.js fill --port P --tasks N     queue N jobs (Queue#addBulk)
//   node bullmq.js work --port P --tasks N --concurrency C
//       runs a no-op processor until N jobs have completed and prints one
//       key=value line: rate, this process's CPU per job, its peak RSS.
//
// Every queue and worker setting is BullMQ's default (completed jobs and
// their return values are kept, events are written to the events stream,
// stalled-job checks on); BullMQ's own default concurrency is 1.

const { Queue, Worker } = require('bullmq');
const { parseArgs, Timer, line, version } = require('./common');

async function fill(args) {
  const connection = { host: '127.0.0.1', port: args.port };
  const queue = new Queue(args.queue, { connection });
  for (let done = 0; done < args.tasks; ) {
    const n = Math.min(1000, args.tasks - done);
    const jobs = [];
    for (let i = 0; i < n; i++) jobs.push({ name: 'noop', data: {} });
    await queue.addBulk(jobs);
    done += n;
  }
  await queue.close();
}

async function work(args) {
  const timer = new Timer();
  timer.start();
  let completed = 0;
  let worker;
  await new Promise((resolve, reject) => {
    worker = new Worker(args.queue, async () => undefined, {
      connection: { host: '127.0.0.1', port: args.port, maxRetriesPerRequest: null },
      concurrency: args.concurrency,
    });
    worker.on('error', reject);
    worker.on('failed', (job, err) => reject(err));
    worker.on('completed', () => {
      if (++completed === args.tasks) resolve();
    });
  });
  const measured = timer.done(args.tasks);
  await worker.close();
  console.log(
    line({
      library: `bullmq@${version('bullmq')}`,
      concurrency: args.concurrency,
      default_concurrency: 1,
      ...measured,
    })
  );
}

const args = parseArgs(process.argv);
(args.op === 'fill' ? fill(args) : work(args)).then(
  () => process.exit(0),
  (err) => {
    console.error(`bullmq.js: ${err.stack || err}`);
    process.exit(1);
  }
);
