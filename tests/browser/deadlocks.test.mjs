// Deadlocks on the fleet panel: this test process holds dl:a through alpha and waits there for
// dl:b, and holds dl:b through bravo and waits there for dl:a (two actors: a process on each
// agent). Charlie's page names the deadlock at the top of its fleet panel, each process with its
// agent, pid, command line, what it holds and what it waits for, and proposes the revoke of the
// lock whose holder waited least (bravo's dl:b: its wait began last); the lock rows say their
// holder waits, and the story shows the chain. Revoking from the proposal gives bravo's holder
// `lost` (revoked), alpha's waiter dl:b, and the panel drops the deadlock.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { EVENT_TIMEOUT_MS, byTestId, chartProblems, launchBrowser, screenshot, withPage } from './browser.mjs';
import { LockClient } from './clients.mjs';
import { Agent, RedisCluster, randomId, waitUntil } from './fixture.mjs';

const FLEET_TIMEOUT_MS = 3 * EVENT_TIMEOUT_MS;

function agentArgs(name) {
  return ['--agent-name', name, '--heartbeat-ttl-ms', '3000', '--fleet-refresh-ms', '1000'];
}

describe('fleet panel: a deadlock across two agents', { timeout: 240000 }, () => {
  const s = { cluster: null, agents: {}, browser: null };

  before(async () => {
    s.cluster = await RedisCluster.start(3);
    for (const name of ['alpha', 'bravo', 'charlie']) {
      s.agents[name] = await Agent.start(s.cluster, { label: `deadlock-${name}`, extraArgs: agentArgs(name) });
    }
    s.browser = await launchBrowser();
  });
  after(async () => {
    await s.browser?.close();
    for (const a of Object.values(s.agents)) await a?.stop();
    await s.cluster?.stop();
  });

  it('names the deadlock, proposes a revoke, and the revoke ends it', async () => {
    const { alpha, bravo, charlie } = s.agents;
    const id = randomId();
    const a = `dl:a-${id}`;
    const b = `dl:b-${id}`;
    const clients = [];
    const connect = async (agent) => {
      const c = await LockClient.connect(agent.socketPath);
      clients.push(c);
      return c;
    };
    try {
      const holdA = await connect(alpha);
      const holdB = await connect(bravo);
      await holdA.acquire(a, { ttl_ms: 10000, renew: true, wait_ms: 10000 });
      await holdB.acquire(b, { ttl_ms: 10000, renew: true, wait_ms: 10000 });
      // alpha's wait first (so bravo's is the one that closes the cycle), each awaited.
      const waitAtAlpha = (await connect(alpha)).call({ op: 'acquire', resource: b, ttl_ms: 10000, wait_ms: 180000 },
        { timeoutMs: 200000 });
      await waitUntil(async () => (await alpha.state()).waiter_list?.some((w) => w.resource === b),
        { what: `alpha's waiter for ${b}` });
      const waitAtBravo = (await connect(bravo)).call({ op: 'acquire', resource: a, ttl_ms: 10000, wait_ms: 180000 },
        { timeoutMs: 200000 });
      waitAtBravo.catch(() => {});

      await withPage(s.browser, `${charlie.baseUrl}/`, 'deadlock-charlie', async (page) => {
        await page.fill(byTestId('token-input'), charlie.token);
        await page.click(byTestId('token-save'));
        await page.locator('#fleet-panel').scrollIntoViewIfNeeded();
        const deadlock = page.locator(byTestId('deadlock'));
        await deadlock.waitFor({ state: 'visible', timeout: FLEET_TIMEOUT_MS });
        assert.equal(await deadlock.getAttribute('data-processes'), '2');
        const actors = deadlock.locator(byTestId('deadlock-actor'));
        assert.equal(await actors.count(), 2);
        for (const [agent, holds, waits] of [['alpha', a, b], ['bravo', b, a]]) {
          const text = await deadlock.locator(byTestId('deadlock-actor', { agent })).textContent();
          assert.match(text, new RegExp(`pid ${process.pid}\\b`));
          assert.match(text, /node/, 'the command line');
          assert.ok(text.includes(`holds ${holds}`), text);
          assert.ok(text.includes(`waits for ${waits}`), text);
        }
        const proposal = deadlock.locator(byTestId('deadlock-proposal'));
        assert.equal(await proposal.getAttribute('data-resource'), b);
        assert.match(await proposal.textContent(), /waited least/);
        // The rows say their holder waits, in a cycle; the story shows the chain.
        const row = page.locator(byTestId('fleet-lock-row', { resource: a }));
        await row.locator(byTestId('fleet-blocked')).filter({ hasText: 'DEADLOCK' })
          .waitFor({ timeout: FLEET_TIMEOUT_MS });
        await row.locator(byTestId('fleet-lock-toggle')).click();
        const chain = page.locator(byTestId('fleet-lock-story', { resource: a })).locator(byTestId('fleet-chain'));
        await chain.waitFor({ state: 'visible' });
        assert.ok((await chain.textContent()).includes(`waits for ${b}`));
        // Who waits behind a's holder: bravo's process, waiting for a.
        const behind = page.locator(byTestId('fleet-lock-story', { resource: a })).locator(byTestId('fleet-behind'));
        await behind.waitFor({ state: 'visible' });
        assert.ok((await behind.textContent()).includes(`waits for ${a}`));
        // The pointer on a chart while a full-page capture resizes the page: the chart is redrawn
        // as the pointer leaves, mid-resize.
        await page.hover('#rate-wrap');
        await screenshot(page, '10-fleet-deadlock');
        // Charlie has had no acquire: its charts are empty, and still drawn at their own width.
        assert.deepEqual(await chartProblems(page), []);

        await proposal.locator(byTestId('deadlock-revoke')).click();
        const dialog = page.locator(byTestId('confirm-dialog'));
        await dialog.waitFor({ state: 'visible' });
        const said = await dialog.textContent();
        assert.ok(said.includes(b), 'the dialog names the lock');
        assert.match(said, /bravo/, 'and its holder');
        assert.match(said, /end a deadlock/, 'and why');
        const answered = page.waitForResponse(
          (r) => r.request().method() === 'POST' && new URL(r.url()).pathname === '/api/v1/fleet/revoke',
          { timeout: EVENT_TIMEOUT_MS },
        );
        await page.click(byTestId('confirm-ok'));
        const response = await answered;
        assert.equal(response.status(), 200, await response.text());

        const lost = await holdB.waitForEvent((e) => e.event === 'lost' && e.resource === b);
        assert.equal(lost.reason, 'revoked');
        const granted = await waitAtAlpha;
        assert.equal(granted.ok, true, JSON.stringify(granted));
        await deadlock.waitFor({ state: 'detached', timeout: FLEET_TIMEOUT_MS });
        assert.equal(await page.locator(byTestId('fleet-deadlocks')).isHidden(), true);
        await screenshot(page, '11-fleet-deadlock-ended');
      });
    } finally {
      for (const c of clients) c.close();
    }
  });
});
