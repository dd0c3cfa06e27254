// lockwarden operator page: the two SVG charts of the last 15 minutes (acquires per
// second by outcome, stacked; acquire wait p99) with their legends and per-bucket tooltips.
'use strict';

(() => {
  const LW = (window.LW = window.LW || {});
  const { $, h, s, setText, S, changed } = LW;
  const { isNum, fmtRate, fmtClock, fmtPeriod, fmtLat, trimZeros, niceCeil } = LW;

  const OUTCOMES = ['acquired', 'timeout', 'no_quorum', 'error'];
  const OUTCOME_LABEL = { acquired: 'acquired', timeout: 'timeout', no_quorum: 'no quorum', error: 'error' };

  const CH = { height: 128, pad: { l: 52, r: 10, t: 8, b: 19 } };

  function renderCharts(d, force) {
    const hist = d.history || { bucket_ms: 5000, points: [] };
    const wr = $('rate-wrap').clientWidth;
    const ww = $('wait-wrap').clientWidth;
    // Not laid out at the moment (0 wide: hidden, or mid-resize): a drawing now would be scaled
    // up to the real width later, labels and all. The resize observer draws once it is.
    if (!wr || !ww) return;
    // Redrawing under the pointer would kill the bucket tooltip being read; catch up on leave.
    if (!force && ($('rate-wrap').matches(':hover') || $('wait-wrap').matches(':hover'))) return;
    if (!changed('charts', [hist, wr, ww]) && !force) return;
    drawRate($('chart-rate'), wr, hist);
    drawWait($('chart-wait'), ww, hist);
  }

  /* Frame shared by both charts: size, gridlines, y labels, time labels. Returns the geometry. */
  function chartFrame(svg, width, hist, ymax, fmtY) {
    const W = Math.max(240, Math.floor(width));
    const H = CH.height;
    const p = CH.pad;
    svg.textContent = '';
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
    svg.setAttribute('width', W);
    svg.setAttribute('height', H);
    const pw = W - p.l - p.r;
    const ph = H - p.t - p.b;
    const bucket = hist.bucket_ms > 0 ? hist.bucket_ms : 5000;
    const pts = Array.isArray(hist.points) ? hist.points : [];
    const slots = Math.max(pts.length, Math.round(900000 / bucket), 1);
    const g = { W, H, pw, ph, bucket, pts, slots, bw: pw / slots, x0: p.l, top: p.t, base: p.t + ph };
    g.y = (v) => g.base - (Math.min(v, ymax) / ymax) * ph;
    g.slotX = (j) => p.l + (slots - pts.length + j) * g.bw;

    const grid = s('g', { class: 'grid-lines' });
    for (const f of [0, 0.5, 1]) {
      const y = Math.round(g.y(ymax * f)) + 0.5;
      grid.append(s('line', { x1: p.l, x2: W - p.r, y1: y, y2: y, class: f === 0 ? 'axis' : 'grid' }));
      grid.append(s('text', { x: p.l - 6, y: y + 4, 'text-anchor': 'end', class: 'tick' }, f === 0 ? '0' : fmtY(ymax * f)));
    }
    const spanMin = Math.round((slots * bucket) / 60000);
    // A minute label is left out where it would run into the two end labels (11 px text:
    // about 6 px a character).
    const leftEnd = p.l + 6 * (spanMin + ' min ago').length + 6;
    const rightStart = W - p.r - 6 * 'now'.length - 6;
    for (let m = 5; m < spanMin; m += 5) {
      const x = Math.round(p.l + pw * (1 - (m * 60000) / (slots * bucket))) + 0.5;
      grid.append(s('line', { x1: x, x2: x, y1: p.t, y2: g.base, class: 'grid' }));
      const half = (6 * (m + ' min').length) / 2;
      if (x - half < leftEnd || x + half > rightStart) continue;
      grid.append(s('text', { x, y: H - 5, 'text-anchor': 'middle', class: 'tick' }, m + ' min'));
    }
    grid.append(s('text', { x: p.l, y: H - 5, 'text-anchor': 'start', class: 'tick' }, spanMin + ' min ago'));
    grid.append(s('text', { x: W - p.r, y: H - 5, 'text-anchor': 'end', class: 'tick' }, 'now'));
    svg.append(grid);
    return g;
  }

  /* A transparent column per bucket whose <title> is the tooltip. */
  function hoverColumn(g, j, text) {
    const r = s('rect', { x: g.slotX(j), y: g.top, width: Math.max(1, g.bw), height: g.ph, class: 'hover' });
    r.append(s('title', {}, text));
    return r;
  }

  function drawRate(svg, width, hist) {
    const sec = (hist.bucket_ms > 0 ? hist.bucket_ms : 5000) / 1000;
    const pts = Array.isArray(hist.points) ? hist.points : [];
    const rate = (p, o) => (isNum(p[o]) ? p[o] : 0) / sec;
    let max = 0;
    for (const p of pts) max = Math.max(max, OUTCOMES.reduce((a, o) => a + rate(p, o), 0));
    const ymax = niceCeil(max);
    const g = chartFrame(svg, width, hist, ymax, (v) => (v >= 10 ? Math.round(v) : +v.toPrecision(3)) + '/s');
    const bars = s('g', { class: 'bars' });
    const hover = s('g', {});
    const w = Math.max(1, g.bw - (g.bw >= 3 ? 1 : 0));
    pts.forEach((p, j) => {
      const x = g.slotX(j);
      const partial = j === pts.length - 1;
      let acc = 0;
      for (const o of OUTCOMES) {
        const v = rate(p, o);
        if (v <= 0) continue;
        const y1 = g.y(acc + v);
        const hgt = Math.max(1.5, g.y(acc) - y1);
        bars.append(s('rect', { x, y: Math.min(y1, g.base - hgt), width: w, height: hgt,
          class: 'o-' + o + (partial ? ' partial' : '') }));
        acc += v;
      }
      const parts = OUTCOMES.map((o) => OUTCOME_LABEL[o] + ' ' + fmtRate(rate(p, o)));
      hover.append(hoverColumn(g, j, fmtClock(p.t) + (partial ? ' (bucket in progress)' : '') + '\n' + parts.join(', ')));
    });
    svg.append(bars, hover);

    // legend: rates of the last complete bucket
    const last = pts.length >= 2 ? pts[pts.length - 2] : pts[pts.length - 1];
    const legend = $('rate-legend');
    legend.textContent = '';
    for (const o of OUTCOMES) {
      const item = h('span', 'lg-item');
      item.append(h('span', 'sw o-' + o), h('span', null, OUTCOME_LABEL[o] + ' '),
        h('strong', null, last ? fmtRate(rate(last, o)) : '\u2014'));
      legend.append(item);
    }
    legend.title = 'rates of the last full ' + fmtPeriod(sec * 1000) + ' bucket; bars are stacked in this order';
    const failed = last ? rate(last, 'timeout') + rate(last, 'no_quorum') + rate(last, 'error') : 0;
    setText($('rate-now'), last ? fmtRate(rate(last, 'acquired')) + ' acquired' + (failed > 0 ? ', ' + fmtRate(failed) +
      ' failed' : ', none failed') + ' (last ' + fmtPeriod(sec * 1000) + ')' : '');
    $('rate-now').classList.toggle('is-bad', failed > 0);
  }

  function drawWait(svg, width, hist) {
    const pts = Array.isArray(hist.points) ? hist.points : [];
    const vals = pts.map((p) => (isNum(p.wait_p99_ms) ? p.wait_p99_ms : null));
    const max = vals.reduce((a, v) => (v != null && v > a ? v : a), 0);
    const ymax = niceCeil(max);
    const g = chartFrame(svg, width, hist, ymax, (v) => trimZeros(fmtLat(v)));
    const cx = (j) => g.slotX(j) + g.bw / 2;
    const lines = s('g', { class: 'wait' });
    let seg = [];
    const flush = () => {
      if (seg.length === 1) {
        lines.append(s('circle', { cx: seg[0][0], cy: seg[0][1], r: 2, class: 'wait-dot' }));
      } else if (seg.length > 1) {
        const d = seg.map((q, i) => (i ? 'L' : 'M') + q[0].toFixed(1) + ' ' + q[1].toFixed(1)).join(' ');
        const area = d + ' L' + seg[seg.length - 1][0].toFixed(1) + ' ' + g.base + ' L' + seg[0][0].toFixed(1) + ' ' + g.base + ' Z';
        lines.append(s('path', { d: area, class: 'wait-area' }), s('path', { d, class: 'wait-line' }));
      }
      seg = [];
    };
    const hover = s('g', {});
    vals.forEach((v, j) => {
      if (v == null) flush();
      else seg.push([cx(j), g.y(v)]);
      hover.append(hoverColumn(g, j, fmtClock(pts[j].t) + '\n' + (v == null ? 'no acquire finished' : 'wait p99 ' + fmtLat(v))));
    });
    flush();
    svg.append(lines, hover);

    const lastIdx = pts.length >= 2 ? pts.length - 2 : pts.length - 1;
    const lastV = lastIdx >= 0 ? vals[lastIdx] : null;
    const legend = $('wait-legend');
    legend.textContent = '';
    const item = h('span', 'lg-item');
    item.append(h('span', 'sw sw-line'), h('span', null, 'wait p99 '), h('strong', null, fmtLat(lastV)));
    legend.append(item);
    const mx = h('span', 'lg-item');
    mx.append(h('span', null, 'max '), h('strong', null, max > 0 ? fmtLat(max) : '\u2014'));
    legend.append(mx);
    legend.append(h('span', 'muted lg-note', 'gaps: no acquire finished'));
    setText($('wait-now'), lastV == null ? 'no acquires in the last bucket' : 'p99 ' + fmtLat(lastV) + ' now');
  }

  function initCharts() {
    if (!('ResizeObserver' in window)) return;
    let pending = 0;
    const ro = new ResizeObserver(() => {
      cancelAnimationFrame(pending);
      pending = requestAnimationFrame(() => S.data && renderCharts(S.data, false));
    });
    for (const id of ['rate-wrap', 'wait-wrap']) {
      ro.observe($(id));
      $(id).addEventListener('mouseleave', () => S.data && renderCharts(S.data, false));
    }
  }

  Object.assign(LW, { renderCharts, initCharts });
})();
