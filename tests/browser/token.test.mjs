// The page of an agent whose admin listener is reachable beyond loopback (0.0.0.0): it shows
// nothing without the admin token, says so once instead of failing every second, and works as
// usual once the token is pasted, sending it with every poll.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { byTestId, screenshot, useStack } from './browser.mjs';
import { httpRequest } from './clients.mjs';
import { randomId } from './fixture.mjs';

const STATE = '/api/v1/state';

function isStatePoll(request) {
  return new URL(request.url()).pathname === STATE;
}

async function saveToken(page, token) {
  await page.fill(byTestId('token-input'), token);
  await page.click(byTestId('token-save'));
}

describe('an agent listening beyond loopback', { timeout: 120000 }, () => {
  // The browser still connects over 127.0.0.1: the agent decides by the address it listens on.
  const stack = useStack(
    { label: 'beyond-loopback-agent', extraArgs: ['--admin-listen', '0.0.0.0:0'] },
    { browser: true },
  );

  it('refuses reads without the token (the fixture sends it)', async () => {
    const { agent } = stack;
    const bare = await httpRequest(`${agent.baseUrl}${STATE}`);
    assert.equal(bare.status, 401, bare.text);
    assert.equal(JSON.parse(bare.text).error, 'unauthorized');
    assert.equal((await httpRequest(`${agent.baseUrl}/healthz`)).status, 200);
    assert.ok((await agent.state()).quorum, 'with the token, the state');
  });

  it('asks for the token, shows nothing and stops polling until it is given', async () => {
    const { agent } = stack;
    await stack.withPage('token-needed', async (page, watch) => {
      // Chromium logs each refused request as a console error: the first poll, the wrong token.
      watch.expect(/status of 401/, 2);
      const notice = page.locator(byTestId('token-needed'));
      await notice.waitFor({ state: 'visible' });
      assert.match(await notice.textContent(), /needs the admin token to show anything/);
      assert.equal(await page.locator(byTestId('quorum-banner')).isVisible(), false);
      assert.equal(await page.locator('#stale-warning').isVisible(), false, 'no error banner');
      assert.equal(await page.getAttribute(byTestId('last-update'), 'data-stale'), 'true');

      // No storm: nothing is polled while the token is missing (the page polls every second).
      // The page's clock (Playwright's) runs 5 s of its timers at once, whatever the machine's
      // speed: a page that still polled would send its poll within them. Then a request of our
      // own from the page: the page's requests are reported in the order it sends them, so a
      // poll sent before it has been reported by the time it is.
      const polls = [];
      page.on('request', (r) => {
        if (isStatePoll(r)) polls.push(r);
      });
      await page.clock.runFor(5000);
      const marker = `/healthz?after-polls=${randomId()}`;
      const markerSeen = page.waitForRequest((r) => r.url().endsWith(marker));
      await page.evaluate((url) => fetch(url).then((r) => r.status), marker);
      await markerSeen;
      assert.equal(polls.length, 0, 'the page kept polling without a token');
      await screenshot(page, '08-token-needed');

      // A wrong token: refused, and the page says so.
      const wrongPoll = page.waitForResponse((r) => isStatePoll(r.request()));
      await saveToken(page, `wrong-${randomId(12)}`);
      assert.equal((await wrongPoll).status(), 401);
      await page.waitForFunction(
        () => document.getElementById('token-needed-title').textContent.includes('refused'),
      );
      assert.ok(await notice.isVisible());

      // The right one: the page shows the agent, and every poll carries the token.
      const goodPoll = page.waitForResponse((r) => isStatePoll(r.request()));
      await saveToken(page, agent.token);
      const good = await goodPoll;
      assert.equal(good.status(), 200);
      assert.equal(good.request().headers().authorization, `Bearer ${agent.token}`);
      await notice.waitFor({ state: 'hidden' });
      await page.waitForSelector(byTestId('quorum-banner', { state: 'healthy' }));
      const next = await page.waitForRequest(isStatePoll);
      assert.equal(next.headers().authorization, `Bearer ${agent.token}`);
    }, { clock: true });
  });
});
