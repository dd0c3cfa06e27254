// lockwarden operator page: who blocks whom in the fleet. The deadlocks of the last fleet read at
// the top of the fleet panel (each process with its host, pid, command line, what it holds and
// what it waits for), with the revoke that would end each; and a lock's blocking chain (what its
// holder waits for, who holds that, and on) for fleet.js's rows and stories. Fields: docs/api.md.
'use strict';

(() => {
  const LW = (window.LW = window.LW || {});
  const { $, h, setText, live, actionButton } = LW;
  const { isNum, fmtDur, plural, truncate } = LW;

  /* "alpha · host-1 · pid 42 (inside pid 40)": where a process of the graph runs. */
  function processLine(p, cls) {
    const n = h('div', cls);
    if (p.gone) n.append(h('span', 'pill pill-bad', 'agent gone'), document.createTextNode(' '));
    n.append(h('span', 'strong', p.agent_name || p.agent_id || '?'));
    if (p.host) n.append(h('span', 'muted', ' \u00b7 ' + p.host));
    if (isNum(p.pid) && p.pid >= 0) n.append(h('span', 'mono', ' \u00b7 pid ' + p.pid));
    if (isNum(p.actor_pid) && p.actor_pid !== p.pid) {
      n.append(h('span', 'muted', ' (inside pid ' + p.actor_pid + ')'));
    }
    if (p.cmdline) n.append(h('div', 'cmdline mono', truncate(p.cmdline, 200)));
    return n;
  }

  /* The age of a wait as of the newest read (get() reads it), ticking from that read (since()
   * is the page's ms since it arrived). */
  const waitAge = (get, since) => live('span', 'wait-age', (x) => setText(x, fmtDur(get() + since())));

  let shown = []; // the deadlocks on the panel, as of the newest read

  /* Deadlock i of the newest read (its actors are the same while the panel shows it). */
  function buildDeadlock(d, i, since) {
    const cur = () => shown[i] || d;
    const box = h('div', 'deadlock');
    box.setAttribute('data-testid', 'deadlock');
    box.setAttribute('data-processes', String(d.actors));
    const head = h('div', 'deadlock-head');
    head.append(h('span', 'pill pill-bad', 'DEADLOCK'), document.createTextNode(' ' + plural(d.actors, 'process', 'processes') +
      ' wait for each other; the oldest has waited '), waitAge(() => cur().oldest_wait_ms, since),
      document.createTextNode('. No ttl ends it while they renew.'));
    box.append(head);
    const list = h('ol', 'deadlock-cycle');
    d.cycle.forEach((p, j) => {
      const li = h('li', 'deadlock-actor');
      li.setAttribute('data-testid', 'deadlock-actor');
      li.setAttribute('data-pid', String(p.pid));
      li.setAttribute('data-agent', p.agent_name || p.agent_id);
      li.append(processLine(p, 'deadlock-who'));
      const what = h('div', 'deadlock-what');
      if (p.holds) {
        what.append(document.createTextNode('holds '), h('span', 'mono resource', p.holds.resource));
        if (isNum(p.holds.held_ms)) what.append(document.createTextNode(' (for ' + fmtDur(p.holds.held_ms) + ' at the read)'));
        what.append(document.createTextNode(' \u00b7 '));
      }
      what.append(document.createTextNode('waits for '), h('span', 'mono resource', p.waits_for),
        document.createTextNode(' since '), waitAge(() => (cur().cycle[j] || p).waited_ms, since),
        document.createTextNode(' ago'));
      li.append(what);
      list.append(li);
    });
    box.append(list);
    const pr = d.proposal;
    if (pr) {
      const act = h('div', 'deadlock-proposal');
      act.setAttribute('data-testid', 'deadlock-proposal');
      act.setAttribute('data-resource', pr.resource);
      act.append(h('span', 'strong', 'To end it: '), document.createTextNode('revoke '),
        h('span', 'mono resource', pr.resource), document.createTextNode(' held by pid ' + pr.pid + '. Why: ' + pr.why + '. '));
      const b = actionButton('Revoke ' + truncate(pr.resource, 40) + '\u2026', 'deadlock-revoke', 'revoke', 'danger-ghost');
      b.setAttribute('data-resource', pr.resource);
      b.setAttribute('data-hold', pr.hold_id || '');
      b.setAttribute('data-why', pr.why);
      act.append(b);
      box.append(act);
    }
    return box;
  }

  /* The deadlocks of fleet read `d` at the top of the fleet panel. */
  /* Rebuilt only when the deadlocks themselves change: their ages tick in place. */
  function renderDeadlocks(d, since) {
    const box = $('fleet-deadlocks');
    const list = d && Array.isArray(d.deadlocks) ? d.deadlocks : [];
    shown = list;
    const sig = JSON.stringify(list.map((x) => [x.cycle.map((p) => [p.agent_id, p.agent_name, p.host, p.gone, p.pid,
      p.actor_pid, p.cmdline, p.waits_for, p.holds && [p.holds.resource, p.holds.hold_id, p.holds.pid]]),
    x.proposal, (LW.S.data || {}).actions]));
    if (box._sig === sig) return;
    box._sig = sig;
    box.hidden = !list.length;
    box.textContent = '';
    if (!list.length) return;
    box.append(h('h3', 'sub-head is-bad', plural(list.length, 'deadlock') + ' in the fleet'));
    list.forEach((x, i) => box.append(buildDeadlock(x, i, since)));
  }

  /* The pill of a row whose holder waits itself: BLOCKED, or DEADLOCK when the chain closes. */
  function chainPill(l) {
    const chain = l.blocked_by || [];
    if (!chain.length) return null;
    const cycle = chain.some((s) => s.cycle);
    const p = h('span', 'pill ' + (cycle ? 'pill-bad' : 'pill-warn'), cycle ? 'DEADLOCK' : 'HOLDER WAITS');
    p.setAttribute('data-testid', 'fleet-blocked');
    p.title = 'Its holder waits for ' + chain[0].waits_for + (cycle ? ', in a cycle back to itself' : '');
    return p;
  }

  /* What of a row's chain a rebuild is for (its ages tick in place). */
  function chainSig(l) {
    return [(l.blocked_by || []).map((s) => [s.depth, s.agent_id, s.pid, s.waits_for, s.cycle,
      (s.held_by || []).map((x) => [x.agent_id, x.pid, x.hold_id])]),
    (l.waiting_behind || []).map((s) => [s.depth, s.agent_id, s.pid, s.waits_for, s.cycle])];
  }

  /* A story block of steps (the row's `field`: blocked_by or waiting_behind), each a waiting
   * process with what it waits for since when, indented by its depth; more(s, node) adds what the
   * kind of step says besides. cur() is the row as of the newest read. Null when there are none. */
  function stepsBlock(l, field, testid, title, cur, since, more) {
    const steps = l[field] || [];
    if (!steps.length) return null;
    const box = h('div', 'story-block chain');
    box.setAttribute('data-testid', testid);
    box.append(h('h4', null, title(steps)));
    steps.forEach((s, k) => {
      const step = h('div', 'chain-step');
      step.style.marginLeft = (s.depth * 16) + 'px';
      step.setAttribute('data-testid', testid + '-step');
      step.setAttribute('data-depth', String(s.depth));
      step.append(processLine(s, 'chain-who'));
      const what = h('div', null);
      what.append(document.createTextNode('waits for '), h('span', 'mono resource', s.waits_for),
        document.createTextNode(' since '), waitAge(() => ((cur()[field] || [])[k] || s).waited_ms, since),
        document.createTextNode(' ago'));
      step.append(what);
      more(s, step, what);
      box.append(step);
    });
    return box;
  }

  /* The row's blocking chain: why its holder does not let go. */
  const chainBlock = (l, cur, since) => stepsBlock(l, 'blocked_by', 'fleet-chain',
    () => 'Why the holder does not let go', cur, since, (s, step, what) => {
      what.append(document.createTextNode(', held by:'));
      for (const x of s.held_by || []) step.append(processLine(x, 'chain-holder'));
      if (s.cycle) step.append(h('div', 'is-bad strong', 'DEADLOCK: a holder of it is already in this chain'));
    });

  /* Who waits behind the row's hold: its waiters, the waiters for what they hold, and on. */
  const behindBlock = (l, cur, since) => stepsBlock(l, 'waiting_behind', 'fleet-behind',
    (steps) => 'Waiting behind it (' + plural(steps.length, 'wait') + ')', cur, since, (s, step, what) => {
      if (s.cycle) what.append(h('span', 'is-bad strong', ' \u00b7 DEADLOCK: the holder itself'));
    });

  /* A lock the deadlocks name (for the revoke dialog when the lock rows do not list it). */
  function deadlockLock(d, resource, hold) {
    for (const x of (d && d.deadlocks) || []) {
      for (const p of x.cycle) {
        const held = p.holds;
        if (held && held.resource === resource && (!hold || held.hold_id === hold)) {
          return { resource, hold_id: held.hold_id, waiters: [],
            holder: { state: held.gone ? 'gone' : 'live', agent_id: held.agent_id, agent_name: held.agent_name,
              host: held.host, pid: held.pid, cmdline: held.cmdline } };
        }
      }
    }
    return null;
  }

  Object.assign(LW, { renderDeadlocks, chainPill, chainBlock, behindBlock, chainSig, deadlockLock });
})();
