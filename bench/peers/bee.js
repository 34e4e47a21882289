'use strict';
// bee.js - bee-queue for bench/compare.sh.
//
//   node bee.js fill --port P --tasks N     queue N jobs (Queue#saveAll)
//   node bee.js work --port P --tasks N --concurrency C
//       runs a no-op processor until N jobs have succeeded and prints one
//       key=value line: rate, this process's CPU per job, its peak RSS.
//
// Every queue setting is bee-queue's default (jobs are stored and kept
// after success, events are sent, stall checks on); bee-queue's own
// default concurrency is 1.

const Queue = require('bee-queue');
const { parseArgs, Timer, line, version } = require('./common');

async function fill(args) {
  const queue = new Queue(args.queue, {
    redis: { host: '127.0.0.1', port: args.port },
    isWorker: false,
    getEvents: false,
  });
  await queue.ready();
  for (let done = 0; done < args.tasks; ) {
    const n = Math.min(1000, args.tasks - done);
    const jobs = [];
    for (let i = 0; i < n; i++) jobs.push(queue.createJob({}));
    const errors = await queue.saveAll(jobs);
    if (errors.size > 0) throw [...errors.values()][0];
    done += n;
  }
  await queue.close();
}

async function work(args) {
  const timer = new Timer();
  timer.start();
  const queue = new Queue(args.queue, { redis: { host: '127.0.0.1', port: args.port } });
  let succeeded = 0;
  await new Promise((resolve, reject) => {
    queue.on('error', reject);
    queue.on('failed', (job, err) => reject(err));
    queue.on('succeeded', () => {
      if (++succeeded === args.tasks) resolve();
    });
    queue.process(args.concurrency, async () => undefined);
  });
  const measured = timer.done(args.tasks);
  await queue.close();
  console.log(
    line({
      library: `bee-queue@${version('bee-queue')}`,
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
    console.error(`bee.js: ${err.stack || err}`);
    process.exit(1);
  }
);
