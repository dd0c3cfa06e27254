'use strict';
// A scripted agent on a Unix socket in a scratch directory, for what the real agent does not
// send: lines that are not JSON objects, and replies and events in one read in a given order.
// The test reads each request line the client wrote and writes the lines of its choice, several
// in one write (one read on the client's side).

const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { once } = require('node:events');

// One accepted connection: next() resolves to the next request the client sent (parsed),
// send(...lines) writes lines (objects are JSON-encoded, strings sent as they are) in one write.
class FakeConnection {
  constructor(socket) {
    this.socket = socket;
    this.requests = [];
    this.waiters = [];
    this.closed = once(socket, 'close');
    let buffer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      buffer += chunk;
      let nl;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const request = JSON.parse(buffer.slice(0, nl)); // the client's own lines
        buffer = buffer.slice(nl + 1);
        const waiter = this.waiters.shift();
        if (waiter) waiter(request);
        else this.requests.push(request);
      }
    });
  }

  next() {
    if (this.requests.length) return Promise.resolve(this.requests.shift());
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  send(...lines) {
    this.socket.write(lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l)) + '\n').join(''));
  }
}

// Listens at `path`; connection() resolves to the next connection accepted. close() ends them
// all and removes the directory.
class FakeAgent {
  static async start() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lw-fake-'));
    const agent = new FakeAgent(dir);
    agent.server.listen(agent.path);
    await once(agent.server, 'listening');
    return agent;
  }

  constructor(dir) {
    this.dir = dir;
    this.path = path.join(dir, 'agent.sock');
    this.sockets = new Set();
    this.accepted = [];
    this.waiters = [];
    this.server = net.createServer((socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      const connection = new FakeConnection(socket);
      const waiter = this.waiters.shift();
      if (waiter) waiter(connection);
      else this.accepted.push(connection);
    });
  }

  connection() {
    if (this.accepted.length) return Promise.resolve(this.accepted.shift());
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  async close() {
    for (const socket of this.sockets) socket.destroy();
    await new Promise((resolve) => this.server.close(resolve));
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

module.exports = { FakeAgent };
