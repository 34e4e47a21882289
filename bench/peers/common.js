'use strict';
// common.js - what bee.js and bullmq.js share: their command line, the
// measurement of the timed part, and its key=value output line.

const fs = require('fs');

// node SCRIPT fill|work --port P --tasks N [--concurrency C] [--queue NAME]
function parseArgs(argv) {
  const out = { op: argv[2], port: 6379, tasks: 20000, concurrency: 8, queue: 'bench' };
  for (let i = 3; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, '');
    if (!(key in out) || argv[i + 1] === undefined) {
      throw new Error(`unknown option ${argv[i]}: give --port, --tasks, --concurrency, --queue`);
    }
    out[key] = key === 'queue' ? argv[i + 1] : Number(argv[i + 1]);
  }
  if (out.op !== 'fill' && out.op !== 'work') {
    throw new Error('give fill or work as the first argument');
  }
  return out;
}

function peakRssMb() {
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const m = /VmHWM:\s+(\d+)/.exec(status);
  return m ? Number(m[1]) / 1024 : -1;
}

// Times from start() to done(): wall clock, and this process's CPU time
// (user + system, all threads) over the same span.
class Timer {
  start() {
    this.t0 = process.hrtime.bigint();
    this.cpu0 = process.cpuUsage();
  }

  done(tasks) {
    const seconds = Number(process.hrtime.bigint() - this.t0) / 1e9;
    const cpu = process.cpuUsage(this.cpu0);
    return {
      rate_per_s: (tasks / seconds).toFixed(0),
      worker_cpu_us_per_task: ((cpu.user + cpu.system) / tasks).toFixed(2),
      rss_mb: peakRssMb().toFixed(1),
    };
  }
}

function line(fields) {
  return Object.entries(fields)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

function version(pkg) {
  return require(`${pkg}/package.json`).version;
}

module.exports = { parseArgs, Timer, line, version };
