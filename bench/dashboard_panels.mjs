#!/usr/bin/env node
// The dashboard's wait and hold panels under load, rendered by a real Prometheus (Grafana is not
// packaged in Debian): a fresh agent over 5 masters, a Prometheus scraping it every second,
// lw_bench's 16-on-1 contended load (16 clients, one resource) for --seconds; then every
// histogram panel of dashboards/lockwarden.json is evaluated over the load's window and printed
// beside what the clients measured (lw_bench's acquire latency p50/p90/p99), and Prometheus's own
// graph page is screenshotted with the wait and hold panels' expressions (headless Chromium).
//
//   node bench/dashboard_panels.mjs [--binary build/lockwarden] [--bench build/bench/lw_bench]
//        [--seconds 30] [--clients 16] [--out build/dashboard-panels] [--label NAME]
//
// Needs: redis-server, prometheus, chromium and tests/browser's npm packages
// (`bash .ci/deps.sh --browser`). A figure, never a verdict: nothing here fails on a number.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as pause } from 'node:timers/promises';
import { parseArgs } from 'node:util';


const repoRoot = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const { values: opts } = parseArgs({
  options: {
    binary: { type: 'string', default: path.join(repoRoot, 'build', 'lockwarden') },
    bench: { type: 'string', default: path.join(repoRoot, 'build', 'bench', 'lw_bench') },
    seconds: { type: 'string', default: '30' },
    clients: { type: 'string', default: '16' },
    out: { type: 'string', default: path.join(repoRoot, 'build', 'dashboard-panels') },
    label: { type: 'string', default: '' },
  },
});
const seconds = Number(opts.seconds);
const label = opts.label || path.basename(path.dirname(path.resolve(opts.binary)));
// The fixture reads LOCKWARDEN_BINARY when it is loaded: set it first.
process.env.LOCKWARDEN_BINARY = path.resolve(opts.binary);
const { launchBrowser } = await import('../tests/browser/browser.mjs');
const {
  Agent, RedisCluster, freePort, makeTempDir, removeTempDir, spawnLogged, stopChild, waitUntil,
} = await import('../tests/browser/fixture.mjs');

// Starts Prometheus scraping target every second; resolves to {url, child} once it is ready.
async function startPrometheus(dir, target) {
  const port = await freePort();
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), [
    'global:', '  scrape_interval: 1s', '  scrape_timeout: 1s',
    'scrape_configs:', '  - job_name: lockwarden', '    static_configs:',
    `      - targets: ['${target}']`, ''].join('\n'));
  const child = await spawnLogged(['prometheus', `--config.file=${dir}/prometheus.yml`,
    `--storage.tsdb.path=${dir}/data`, `--web.listen-address=127.0.0.1:${port}`,
    '--log.level=warn'], path.join(dir, 'prometheus.log'));
  const url = `http://127.0.0.1:${port}`;
  await waitUntil(async () => (await fetch(`${url}/-/ready`).catch(() => null))?.ok, {
    timeoutMs: 30000, intervalMs: 200, what: 'prometheus to be ready',
  });
  return { url, child };
}

async function query(prom, expr, time) {
  const u = `${prom}/api/v1/query?query=${encodeURIComponent(expr)}&time=${time}`;
  const body = await (await fetch(u)).json();
  if (body.status !== 'success') throw new Error(`${expr}: ${JSON.stringify(body)}`);
  return body.data.result;
}

// The dashboard's histogram panels: [{title, legend, expr}], with Grafana's variables replaced
// for this one agent and the load's window.
function histogramPanels(windowS) {
  const dash = JSON.parse(fs.readFileSync(path.join(repoRoot, 'dashboards', 'lockwarden.json'), 'utf8'));
  const panels = [];
  const walk = (list) => {
    for (const p of list ?? []) {
      walk(p.panels);
      for (const t of p.targets ?? []) {
        if (!/_seconds_bucket/.test(t.expr ?? '') || !/histogram_quantile/.test(t.expr)) continue;
        const expr = t.expr.replaceAll('$__rate_interval', `${windowS}s`)
          .replaceAll('job=~"$job"', 'job="lockwarden"').replaceAll('instance=~"$instance"', 'instance=~".+"');
        if (expr.includes('$')) throw new Error(`a Grafana variable left in ${expr}`);
        panels.push({ title: p.title, legend: t.legendFormat ?? '', expr });
      }
    }
  };
  walk(dash.panels);
  return panels;
}

async function main() {
  const dir = makeTempDir('lw-panels-');
  fs.mkdirSync(opts.out, { recursive: true });
  let cluster = null;
  let agent = null;
  let prom = null;
  try {
    cluster = await RedisCluster.start(5);
    agent = await Agent.start(cluster, { token: false, label: `panels-${label}`, logDir: opts.out,
      extraArgs: ['--log-level', 'info'] });
    prom = await startPrometheus(dir, `127.0.0.1:${agent.adminPort}`);
    await pause(2500); // two scrapes before the load: the counters' starting points
    const t0 = Date.now() / 1000;
    const json = path.join(dir, 'bench.json');
    execFileSync(opts.bench, ['--socket', agent.socketPath, '--mode', 'contended', '--clients',
      opts.clients, '--seconds', String(seconds), '--warmup-seconds', '0', '--wait-ms', '5000',
      '--json', json], { stdio: ['ignore', 'ignore', 'inherit'] });
    await pause(2500); // the last samples scraped
    const t1 = Date.now() / 1000;
    const b = JSON.parse(fs.readFileSync(json, 'utf8').trim().split('\n').at(-1));
    const windowS = Math.ceil(t1 - t0) + 2;
    const client = { 0.5: b.acquire_us_p50 / 1e6, 0.9: b.acquire_us_p90 / 1e6, 0.99: b.acquire_us_p99 / 1e6 };
    console.log(`${label}: ${opts.clients}-on-1 for ${seconds} s: ${b.cycles} cycles ` +
      `(${b.cycles_per_s}/s); client-measured acquire p50 ${(client[0.5] * 1e3).toFixed(3)} ms, ` +
      `p90 ${(client[0.9] * 1e3).toFixed(3)} ms, p99 ${(client[0.99] * 1e3).toFixed(3)} ms`);
    // Whether Prometheus could scrape the agent during the load (a figure for the panels' gaps).
    const [scrapes] = await query(prom.url, `count_over_time(up[${windowS}s])`, t1);
    const [ups] = await query(prom.url, `sum_over_time(up[${windowS}s])`, t1);
    const [slowest] = await query(prom.url, `max_over_time(scrape_duration_seconds[${windowS}s])`, t1);
    console.log(`  scrapes in the window: ${scrapes?.value[1]}, up in ${ups?.value[1]}; slowest ` +
      `${(Number(slowest?.value[1]) * 1e3).toFixed(1)} ms`);
    const rows = [];
    for (const p of histogramPanels(windowS)) {
      for (const r of await query(prom.url, p.expr, t1)) {
        const q = Number(/histogram_quantile\(([\d.]+)/.exec(p.expr)[1]);
        const v = Number(r.value[1]);
        if (Number.isNaN(v)) continue; // a series with no samples in the window
        const series = Object.entries(r.metric).map(([k, x]) => `${k}=${x}`).join(',');
        const vsClient = /acquire_wait|grant_wait/.test(p.expr) && client[q]
          ? ` (${((v / client[q] - 1) * 100).toFixed(1)}% vs client p${Math.round(q * 100)})` : '';
        rows.push({ panel: p.title, q, series, value: v });
        console.log(`  ${p.title} [q=${q}${series ? ` ${series}` : ''}]: ${(v * 1e3).toFixed(3)} ms${vsClient}`);
      }
    }
    fs.writeFileSync(path.join(opts.out, `panels-${label}.json`),
      `${JSON.stringify({ label, bench: b, client, rows }, null, 1)}\n`);
    // Prometheus's graph page with the wait and hold panels' expressions (every panel but the
    // masters'), each over 5 s windows. Its end field takes whole minutes (UTC): the graph ends
    // at the next whole minute and starts before the load did.
    const shown = histogramPanels(windowS).filter((p) => !/master_request/.test(p.expr));
    const endMs = Math.ceil((t1 * 1000 + 1000) / 60000) * 60000;
    const end = encodeURIComponent(new Date(endMs).toISOString().slice(0, 16).replace('T', ' '));
    const rangeS = Math.ceil(endMs / 1000 - t0) + 5;
    const qs = shown.map((p, i) => `g${i}.expr=${encodeURIComponent(p.expr.replace(`[${windowS}s]`, '[5s]'))}` +
      `&g${i}.tab=0&g${i}.range_input=${rangeS}s&g${i}.end_input=${end}` +
      `&g${i}.moment_input=${end}`).join('&');
    const browser = await launchBrowser();
    try {
      const page = await browser.newPage({ viewport: { width: 1400, height: 3600 } });
      await page.goto(`${prom.url}/graph?${qs}`, { waitUntil: 'networkidle' });
      await page.waitForTimeout(1500); // the charts draw after their data arrived
      const png = path.join(opts.out, `panels-${label}.png`);
      await page.screenshot({ path: png, fullPage: true });
      console.log(`screenshot: ${png}`);
    } finally {
      await browser.close();
    }
  } finally {
    if (prom) await stopChild(prom.child, 'SIGTERM');
    if (agent) await agent.stop();
    if (cluster) await cluster.stop();
    removeTempDir(dir);
  }
}

main().catch((err) => {
  console.error(`dashboard_panels: ${err.stack || err}`);
  process.exit(1);
});
