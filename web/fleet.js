// lockwarden operator page: the fleet panel. Every agent on the masters (settings drift in red),
// every lock held in the fleet (stuck first; a holder whose agent is gone shown as such) with its
// waiters from every agent, and a row's whole story (holder, waiters, masters) with Revoke.
// GET /api/v1/fleet is polled every 5 s, and only while the panel is on screen: each read costs
// the masters a SCAN of the lock keys.
'use strict';

(() => {
  const LW = (window.LW = window.LW || {});
  const { $, h, setText, live, reconcile, getToken, actionButton } = LW;
  const { isNum, fmtDur, fmtCountdown, fmtCount, plural, truncate } = LW;
  const { fleetHold, holdSig, holdKind, holdWho, holdCmdline, holdHeldCell, holdRenewCell, holdFactsList } = LW;

  const FLEET_POLL_MS = 5000;
  const FLEET_TIMEOUT_MS = 10000; // the agent answers within 1.5 s, with an older read if need be
  const ROW_LIMIT = 200;

  const F = {
    data: null, // last /api/v1/fleet answer
    anchor: 0, // performance.now() when it arrived: ages tick from there
    error: '',
    off: false, // fleet presence is off on this agent
    visible: false,
    inFlight: false,
    again: false,
    timer: 0,
    lastPoll: -Infinity,
    prefix: '',
    open: new Set(), // resources whose story is expanded
  };

  const since = () => (F.data ? performance.now() - F.anchor : 0);

  // ---------------------------------------------------------------- polling

  function fleetPollSoon() {
    if (F.inFlight) F.again = true;
    else if (F.visible && !document.hidden) pollFleet();
  }

  function scheduleNext() {
    clearTimeout(F.timer);
    F.timer = 0;
    if (F.visible && !document.hidden) F.timer = setTimeout(pollFleet, F.again ? 0 : FLEET_POLL_MS);
    F.again = false;
  }

  /* Whether this agent takes part in the fleet, as its state says (an agent with fleet presence
   * off has no id): null until the first state arrives. Asking such an agent for the fleet would
   * only earn a 404 every 5 s. */
  function fleetOn() {
    const d = LW.S.data;
    if (!d || !d.agent) return null;
    return !!d.agent.id;
  }

  async function pollFleet() {
    clearTimeout(F.timer);
    F.timer = 0;
    const on = fleetOn();
    if (on !== true) {
      F.off = on === false;
      if (F.off) renderFleet();
      else if (F.visible) F.timer = setTimeout(pollFleet, 1000); // no state yet
      return;
    }
    F.inFlight = true;
    F.lastPoll = performance.now();
    const ctl = new AbortController();
    const timeout = setTimeout(() => ctl.abort(), FLEET_TIMEOUT_MS);
    const headers = { Accept: 'application/json' };
    const token = getToken();
    if (token) headers.Authorization = 'Bearer ' + token;
    const url = '/api/v1/fleet?limit=' + ROW_LIMIT + (F.prefix ? '&prefix=' + encodeURIComponent(F.prefix) : '');
    try {
      const r = await fetch(url, { cache: 'no-store', signal: ctl.signal, headers });
      let j = null;
      try {
        j = await r.json();
      } catch (e) {
        /* not JSON */
      }
      F.off = r.status === 404 && !!j && j.error === 'not_found';
      if (!r.ok || !j || !Array.isArray(j.locks)) {
        throw new Error((j && j.message) || 'HTTP ' + r.status);
      }
      F.data = j;
      F.anchor = performance.now();
      F.error = '';
    } catch (e) {
      F.error = e && e.name === 'AbortError' ? 'no answer within ' + FLEET_TIMEOUT_MS / 1000 + ' s'
        : (e && e.message) || String(e);
    } finally {
      clearTimeout(timeout);
    }
    F.inFlight = false;
    renderFleet();
    scheduleNext();
  }

  function setVisible(v) {
    F.visible = v && !document.hidden;
    if (!F.visible) {
      clearTimeout(F.timer);
      F.timer = 0;
    } else if (!F.inFlight && !F.timer) {
      const wait = Math.max(0, FLEET_POLL_MS - (performance.now() - F.lastPoll));
      F.timer = setTimeout(pollFleet, wait);
    }
  }

  // ---------------------------------------------------------------- render

  function renderFleet() {
    renderStatus();
    const d = F.off ? null : F.data;
    LW.renderDeadlocks(d, since);
    $('fleet-agents-head').hidden = !d;
    $('fleet-locks-head').hidden = !d;
    renderAgents(d ? d.agents : []);
    renderLocks(d);
    renderUnheld(d ? d.waiting_unheld : []);
  }

  function renderStatus() {
    const st = $('fleet-status');
    const d = F.data;
    st.className = 'fleet-status';
    if (F.off) {
      setText(st, 'Fleet presence is off on this agent (heartbeat_ttl_ms = 0): it neither announces itself nor reads the fleet.');
      st.classList.add('muted');
      setText($('fleet-sub'), '');
      return;
    }
    if (F.error) st.classList.add('is-bad');
    const parts = [];
    if (F.error) parts.push('The last read failed: ' + F.error + (d ? '. Showing the previous one.' : '.'));
    if (d) {
      const n = Array.isArray(d.masters) ? d.masters.length : 0;
      parts.push('Read from ' + d.masters_read + ' of ' + n + ' masters in ' + fmtDur(d.read_seconds * 1000) +
        (d.complete ? '' : ' \u2014 INCOMPLETE: fewer than the quorum of ' + d.quorum + ' answered; locks may be missing') + '.');
      if (d.reads > 1) {
        parts.push('That sweep of the keys took ' + plural(d.reads, 'read') + ' (fleet_read_budget: ' +
          plural(d.keys_walked, 'key') + ' walked).');
      }
      if (d.partial) {
        parts.push('PARTIAL: the first sweep of the keys has not ended; the locks and counts below are of the ' +
          plural(d.keys_walked, 'key') + ' walked so far only, not of the whole fleet.');
        st.classList.add('is-warn');
      }
      if (d.sweep) {
        parts.push('Sweep under way: ' + plural(d.sweep.keys_walked, 'key') + ' walked in ' + plural(d.sweep.reads, 'read') +
          ', on master ' + (d.sweep.master + 1) + ' of ' + d.sweep.masters + '; keys not walked yet show in the next view.');
      }
      if (d.rows_complete === false) {
        parts.push('Rows for this filter come with the next read; until then only those kept for other filters are shown.');
        st.classList.add('is-warn');
      }
      if (isFinite(d.age_ms) && d.age_ms > 10000) {
        parts.push('This read ended ' + fmtDur(d.age_ms) + ' ago: a newer one has not ended yet.');
        st.classList.add('is-warn');
      }
      for (const m of (d.masters || []).filter((x) => !x.ok)) parts.push(m.master + ' not read: ' + (m.error || 'error') + '.');
      if (!d.complete) st.classList.add('is-warn');
    }
    setText(st, parts.join(' '));
    const drift = d ? d.agents.filter((a) => a.drift && a.drift.length).length : 0;
    setText($('fleet-sub'), d ? plural(d.agents.length, 'agent') + ' \u00b7 ' + plural(d.locks_total, 'lock') +
      (drift ? ' \u00b7 ' + drift + ' with settings drift' : '') : '');
    $('fleet-sub').classList.toggle('is-bad', drift > 0);
  }

  function renderAgents(agents) {
    $('fleet-agents-table').hidden = !agents.length;
    const self = F.data && F.data.self ? F.data.self.id : '';
    reconcile($('fleet-agents-tbody'), agents.map((a) => ({
      sig: JSON.stringify([a.id, a.name, a.host, a.pid, a.version, a.up, a.drift, a.locks_total, a.waiters_total, a.settings, self]),
      data: a,
      build: buildAgentRow,
    })));
  }

  function buildAgentRow(a) {
    const drift = Array.isArray(a.drift) && a.drift.length > 0;
    const tr = h('tr', 'agent-row' + (drift ? ' is-drift' : ''));
    tr.setAttribute('data-testid', 'agent-row');
    tr.setAttribute('data-name', a.name);
    tr.setAttribute('data-drift', drift ? 'true' : 'false');
    const cur = () => tr._data || a;
    const name = h('td', 'cell-agent');
    name.append(h('div', 'strong', a.name || a.id));
    if (F.data && F.data.self && F.data.self.id === a.id) name.append(h('span', 'pill pill-info', 'this agent'));
    name.append(h('div', 'muted mono small', a.id));
    tr.append(name, h('td', 'mono', a.host + ' \u00b7 pid ' + a.pid));
    tr.append(h('td', a.up ? '' : 'is-bad', a.up ? 'up' : 'DOWN'));
    tr.append(h('td', 'mono', a.version));
    tr.append(live('td', 'num', (n) => setText(n, fmtDur(cur().heartbeat_age_ms + since()) + ' ago')));
    const set = h('td', 'cell-drift' + (drift ? ' is-bad' : ' muted'));
    set.setAttribute('data-testid', 'agent-drift');
    if (drift) for (const why of a.drift) set.append(h('div', 'drift-reason', why));
    else set.append(document.createTextNode('agrees with the fleet'));
    const s = a.settings || {};
    set.title = 'key_prefix ' + s.key_prefix + ', max_ttl_ms ' + s.max_ttl_ms + ', drift_factor ' + s.drift_factor +
      ', restart_quarantine ' + s.restart_quarantine + ', fence_prefix ' + s.fence_prefix + ', fence_quorum ' + s.fence_quorum;
    tr.append(set);
    tr.append(h('td', 'num', fmtCount(a.locks_total)), h('td', 'num', fmtCount(a.waiters_total)));
    return tr;
  }

  function renderLocks(d) {
    const locks = d ? d.locks : [];
    $('fleet-locks-table').hidden = !locks.length;
    const empty = $('fleet-locks-empty');
    empty.hidden = !d || locks.length > 0;
    setText(empty, F.prefix ? 'No lock whose resource starts with \u201c' + F.prefix + '\u201d is held in the fleet.'
      : 'No lock is held in the fleet.');
    const items = [];
    const ctx = [d && d.masters ? d.masters.length : 0, (LW.S.data || {}).actions];
    for (const l of locks) {
      const sig = JSON.stringify([ctx, holdSig(fleetHold(l)), l.hold_id, l.shape, l.holder.state,
        l.holder.agent_id, l.masters, l.quorum, l.stuck, l.stuck_reason,
        l.waiters.map((w) => [w.agent_id, w.pid, w.cmdline, w.mode]), LW.chainSig(l)]);
      const open = F.open.has(rowKey(l));
      items.push({ sig: sig + open, data: l, build: (x) => buildLockRow(x, open) });
      if (open) items.push({ sig: 'story' + sig, data: l, build: buildStory });
    }
    reconcile($('fleet-locks-tbody'), items);
  }

  /* A resource has one row per hold (its permits, its readers): rows are told apart by hold_id. */
  function rowKey(l) {
    return l.resource + '\u0000' + (l.hold_id || '');
  }

  function holderName(hd) {
    if (hd.state === 'unknown') return 'unknown writer';
    return hd.agent_name || hd.agent_id || '?';
  }

  function buildLockRow(l, open) {
    const hd = l.holder;
    const tr = h('tr', 'fleet-lock-row' + (l.stuck ? ' is-stuck' : '') + (hd.state === 'gone' ? ' is-gone' : ''));
    tr.setAttribute('data-testid', 'fleet-lock-row');
    tr.setAttribute('data-resource', l.resource);
    tr.setAttribute('data-hold', l.hold_id || '');
    tr.setAttribute('data-mode', l.mode || 'exclusive');
    tr.setAttribute('data-state', hd.state);
    tr.setAttribute('data-stuck', l.stuck ? 'true' : 'false');
    const cur = () => tr._data || l;
    const x = fleetHold(l);
    const s = l.shape || {};
    const res = h('td', 'cell-resource');
    if (l.stuck) res.append(h('span', 'pill pill-warn', 'STUCK'));
    const blocked = LW.chainPill(l);
    if (blocked) res.append(blocked);
    res.append(h('div', 'resource mono', l.resource));
    res.append(holdKind(x, { held: l.mode === 'permit' ? s.permits_held : s.readers, testid: 'fleet-hold-kind',
      writerWaiting: s.writer_waiting }));
    if (l.stuck && l.stuck_reason) res.append(h('div', 'stuck-reason', l.stuck_reason));
    tr.append(res);

    const who = h('td', 'cell-holder');
    who.setAttribute('data-testid', 'fleet-holder');
    const agent = [];
    if (hd.state === 'gone') agent.push(h('span', 'pill pill-bad', 'holder agent gone'), document.createTextNode(' '));
    agent.push(h('span', 'strong', holderName(hd)));
    if (hd.host) agent.push(h('span', 'muted', ' \u00b7 ' + hd.host));
    who.append(holdWho(x, { testid: 'fleet', unknown: '', before: agent }));
    who.append(holdCmdline(x, hd.state === 'gone' ? 'nothing renews or releases it: it goes when its ttl runs out'
      : 'command line not reported'));
    tr.append(who);

    tr.append(holdHeldCell(() => cur().holder, since));
    tr.append(live('td', 'cell-validity', (n) => {
      const c = cur();
      setText(n, fmtCountdown(c.validity_ms - since()) + (c.holder.ttl_ms > 0 ? ' / ' + fmtDur(c.holder.ttl_ms) : ''));
    }));
    tr.append(holdRenewCell(x));
    const ms = h('td', 'num' + (l.quorum ? '' : ' is-bad'), l.masters.length + ' of ' + l.masters_total);
    ms.title = l.masters.join(', ') + (l.quorum ? '' : ' (fewer than a quorum)');
    tr.append(ms);
    tr.append(buildWaiterCell(tr, l));

    const act = h('td', 'cell-act');
    const b = h('button', 'linkish', open ? 'hide' : 'details');
    b.type = 'button';
    b.setAttribute('data-testid', 'fleet-lock-toggle');
    b.setAttribute('aria-expanded', open ? 'true' : 'false');
    b.addEventListener('click', () => {
      if (F.open.has(rowKey(l))) F.open.delete(rowKey(l));
      else F.open.add(rowKey(l));
      renderLocks(F.data);
    });
    act.append(b);
    tr.append(act);
    return tr;
  }

  /* get() returns the waiter as of the newest read (its row may be kept across reads). */
  function waiterLine(get, cls) {
    const w = get();
    const n = h('div', cls);
    n.setAttribute('data-testid', 'fleet-waiter');
    n.setAttribute('data-agent', w.agent_name || w.agent_id);
    n.append(h('span', 'strong', w.agent_name || w.agent_id || '?'));
    if (isNum(w.pid) && w.pid >= 0) n.append(h('span', 'mono', ' \u00b7 pid ' + w.pid));
    n.append(document.createTextNode(' \u00b7 waiting '));
    n.append(live('span', 'wait-age', (x) => setText(x, fmtDur(get().waited_ms + since()))));
    return n;
  }

  /* The waiter at index i of the row's current data. */
  const waiterOf = (node, l, i) => () => ((node._data || l).waiters[i] || l.waiters[i]);

  function buildWaiterCell(tr, l) {
    const td = h('td', 'cell-fleet-waiters');
    if (!l.waiters.length) {
      td.append(h('span', 'muted', 'none'));
      return td;
    }
    l.waiters.slice(0, 3).forEach((w, i) => td.append(waiterLine(waiterOf(tr, l, i), 'waiter-line')));
    if (l.waiters.length > 3) td.append(h('div', 'muted', '+' + (l.waiters.length - 3) + ' more'));
    return td;
  }

  function field(dl, label, value) {
    const row = h('div', 'kv');
    row.append(h('dt', null, label), h('dd', null, value));
    dl.append(row);
  }

  /* The whole story of one lock: its holder, every waiter, every master; and Revoke. */
  function buildStory(l) {
    const hd = l.holder;
    const tr = h('tr', 'fleet-story');
    tr.setAttribute('data-testid', 'fleet-lock-story');
    tr.setAttribute('data-resource', l.resource);
    tr.setAttribute('data-hold', l.hold_id || '');
    const td = h('td');
    td.colSpan = 8;
    const holder = h('dl', 'story-block');
    holder.append(h('h4', null, 'Holder'));
    field(holder, 'state', { live: 'its agent is in the registry', gone: 'its agent is gone: nothing renews or releases it',
      unknown: 'the key\u2019s value names no agent' }[hd.state] || hd.state);
    field(holder, 'agent', holderName(hd) + (hd.agent_id ? ' (' + hd.agent_id + ')' : ''));
    if (hd.host) field(holder, 'host', hd.host);
    holdFactsList(holder, fleetHold(l));
    const masters = h('div', 'story-block');
    masters.append(h('h4', null, 'Masters (' + l.masters.length + ' of ' + l.masters_total + (l.quorum ? ', a quorum)' : ', NO quorum)')));
    for (const m of l.masters) masters.append(h('div', 'mono small', m));
    const waiters = h('div', 'story-block');
    waiters.append(h('h4', null, 'Waiters (' + l.waiters.length + ')'));
    l.waiters.forEach((w, i) => {
      const line = waiterLine(waiterOf(tr, l, i), 'waiter-line');
      if (w.cmdline) line.append(h('div', 'cmdline mono', truncate(w.cmdline, 200)));
      waiters.append(line);
    });
    if (!l.waiters.length) waiters.append(h('div', 'muted', 'nobody waits for it'));
    const act = h('div', 'story-act');
    const b = actionButton('Revoke\u2026', 'fleet-revoke', 'revoke', 'danger-ghost');
    b.setAttribute('data-resource', l.resource);
    b.setAttribute('data-hold', l.hold_id || '');
    act.append(b);
    const grid = h('div', 'story');
    grid.append(holder, masters, waiters, act);
    const chain = LW.chainBlock(l, () => tr._data || l, since);
    if (chain) grid.append(chain);
    const behind = LW.behindBlock(l, () => tr._data || l, since);
    if (behind) grid.append(behind);
    td.append(grid);
    tr.append(td);
    return tr;
  }

  function renderUnheld(list) {
    const box = $('fleet-unheld');
    box.hidden = !list || !list.length;
    if (box.hidden) return;
    box.textContent = '';
    box.append(h('h3', 'sub-head', 'Waiting for locks nobody holds right now'));
    for (const w of list) {
      const line = waiterLine(() => w, 'waiter-line');
      line.prepend(h('span', 'mono resource', w.resource + ' \u2190 '));
      box.append(line);
    }
  }

  // ---------------------------------------------------------------- start

  function initFleet() {
    const panel = $('fleet-panel');
    if ('IntersectionObserver' in window) {
      new IntersectionObserver((entries) => {
        for (const e of entries) setVisible(e.isIntersecting);
      }).observe(panel);
    } else {
      setVisible(true);
    }
    document.addEventListener('visibilitychange', () => {
      const r = panel.getBoundingClientRect();
      setVisible(r.bottom > 0 && r.top < window.innerHeight);
    });
    $('fleet-filter').addEventListener('submit', (e) => {
      e.preventDefault();
      F.prefix = $('fleet-prefix').value.trim();
      F.open.clear();
      fleetPollSoon();
    });
  }

  /* The row of resource (and hold, when given) in the last read (for the revoke dialog). */
  function fleetLock(resource, hold) {
    if (!F.data) return null;
    return F.data.locks.find((l) => l.resource === resource && (!hold || l.hold_id === hold)) ||
      LW.deadlockLock(F.data, resource, hold);
  }

  Object.assign(LW, { initFleet, fleetPollSoon, fleetLock });
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', initFleet);
  else initFleet();
})();
