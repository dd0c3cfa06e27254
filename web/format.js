// lockwarden operator page: formatting of numbers, durations and times for display.
// Pure functions; nothing here touches the DOM. Loaded first; app.js says how the parts fit.
'use strict';

(() => {
  const LW = (window.LW = window.LW || {});

  const pad2 = (n) => String(n).padStart(2, '0');
  const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const isNum = (v) => typeof v === 'number' && isFinite(v);

  /* 0.4 s, 45 s, 6m 12s, 2h 03m, 3d 4h. */
  function fmtDur(ms) {
    if (!isNum(ms)) return '\u2014';
    const sec = Math.max(0, ms) / 1000;
    if (sec < 10) return sec.toFixed(1) + ' s';
    if (sec < 60) return Math.floor(sec) + ' s';
    const m = Math.floor(sec / 60);
    if (m < 60) return m + 'm ' + pad2(Math.floor(sec % 60)) + 's';
    const hr = Math.floor(m / 60);
    if (hr < 24) return hr + 'h ' + pad2(m % 60) + 'm';
    return Math.floor(hr / 24) + 'd ' + (hr % 24) + 'h';
  }

  /* Latencies: 180 µs, 1.52 ms, 48.2 ms, 152 ms, 1.21 s. */
  function fmtLat(ms) {
    if (!isNum(ms)) return '\u2014';
    if (ms === 0) return '0';
    if (ms < 1) return Math.max(1, Math.round(ms * 1000)) + ' \u00b5s';
    if (ms < 10) return ms.toFixed(2) + ' ms';
    if (ms < 100) return ms.toFixed(1) + ' ms';
    if (ms < 1000) return Math.round(ms) + ' ms';
    return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
  }

  /* Axis labels: no trailing zeros (1 s, 2.5 ms). */
  function trimZeros(str) {
    return str.replace(/(\.\d*?)0+(?=\D|$)/, '$1').replace(/\.(?=\D|$)/, '');
  }

  function fmtRate(r) {
    if (!isNum(r) || r === 0) return '0/s';
    if (r < 0.1) return r.toFixed(2) + '/s';
    if (r < 10) return r.toFixed(1) + '/s';
    return Math.round(r) + '/s';
  }

  function fmtCount(n) {
    return isNum(n) ? n.toLocaleString('en-US') : '\u2014';
  }

  /* Wall-clock time of an event: 10:02:13 today, else "Nov 19 10:02". */
  function fmtClock(unixMs) {
    if (!isNum(unixMs)) return '\u2014';
    const d = new Date(unixMs);
    const now = new Date();
    const hms = pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
    if (d.toDateString() === now.toDateString()) return hms;
    return MONTHS[d.getMonth()] + ' ' + d.getDate() + ' ' + hms.slice(0, 5);
  }

  /* Configured periods: 60 s, 5 min, 2 h; falls back to fmtDur for odd values. */
  function fmtPeriod(ms) {
    if (!isNum(ms)) return '\u2014';
    if (ms % 3600000 === 0 && ms >= 3600000) return ms / 3600000 + ' h';
    if (ms % 60000 === 0 && ms >= 300000) return ms / 60000 + ' min';
    if (ms % 1000 === 0 && ms < 300000) return ms / 1000 + ' s';
    return fmtDur(ms);
  }

  function fmtCountdown(ms) {
    if (!isNum(ms)) return '\u2014';
    if (ms <= 0) return 'expired';
    return fmtDur(ms);
  }

  function truncate(str, n) {
    return str.length > n ? str.slice(0, n - 1) + '\u2026' : str;
  }

  function plural(n, one, many) {
    return n + ' ' + (n === 1 ? one : many || one + 's');
  }

  /* An election's leader as its record names it: "leader host-a:8080 · term 7". */
  function leaderText(e) {
    return 'leader ' + (e.value != null ? e.value : '(no value)') + ' \u00b7 term ' + e.term;
  }

  /* 1, 2, 2.5, 5 x 10^n at or above v. */
  function niceCeil(v) {
    if (!(v > 0)) return 1;
    const e = Math.pow(10, Math.floor(Math.log10(v)));
    const f = v / e;
    const n = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
    return n * e;
  }

  Object.assign(LW, {
    isNum, fmtDur, fmtLat, trimZeros, fmtRate, fmtCount, fmtClock, fmtPeriod, fmtCountdown,
    truncate, plural, niceCeil, leaderText,
  });
})();
