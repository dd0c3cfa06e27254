// Operator actions from the page: expiring a leaked key and force-releasing a lock, each behind
// the admin token and a confirmation; and the page of an agent whose actions are disabled.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { EVENT_TIMEOUT_MS, byTestId, screenshot, useStack } from './browser.mjs';
import { randomId } from './fixture.mjs';

// Resolves with the next POST to path (an admin action) the page sends.
function nextPost(page, path, timeout = EVENT_TIMEOUT_MS) {
  return page.waitForResponse(
    (r) => r.request().method() === 'POST' && new URL(r.url()).pathname === path,
    { timeout },
  );
}

// Records every POST request the page sends from now on.
function recordPosts(page) {
  const posts = [];
  page.on('request', (r) => {
    if (r.method() === 'POST') posts.push(r);
  });
  return posts;
}

// Waits until action-result reports ok (true/false) and, if given, its text includes `text`.
async function waitForActionResult(page, ok, text = '') {
  await page.waitForFunction(
    ([sel, want, needle]) => {
      const el = document.querySelector(sel);
      return el && el.getAttribute('data-ok') === want && el.textContent.includes(needle);
    },
    [byTestId('action-result'), String(ok), text],
    { timeout: EVENT_TIMEOUT_MS },
  );
}

// Clicks an action button and waits for the confirmation dialog it opens.
async function openDialog(page, button) {
  await button.click();
  await page.locator(byTestId('confirm-dialog')).waitFor({ state: 'visible' });
}

// Closes the confirmation dialog if the page left it open (e.g. to show an error in it).
async function closeDialog(page) {
  const dialog = page.locator(byTestId('confirm-dialog'));
  if (await dialog.isVisible()) await page.click(byTestId('confirm-cancel'));
  await dialog.waitFor({ state: 'hidden', timeout: EVENT_TIMEOUT_MS });
}

async function saveToken(page, token) {
  await page.fill(byTestId('token-input'), token);
  await page.click(byTestId('token-save'));
}

// The leaked keys planted here are not lock keys (not under the "lock:" prefix) but match an
// extra scan pattern: once given a TTL they are no finding at all. A lock key with a TTL on one
// master would come back as a "partial" finding.
const LEAK_SCAN = ['--scan-pattern', 'lw-leak-*'];

// Sets a key without a TTL on master that an agent with LEAK_SCAN reports as leaked; returns it.
async function plantLeak(master) {
  const key = `lw-leak-${randomId()}`;
  assert.equal(await master.command(['SET', key, 'v']), 'OK');
  return key;
}

function normalizeSpace(text) {
  return text.replace(/\s+/g, ' ').trim();
}

describe('actions with the admin token', { timeout: 120000 }, () => {
  const stack = useStack(
    { label: 'actions-agent', scanIntervalMs: 500, extraArgs: LEAK_SCAN },
    { browser: true },
  );

  it('expires a leaked key: refused without the token, done with it after confirming', async () => {
    const { cluster, agent } = stack;
    const master = cluster.master(1);
    const key = await plantLeak(master);

    await stack.withPage('leak', async (page, watch) => {
      const row = page.locator(byTestId('leak-row', { master: master.address, key }));
      await row.waitFor({ state: 'visible', timeout: EVENT_TIMEOUT_MS });
      await screenshot(page, '04-leak-listed');

      const dialog = page.locator(byTestId('confirm-dialog'));
      const expireButton = row.locator(byTestId('leak-expire'));
      // Chromium logs each refused request as a console error; those are expected here.
      watch.expect(/status of 401/, 2);

      // No token saved: nothing changes, and action-result says it failed. (A page may refuse
      // before sending, or send and be refused with 401; either way nothing may change.)
      const posts = recordPosts(page);
      await openDialog(page, expireButton);
      await page.click(byTestId('confirm-ok'));
      await page.waitForSelector(byTestId('action-result', { ok: false }));
      for (const request of posts) assert.equal((await request.response())?.status(), 401);
      await closeDialog(page);
      assert.equal(await master.command(['PTTL', key]), -1);

      // A wrong token: the agent refuses with 401 and the page shows the server's message.
      await saveToken(page, `wrong-${randomId(12)}`);
      await openDialog(page, expireButton);
      const refused = nextPost(page, '/api/v1/leaks/expire');
      await page.click(byTestId('confirm-ok'));
      const refusal = await refused;
      assert.equal(refusal.status(), 401);
      const { message } = await refusal.json();
      await waitForActionResult(page, false, message);
      await closeDialog(page);
      assert.equal(await master.command(['PTTL', key]), -1);

      // With the token: a confirmation that names the key, then the TTL is set.
      await saveToken(page, agent.token);
      await openDialog(page, expireButton);
      assert.ok((await dialog.textContent()).includes(key), 'the dialog names the key');
      await screenshot(page, '05-confirm-dialog');
      const done = nextPost(page, '/api/v1/leaks/expire');
      await page.click(byTestId('confirm-ok'));
      const response = await done;
      assert.equal(response.request().headers().authorization, `Bearer ${agent.token}`);
      assert.equal(response.status(), 200, await response.text());
      await waitForActionResult(page, true);
      await dialog.waitFor({ state: 'hidden', timeout: EVENT_TIMEOUT_MS });
      const pttl = await master.command(['PTTL', key]);
      assert.ok(pttl > 0, `PTTL ${key} is ${pttl}, expected a TTL`);
      await row.waitFor({ state: 'detached', timeout: EVENT_TIMEOUT_MS });
    });
  });

  it('force-releases a lock after confirming; the holder gets lost/revoked', async () => {
    const { cluster, agent } = stack;
    await agent.withClient(async (client) => {
      const resource = `reports-${randomId()}`;
      // The longest ttl an agent allows by default (max_ttl_ms): it outlasts the test.
      const grant = await client.acquire(resource, { ttl_ms: 60000, wait_ms: 10000 });

      await stack.withPage('force-release', async (page) => {
        const row = page.locator(byTestId('lock-row', { resource }));
        await row.waitFor({ state: 'visible', timeout: EVENT_TIMEOUT_MS });
        await saveToken(page, agent.token);
        const dialog = page.locator(byTestId('confirm-dialog'));
        const releaseButton = row.locator(byTestId('force-release'));

        // Cancelling sends nothing and leaves the lock alone.
        const posts = recordPosts(page);
        await openDialog(page, releaseButton);
        assert.ok((await dialog.textContent()).includes(resource), 'the dialog names the lock');
        await page.click(byTestId('confirm-cancel'));
        await dialog.waitFor({ state: 'hidden', timeout: EVENT_TIMEOUT_MS });
        assert.deepEqual(posts.map((r) => r.url()), []);
        assert.equal(client.events.length, 0);

        await openDialog(page, releaseButton);
        const done = nextPost(page, '/api/v1/locks/release');
        await page.click(byTestId('confirm-ok'));
        const response = await done;
        assert.equal(response.status(), 200, await response.text());
        await waitForActionResult(page, true);
        await row.waitFor({ state: 'detached', timeout: EVENT_TIMEOUT_MS });

        const lost = await client.waitForEvent(
          (e) => e.event === 'lost' && e.resource === resource,
        );
        assert.deepEqual(
          { event: lost.event, resource: lost.resource, token: lost.token, reason: lost.reason },
          { event: 'lost', resource, token: grant.token, reason: 'revoked' },
        );
        for (const m of cluster.masters) {
          const left = await m.command(['GET', `lock:${resource}`]);
          assert.equal(left, null, `lock key left on ${m.address}`);
        }
        await screenshot(page, '06-after-force-release');
      });
    });
  });
});

describe('actions disabled (agent without an admin token)', { timeout: 120000 }, () => {
  const stack = useStack(
    { token: false, label: 'no-token-agent', extraArgs: LEAK_SCAN },
    { browser: true },
  );

  it('says how to enable actions and disables every action button', async () => {
    const { cluster, agent } = stack;
    const master = cluster.master(0);
    const key = await plantLeak(master);
    await agent.withClient(async (client) => {
      const resource = `batch-${randomId()}`;
      await client.acquire(resource, { ttl_ms: 60000, renew: true, wait_ms: 10000 });

      await stack.withPage('actions-disabled', async (page) => {
        const notice = page.locator(byTestId('actions-disabled'));
        await notice.waitFor({ state: 'visible', timeout: EVENT_TIMEOUT_MS });
        const { actions } = await agent.state();
        assert.equal(actions?.enabled, false, 'state.actions.enabled');
        const shown = normalizeSpace(await notice.textContent());
        assert.ok(
          shown.includes(normalizeSpace(actions.how_to_enable)),
          `the notice shows actions.how_to_enable; it says: ${shown}`,
        );

        const lockRow = page.locator(byTestId('lock-row', { resource }));
        const leakRow = page.locator(byTestId('leak-row', { master: master.address, key }));
        await lockRow.waitFor({ state: 'visible', timeout: EVENT_TIMEOUT_MS });
        await leakRow.waitFor({ state: 'visible', timeout: EVENT_TIMEOUT_MS });
        assert.ok(await lockRow.locator(byTestId('force-release')).isDisabled(), 'force-release');
        assert.ok(await leakRow.locator(byTestId('leak-expire')).isDisabled(), 'leak-expire');
        assert.ok(await leakRow.locator(byTestId('leak-delete')).isDisabled(), 'leak-delete');
        await screenshot(page, '07-actions-disabled');
      });
    });
  });
});
