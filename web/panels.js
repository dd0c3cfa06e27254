// lockwarden operator page: the panels. The header line, the quorum banner (and the
// tab's title and icon), the master cards, and the tables of locks, leaked keys and events.
// Each render* takes a state snapshot and updates its section in place.
'use strict';

(() => {
  const LW = (window.LW = window.LW || {});
  const { $, h, setText, setAttr, live, reconcile, S, sinceSnapshot, agentNow, changed } = LW;
  const { isNum, fmtDur, fmtLat, fmtCount, fmtClock, fmtPeriod, fmtCountdown, plural } = LW;
  const { actionButton, holdSig, holdKind, holdWho, holdCmdline, holdHeldCell, holdRenewCell } = LW;

  const PRESENCE_HELP = {
    held: 'held (the key has this lock\u2019s token)',
    missing: 'missing (no key: lost or expired there)',
    other: 'other token (someone else holds the key there)',
    unknown: 'unknown (not checked, or master down)',
  };

  // ---------------------------------------------------------------- render: header, banner

  function renderHeader(d) {
    const a = d.agent || {};
    const parts = [];
    if (a.version) parts.push('v' + a.version);
    if (isNum(a.pid)) parts.push('pid ' + a.pid);
    if (isNum(a.uptime_s)) parts.push('up ' + fmtDur(a.uptime_s * 1000));
    if (a.socket) parts.push(a.socket);
    const loop = d.loop || {};
    if (isNum(loop.lag_max_ms)) parts.push('loop late ' + fmtLat(loop.lag_max_ms));
    setText($('agent-meta'), parts.join(' \u00b7 '));
    const title = [];
    if (a.started_at) title.push('started ' + a.started_at);
    if (isNum(loop.lag_max_ms)) {
      title.push('loop late: the most a timer of the agent\u2019s event loop fired late in the last ' +
        loop.window_s + ' s (its longest turn: ' + fmtLat(loop.turn_max_ms) + '); rounds time out ' +
        'when it nears the node timeout (lockwarden_loop_lag_seconds)');
    }
    setAttr($('agent-meta'), 'title', title.join('; '));
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
      ' masters usable' + (quarantined.length ? ' (' + quarantined.length + ' quarantined)' : '') +
      ', ' + q.needed + ' needed, margin ' + q.margin);

    const detail = [];
    if (state === 'at_risk' && q.margin === 0) {
      detail.push('Locking still works, but one more master failure stops it.');
    } else if (state === 'at_risk') {
      detail.push('Locking still works with less redundancy; ' +
        plural(q.margin, 'more master') + ' may fail before it stops.');
    }
    if (state === 'lost') detail.push('No lock can be granted or renewed.');
    if (down.length) detail.push('Down: ' + down.join(', ') + '.');
    if (quarantined.length) {
      detail.push(plural(quarantined.length, 'master') + ' in restart quarantine (up, but not counted ' +
        'until max_ttl after their start): ' + quarantined.join(', ') + '.');
    }
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

  // ---------------------------------------------------------------- render: masters

  function renderMasters(d) {
    const ms = d.masters;
    const down = ms.filter((m) => !m.up).length;
    const quarantined = ms.filter((m) => m.up && m.quarantined).length;
    setText($('masters-sub'), ms.length - down + ' of ' + ms.length + ' up' +
      (down ? ' \u00b7 ' + down + ' down' : '') + (quarantined ? ' \u00b7 ' + quarantined + ' quarantined' : ''));
    reconcile($('master-grid'), ms.map((m) => ({ sig: JSON.stringify(m), data: m, build: buildMaster })));
  }

  function buildMaster(m) {
    const card = h('article', 'master-card ' + (m.up ? 'is-up' : 'is-down'));
    card.setAttribute('data-testid', 'master-card');
    card.setAttribute('data-master', m.master);
    card.setAttribute('data-up', m.up ? 'true' : 'false');
    card.setAttribute('data-quarantined', m.quarantined ? 'true' : 'false');

    const head = h('div', 'mc-head');
    const addr = h('span', 'mc-addr mono', m.master);
    addr.title = 'master ' + (isNum(m.index) ? m.index + 1 : '') + ': ' + m.master;
    head.append(addr);
    head.append(h('span', 'pill ' + (m.up ? 'pill-ok' : 'pill-bad'), m.up ? 'UP' : 'DOWN'));
    if (m.tls === 'verified' || m.tls === 'unverified') {
      const verified = m.tls === 'verified';
      const tls = h('span', 'pill ' + (verified ? 'pill-info' : 'pill-warn'), verified ? 'TLS' : 'TLS UNVERIFIED');
      tls.setAttribute('data-testid', 'master-tls');
      tls.title = verified ? 'rediss://: its certificate is checked'
        : 'rediss:// with redis_tls_insecure_skip_verify: any certificate is accepted';
      head.append(tls);
    }
    card.append(head);
    if (m.quarantined) card.append(buildQuarantine(card, m));

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

  /* Restart quarantine: the pill, the time until its votes count again (ticking), and why. */
  function buildQuarantine(card, m) {
    card.classList.add('is-quarantined');
    const box = h('div', 'mc-quarantine');
    box.setAttribute('data-testid', 'master-quarantine');
    const line = h('div', 'mc-q-line');
    line.append(h('span', 'pill pill-warn', 'QUARANTINED'));
    line.append(live('span', 'mc-q-left', (n) => {
      const c = card._data || m;
      const left = isNum(c.quarantine_left_ms) ? c.quarantine_left_ms - sinceSnapshot() : NaN;
      setText(n, !isNum(left) ? 'not counted' : left > 0 ? 'counts again in ' + fmtDur(left)
        : 'counts again any moment');
    }));
    box.append(line);
    line.title = 'the agent does not count this master\u2019s votes toward the quorum: it started ' +
      'less than max_ttl ago, so it may have forgotten locks it held';
    if (m.quarantine_reason) {
      const why = h('div', 'mc-q-reason', m.quarantine_reason);
      why.title = m.quarantine_reason;
      box.append(why);
    }
    return box;
  }

  // ---------------------------------------------------------------- render: locks

  function renderLocks(d) {
    const locks = d.locks || [];
    const stuck = locks.filter((l) => l.stuck).length;
    const total = isNum(d.locks_total) ? d.locks_total : locks.length;
    const shown = total > locks.length ? ' (showing the first ' + locks.length + ')' : '';
    setText($('locks-sub'), locks.length ? plural(total, 'lock') + shown + (stuck ? ' \u00b7 ' +
      stuck + ' stuck' : '') + ' \u00b7 stuck after ' + fmtPeriod(d.stuck_after_ms) : '');
    $('locks-table').hidden = locks.length === 0;
    $('locks-empty').hidden = locks.length !== 0;
    setText($('locks-empty'), 'No locks are held through this agent.');
    const ctx = [d.actions, d.quorum.needed];
    reconcile($('locks-tbody'), locks.map((l) => withElection(l, {
      // Ticking fields stay out of the signature; they are updated in place.
      sig: JSON.stringify([ctx, holdSig(l), l.session, l.holders, l.stuck, l.stuck_reason, l.presence,
        !!l.presence_checked_at]),
      data: l,
      build: buildLockRow,
    })));
  }

  // An election's row is built again when its candidates change (its leader is the hold's).
  function withElection(l, row) {
    const e = l.election;
    if (e) row.sig += JSON.stringify((e.candidates || []).map((c) => [c.session, c.pid, c.cmdline]));
    return row;
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
    tdRes.append(holdKind(l, { held: l.holders, testid: 'lock-kind' }));
    if (l.kind === 'election') tdRes.append(buildCandidates(l));
    if (l.stuck && l.stuck_reason) tdRes.append(h('div', 'stuck-reason', l.stuck_reason));
    tr.append(tdRes);

    // holder: this agent's session besides (a detached lease has none of its own)
    const tdHold = h('td', 'cell-holder');
    const session = l.detached ? [] : [h('span', 'muted', ' \u00b7 session ' + l.session)];
    tdHold.append(holdWho(l, { testid: 'lock', unknown: 'holder disconnected', after: session }));
    tdHold.append(holdCmdline(l, 'command line unknown'));
    tr.append(tdHold);

    // held for (ticks)
    tr.append(holdHeldCell(cur, sinceSnapshot));

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

    tr.append(holdRenewCell(l));
    tr.append(h('td', 'num' + (l.waiters > 0 ? ' strong' : ' muted'), fmtCount(l.waiters)));
    tr.append(buildPresence(l));

    const tdAct = h('td', 'cell-act');
    const b = actionButton('Force-release\u2026', 'force-release', 'release', 'danger-ghost');
    b.setAttribute('data-resource', l.resource);
    tdAct.append(b);
    tr.append(tdAct);
    return tr;
  }

  // An election's candidates waiting at this agent: "2 candidates: pid 4242, pid 4243".
  function buildCandidates(l) {
    const list = (l.election && l.election.candidates) || [];
    const box = h('div', 'election-candidates muted');
    box.setAttribute('data-testid', 'election-candidates');
    if (!list.length) {
      setText(box, 'no candidate waits here');
      return box;
    }
    box.append(document.createTextNode(plural(list.length, 'candidate') + ': '));
    list.forEach((c, i) => {
      const who = h('span', 'mono', isNum(c.pid) && c.pid >= 0 ? 'pid ' + c.pid : 'session ' + c.session);
      who.setAttribute('data-testid', 'election-candidate');
      who.title = (c.cmdline || 'command line unknown') + ' \u00b7 waiting since ' + fmtDur(c.waited_ms) + ' before this view';
      if (i) box.append(document.createTextNode(', '));
      box.append(who);
    });
    return box;
  }

  function buildPresence(l) {
    const td = h('td', 'cell-presence');
    const pres = Array.isArray(l.presence) ? l.presence : [];
    const dots = h('span', 'dots');
    let held = 0;
    let unknown = 0;
    // One state per master, in the order of d.masters.
    pres.forEach((p, i) => {
      const st = PRESENCE_HELP[p] ? p : 'unknown';
      const m = S.data && S.data.masters[i] ? S.data.masters[i].master : 'master ' + (i + 1);
      if (st === 'held') held++;
      if (st === 'unknown') unknown++;
      const dot = h('span', 'dot dot-' + st);
      dot.title = m + ': ' + PRESENCE_HELP[st];
      dot.setAttribute('role', 'img');
      dot.setAttribute('aria-label', m + ' ' + st);
      dots.append(dot);
    });
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

  // ---------------------------------------------------------------- render: waiters

  /* The acquires queued at this agent, longest waiting first. */
  function renderWaiters(d) {
    const list = Array.isArray(d.waiter_list) ? d.waiter_list : [];
    const total = isNum(d.waiters) ? d.waiters : list.length;
    setText($('waiters-sub'), list.length ? plural(total, 'waiter') + ' \u00b7 oldest waiting ' +
      fmtDur(d.oldest_wait_ms) : '');
    $('waiters-table').hidden = list.length === 0;
    $('waiters-empty').hidden = list.length !== 0;
    reconcile($('waiters-tbody'), list.map((w) => ({
      sig: JSON.stringify([w.resource, w.session, w.pid, w.cmdline, w.wait_ms]),
      data: w,
      build: buildWaiterRow,
    })));
  }

  function buildWaiterRow(w) {
    const tr = h('tr', 'waiter-row');
    tr.setAttribute('data-testid', 'waiter-row');
    tr.setAttribute('data-resource', w.resource);
    const cur = () => tr._data || w;
    tr.append(h('td', 'resource mono', w.resource));
    const who = h('td', 'cell-holder');
    who.append(h('div', 'holder-id mono', isNum(w.pid) && w.pid >= 0 ? 'pid ' + w.pid : 'pid unknown'));
    const cmd = h('div', 'cmdline mono' + (w.cmdline ? '' : ' muted'), w.cmdline || 'command line unknown');
    if (w.cmdline) cmd.title = w.cmdline;
    who.append(cmd);
    tr.append(who);
    tr.append(live('td', 'num', (n) => setText(n, fmtDur(cur().waited_ms + sinceSnapshot()))));
    tr.append(h('td', 'num muted', fmtDur(w.wait_ms)));
    return tr;
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

  Object.assign(LW, {
    renderHeader, renderQuorum, renderMasters, renderLocks, renderWaiters, renderLeaks, renderEvents,
  });
})();
