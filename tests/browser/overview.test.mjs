// The operator page shows what the agent sees: masters, quorum, and locks held over the socket.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { byTestId, launchBrowser, screenshot, withPage } from './browser.mjs';
import { LockClient } from './clients.mjs';
import { Agent, RedisCluster, msUntil, randomId } from './fixture.mjs';

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

describe('overview of a healthy cluster', { timeout: 120000 }, () => {
  let cluster;
  let agent;
  let browser;

  before(async () => {
    cluster = await RedisCluster.start(5);
    agent = await Agent.start(cluster, { label: 'overview-agent' });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await agent?.stop();
    await cluster?.stop();
  });

  it('shows 5 masters up and a healthy quorum', async () => {
    await withPage(browser, `${agent.baseUrl}/`, 'healthy', async (page) => {
      await waitForAllMastersUp(page, 5);
      for (const m of cluster.masters) {
        await page.waitForSelector(byTestId('master-card', { master: m.address, up: true }), {
          timeout: 1000,
        });
      }
      await page.waitForSelector(byTestId('quorum-banner', { state: 'healthy' }), {
        timeout: 5000,
      });
    });
  });

  it('lists a socket client\'s lock within 2 s with its pid, and drops it on release', async () => {
    await withPage(browser, `${agent.baseUrl}/`, 'lock-row', async (page) => {
      // The page is up and polling before the lock exists, so the 2 s measure only the
      // agent's snapshot and the page's poll.
      await waitForAllMastersUp(page, 5);
      const client = await LockClient.connect(agent.socketPath);
      try {
        const resource = `orders-${randomId()}`;
        const grant = await client.acquire(resource, { ttl_ms: 60000, renew: true });
        const row = page.locator(byTestId('lock-row', { resource }));
        await row.waitFor({ state: 'visible', timeout: msUntil(grant.receivedAt + 2000) });
        assert.match(await row.textContent(), new RegExp(`\\b${process.pid}\\b`));
        await page.waitForSelector(byTestId('quorum-banner', { state: 'healthy' }));
        await screenshot(page, '01-healthy-with-lock');

        const released = await client.release(resource, grant.token);
        await row.waitFor({ state: 'detached', timeout: msUntil(released.receivedAt + 2000) });
      } finally {
        client.close();
      }
    });
  });
});

describe('overview while masters die', { timeout: 120000 }, () => {
  let cluster;
  let agent;
  let browser;

  before(async () => {
    cluster = await RedisCluster.start(5);
    agent = await Agent.start(cluster, { label: 'quorum-agent' });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await agent?.stop();
    await cluster?.stop();
  });

  // With 5 masters a lock needs 3. The banner is healthy only while all 5 are usable; one down
  // is at risk (margin 1, the text says so), two down still at risk (margin 0), three lost.
  it('marks killed masters down and the quorum at risk, then lost', async () => {
    await withPage(browser, `${agent.baseUrl}/`, 'quorum', async (page) => {
      await waitForAllMastersUp(page, 5);
      await page.waitForSelector(byTestId('quorum-banner', { state: 'healthy' }));

      const down = async (i) => {
        await cluster.kill(i);
        await page.waitForSelector(
          byTestId('master-card', { master: cluster.master(i).address, up: false }),
          { timeout: 10000 },
        );
      };

      await down(0);
      await page.waitForSelector(byTestId('quorum-banner', { state: 'at_risk' }), {
        timeout: 5000,
      });
      const upCards = page.locator(byTestId('master-card', { up: true }));
      assert.equal(await upCards.count(), 4);
      await screenshot(page, '02-at-risk');
      await down(1);
      await page.waitForSelector(byTestId('quorum-banner', { state: 'at_risk' }), {
        timeout: 10000,
      });
      assert.equal(await upCards.count(), 3);

      await down(2);
      await page.waitForSelector(byTestId('quorum-banner', { state: 'lost' }), {
        timeout: 10000,
      });
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
