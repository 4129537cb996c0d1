'use strict';
// The test server: a real replica set when FERRY_TEST_MONGODB_URI is set,
// else the repository's emulator (cmd/mongotest) in a child process:
// FERRY_MONGOTEST_BIN when it names a built binary, else built here with
// `go build` (the Go build cache makes that quick after the first time).

const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

const REPO = path.resolve(__dirname, '..', '..', '..', '..');

let built = null;
function binary(name, pkg) {
  const env = name === 'mongotest' ? process.env.FERRY_MONGOTEST_BIN : process.env.FERRY_BIN;
  if (env && fs.existsSync(env)) return env;
  const out = path.join(os.tmpdir(), `ferry-receiver-test-${process.pid}-${name}`);
  if (!fs.existsSync(out)) execFileSync('go', ['build', '-o', out, pkg], { cwd: REPO, stdio: ['ignore', 'ignore', 'inherit'] });
  return out;
}

/** mongotestBinary returns the emulator's binary, building it if needed. */
function mongotestBinary() {
  built = built || binary('mongotest', './mongotest/cmd/mongotest');
  return built;
}

/** ferryBinary returns the ferry binary (FERRY_BIN, or built). */
function ferryBinary() {
  return binary('ferry', './cmd/ferry');
}

/**
 * startMongo returns {uri, emulator, stop}. args are extra emulator flags
 * (e.g. ['-ttl-interval', '200ms', '-test-controls']); against a real
 * server they are ignored and emulator is false (tests needing its
 * controls skip).
 */
async function startMongo(args = []) {
  if (process.env.FERRY_TEST_MONGODB_URI) {
    return { uri: process.env.FERRY_TEST_MONGODB_URI, emulator: false, stop: async () => {} };
  }
  const child = spawn(mongotestBinary(), ['-addr', '127.0.0.1:0', '-exit-on-stdin-eof', ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  const uri = await new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout });
    rl.once('line', (line) => resolve(line.trim()));
    child.once('exit', (code) => reject(new Error(`mongotest exited with ${code} before printing its URI`)));
  });
  return {
    uri,
    emulator: true,
    child,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', resolve);
        child.stdin.end();
      }),
  };
}

/**
 * useMongo starts the test server before the file's tests (startMongo with
 * args) and a connected MongoClient, and stops both after them. It returns
 * an object whose uri, client and emulator fields are set once they run.
 */
function useMongo(args = [], clientOptions = {}) {
  const { before, after } = require('node:test');
  const { MongoClient } = require('mongodb');
  const m = { uri: '', client: null, emulator: false, server: null };
  before(async () => {
    m.server = await startMongo(args);
    m.uri = m.server.uri;
    m.emulator = m.server.emulator;
    m.client = new MongoClient(m.uri, clientOptions);
    await m.client.connect();
  });
  after(async () => {
    if (m.client) await m.client.close();
    if (m.server) await m.server.stop();
  });
  return m;
}

/** uniqueDb returns a database name no other test uses. */
let dbs = 0;
function uniqueDb(prefix = 'rt') {
  dbs++;
  return `${prefix}_${process.pid}_${dbs}`;
}

module.exports = { startMongo, useMongo, mongotestBinary, ferryBinary, uniqueDb, REPO };
