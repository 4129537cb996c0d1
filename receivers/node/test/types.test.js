'use strict';
// index.d.ts against what a TypeScript user writes (test/types.ts), with
// the TypeScript compiler in strict mode; @ts-expect-error lines check that
// wrong uses are refused.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');

test('index.d.ts types a handler, an external handler and the helpers', () => {
  const tsc = path.join(__dirname, '..', 'node_modules', 'typescript', 'bin', 'tsc');
  let out = '';
  try {
    execFileSync(process.execPath, [tsc, '-p', path.join(__dirname, 'tsconfig.json')], { encoding: 'utf8' });
  } catch (err) {
    out = (err.stdout || '') + (err.stderr || '');
  }
  assert.equal(out, '', 'tsc reported:\n' + out);
});
