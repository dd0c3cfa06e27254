'use strict';
// The package as installed: what `require('lockwarden')` and `import('lockwarden')` give, and
// connecting.

const { describe, test } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const lockwarden = require('lockwarden');
const { limit } = require('./harness');

describe('package', () => {
  test('require and import load the installed package', limit, async () => {
    // test.sh installs the packed tarball into a scratch project: this must be that copy, not
    // the source tree.
    const installed = path.join('node_modules', 'lockwarden', 'lockwarden.js');
    assert.ok(require.resolve('lockwarden').endsWith(path.sep + installed), require.resolve('lockwarden'));
    assert.equal(require('lockwarden/package.json').name, 'lockwarden');
    const esm = await import('lockwarden');
    for (const name of ['Client', 'Lock', 'Leadership', 'Observation', 'LockError', 'defaultSocket']) {
      assert.equal(typeof lockwarden[name], 'function', name);
      assert.equal(esm[name], lockwarden[name], name); // ESM's named exports are the same
    }
    assert.equal(esm.default, lockwarden);
  });

  test('connect rejects where no agent listens, naming the socket', limit, async () => {
    const where = '/nonexistent/lockwarden.sock';
    await assert.rejects(lockwarden.Client.connect(where), (err) => {
      assert.equal(err.code, 'ENOENT');
      assert.equal(err.path, where);
      assert.match(err.message, /^cannot connect to the lockwarden agent at \/nonexistent\/lockwarden\.sock: /);
      return true;
    });
  });
});
