// The fixture itself, against the agent's JSON API only (no page): if these fail, the page
// tests' failures say nothing about the page.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, it } from 'node:test';

import { launchBrowser, useStack } from './browser.mjs';
import { randomId, waitUntil } from './fixture.mjs';

describe('fixture', { timeout: 120000 }, () => {
  const stack = useStack({ label: 'fixture-agent' });

  it('starts 5 masters and an agent that sees them all', async () => {
    const { cluster, agent } = stack;
    const state = await agent.state();
    assert.deepEqual(
      state.masters.map((m) => m.master),
      cluster.masters.map((m) => m.address),
    );
    assert.ok(state.masters.every((m) => m.up));
    assert.equal(state.quorum.state, 'healthy');
    assert.equal((fs.statSync(`${agent.dir}/admin.token`).mode & 0o777).toString(8), '600');
  });

  it('acquires and releases over the socket; the state shows the lock with our pid', async () => {
    const { agent } = stack;
    await agent.withClient(async (client) => {
      const resource = `fixture-${randomId()}`;
      const grant = await client.acquire(resource, { ttl_ms: 30000, wait_ms: 10000 });
      assert.match(grant.token, /^[0-9a-f]{40}$/);
      const lock = await waitUntil(
        async () => (await agent.state()).locks.find((l) => l.resource === resource),
        { what: `${resource} in /api/v1/state` },
      );
      assert.equal(lock.pid, process.pid);
      await client.release(resource, grant.token);
      await waitUntil(
        async () => !(await agent.state()).locks.some((l) => l.resource === resource),
        { what: `${resource} to leave /api/v1/state` },
      );
    });
  });

  it('force-release through the API pushes lost/revoked to the holder', async () => {
    const { agent } = stack;
    await agent.withClient(async (client) => {
      const resource = `fixture-${randomId()}`;
      // The longest ttl an agent allows by default (max_ttl_ms): it outlasts the test.
      const grant = await client.acquire(resource, { ttl_ms: 60000, wait_ms: 10000 });
      const refused = await agent.post('/api/v1/locks/release', { resource }, { token: null });
      assert.equal(refused.status, 401);
      const res = await agent.post('/api/v1/locks/release', { resource });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      const ev = await client.waitForEvent((e) => e.event === 'lost' && e.resource === resource);
      assert.deepEqual(
        { event: ev.event, resource: ev.resource, token: ev.token, reason: ev.reason },
        { event: 'lost', resource, token: grant.token, reason: 'revoked' },
      );
    });
  });

  it('plants a TTL-less lock key that the scanner reports, and expires it', async () => {
    const { cluster, agent } = stack;
    const master = cluster.master(2);
    const key = `lock:lw-leak-${randomId()}`;
    assert.equal(await master.command(['SET', key, 'v']), 'OK');
    assert.equal(await master.command(['PTTL', key]), -1);
    await waitUntil(
      async () => (await agent.getJson('/api/v1/leaks')).leaks.some((l) => l.key === key),
      { what: `${key} in /api/v1/leaks` },
    );
    const res = await agent.post('/api/v1/leaks/expire', {
      master: master.address,
      key,
      ttl_ms: 60000,
    });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.ok((await master.command(['PTTL', key])) > 0);
  });

  it('kills a master: the agent reports it down', async () => {
    const { cluster, agent } = stack;
    await cluster.kill(4);
    assert.equal(cluster.master(4).running, false);
    await waitUntil(async () => (await agent.state()).masters[4].up === false, {
      what: 'master 4 down in /api/v1/state',
    });
  });

  it('launches chromium headless', async () => {
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage();
      await page.setContent('<p data-testid="x">hello</p>');
      assert.equal(await page.textContent('[data-testid="x"]'), 'hello');
    } finally {
      await browser.close();
    }
  });
});

describe('fixture without a token', { timeout: 120000 }, () => {
  const stack = useStack({ token: false, label: 'fixture-agent-no-token' });

  it('refuses actions with 403', async () => {
    const res = await stack.agent.post(
      '/api/v1/locks/release',
      { resource: 'x' },
      { token: 'x'.repeat(20) },
    );
    assert.equal(res.status, 403, JSON.stringify(res.body));
  });
});
