'use strict';
// Takes a lock through the lockwarden agent at $LOCKWARDEN_SOCKET, works under it, and shows how
// to tell the error codes apart:  node example.js [resource]
// Ctrl-C while it waits for the lock gives up the wait (an AbortSignal); while it works, stops
// the work after the current step and releases the lock.

const { setTimeout: sleep } = require('timers/promises');
const { Client } = require('lockwarden'); // in this directory: the package itself

async function main(resource) {
  let client;
  try {
    client = await Client.connect(); // $LOCKWARDEN_SOCKET or /run/lockwarden/lockwarden.sock
  } catch (err) {
    console.error('agent unreachable:', err.message);
    return 69;
  }
  const interrupted = new AbortController();
  process.once('SIGINT', () => interrupted.abort());
  try {
    // Wait up to 5 s for another holder; the agent renews the lock while we are connected.
    const options = { ttlMs: 3000, waitMs: 5000, renew: true, signal: interrupted.signal };
    await client.withLock(resource, options, async (lock) => {
      console.log(`acquired ${resource} (valid ${lock.validityMs} ms, waited ${lock.waitedMs} ms)`);
      lock.on('lost', (reason) => console.error('lock lost:', reason));
      for (const step of [1, 2, 3]) {
        await sleep(1000, undefined, { signal: lock.signal }); // one step; aborted if lost
        interrupted.signal.throwIfAborted(); // Ctrl-C: stop after this step
        console.log('step', step, 'done');
      }
      // An explicit extension, for code that does not use renew.
      console.log(`extended, valid ${await lock.extend(10000)} ms`);
    });
    console.log('released', resource); // withLock released it
    return 0;
  } catch (err) {
    if (err.name === 'AbortError') {
      console.error('interrupted');
      return 130;
    }
    switch (err.code) {
      case 'lost':
        console.error('stopped: the lock was lost');
        return 72;
      case 'timeout':
        console.log(`busy: someone else held ${resource} for all 5 s; try later`);
        return 75;
      case 'no_quorum':
        console.error('lock service unavailable (no quorum of masters):', err.detail);
        return 69;
      default:
        console.error(err.message);
        return 1;
    }
  } finally {
    await client.close(); // closing the connection would release the lock too
  }
}

main(process.argv[2] || 'example:node').then((code) => { process.exitCode = code; });
