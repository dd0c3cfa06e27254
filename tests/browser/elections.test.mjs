// An election on the page: a campaign through the real agent shows as "election · leader V ·
// term N" with the candidate queued behind it, on this agent's locks and in the fleet view (one
// row: the leader record beside the hold is no hold of its own); after the leader resigns, the
// candidate is the leader with a higher term.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { EVENT_TIMEOUT_MS, byTestId, screenshot, useStack } from './browser.mjs';
import { LockClient } from './clients.mjs';
import { randomId, waitUntil } from './fixture.mjs';

// The fleet is read at most every 5 s while its panel is on screen.
const FLEET_TIMEOUT_MS = 3 * EVENT_TIMEOUT_MS;

// Campaigns for name with value; resolves with the reply (ok or not).
function campaign(client, name, value, waitMs) {
  return client.call({ op: 'campaign', name, value, ttl_ms: 60000, wait_ms: waitMs },
    { timeoutMs: waitMs + EVENT_TIMEOUT_MS });
}

describe('an election on the page', { timeout: 180000 }, () => {
  const stack = useStack({ label: 'elections-agent' }, { browser: true });

  it('shows the leader, its term and a waiting candidate, here and in the fleet', async () => {
    const name = `jobs-${randomId()}`;
    const leader = await LockClient.connect(stack.agent.socketPath);
    const candidate = await LockClient.connect(stack.agent.socketPath);
    try {
      const elected = await campaign(leader, name, 'host-a:8080', 10000);
      assert.equal(elected.ok, true, JSON.stringify(elected));
      assert.ok(Number.isSafeInteger(elected.term) && elected.term >= 1, JSON.stringify(elected));
      // Queued behind the leader for longer than this test takes.
      const waiting = campaign(candidate, name, 'host-b:9090', 120000);
      await waitUntil(async () => (await stack.agent.state()).waiter_list?.some((w) => w.resource === name),
        { what: `the agent's waiter_list to list the candidate for ${name}` });

      await stack.withPage('election', async (page) => {
        const row = page.locator(byTestId('lock-row', { resource: name }));
        const kind = row.locator(byTestId('lock-kind'));
        await kind.filter({ hasText: `election \u00b7 leader host-a:8080 \u00b7 term ${elected.term}` })
          .waitFor({ state: 'visible' });
        const candidates = row.locator(byTestId('election-candidate'));
        await candidates.first().waitFor({ state: 'visible' });
        assert.equal(await candidates.count(), 1);
        // Both campaigns are this process's: the candidate is named by its pid.
        assert.equal(await candidates.first().textContent(), `pid ${process.pid}`);
        assert.match(await row.locator(byTestId('election-candidates')).textContent(), /^1 candidate: /);

        // The fleet view: the leader hold is a row that names the election; its record is none.
        await page.locator('#fleet-panel').scrollIntoViewIfNeeded();
        const fleetRow = page.locator(byTestId('fleet-lock-row', { resource: name }));
        await fleetRow.locator(byTestId('fleet-hold-kind'))
          .filter({ hasText: `election \u00b7 leader host-a:8080 \u00b7 term ${elected.term}` })
          .waitFor({ state: 'visible', timeout: FLEET_TIMEOUT_MS });
        assert.equal(await fleetRow.count(), 1, 'one fleet row: the record beside the hold is no hold');
        assert.equal(await fleetRow.getAttribute('data-mode'), 'exclusive');
        await screenshot(page, '09-election');

        // The leader resigns: the candidate leads, with a higher term, and nobody waits.
        const resigned = await leader.call({ op: 'resign', name, token: elected.token });
        assert.equal(resigned.ok, true, JSON.stringify(resigned));
        const next = await waiting;
        assert.equal(next.ok, true, JSON.stringify(next));
        assert.ok(next.term > elected.term, `term ${next.term} after ${elected.term}`);
        await kind.filter({ hasText: `election \u00b7 leader host-b:9090 \u00b7 term ${next.term}` })
          .waitFor({ state: 'visible' });
        await row.locator(byTestId('election-candidates'), { hasText: 'no candidate waits here' })
          .waitFor({ state: 'visible' });
      });
    } finally {
      leader.close();
      candidate.close();
    }
  });
});
