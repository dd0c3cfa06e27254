// lockwarden operator page: polls GET /api/v1/state once a second and renders it.
//
// Safety rules this file keeps:
// - Every string from the agent (resource names, keys, cmdlines, messages) reaches the DOM through
//   textContent or setAttribute, never through innerHTML: they are attacker-controlled.
// - No inline script or style (the agent serves a strict CSP); styling is by class.
// - Sections are reconciled, not blindly rebuilt: a row whose data did not change keeps its DOM
//   node, so focus and text selection survive the 1 s poll. Ticking values (held for, validity,
//   ages) are updated in place between polls from the snapshot's time.
'use strict';

(() => {
  const POLL_MS = 1000;
  const POLL_TIMEOUT_MS = 4000;
  const ACTION_TIMEOUT_MS = 10000;
  const TICK_MS = 250;
  // The agent publishes a snapshot every 250 ms; one that has not changed for this long means its
  // event loop is wedged (the agent's /healthz fails after the same 5 s).
  const SNAPSHOT_STALE_MS = 5000;
  const TOKEN_KEY = 'lockwarden.token';
  const OUTCOMES = ['acquired', 'timeout', 'no_quorum', 'error'];
  const OUTCOME_LABEL = { acquired: 'acquired', timeout: 'timeout', no_quorum: 'no quorum', error: 'error' };
  const PRESENCE_HELP = {
    held: 'held (the key has this lock\u2019s token)',
    missing: 'missing (no key: lost or expired there)',
    other: 'other token (someone else holds the key there)',
    unknown: 'unknown (not checked, or master down)',
  };

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- DOM helpers

  /* Creates an element with an optional class list and text. */
  function h(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text != null) n.textContent = String(text);
    return n;
  }

  const SVGNS = 'http://www.w3.org/2000/svg';
  function s(tag, attrs, text) {
    const n = document.createElementNS(SVGNS, tag);
    for (const k of Object.keys(attrs || {})) n.setAttribute(k, String(attrs[k]));
    if (text != null) n.textContent = String(text);
    return n;
  }

  function setText(node, text) {
    const t = String(text);
    if (node.textContent !== t) node.textContent = t;
  }

  function setAttr(node, name, value) {
    const v = String(value);
    if (node.getAttribute(name) !== v) node.setAttribute(name, v);
  }

  /* A text node whose content is recomputed by the ticker from its row's current data. */
  function live(tag, cls, fn) {
    const n = h(tag, (cls ? cls + ' ' : '') + 'live');
    n._tick = fn;
    fn(n);
    return n;
  }

  /* Makes container's children match items ({sig, build, data}) in order. A child built for an
   * item with the same sig is kept (with its focus/selection); its .data is refreshed so live
   * cells tick from the newest snapshot. */
  function reconcile(container, items) {
    const pool = new Map();
    for (const n of Array.from(container.children)) {
      if (!pool.has(n._sig)) pool.set(n._sig, []);
      pool.get(n._sig).push(n);
    }
    const nodes = items.map((it) => {
      const same = pool.get(it.sig);
      let n = same && same.shift();
      if (!n) {
        n = it.build(it.data);
        n._sig = it.sig;
      }
      n._data = it.data;
      return n;
    });
    nodes.forEach((n, i) => {
      if (container.children[i] !== n) container.insertBefore(n, container.children[i] || null);
    });
    while (container.children.length > nodes.length) container.lastElementChild.remove();
    tickWithin(container);
  }

  // ---------------------------------------------------------------- formatting

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

  /* 1, 2, 2.5, 5 x 10^n at or above v. */
  function niceCeil(v) {
    if (!(v > 0)) return 1;
    const e = Math.pow(10, Math.floor(Math.log10(v)));
    const f = v / e;
    const n = f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10;
    return n * e;
  }

  // ---------------------------------------------------------------- state

  const S = {
    data: null, // last state that arrived intact
    anchor: 0, // performance.now() that corresponds to data.taken_unix_ms
    lastTaken: null,
    pollError: '', // why the last poll failed; '' when it worked
    inFlight: false,
    again: false,
    timer: 0,
    keys: {}, // section name -> signature of what it shows
    memToken: '', // used when sessionStorage is unavailable
    pending: null, // the action the dialog is asking about
    busy: false, // an action request is in flight
    title: '', // tab title for the quorum state
  };

  /* Milliseconds since the snapshot was taken, on the page's monotonic clock: a skewed or
   * jumping browser wall clock does not bend countdowns. */
  function sinceSnapshot() {
    return S.data ? Math.max(0, performance.now() - S.anchor) : 0;
  }

  /* The agent's clock "now", for ages of things stamped by the agent. */
  function agentNow() {
    return S.data ? S.data.taken_unix_ms + sinceSnapshot() : Date.now();
  }

  function changed(name, value) {
    const k = JSON.stringify(value);
    if (S.keys[name] === k) return false;
    S.keys[name] = k;
    return true;
  }

  // ---------------------------------------------------------------- token

  function getToken() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || '';
    } catch (e) {
      return S.memToken;
    }
  }

  function setToken(t) {
    S.memToken = t;
    try {
      if (t) sessionStorage.setItem(TOKEN_KEY, t);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch (e) {
      /* storage disabled: memToken keeps it for this page */
    }
    renderTokenStatus();
  }

  function renderTokenStatus() {
    const has = !!getToken();
    setText($('token-status'), has ? 'saved for this tab' : 'not set');
    $('token-status').classList.toggle('is-set', has);
    $('token-forget').hidden = !has;
  }

  function initToken() {
    $('token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const v = $('token-input').value.trim();
      if (!v) {
        setText($('token-status'), 'paste a token first');
        $('token-input').focus();
        return;
      }
      setToken(v);
      $('token-input').value = '';
    });
    $('token-forget').addEventListener('click', () => {
      setToken('');
      $('token-input').focus();
    });
    renderTokenStatus();
  }

  // ---------------------------------------------------------------- polling

  function schedule(ms) {
    clearTimeout(S.timer);
    S.timer = setTimeout(poll, ms);
  }

  /* Polls now, or right after the poll in flight (polls never overlap). */
  function pollSoon() {
    if (S.inFlight) {
      S.again = true;
      return;
    }
    schedule(0);
  }

  async function poll() {
    S.timer = 0;
    S.inFlight = true;
    const ctl = new AbortController();
    const timeout = setTimeout(() => ctl.abort(), POLL_TIMEOUT_MS);
    let d = null;
    try {
      const r = await fetch('/api/v1/state', {
        cache: 'no-store',
        signal: ctl.signal,
        headers: { Accept: 'application/json' },
      });
      if (!r.ok) {
        let msg = 'HTTP ' + r.status;
        try {
          const j = await r.json();
          if (j && j.message) msg += ': ' + j.message;
        } catch (e) {
          /* not JSON */
        }
        throw new Error(msg);
      }
      d = await r.json();
      if (!d || typeof d !== 'object' || !d.quorum || !Array.isArray(d.masters)) {
        d = null;
        throw new Error('the answer is not a state snapshot');
      }
    } catch (e) {
      S.pollError = e && e.name === 'AbortError' ? 'no answer within ' + POLL_TIMEOUT_MS / 1000 + ' s'
        : (e && e.message) || String(e);
    } finally {
      clearTimeout(timeout);
    }
    if (d) {
      try {
        accept(d);
        S.pollError = '';
      } catch (e) {
        S.pollError = 'this page could not show the state (' + e.message + ')';
        console.error(e); // a bug in the page, not the agent: let it be seen
      }
    }
    S.inFlight = false;
    tick();
    schedule(S.again ? 0 : POLL_MS);
    S.again = false;
  }

  function accept(d) {
    if (d.taken_unix_ms !== S.lastTaken) {
      // Clamp the apparent age: the snapshot is at most ~250 ms old when served, so anything else
      // is clock skew between this browser and the agent.
      const age = Math.min(Math.max(Date.now() - d.taken_unix_ms, 0), 1000);
      S.anchor = performance.now() - age;
      S.lastTaken = d.taken_unix_ms;
    }
    S.data = d;
    render(d);
  }

  // ---------------------------------------------------------------- render: header, banner

  function render(d) {
    renderHeader(d);
    renderQuorum(d);
    renderActionsNotice(d);
    renderMasters(d);
    renderCharts(d, false);
    renderLocks(d);
    renderLeaks(d);
    renderEvents(d);
  }

  function renderHeader(d) {
    const a = d.agent || {};
    const parts = [];
    if (a.version) parts.push('v' + a.version);
    if (isNum(a.pid)) parts.push('pid ' + a.pid);
    if (isNum(a.uptime_s)) parts.push('up ' + fmtDur(a.uptime_s * 1000));
    if (a.socket) parts.push(a.socket);
    setText($('agent-meta'), parts.join(' \u00b7 '));
    if (a.started_at) setAttr($('agent-meta'), 'title', 'started ' + a.started_at);
  }

  function renderQuorum(d) {
    const q = d.quorum;
    const usable = isNum(q.usable) ? q.usable : q.up;
    const state = ['healthy', 'at_risk', 'lost'].includes(q.state) ? q.state : 'unknown';
    const down = d.masters.filter((m) => !m.up).map((m) => m.master);
    const quarantined = d.masters.filter((m) => m.up && m.quarantined).map((m) => m.master);
    const locks = d.locks || [];
    const stuck = locks.filter((l) => l.stuck).length;
    if (!changed('quorum', [q, down, quarantined, locks.length, stuck, d.sessions, d.waiters])) return;

    setTabStatus(state);
    const banner = $('quorum-banner');
    banner.setAttribute('data-state', state);
    const word = { healthy: 'healthy', at_risk: 'at risk', lost: 'LOST', unknown: state }[state];
    const icon = { healthy: '\u2713', at_risk: '!', lost: '\u2715', unknown: '?' }[state];
    setText($('quorum-icon'), icon);
    setText($('quorum-title'), 'Quorum ' + word + ' \u2014 ' + usable + ' of ' + q.masters +
      ' masters usable, ' + q.needed + ' needed, margin ' + q.margin);

    const detail = [];
    if (state === 'at_risk' && q.margin === 0) {
      detail.push('Locking still works, but one more master failure stops it.');
    } else if (state === 'at_risk') {
      detail.push('Locking still works with less redundancy; ' +
        plural(q.margin, 'more master') + ' may fail before it stops.');
    }
    if (state === 'lost') detail.push('No lock can be granted or renewed.');
    if (down.length) detail.push('Down: ' + down.join(', ') + '.');
    if (quarantined.length) detail.push('Quarantined: ' + quarantined.join(', ') + '.');
    if (state === 'healthy') {
      detail.push('Locking works; ' + plural(q.margin, 'master') + ' may fail before it stops.');
    }
    setText($('quorum-detail'), detail.join(' '));

    const stats = $('quorum-stats');
    stats.textContent = '';
    const stat = (n, label, cls) => {
      const b = h('div', 'stat' + (cls ? ' ' + cls : ''));
      b.append(h('span', 'stat-n', fmtCount(n)), h('span', 'stat-l', label));
      stats.append(b);
    };
    stat(locks.length, locks.length === 1 ? 'lock held' : 'locks held');
    stat(stuck, 'stuck', stuck ? 'is-warn' : '');
    stat(d.waiters, d.waiters === 1 ? 'waiter' : 'waiters');
    stat(d.sessions, d.sessions === 1 ? 'session' : 'sessions');
  }

  /* The tab title and icon carry the quorum state, for a tab in the background. */
  function setTabStatus(state) {
    const colour = { healthy: '#1c9a6c', at_risk: '#e6a117', lost: '#d8402f' }[state] || '#888888';
    S.title = { healthy: 'lockwarden \u2014 healthy', at_risk: '! at risk \u2014 lockwarden',
      lost: '\u2715 LOST \u2014 lockwarden' }[state] || 'lockwarden';
    const svg = "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'><path d='M5 7V5a3 3 0 0 1 6 0v2' " +
      "fill='none' stroke='" + colour + "' stroke-width='2'/><rect x='2.5' y='7' width='11' height='8' rx='1.5' fill='" +
      colour + "'/></svg>";
    $('favicon').setAttribute('href', 'data:image/svg+xml,' + encodeURIComponent(svg));
  }

  function renderActionsNotice(d) {
    const a = d.actions || {};
    const off = !a.enabled;
    $('actions-disabled').hidden = !off;
    setText($('actions-how'), off ? a.how_to_enable || '' : '');
    $('token-form').classList.toggle('is-moot', off);
  }

  /* Common state of every action button. */
  function actionButton(label, testid, action, cls) {
    const a = (S.data && S.data.actions) || {};
    const b = h('button', 'act' + (cls ? ' ' + cls : ''), label);
    b.type = 'button';
    b.setAttribute('data-testid', testid);
    b.setAttribute('data-action', action);
    if (!a.enabled) {
      b.disabled = true;
      b.title = 'Admin actions are disabled on this agent. ' + (a.how_to_enable || '');
    }
    return b;
  }

  // ---------------------------------------------------------------- render: masters

  function renderMasters(d) {
    const ms = d.masters;
    const down = ms.filter((m) => !m.up).length;
    setText($('masters-sub'), ms.length - down + ' of ' + ms.length + ' up' +
      (down ? ' \u00b7 ' + down + ' down' : ''));
    reconcile($('master-grid'), ms.map((m) => ({ sig: JSON.stringify(m), data: m, build: buildMaster })));
  }

  function buildMaster(m) {
    const card = h('article', 'master-card ' + (m.up ? 'is-up' : 'is-down'));
    card.setAttribute('data-testid', 'master-card');
    card.setAttribute('data-master', m.master);
    card.setAttribute('data-up', m.up ? 'true' : 'false');

    const head = h('div', 'mc-head');
    const addr = h('span', 'mc-addr mono', m.master);
    addr.title = 'master ' + (isNum(m.index) ? m.index + 1 : '') + ': ' + m.master;
    head.append(addr);
    head.append(h('span', 'pill ' + (m.up ? 'pill-ok' : 'pill-bad'), m.up ? 'UP' : 'DOWN'));
    card.append(head);
    if (m.quarantined) {
      card.classList.add('is-quarantined');
      const qn = h('div', 'mc-quarantine');
      qn.append(h('span', 'pill pill-warn', 'QUARANTINED'), h('span', null, ' not counted'));
      qn.title = 'up, but the agent does not count this master towards the quorum while it is quarantined';
      card.append(qn);
    }

    const dl = h('dl', 'mc-stats');
    const row = (label, value, cls, title) => {
      const div = h('div', 'kv' + (cls ? ' ' + cls : ''));
      const dd = h('dd', null, value);
      if (title) dd.title = title;
      div.append(h('dt', null, label), dd);
      dl.append(div);
    };
    row('rtt p50 / p99', fmtLat(m.rtt_p50_ms) + ' / ' + fmtLat(m.rtt_p99_ms), 'wide',
      'over the last \u22641024 commands');
    row('ping', fmtLat(m.rtt_ms), '', 'last health PING');
    row('errors', fmtCount(m.errors), '', 'errors since the agent started (all kinds)');
    row('reconnects', fmtCount(m.reconnects));
    row('uptime', isNum(m.uptime_s) ? fmtDur(m.uptime_s * 1000) : '\u2014', '',
      'redis uptime from INFO server' + (isNum(m.uptime_s) && m.uptime_s < 600 ? ' (restarted recently)' : ''));
    const scanned = isNum(m.lock_keys);
    row('lock keys', scanned ? fmtCount(m.lock_keys) : '\u2014', '', scanned ? 'seen by the last scan pass'
      : 'no scan pass yet, or scanner off');
    const leaked = isNum(m.leaked_keys) ? m.leaked_keys : null;
    row('leaked', leaked == null ? '\u2014' : fmtCount(leaked), leaked > 0 ? 'is-bad' : '',
      'findings of the last scan pass on this master');
    row('run id', m.run_id ? m.run_id.slice(0, 8) : '\u2014', 'wide mono', m.run_id || 'not known yet');
    card.append(dl);

    if (!m.up || m.last_error) {
      // Down: the error is why. Up: it is history (the master recovered), shown quietly.
      const text = m.up ? 'last error: ' + m.last_error : m.last_error || 'down (no error recorded)';
      const err = h('div', 'mc-error' + (m.up ? ' is-past' : ''), text);
      err.title = m.last_error || '';
      card.append(err);
    }
    return card;
  }

  // ---------------------------------------------------------------- render: locks

  function renderLocks(d) {
    const locks = d.locks || [];
    const stuck = locks.filter((l) => l.stuck).length;
    setText($('locks-sub'), locks.length ? plural(locks.length, 'lock') + (stuck ? ' \u00b7 ' + stuck +
      ' stuck' : '') + ' \u00b7 stuck after ' + fmtPeriod(d.stuck_after_ms) : '');
    $('locks-table').hidden = locks.length === 0;
    $('locks-empty').hidden = locks.length !== 0;
    setText($('locks-empty'), 'No locks are held through this agent.');
    const ctx = [d.actions, d.quorum.needed];
    reconcile($('locks-tbody'), locks.map((l) => ({
      // Ticking fields stay out of the signature; they are updated in place.
      sig: JSON.stringify([ctx, l.resource, l.session, l.pid, l.uid, l.cmdline, l.ttl_ms, l.renew,
        l.waiters, l.stuck, l.stuck_reason, l.presence, !!l.presence_checked_at]),
      data: l,
      build: buildLockRow,
    })));
  }

  function buildLockRow(l) {
    const tr = h('tr', 'lock-row' + (l.stuck ? ' is-stuck' : ''));
    tr.setAttribute('data-testid', 'lock-row');
    tr.setAttribute('data-resource', l.resource);
    tr.setAttribute('data-stuck', l.stuck ? 'true' : 'false');
    const cur = () => tr._data || l;

    // resource + stuck reason
    const tdRes = h('td', 'cell-resource');
    const name = h('div', 'resource mono', l.resource);
    name.title = l.resource;
    if (l.stuck) {
      const tag = h('span', 'pill pill-warn', 'STUCK');
      tdRes.append(tag);
    }
    tdRes.append(name);
    if (l.stuck && l.stuck_reason) tdRes.append(h('div', 'stuck-reason', l.stuck_reason));
    tr.append(tdRes);

    // holder
    const tdHold = h('td', 'cell-holder');
    const who = h('div', 'holder-id');
    if (isNum(l.pid) && l.pid >= 0) who.append(h('span', 'mono', 'pid ' + l.pid));
    else who.append(h('span', 'muted', 'holder disconnected'));
    who.append(h('span', 'muted', ' \u00b7 uid ' + (isNum(l.uid) && l.uid >= 0 ? l.uid : '\u2014') +
      ' \u00b7 session ' + l.session));
    tdHold.append(who);
    const cmd = h('div', 'cmdline mono' + (l.cmdline ? '' : ' muted'), l.cmdline || 'command line unknown');
    if (l.cmdline) cmd.title = l.cmdline;
    tdHold.append(cmd);
    tr.append(tdHold);

    // held for (ticks)
    tr.append(live('td', 'num', (n) => setText(n, fmtDur(cur().held_ms + sinceSnapshot()))));

    // validity countdown (ticks) with a bar relative to the ttl
    const tdVal = h('td', 'cell-validity');
    const txt = h('span', 'val-text');
    const bar = h('span', 'val-bar');
    const fill = h('span', 'val-fill');
    bar.append(fill);
    tdVal.append(txt, bar);
    tdVal.classList.add('live');
    tdVal._tick = () => {
      const c = cur();
      const left = c.validity_ms - sinceSnapshot();
      const frac = c.ttl_ms > 0 ? Math.max(0, Math.min(1, left / c.ttl_ms)) : 0;
      setText(txt, fmtCountdown(left));
      const level = left <= 0 ? 'is-bad' : frac < 0.2 ? 'is-warn' : '';
      if (tdVal._level !== level) {
        tdVal.classList.remove('is-bad', 'is-warn');
        if (level) tdVal.classList.add(level);
        tdVal._level = level;
      }
      fill.style.width = (frac * 100).toFixed(1) + '%'; // CSSOM: allowed under style-src 'self'
      tdVal.title = 'validity left of a ' + fmtDur(c.ttl_ms) + ' ttl' + (c.renew ? ', renewed by the agent' : ', not renewed');
    };
    tdVal._tick(tdVal);
    tr.append(tdVal);

    tr.append(h('td', l.renew ? '' : 'muted', l.renew ? 'yes' : 'no'));
    tr.append(h('td', 'num' + (l.waiters > 0 ? ' strong' : ' muted'), fmtCount(l.waiters)));
    tr.append(buildPresence(l));

    const tdAct = h('td', 'cell-act');
    const b = actionButton('Force-release\u2026', 'force-release', 'release', 'danger-ghost');
    b.setAttribute('data-resource', l.resource);
    tdAct.append(b);
    tr.append(tdAct);
    return tr;
  }

  function buildPresence(l) {
    const td = h('td', 'cell-presence');
    const pres = Array.isArray(l.presence) ? l.presence : [];
    const dots = h('span', 'dots');
    let held = 0;
    let unknown = 0;
    for (const p of pres) {
      const st = PRESENCE_HELP[p.state] ? p.state : 'unknown';
      if (st === 'held') held++;
      if (st === 'unknown') unknown++;
      const dot = h('span', 'dot dot-' + st);
      dot.title = p.master + ': ' + PRESENCE_HELP[st];
      dot.setAttribute('role', 'img');
      dot.setAttribute('aria-label', p.master + ' ' + st);
      dots.append(dot);
    }
    const needed = S.data ? S.data.quorum.needed : 0;
    const checked = !!l.presence_checked_at && pres.length > 0;
    const count = h('span', 'presence-count', checked ? held + '/' + pres.length : '\u2014');
    if (!checked) {
      count.classList.add('muted');
      count.title = 'not checked yet';
    } else if (held < needed && unknown === 0) {
      count.classList.add('is-bad');
      count.title = 'on fewer masters than the quorum of ' + needed;
    } else if (held < needed) {
      count.classList.add('is-warn');
      count.title = 'quorum of ' + needed + ' not confirmed: some masters could not be checked';
    } else {
      count.title = 'held on ' + held + ' of ' + pres.length + ' masters (quorum ' + needed + ')';
    }
    td.append(dots, count);
    return td;
  }

  // ---------------------------------------------------------------- render: leaks

  function renderLeaks(d) {
    const L = d.leaks || {};
    const leaks = Array.isArray(L.leaks) ? L.leaks : [];
    renderScanner(L);
    const noTtl = leaks.filter((k) => k.type === 'no_ttl').length;
    setText($('leaks-sub'), leaks.length ? plural(leaks.length, 'finding') +
      (noTtl ? ' \u00b7 ' + noTtl + ' without TTL' : '') : '');
    const empty = $('leaks-empty');
    $('leaks-table').hidden = leaks.length === 0;
    empty.hidden = leaks.length !== 0 || L.scanner === 'off' || !L.last_pass;
    setText(empty, 'No leaked keys in the last pass.');
    reconcile($('leaks-tbody'), leaks.map((k) => ({
      sig: JSON.stringify([d.actions, k]),
      data: k,
      build: buildLeakRow,
    })));
  }

  function renderScanner(L) {
    const box = $('scanner-state');
    if (!changed('scanner', [L.scanner, L.interval_ms, L.last_pass])) return;
    box.textContent = '';
    box.className = 'scanner-state';
    if (L.scanner === 'off') {
      box.classList.add('muted');
      box.append(h('span', null, 'Scanner off (scan_interval_ms = 0): lock keys on the masters are not checked for leaks.'));
      return;
    }
    const every = isNum(L.interval_ms) && L.interval_ms > 0 ? ', every ' + fmtPeriod(L.interval_ms) : '';
    const p = L.last_pass;
    if (!p) {
      box.append(h('span', null, 'Scanner on' + every + ' \u2014 waiting for the first pass to finish.'));
      return;
    }
    const line = h('div');
    line.append(h('span', null, 'Last pass ' + fmtClock(p.started_unix_ms) + ' ('));
    const ago = live('span', null, (n) => setText(n, fmtDur(agentNow() - p.started_unix_ms) + ' ago'));
    line.append(ago);
    const ms = Array.isArray(p.masters) ? p.masters : [];
    const ok = ms.filter((m) => m.ok);
    const keys = ok.reduce((a, m) => a + (m.keys_scanned || 0), 0);
    line.append(h('span', null, ')' + every + ' \u00b7 ' + ok.length + ' of ' + ms.length +
      ' masters scanned, ' + fmtCount(keys) + ' keys'));
    box.append(line);
    for (const m of ms.filter((x) => !x.ok)) {
      const e = h('div', 'is-bad');
      // Errors often start with the address already; say it once.
      const why = (m.error || 'error').replace(m.master + ': ', '');
      e.append(h('span', 'mono', m.master), h('span', null, ': not scanned \u2014 ' + why));
      box.append(e);
    }
    if (p.partial_checked === false) {
      box.append(h('div', 'is-warn', 'Partial-lock check: ' + (p.partial_note || 'skipped in this pass.')));
    }
  }

  const FINDING = {
    no_ttl: ['no TTL', 'pill-bad', 'never expires: a leak'],
    ttl_above_max: ['TTL above max', 'pill-warn', 'a lock key whose TTL exceeds max_ttl_ms'],
    partial: ['partial', 'pill-info', 'a lock token on fewer than a quorum of masters, held by no grant of this agent; it expires by itself'],
  };

  function buildLeakRow(k) {
    const tr = h('tr', 'leak-row' + (k.type === 'no_ttl' ? ' is-leak' : ''));
    tr.setAttribute('data-testid', 'leak-row');
    tr.setAttribute('data-master', k.master);
    tr.setAttribute('data-key', k.key);
    const cur = () => tr._data || k;

    tr.append(h('td', 'mono', k.master));
    const key = h('td', 'mono key', k.key);
    key.title = k.key;
    tr.append(key);
    const f = FINDING[k.type] || [String(k.type), 'pill-info', ''];
    const tdF = h('td');
    const pill = h('span', 'pill ' + f[1], f[0] + (k.type === 'partial' && isNum(k.copies) ? ' \u00b7 ' +
      k.copies + ' of ' + (S.data ? S.data.quorum.masters : '?') : ''));
    pill.title = f[2];
    tdF.append(pill);
    tr.append(tdF);
    tr.append(h('td', 'muted', k.redis_type || '\u2014'));
    tr.append(h('td', 'num', k.ttl_ms === -1 ? 'none' : isNum(k.ttl_ms) && k.ttl_ms >= 0 ? fmtDur(k.ttl_ms) : '\u2014'));
    const age = live('td', 'num', (n) => setText(n, fmtDur(agentNow() - cur().first_seen_unix_ms) + ' ago'));
    age.title = 'first seen ' + (k.first_seen || '');
    tr.append(age);

    const tdAct = h('td', 'cell-act');
    if (k.type === 'no_ttl') {
      const ex = actionButton('Expire\u2026', 'leak-expire', 'expire', '');
      const del = actionButton('Delete\u2026', 'leak-delete', 'delete', 'danger-ghost');
      for (const b of [ex, del]) {
        b.setAttribute('data-master', k.master);
        b.setAttribute('data-key', k.key);
      }
      tdAct.append(ex, del);
    } else {
      tdAct.append(h('span', 'muted small', k.type === 'partial' ? 'expires by itself' : 'has a TTL; no action here'));
    }
    tr.append(tdAct);
    return tr;
  }

  // ---------------------------------------------------------------- render: events

  function renderEvents(d) {
    const ev = Array.isArray(d.events) ? d.events : [];
    const errs = ev.filter((e) => e.severity === 'error').length;
    setText($('events-sub'), ev.length ? plural(ev.length, 'event') + (errs ? ' \u00b7 ' + errs + ' errors' : '') +
      ' \u00b7 newest first' : '');
    const body = $('events-body');
    if (!ev.length) {
      if (!changed('events-empty', true)) return;
      body.textContent = '';
      const p = h('p', 'empty', 'No events yet.');
      p._sig = 'empty';
      body.append(p);
      return;
    }
    S.keys['events-empty'] = undefined;
    reconcile(body, ev.map((e) => ({ sig: JSON.stringify(e), data: e, build: buildEvent })));
  }

  function buildEvent(e) {
    const sev = ['info', 'warning', 'error'].includes(e.severity) ? e.severity : 'info';
    const row = h('div', 'event-row sev-' + sev);
    row.setAttribute('data-testid', 'event-row');
    const t = h('span', 'ev-time mono');
    t.append(h('span', null, fmtClock(e.at_unix_ms)));
    t.append(live('span', 'ev-ago muted', (n) => setText(n, fmtDur(agentNow() - e.at_unix_ms) + ' ago')));
    t.title = e.at || '';
    row.append(t);
    const pillCls = { info: 'pill-info', warning: 'pill-warn', error: 'pill-bad' }[sev];
    row.append(h('span', 'pill ' + pillCls, sev.toUpperCase()));
    row.append(h('span', 'ev-kind muted', e.kind || ''));
    const msg = h('span', 'ev-msg', e.message || '');
    msg.title = e.message || '';
    row.append(msg);
    if (isNum(e.count) && e.count > 1) {
      const c = h('span', 'ev-count', '\u00d7' + e.count);
      c.title = e.count + ' identical events coalesced';
      row.append(c);
    }
    return row;
  }

  // ---------------------------------------------------------------- charts

  const CH = { height: 128, pad: { l: 52, r: 10, t: 8, b: 19 } };

  function renderCharts(d, force) {
    const hist = d.history || { bucket_ms: 5000, points: [] };
    const wr = $('rate-wrap').clientWidth;
    const ww = $('wait-wrap').clientWidth;
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
    for (let m = 5; m < spanMin; m += 5) {
      const x = Math.round(p.l + pw * (1 - (m * 60000) / (slots * bucket))) + 0.5;
      grid.append(s('line', { x1: x, x2: x, y1: p.t, y2: g.base, class: 'grid' }));
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

  // ---------------------------------------------------------------- ticker

  function tickWithin(root) {
    for (const n of root.querySelectorAll('.live')) n._tick && n._tick(n);
  }

  /* Updates "updated … ago", the stale warning and every ticking cell. */
  function tick() {
    const lu = $('last-update');
    const warn = $('stale-warning');
    if (!S.data) {
      if (S.pollError) {
        setText(lu, 'no data');
        lu.setAttribute('data-stale', 'true');
        warn.hidden = false;
        setText(warn, 'Cannot reach the agent: ' + S.pollError + '. Retrying every second.');
      }
      return;
    }
    const age = sinceSnapshot();
    const frozen = !S.pollError && age > SNAPSHOT_STALE_MS;
    const stale = !!S.pollError || frozen;
    setText(lu, 'updated ' + fmtDur(age) + ' ago');
    lu.title = 'snapshot taken ' + (S.data.taken_at || '');
    setAttr(lu, 'data-stale', stale ? 'true' : 'false');
    document.body.classList.toggle('is-stale', stale);
    const title = (stale ? 'stale \u00b7 ' : '') + (S.title || 'lockwarden');
    if (document.title !== title) document.title = title;
    warn.hidden = !stale;
    if (S.pollError) {
      setText(warn, 'Not live: the last poll failed (' + S.pollError + '). Showing data from ' +
        fmtDur(age) + ' ago (' + fmtClock(S.data.taken_unix_ms) + '); retrying every second.');
    } else if (frozen) {
      setText(warn, 'Not live: the agent answers but its snapshot has not changed for ' + fmtDur(age) +
        '; its event loop may be wedged (GET /healthz fails after 5 s).');
    }
    tickWithin($('main'));
  }

  // ---------------------------------------------------------------- actions

  /* Builds a paragraph from strings and {code: "..."} parts. */
  function para(node, parts) {
    node.textContent = '';
    for (const p of parts) node.append(typeof p === 'string' ? document.createTextNode(p) : h('code', null, p.code));
  }

  const q = (v) => '\u201c' + v + '\u201d';

  function ttlValue() {
    const v = Number($('confirm-ttl').value);
    return Number.isInteger(v) && v >= 1 ? v : null;
  }

  function describe(a) {
    const text = $('confirm-text');
    const caution = $('confirm-caution');
    caution.hidden = true;
    if (a.action === 'release') {
      const l = a.lock || {};
      const gone = !(isNum(l.pid) && l.pid >= 0);
      const holder = gone ? 'held by session ' + (l.session != null ? l.session : '?') + ' (its process has disconnected)'
        : 'held by pid ' + l.pid + (l.cmdline ? ' (' + truncate(l.cmdline, 120) + ')' : '');
      const w = l.waiters > 0 ? (l.waiters === 1 ? 'The 1 waiter queued for it will get it next.'
        : 'The ' + l.waiters + ' waiters queued for it will contend next.') : 'Nobody is queued for it.';
      const tell = gone ? ['Its holder is gone, so nobody receives the ', { code: 'lost' }, ' event. ']
        : ['The holder gets a ', { code: 'lost' }, ' event with reason ', { code: 'revoked' },
          ' and must stop touching the resource. '];
      para(text, ['The lock ' + q(a.resource) + ' ' + holder + ' will be deleted on every master with its token. ']
        .concat(tell, [w]));
      para(caution, ['The holder is not stopped by this: a program that ignores ', { code: 'lost' },
        ' may keep working on the resource. (', { code: 'lockwarden lock' }, ' terminates its command.)']);
      caution.hidden = false;
    } else if (a.action === 'expire') {
      const ttl = ttlValue();
      para(text, ['Set a TTL of ' + (ttl ? fmtPeriod(ttl) : '?') + ' on key ' + q(a.key) +
        ' on master ' + a.master + ', only if it still has no TTL. It then expires by itself; a key that has become a live lock since the scan is not touched.']);
      setText($('confirm-ttl-hint'), ttl ? '= ' + fmtPeriod(ttl) : 'a whole number of ms, at least 1');
    } else if (a.action === 'delete') {
      para(text, ['Delete key ' + q(a.key) + ' on master ' + a.master + ', only if it still has no TTL.']);
      para(caution, ['Whatever still relies on this key loses it now. Setting a TTL (Expire) is the gentler fix.']);
      caution.hidden = false;
    }
  }

  function openAction(action, ds) {
    if (S.busy) return;
    const d = S.data || {};
    const a = { action, resource: ds.resource, master: ds.master, key: ds.key };
    if (action === 'release') a.lock = (d.locks || []).find((l) => l.resource === ds.resource) || { resource: ds.resource };
    const titles = { release: 'Force-release lock ' + q(truncate(ds.resource || '', 60)) + '?',
      expire: 'Set a TTL on a leaked key?', delete: 'Delete a leaked key?' };
    const oks = { release: 'Force-release', expire: 'Set TTL', delete: 'Delete key' };
    S.pending = a;
    setText($('confirm-title'), titles[action]);
    setText($('confirm-ok'), oks[action]);
    $('confirm-ok').className = action === 'expire' ? 'primary' : 'danger';
    $('confirm-ttl-field').hidden = action !== 'expire';
    $('confirm-ttl').value = '60000';
    $('confirm-token-field').hidden = !!getToken();
    $('confirm-token').value = '';
    $('confirm-error').hidden = true;
    setBusy(false);
    describe(a);
    const dlg = $('confirm-dialog');
    if (!dlg.open) dlg.showModal();
    if (!getToken()) $('confirm-token').focus();
    else if (action === 'expire') $('confirm-ttl').focus();
    else $('confirm-cancel').focus(); // the safe choice has focus
  }

  function setBusy(b) {
    S.busy = b;
    $('confirm-ok').disabled = b;
    $('confirm-cancel').disabled = b;
    if (b) setText($('confirm-ok'), 'Working\u2026');
  }

  function dialogError(msg) {
    const e = $('confirm-error');
    e.hidden = false;
    setText(e, msg);
  }

  async function confirmAction() {
    const a = S.pending;
    if (!a || S.busy) return;
    let token = getToken();
    if (!token) {
      token = $('confirm-token').value.trim();
      if (!token) {
        const msg = 'An admin token is needed: paste the content of the agent\u2019s admin_token_file here or in the box at the top.';
        dialogError(msg);
        showResult(false, 'Not sent: no admin token. ' + msg);
        $('confirm-token').focus();
        return;
      }
      setToken(token);
    }
    let path;
    let body;
    let what;
    if (a.action === 'release') {
      path = '/api/v1/locks/release';
      body = { resource: a.resource };
      what = 'force-release of ' + q(a.resource);
    } else {
      const ttl = a.action === 'expire' ? ttlValue() : null;
      if (a.action === 'expire' && !ttl) {
        dialogError('The TTL must be a whole number of milliseconds, at least 1.');
        $('confirm-ttl').focus();
        return;
      }
      path = a.action === 'expire' ? '/api/v1/leaks/expire' : '/api/v1/leaks/delete';
      body = a.action === 'expire' ? { master: a.master, key: a.key, ttl_ms: ttl } : { master: a.master, key: a.key };
      what = (a.action === 'expire' ? 'expire of ' : 'delete of ') + 'key ' + q(a.key) + ' on ' + a.master;
    }
    setBusy(true);
    showPending('Sending ' + what + '\u2026');
    const ctl = new AbortController();
    const to = setTimeout(() => ctl.abort(), ACTION_TIMEOUT_MS);
    let ok = false;
    let msg;
    try {
      const r = await fetch(path, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + token },
        body: JSON.stringify(body),
        cache: 'no-store',
        signal: ctl.signal,
      });
      let j = null;
      try {
        j = await r.json();
      } catch (e) {
        /* not JSON */
      }
      ok = r.ok && !!j && j.ok !== false;
      msg = ok ? successText(a, j) : failureText(r.status, j, what);
    } catch (e) {
      msg = 'Request failed (' + (e && e.name === 'AbortError' ? 'no answer within ' + ACTION_TIMEOUT_MS / 1000 + ' s'
        : (e && e.message) || String(e)) + '): ' + what + ' may or may not have happened; check the tables.';
    } finally {
      clearTimeout(to);
    }
    setBusy(false);
    S.pending = null;
    $('confirm-dialog').close();
    showResult(ok, msg);
    pollSoon();
  }

  function successText(a, j) {
    if (a.action === 'release') {
      const pid = isNum(j.pid) && j.pid >= 0 ? ' (pid ' + j.pid + ')' : '';
      let t = 'Released ' + q(a.resource) + pid;
      if (isNum(j.deleted_on) && isNum(j.masters)) {
        t += ': deleted on ' + j.deleted_on + ' of ' + j.masters + ' masters.';
        if (j.deleted_on < j.masters) t += ' The other copies were already gone or did not answer; they expire with the ttl.';
      } else t += '.';
      return t;
    }
    return 'Key ' + q(a.key) + ' on ' + a.master + ': ' + (j.message || (a.action === 'expire' ? 'TTL set' : 'deleted')) + '.';
  }

  function failureText(status, j, what) {
    const prefix = {
      400: 'Bad request', 401: 'Token refused', 403: 'Refused', 404: 'Not held', 409: 'Nothing changed',
      413: 'Too large', 502: 'Master error', 503: 'Agent unavailable',
    }[status] || 'Failed';
    const m = j && j.message ? j.message : 'HTTP ' + status;
    const code = j && j.error ? j.error : '';
    let t = prefix + ': ' + m + ' (' + what + '; HTTP ' + status + (code ? ' ' + code : '') + ')';
    if (status === 401) t += '. Check the admin token at the top.';
    return t;
  }

  /* While a request is out, action-result has no data-ok: it reports the next answer only. */
  function showPending(msg) {
    const r = $('action-result');
    r.removeAttribute('data-ok');
    r.classList.remove('is-ok', 'is-bad');
    setText($('action-result-text'), msg);
    r.hidden = false;
  }

  function showResult(ok, msg) {
    const r = $('action-result');
    r.setAttribute('data-ok', ok ? 'true' : 'false');
    r.classList.toggle('is-ok', ok);
    r.classList.toggle('is-bad', !ok);
    setText($('action-result-text'), fmtClock(Date.now()) + ' \u00b7 ' + msg);
    r.hidden = false;
  }

  function initActions() {
    $('main').addEventListener('click', (e) => {
      const b = e.target.closest('button[data-action]');
      if (!b || b.disabled) return;
      openAction(b.getAttribute('data-action'), {
        resource: b.getAttribute('data-resource'),
        master: b.getAttribute('data-master'),
        key: b.getAttribute('data-key'),
      });
    });
    $('confirm-form').addEventListener('submit', (e) => {
      e.preventDefault();
      confirmAction();
    });
    $('confirm-cancel').addEventListener('click', () => {
      if (S.busy) return;
      S.pending = null;
      $('confirm-dialog').close();
    });
    $('confirm-dialog').addEventListener('cancel', (e) => {
      if (S.busy) e.preventDefault(); // the request is out; wait for its answer
      else S.pending = null;
    });
    $('confirm-ttl').addEventListener('input', () => S.pending && describe(S.pending));
    $('action-result-close').addEventListener('click', () => {
      $('action-result').hidden = true;
    });
  }

  // ---------------------------------------------------------------- start

  function start() {
    initToken();
    initActions();
    initCharts();
    setInterval(tick, TICK_MS);
    poll();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
