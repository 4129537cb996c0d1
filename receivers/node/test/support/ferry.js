'use strict';
// ferry run as a child process with a configuration written for a test.

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { ferryBinary } = require('./mongotest');

/** freePort returns a TCP port free on 127.0.0.1 right now. */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** startFerry writes yaml to a file and runs `ferry run -c` on it; stop()
 * sends SIGTERM and waits for the exit. */
function startFerry(yaml, env = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ferry-receiver-'));
  const file = path.join(dir, 'ferry.yaml');
  fs.writeFileSync(file, yaml);
  const child = spawn(ferryBinary(), ['run', '-c', file], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  const log = [];
  child.stderr.on('data', (b) => log.push(b.toString()));
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  return {
    child,
    log: () => log.join(''),
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const r = await exited;
      fs.rmSync(dir, { recursive: true, force: true });
      return r;
    },
  };
}

module.exports = { freePort, startFerry };
