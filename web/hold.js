// lockwarden operator page: one hold (core/hold.h) as both panels show it. The locks panel has
// this agent's holds (/api/v1/state "locks"), the fleet panel every hold on the masters
// (/api/v1/fleet "locks", whose holder's fields sit under "holder": fleetHold joins them back).
// Both build a hold's cells through here, so a datum of a hold is rendered once: a new one is
// its line in HOLD_DATA (a tag beside the holder, a fact in the hold's details: the fleet's story,
// the holder's title in both) and its key in HOLD_KEYS.
'use strict';

(() => {
  const LW = (window.LW = window.LW || {});
  const { h, live, setText, isNum, fmtDur, plural, leaderText } = LW;

  /* A fleet row's hold: its holder's fields with the row's resource and kind. */
  function fleetHold(row) {
    return Object.assign({}, row.holder, { resource: row.resource, kind: (row.shape || {}).kind, mode: row.mode,
      permit: row.permit, permits: row.permits, election: row.election });
  }

  const known = (v) => (isNum(v) && v >= 0 ? v : '\u2014');

  const MODE_HELP = {
    election: 'an election\u2019s leader: its term is the hold\u2019s fence; the candidates wait for it',
    exclusive: 'exclusive: no other holder (a mutex, or the write hold of a read-write lock)',
    shared: 'a read hold: readers share; a writer waits for all of them',
    permit: 'a permit of a semaphore',
  };

  /* Each datum of a hold shown beside its holder (tag: [text, title, testid]) or in its details
   * (fact: [label, text]); a datum that has nothing to say returns nothing. A new datum is its
   * line here and its key in HOLD_KEYS. */
  const HOLD_DATA = [
    { tag: (x, p) => x.detached && ['detached', 'a detached lease: it outlives the connection that took it, and ends ' +
      'when released by its token or when its ttl runs out (an extend by token keeps it); pid, uid and command are ' +
      'its creator\u2019s at the acquire', p + '-detached'] },
    { fact: (x) => x.detached && ['lease', 'detached: it outlives the connection that took it, and ends when released ' +
      'by its token or when its ttl runs out'] },
    { fact: (x) => isNum(x.pid) && x.pid >= 0 && [x.detached ? 'created by pid / uid' : 'pid / uid',
      x.pid + ' / ' + known(x.uid)] },
    { fact: (x) => isNum(x.gid) && x.gid >= 0 && ['gid', String(x.gid)] },
    { fact: (x) => x.cmdline && ['command', x.cmdline] },
    { fact: (x) => x.held_since_ms > 0 && ['held since', new Date(x.held_since_ms).toISOString()] },
    { fact: (x) => x.ttl_ms > 0 && ['ttl', fmtDur(x.ttl_ms) + (x.renew ? ', renewed' : ', not renewed')] },
    { fact: (x) => x.fence != null && ['fence', String(x.fence)] },
    { fact: (x) => ['hold', x.mode === 'permit' ? 'permit ' + x.permit + ' of a semaphore of ' + (x.permits || '?')
      : MODE_HELP[modeOf(x)]] },
  ];

  /* The fields of a hold whose change rebuilds the row that shows it (how long it is held ticks
   * in place); an election's by its leader. */
  const HOLD_KEYS = ['resource', 'kind', 'mode', 'permits', 'permit', 'fence', 'ttl_ms', 'renew', 'waiters', 'pid',
    'uid', 'gid', 'cmdline', 'detached'];

  function holdSig(x) {
    const e = x.election;
    return JSON.stringify([HOLD_KEYS.map((k) => x[k]), e ? [e.term, e.value] : null]);
  }

  /* The key of MODE_HELP for the hold. */
  function modeOf(x) {
    if (x.kind === 'election' || x.election) return 'election';
    return MODE_HELP[x.mode] ? x.mode : 'exclusive';
  }

  /* [label, text] of every fact of the hold, in HOLD_DATA's order. */
  function holdFacts(x) {
    return HOLD_DATA.map((d) => d.fact && d.fact(x)).filter(Boolean);
  }

  /* What kind of hold it is and how many of its kind the resource has: "semaphore · permit 2 ·
   * 3 of 4 held", "shared · 2 readers · writer waiting", "election · leader host-a:8080 · term 7",
   * "exclusive" (a mutex's hold, or the writer of a read-write lock). o.held: the resource's holds
   * of its kind; o.writerWaiting: a writer waits (new readers are refused). */
  function holdKindText(x, o) {
    const waiting = o.writerWaiting ? ' \u00b7 writer waiting' : '';
    if (x.kind === 'election' || x.election) {
      return 'election \u00b7 ' + (x.election ? leaderText(x.election) : 'its record not read yet');
    }
    const n = isNum(o.held) ? o.held : 1;
    if (x.mode === 'permit') {
      return 'semaphore \u00b7 permit ' + x.permit + ' \u00b7 ' + n + ' of ' + (x.permits || '?') + ' held';
    }
    if (x.mode === 'shared') return 'shared \u00b7 ' + plural(n, 'reader') + waiting;
    return 'exclusive' + waiting;
  }

  /* The kind line under the resource (holdKindText; o.testid names it for tests). */
  function holdKind(x, o) {
    const mode = x.mode || 'exclusive';
    const kind = h('div', 'hold-kind muted', holdKindText(x, o));
    kind.setAttribute('data-testid', o.testid);
    kind.setAttribute('data-mode', mode);
    kind.title = mode === 'permit' && x.permits ? MODE_HELP.permit + ': at most ' + x.permits + ' holders at once'
      : MODE_HELP[modeOf(x)];
    return kind;
  }

  /* Who holds it: o.before (the fleet's holder agent), its tags, "pid N · uid U · gid G" (a
   * detached lease's "created by pid N"), o.after (this agent's session). o.unknown: what to say
   * when the pid is not known ("": nothing). The title lists every fact of the hold. */
  function holdWho(x, o) {
    const parts = [];
    for (const d of HOLD_DATA) {
      const tag = d.tag && d.tag(x, o.testid);
      if (!tag) continue;
      const pill = h('span', 'pill pill-info', tag[0]);
      pill.title = tag[1];
      pill.setAttribute('data-testid', tag[2]);
      parts.push(pill, document.createTextNode(' '));
    }
    if (x.detached) parts.push(document.createTextNode('created by '));
    const pid = isNum(x.pid) && x.pid >= 0;
    const unknown = x.detached ? 'an unknown process' : o.unknown;
    if (pid) parts.push(h('span', 'mono', 'pid ' + x.pid));
    else if (unknown) parts.push(h('span', 'muted', unknown));
    if (pid || unknown) {
      parts.push(h('span', 'muted', ' \u00b7 uid ' + known(x.uid) + (isNum(x.gid) ? ' \u00b7 gid ' + known(x.gid) : '')));
    }
    const who = h('div', 'holder-id');
    const before = o.before || [];
    who.append(...before);
    if (before.length && parts.length) who.append(document.createTextNode(' \u00b7 '));
    who.append(...parts, ...(o.after || []));
    who.title = holdFacts(x).map((f) => f[0] + ': ' + f[1]).join('\n');
    return who;
  }

  /* The holder's command line; `missing` when there is none. */
  function holdCmdline(x, missing) {
    const cmd = h('div', 'cmdline mono' + (x.cmdline ? '' : ' muted'), x.cmdline || missing);
    cmd.title = x.cmdline || missing;
    return cmd;
  }

  /* How long it is held, ticking: get() is the hold as of the latest read, since() the time since. */
  function holdHeldCell(get, since) {
    return live('td', 'num', (n) => {
      const x = get();
      setText(n, isNum(x.held_ms) && x.held_ms >= 0 ? fmtDur(x.held_ms + since()) : '\u2014');
    });
  }

  /* Whether its agent renews it ("—" when that is not known: no ttl reported). */
  function holdRenewCell(x) {
    if (!(x.ttl_ms > 0)) return h('td', 'muted', '\u2014');
    return h('td', x.renew ? '' : 'muted', x.renew ? 'yes' : 'no');
  }

  /* The facts as a definition list (a fleet row's story). */
  function holdFactsList(dl, x) {
    for (const [label, text] of holdFacts(x)) {
      const row = h('div', 'kv');
      row.append(h('dt', null, label), h('dd', null, text));
      dl.append(row);
    }
  }

  Object.assign(LW, { fleetHold, holdSig, holdKind, holdWho, holdCmdline, holdHeldCell, holdRenewCell, holdFactsList });
})();
