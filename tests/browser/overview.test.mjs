// The operator page shows what the agent sees: masters, quorum, and locks held over the socket.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { byTestId, screenshot, useStack } from './browser.mjs';
import { msUntil, randomId } from './fixture.mjs';

// Waits until the page shows exactly `count` master cards and every one has data-up="true".
async function waitForAllMastersUp(page, count, timeout = 5000) {
  await page.waitForFunction(
    (n) => {
      const cards = document.querySelectorAll('[data-testid="master-card"]');
      return cards.length === n && [...cards].every((c) => c.getAttribute('data-up') === 'true');
    },
    count,
    { timeout },
  );
}

// Waits until the quorum banner shows state (healthy, at_risk, lost); 10 s is withPage's default.
async function waitForQuorum(page, state, timeout = 10000) {
  await page.waitForSelector(byTestId('quorum-banner', { state }), { timeout });
}

describe('overview of a healthy cluster', { timeout: 120000 }, () => {
  const stack = useStack({ label: 'overview-agent' }, { browser: true });

  it('shows 5 masters up and a healthy quorum', async () => {
    await stack.withPage('healthy', async (page) => {
      await waitForAllMastersUp(page, 5);
      for (const m of stack.cluster.masters) {
        await page.waitForSelector(byTestId('master-card', { master: m.address, up: true }), {
          timeout: 1000,
        });
      }
      await waitForQuorum(page, 'healthy', 5000);
    });
  });

  it('lists a socket client\'s lock within 2 s with its pid, and drops it on release', async () => {
    await stack.withPage('lock-row', async (page) => {
      // The page is up and polling before the lock exists, so the 2 s measure only the
      // agent's snapshot and the page's poll.
      await waitForAllMastersUp(page, 5);
      await stack.agent.withClient(async (client) => {
        const resource = `orders-${randomId()}`;
        const grant = await client.acquire(resource, { ttl_ms: 60000, renew: true });
        const row = page.locator(byTestId('lock-row', { resource }));
        await row.waitFor({ state: 'visible', timeout: msUntil(grant.receivedAt + 2000) });
        assert.match(await row.textContent(), new RegExp(`\\b${process.pid}\\b`));
        // The presence probe finds the key with this grant's token on all 5 masters.
        await row.locator('.presence-count', { hasText: '5/5' }).waitFor({ timeout: 5000 });
        assert.equal(await row.locator('.dot-held').count(), 5);
        await waitForQuorum(page, 'healthy');
        await screenshot(page, '01-healthy-with-lock');

        const released = await client.release(resource, grant.token);
        await row.waitFor({ state: 'detached', timeout: msUntil(released.receivedAt + 2000) });
      });
    });
  });
});

describe('overview while masters die', { timeout: 120000 }, () => {
  const stack = useStack({ label: 'quorum-agent' }, { browser: true });

  // With 5 masters a lock needs 3. The banner is healthy only while all 5 are usable; one down
  // is at risk (margin 1, the text says so), two down still at risk (margin 0), three lost.
  it('marks killed masters down and the quorum at risk, then lost', async () => {
    const { cluster } = stack;
    await stack.withPage('quorum', async (page) => {
      await waitForAllMastersUp(page, 5);
      await waitForQuorum(page, 'healthy');

      const down = async (i) => {
        await cluster.kill(i);
        await page.waitForSelector(
          byTestId('master-card', { master: cluster.master(i).address, up: false }),
          { timeout: 10000 },
        );
      };

      await down(0);
      await waitForQuorum(page, 'at_risk', 5000);
      const upCards = page.locator(byTestId('master-card', { up: true }));
      assert.equal(await upCards.count(), 4);
      await screenshot(page, '02-at-risk');
      await down(1);
      await waitForQuorum(page, 'at_risk');
      assert.equal(await upCards.count(), 3);

      await down(2);
      await waitForQuorum(page, 'lost');
      await page.waitForFunction(
        () =>
          document.querySelectorAll('[data-testid="master-card"][data-up="false"]').length === 3,
        null,
        { timeout: 5000 },
      );
      await screenshot(page, '03-lost');
    });
  });
});

describe('restart quarantine', { timeout: 120000 }, () => {
  // max_ttl 4 s: the fresh masters count ~4 s after they started (the agent is ready only then),
  // and a restarted one 4 s after its restart.
  const stack = useStack(
    {
      label: 'quarantine-agent',
      extraArgs: ['--restart-quarantine', 'true', '--max-ttl-ms', '4000', '--default-ttl-ms', '1000'],
    },
    { browser: true },
  );

  it('shows a restarted master quarantined, why and for how long, then counts it again', async () => {
    const { cluster } = stack;
    await stack.withPage('quarantine', async (page) => {
      await waitForAllMastersUp(page, 5);
      await waitForQuorum(page, 'healthy');
      const m = cluster.master(0);
      await cluster.kill(0);
      await m.restart();
      const card = page.locator(byTestId('master-card', { master: m.address, quarantined: true }));
      await card.waitFor({ timeout: 10000 });
      await waitForQuorum(page, 'at_risk', 2000);
      assert.match(await card.locator('.mc-q-reason').textContent(),
        /^restarted (just now|.* ago) \(run_id \w+ became \w+\); may have forgotten the locks it held$/);
      assert.match(await card.locator('.mc-q-left').textContent(), /counts again in \d/);
      assert.match(await page.locator('#quorum-title').textContent(),
        /4 of 5 masters usable \(1 quarantined\)/);
      assert.match(await page.locator('#quorum-detail').textContent(),
        /1 master in restart quarantine .*: 127\.0\.0\.1:\d+\./);
      await screenshot(page, '04-quarantined');
      // max_ttl after its restart it counts again.
      await page.waitForSelector(byTestId('master-card', { master: m.address, quarantined: false }),
        { timeout: 8000 });
      await waitForQuorum(page, 'healthy', 2000);
    });
  });
});
