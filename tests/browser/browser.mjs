// The browser side: Debian's chromium through playwright-core, pages watched for console
// errors, screenshots; and useStack, the masters, agent and browser a describe block runs against.

import fs from 'node:fs';
import path from 'node:path';
import { after, before } from 'node:test';

import {
  Agent, EVENT_TIMEOUT_MS, RedisCluster, chromiumPath, here, makeTempDir, outputDir, removeTempDir,
} from './fixture.mjs';
import { makeTlsFiles } from './tls_files.mjs';

// What a test waits for on the page (a poll's result rendered, a dialog opening, a response)
// comes within this, however loaded the machine: see EVENT_TIMEOUT_MS.
export { EVENT_TIMEOUT_MS };

async function loadPlaywright() {
  try {
    return await import('playwright-core');
  } catch (err) {
    throw new Error(
      `cannot load playwright-core (${err.message}): run "npm ci" in ${here} ` +
        '(bash .ci/deps.sh does it)',
    );
  }
}

export async function launchBrowser() {
  const { chromium } = await loadPlaywright();
  if (!fs.existsSync(chromiumPath)) {
    throw new Error(`${chromiumPath} not found: apt-get install chromium (bash .ci/deps.sh)`);
  }
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu'],
  });
}

// Collects what must never happen on the page: console errors (CSP violations among them) and
// uncaught exceptions. An error the test provokes on purpose (e.g. the browser's
// "Failed to load resource: ... 401" for a refused action) is allowed with expect().
export class PageWatch {
  constructor(page) {
    this.problems = [];
    this.allowances = []; // {re, left}
    page.on('console', (msg) => {
      if (msg.type() !== 'error') return;
      const loc = msg.location();
      const text = `${msg.text()}${loc && loc.url ? ` (${loc.url})` : ''}`;
      const allowance = this.allowances.find((a) => a.left > 0 && a.re.test(text));
      if (allowance) allowance.left -= 1;
      else this.problems.push(`console error: ${text}`);
    });
    page.on('pageerror', (err) => this.problems.push(`uncaught exception: ${err.stack || err}`));
  }

  // Allows `count` console errors matching re from now on.
  expect(re, count = 1) {
    this.allowances.push({ re, left: count });
  }

  assertClean() {
    if (this.problems.length) {
      throw new Error(`the page reported problems:\n  ${this.problems.join('\n  ')}`);
    }
  }
}

// Reports CSP violations as console errors even where Chromium would only count them.
const CSP_REPORTER = `document.addEventListener('securitypolicyviolation', (e) => {
  console.error('CSP violation: ' + e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') +
    ' at ' + e.sourceFile + ':' + e.lineNumber);
});`;

// Runs body(page, watch) on a fresh 1280x900 page (own context: fresh sessionStorage) at url,
// then checks the page stayed clean. On failure, saves FAIL-<name>.png for diagnosis.
// options.clock: install Playwright's clock before the page loads (its timers still run in real
// time until the test takes control, e.g. page.clock.runFor()).
export async function withPage(browser, url, name, body, { clock = false } = {}) {
  fs.rmSync(path.join(outputDir, `FAIL-${name}.png`), { force: true }); // from an earlier run
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(EVENT_TIMEOUT_MS); // clicks and waits without their own timeout
  try {
    const page = await context.newPage();
    const watch = new PageWatch(page);
    await page.addInitScript(CSP_REPORTER);
    if (clock) await page.clock.install();
    try {
      const response = await page.goto(url, { waitUntil: 'load' });
      if (!response || !response.ok()) {
        throw new Error(`GET ${url}: HTTP ${response ? response.status() : 'no response'}`);
      }
      await body(page, watch);
    } catch (err) {
      await screenshot(page, `FAIL-${name}`).catch(() => {});
      if (watch.problems.length) err.message += `\n(page problems: ${watch.problems.join('; ')})`;
      throw err;
    }
    watch.assertClean();
  } finally {
    await context.close();
  }
}

export async function screenshot(page, name) {
  fs.mkdirSync(outputDir, { recursive: true });
  // A click scrolls the page; a full-page capture of a scrolled page draws fixed and sticky
  // elements (the top bar, a modal dialog) at the scroll offset, over the content.
  await page.evaluate(() => window.scrollTo(0, 0));
  const file = path.join(outputDir, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

// CSS selector for a data-testid with optional data-* attributes, e.g.
// byTestId('lock-row', {resource: 'orders'}) -> [data-testid="lock-row"][data-resource="orders"]
export function byTestId(id, attrs = {}) {
  let sel = `[data-testid=${JSON.stringify(id)}]`;
  for (const [k, v] of Object.entries(attrs)) sel += `[data-${k}=${JSON.stringify(String(v))}]`;
  return sel;
}

// Registers before/after hooks in the calling describe block: before() starts 5 redis-server
// masters, an agent on them (agentOptions as for Agent.start) and, with {browser: true},
// chromium; after() stops what started. Returns the object before() fills in: {cluster, agent,
// browser}, and withPage(name, body, options), which is withPage() on the agent's page.
// tls: the masters speak TLS only (rediss://), with a CA and certificate made for the stack.
export function useStack(agentOptions = {}, { browser: withBrowser = false, tls = false } = {}) {
  let tlsDir = null;
  const stack = {
    cluster: null,
    agent: null,
    browser: null,
    withPage(name, body, options) {
      return withPage(stack.browser, `${stack.agent.baseUrl}/`, name, body, options);
    },
  };
  before(async () => {
    tlsDir = tls ? makeTempDir('lw-browser-tls-') : null;
    const files = tlsDir ? makeTlsFiles(tlsDir) : null;
    stack.cluster = await RedisCluster.start(5, { tls: files });
    const extraArgs = [...(agentOptions.extraArgs ?? []),
      ...(files ? ['--redis-tls-ca-file', files.ca] : [])];
    stack.agent = await Agent.start(stack.cluster, { ...agentOptions, extraArgs });
    if (withBrowser) stack.browser = await launchBrowser();
  });
  after(async () => {
    await stack.browser?.close();
    await stack.agent?.stop();
    await stack.cluster?.stop();
    if (tlsDir) removeTempDir(tlsDir);
  });
  return stack;
}

// What is wrong with how the two charts are drawn right now, as sentences (empty: nothing):
// drawn for another width than they show at (so scaled, labels and all), or axis labels that
// overlap. Called after a full-page screenshot, which resizes the page and back.
export async function chartProblems(page) {
  return page.evaluate(() => {
    const problems = [];
    for (const svg of document.querySelectorAll('svg.chart')) {
      const shown = svg.getBoundingClientRect().width;
      const drawn = Number((svg.getAttribute('viewBox') || '').split(' ')[2]);
      if (!(Math.abs(shown - drawn) <= 1)) problems.push(`${svg.id}: drawn ${drawn} wide, shown ${shown} wide`);
      const boxes = [...svg.querySelectorAll('text.tick')].map((t) => [t.textContent, t.getBoundingClientRect()]);
      for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
          const [ta, a] = boxes[i];
          const [tb, b] = boxes[j];
          if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) {
            problems.push(`${svg.id}: labels "${ta}" and "${tb}" overlap`);
          }
        }
      }
    }
    return problems;
  });
}
