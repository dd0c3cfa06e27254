// lockwarden operator page: admin actions. The token box, the "actions disabled"
// notice, the action buttons of the lock and leak rows, the confirmation dialog, and the POSTs it
// sends. The token is kept in sessionStorage (this tab only) and sent as a Bearer header, with
// every action and with every poll (an agent listening beyond loopback needs it for reads too).
'use strict';

(() => {
  const LW = (window.LW = window.LW || {});
  const { $, h, setText, S } = LW;
  const { isNum, fmtClock, fmtPeriod, truncate, plural } = LW;

  const ACTION_TIMEOUT_MS = 10000;
  const TOKEN_KEY = 'lockwarden.token';

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
    if (LW.tokenChanged) LW.tokenChanged(); // app.js: poll with it at once
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

  // ---------------------------------------------------------------- notice, buttons

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

  // ---------------------------------------------------------------- dialog, requests

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
      const gone = !(isNum(l.pid) && l.pid >= 0) || l.detached;
      const creator = isNum(l.pid) && l.pid >= 0 ? 'pid ' + l.pid + (l.cmdline ? ' (' + truncate(l.cmdline, 120) + ')' : '')
        : 'uid ' + l.uid;
      const holder = l.detached ? 'is a detached lease created by ' + creator + ': no connection holds it, and it'
        : gone ? 'held by session ' + (l.session != null ? l.session : '?') + ' (its process has disconnected)'
          : 'held by pid ' + l.pid + (l.cmdline ? ' (' + truncate(l.cmdline, 120) + ')' : '');
      const w = l.waiters > 0 ? (l.waiters === 1 ? 'The 1 waiter queued for it will get it next.'
        : 'The ' + l.waiters + ' waiters queued for it will contend next.') : 'Nobody is queued for it.';
      const tell = l.detached ? ['Nobody receives the ', { code: 'lost' }, ' event; a release or extend with its token then gets ',
        { code: 'not_held' }, '. ']
        : gone ? ['Its holder is gone, so nobody receives the ', { code: 'lost' }, ' event. ']
        : ['The holder gets a ', { code: 'lost' }, ' event with reason ', { code: 'revoked' },
          ' and must stop touching the resource. '];
      para(text, ['The lock ' + q(a.resource) + ' ' + holder + ' will be deleted on every master with its token. ']
        .concat(tell, [w]));
      para(caution, ['The holder is not stopped by this: a program that ignores ', { code: 'lost' },
        ' may keep working on the resource. (', { code: 'lockwarden lock' }, ' terminates its command.)']);
      caution.hidden = false;
    } else if (a.action === 'revoke') {
      describeRevoke(a, text, caution);
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

  /* A lock held anywhere in the fleet (fleet.js's row): its holder's agent is told, or the key is
   * compare-and-deleted when that agent is gone. */
  function describeRevoke(a, text, caution) {
    const l = a.lock || { holder: {}, waiters: [] };
    const hd = l.holder || {};
    const who = hd.state === 'gone' ? 'held through agent ' + (hd.agent_id || '?') + ', which is gone,'
      : 'held through agent ' + (hd.agent_name || hd.agent_id || '?') + (hd.host ? ' on ' + hd.host : '') +
        (isNum(hd.pid) && hd.pid >= 0 ? ' by pid ' + hd.pid + (hd.cmdline ? ' (' + truncate(hd.cmdline, 120) + ')' : '') : '');
    const n = (l.waiters || []).length;
    const tell = hd.state === 'live' ? ['will be revoked: its agent gives the holder a ', { code: 'lost' }, ' event with reason ',
      { code: 'revoked' }, ' and deletes the key. If that agent does not answer, the key is deleted on every master where it still holds this value. ']
      : ['will be deleted on every master where the key still holds the value read now. '];
    para(text, ['The lock ' + q(a.resource) + ' ' + who + ' '].concat(tell,
      [n ? plural(n, 'waiter') + ' in the fleet will contend next.' : 'Nobody in the fleet waits for it.'],
      a.why ? [' Proposed to end a deadlock: ' + a.why + '.'] : []));
    para(caution, ['The holder is not stopped by this: a program that ignores ', { code: 'lost' },
      ' may keep working on the resource.']);
    caution.hidden = false;
  }

  function openAction(action, ds) {
    if (S.busy) return;
    const d = S.data || {};
    const a = { action, resource: ds.resource, master: ds.master, key: ds.key, hold: ds.hold, why: ds.why };
    if (action === 'release') a.lock = (d.locks || []).find((l) => l.resource === ds.resource) || { resource: ds.resource };
    if (action === 'revoke') a.lock = (LW.fleetLock && LW.fleetLock(ds.resource, ds.hold)) || null;
    const titles = { release: 'Force-release lock ' + q(truncate(ds.resource || '', 60)) + '?',
      revoke: 'Revoke lock ' + q(truncate(ds.resource || '', 60)) + ' in the fleet?',
      expire: 'Set a TTL on a leaked key?', delete: 'Delete a leaked key?' };
    const oks = { release: 'Force-release', revoke: 'Revoke', expire: 'Set TTL', delete: 'Delete key' };
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
    } else if (a.action === 'revoke') {
      path = '/api/v1/fleet/revoke';
      body = a.hold ? { resource: a.resource, hold: a.hold } : { resource: a.resource };
      what = 'revoke of ' + q(a.resource);
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
    LW.pollSoon(); // app.js, loaded after this file
    if (LW.fleetPollSoon) LW.fleetPollSoon();
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
    if (a.action === 'revoke') {
      const masters = isNum(j.masters_read) ? ' (' + j.masters_read + ' masters read)' : '';
      return j.how === 'holder_agent' ? 'Revoked ' + q(a.resource) + ' through its holder\u2019s agent ' + (j.agent_id || '') + masters + '.'
        : 'Deleted ' + q(a.resource) + ' on ' + j.deleted + ' masters (its holder\u2019s agent was gone or silent)' + masters + '.';
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
        hold: b.getAttribute('data-hold') || '',
        why: b.getAttribute('data-why') || '',
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

  Object.assign(LW, { getToken, renderActionsNotice, actionButton, initToken, initActions });
})();
