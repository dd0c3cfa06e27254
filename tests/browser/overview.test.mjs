// The operator page shows what the agent sees: masters, quorum, and locks held over the socket.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { EVENT_TIMEOUT_MS, byTestId, screenshot, useStack } from './browser.mjs';
import { START_TIMEOUT_MS, randomId } from './fixture.mjs';

// Waits until the page shows exactly `count` master cards and every one has data-up="true".
async function waitForAllMastersUp(page, count, timeout = EVENT_TIMEOUT_MS) {
  await page.waitForFunction(
    (n) => {
      const cards = document.querySelectorAll('[data-testid="master-card"]');
      return cards.length === n && [...cards].every((c) => c.getAttribute('data-up') === 'true');
    },
    count,
    { timeout },
  );
}

// Waits until the quorum banner shows state (healthy, at_risk, lost).
async function waitForQuorum(page, state, timeout = EVENT_TIMEOUT_MS) {
  await page.waitForSelector(byTestId('quorum-banner', { state }), { timeout });
}

describe('overview of a healthy cluster', { timeout: 120000 }, () => {
  const stack = useStack({ label: 'overview-agent' }, { browser: true });

  it('shows 5 masters up and a healthy quorum', async () => {
    await stack.withPage('healthy', async (page) => {
      await waitForAllMastersUp(page, 5);
      for (const m of stack.cluster.masters) {
        await page.waitForSelector(byTestId('master-card', { master: m.address, up: true }));
      }
      await waitForQuorum(page, 'healthy');
    });
  });

  it('lists a socket client\'s lock with its pid, and drops it on release', async () => {
    await stack.withPage('lock-row', async (page) => {
      // The page is up and polling before the lock exists. It shows the lock within about a
      // second (the agent's snapshot, the page's poll); the test does not time that, it waits
      // for the row (and then for it to go) with a generous deadline.
      await waitForAllMastersUp(page, 5);
      await stack.agent.withClient(async (client) => {
        const resource = `orders-${randomId()}`;
        const grant = await client.acquire(resource,
          { ttl_ms: 60000, renew: true, wait_ms: 10000 });
        const row = page.locator(byTestId('lock-row', { resource }));
        await row.waitFor({ state: 'visible' });
        assert.match(await row.textContent(), new RegExp(`\\b${process.pid}\\b`));
        // The presence probe finds the key with this grant's token on all 5 masters.
        await row.locator('.presence-count', { hasText: '5/5' }).waitFor();
        assert.equal(await row.locator('.dot-held').count(), 5);
        await waitForQuorum(page, 'healthy');
        await screenshot(page, '01-healthy-with-lock');

        await client.release(resource, grant.token);
        await row.waitFor({ state: 'detached' });
      });
    });
  });
});

describe('the kind of each hold', { timeout: 120000 }, () => {
  const stack = useStack({ label: 'kinds-agent' }, { browser: true });

  it('shows a semaphore\'s permits as n of K and shared holds as readers', async () => {
    await stack.withPage('lock-kinds', async (page) => {
      await waitForAllMastersUp(page, 5);
      const pool = `pool-${randomId()}`;
      const cfg = `cfg-${randomId()}`;
      const hold = { ttl_ms: 60000, renew: true, wait_ms: 10000 };
      await stack.agent.withClient(async (a) => {
        await stack.agent.withClient(async (b) => {
          const permits = [await a.acquire(pool, { ...hold, permits: 3 }),
            await b.acquire(pool, { ...hold, permits: 3 })];
          assert.deepEqual(permits.map((p) => p.mode), ['permit', 'permit']);
          await a.acquire(cfg, { ...hold, shared: true });
          await b.acquire(cfg, { ...hold, shared: true });

          const poolKinds = page.locator(`${byTestId('lock-row', { resource: pool })} ${byTestId('lock-kind')}`);
          const cfgKinds = page.locator(`${byTestId('lock-row', { resource: cfg })} ${byTestId('lock-kind')}`);
          // Both holds of each resource listed, each saying how many of its kind are held.
          await page.locator(byTestId('lock-kind', { mode: 'permit' }), { hasText: '2 of 3 held' })
            .nth(1).waitFor();
          await page.locator(byTestId('lock-kind', { mode: 'shared' }), { hasText: '2 readers' })
            .nth(1).waitFor();
          assert.equal(await poolKinds.count(), 2);
          assert.equal(await cfgKinds.count(), 2);
          const shown = (await poolKinds.allTextContents()).sort();
          const expected = permits.map((p) => `semaphore \u00b7 permit ${p.permit} \u00b7 2 of 3 held`).sort();
          assert.deepEqual(shown, expected);
          assert.deepEqual(await cfgKinds.allTextContents(), ['shared \u00b7 2 readers', 'shared \u00b7 2 readers']);
          await screenshot(page, '01b-semaphore-and-readers');
        });
      });
    });
  });
});

describe('masters over TLS', { timeout: 120000 }, () => {
  const stack = useStack({ label: 'tls-agent' }, { browser: true, tls: true });

  it('marks each rediss:// master TLS, and probes a lock on all of them', async () => {
    await stack.withPage('tls', async (page) => {
      await waitForAllMastersUp(page, 5);
      const pills = page.locator(byTestId('master-tls'));
      assert.equal(await pills.count(), 5);
      for (const text of await pills.allTextContents()) assert.equal(text, 'TLS');
      await stack.agent.withClient(async (client) => {
        const resource = `tls-${randomId()}`;
        const grant = await client.acquire(resource, { ttl_ms: 60000, wait_ms: 10000 });
        // The presence probe reads the key over TLS on every master.
        const row = page.locator(byTestId('lock-row', { resource }));
        await row.locator('.presence-count', { hasText: '5/5' }).waitFor();
        await screenshot(page, '01d-tls-masters');
        await client.release(resource, grant.token);
        await row.waitFor({ state: 'detached' });
      });
    });
  });
});

describe('a detached lease', { timeout: 120000 }, () => {
  const stack = useStack({ label: 'detached-agent' }, { browser: true });

  it('is listed after its connection closed, as created by its process', async () => {
    await stack.withPage('detached', async (page) => {
      await waitForAllMastersUp(page, 5);
      const resource = `lease-${randomId()}`;
      const grant = await stack.agent.withClient((client) =>
        client.acquire(resource, { ttl_ms: 60000, wait_ms: 10000, detach: true }));
      // The connection that took it is closed: the row is still there, marked detached, with
      // the creator's pid.
      const row = page.locator(byTestId('lock-row', { resource }));
      await row.locator(byTestId('lock-detached')).waitFor();
      assert.match(await row.textContent(), new RegExp(`detached created by pid ${process.pid}\\b`));
      assert.doesNotMatch(await row.textContent(), /session/);
      await screenshot(page, '01c-detached-lease');
      // Released by token from another connection of the same uid, it goes.
      await stack.agent.withClient((client) => client.release(resource, grant.token));
      await row.waitFor({ state: 'detached' });
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
        );
      };

      await down(0);
      await waitForQuorum(page, 'at_risk');
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
      );
      await screenshot(page, '03-lost');
    });
  });
});

describe('restart quarantine', { timeout: 180000 }, () => {
  // max_ttl 15 s: the fresh masters count 15 s after they started (the agent is ready only then),
  // and a restarted one 15 s after its restart: the page is read while it is quarantined, and that
  // must hold however slow the machine is, so the window is long (default_ttl stays within it).
  const QUARANTINE_MS = 15000;
  const stack = useStack(
    {
      label: 'quarantine-agent',
      extraArgs: ['--restart-quarantine', 'true', '--max-ttl-ms', String(QUARANTINE_MS),
        '--default-ttl-ms', '1000'],
      readyTimeoutMs: QUARANTINE_MS + START_TIMEOUT_MS,
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
      // One look at one render that shows the card quarantined and the quorum at risk: every
      // text read here is from that render, not from a later one after the quarantine ended.
      const shown = await (await page.waitForFunction(
        ({ cardSel, bannerSel }) => {
          const card = document.querySelector(cardSel);
          if (!card || !document.querySelector(bannerSel)) return null;
          const text = (el) => (el ? el.textContent : '');
          return {
            reason: text(card.querySelector('.mc-q-reason')),
            left: text(card.querySelector('.mc-q-left')),
            title: text(document.getElementById('quorum-title')),
            detail: text(document.getElementById('quorum-detail')),
          };
        },
        {
          cardSel: byTestId('master-card', { master: m.address, quarantined: true }),
          bannerSel: byTestId('quorum-banner', { state: 'at_risk' }),
        },
        { timeout: QUARANTINE_MS + EVENT_TIMEOUT_MS },
      )).jsonValue();
      assert.match(shown.reason,
        /^restarted \S+ ago \(run_id \w+ became \w+\), and counts once up \S+ \(max_ttl_ms\): it may have forgotten the locks it held$/);
      assert.match(shown.left, /counts again in \d/);
      assert.match(shown.title, /4 of 5 masters usable \(1 quarantined\)/);
      assert.match(shown.detail, /1 master in restart quarantine .*: 127\.0\.0\.1:\d+\./);
      await screenshot(page, '04-quarantined');
      // max_ttl after its restart it counts again.
      await page.waitForSelector(byTestId('master-card', { master: m.address, quarantined: false }),
        { timeout: QUARANTINE_MS + EVENT_TIMEOUT_MS });
      await waitForQuorum(page, 'healthy');
    });
  });
});
