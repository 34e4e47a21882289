'use strict';
// index.d.ts describes the API: a TypeScript program using every method
// (types-check.ts) compiles with --strict against it.

const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');
const { test } = require('node:test');

test('the declarations compile against their use', () => {
  const tsc = path.join(__dirname, '..', 'node_modules', 'typescript', 'bin', 'tsc');
  let out = '';
  try {
    execFileSync(process.execPath, [tsc, '--noEmit', '--strict', '--esModuleInterop',
      '--target', 'es2020', '--module', 'commonjs', '--types', 'node',
      path.join(__dirname, 'types-check.ts')], { timeout: 120000 });
  } catch (e) {
    out = `${e.stdout}${e.stderr}`;
  }
  assert.equal(out, '');
});
