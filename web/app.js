// lockwarden operator page: polls GET /api/v1/state once a second and renders it.
//
// The page is eight plain scripts that index.html loads in order, each adding what it offers to one
// namespace, window.LW, and taking what it needs from the scripts before it:
//   format.js   formatting of numbers, durations and times
//   page.js     the page state and the DOM helpers (build, reconcile, tick)
//   charts.js   the SVG charts
//   actions.js  token box, action buttons, confirmation dialog, POSTs
//   hold.js     one hold as both the locks and the fleet panels render it
//   panels.js   header, quorum banner, masters, locks, waiters, leaks, events
//   fleet.js    the fleet panel (its own poll of /api/v1/fleet, only while on screen)
//   app.js      polling, the ticker, start
//
// Safety rules every part keeps:
// - Every string from the agent (resource names, keys, cmdlines, messages) reaches the DOM through
//   textContent or setAttribute, never through innerHTML: they are attacker-controlled.
// - No inline script or style (the agent serves a strict CSP); styling is by class.
// - Sections are reconciled, not blindly rebuilt: a row whose data did not change keeps its DOM
//   node, so focus and text selection survive the 1 s poll. Ticking values (held for, validity,
//   ages) are updated in place between polls from the snapshot's time.
'use strict';

(() => {
  const LW = (window.LW = window.LW || {});
  const { $, setText, setAttr, tickWithin, S, sinceSnapshot, fmtDur, fmtClock } = LW;
  const { renderHeader, renderQuorum, renderMasters, renderLocks, renderWaiters, renderLeaks, renderEvents } = LW;
  const { renderCharts, initCharts, renderActionsNotice, initToken, initActions, getToken } = LW;

  const POLL_MS = 1000;
  const POLL_TIMEOUT_MS = 4000;
  const TICK_MS = 250;
  // The agent publishes a snapshot every 250 ms; one that has not changed for this long means its
  // event loop is wedged (the agent's /healthz fails after the same 5 s).
  const SNAPSHOT_STALE_MS = 5000;

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
    let refused = null; // a 401: {had: whether a token was sent, message}
    const token = getToken();
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    try {
      const r = await fetch('/api/v1/state', { cache: 'no-store', signal: ctl.signal, headers });
      if (r.status === 401) {
        refused = { had: !!token, message: '' };
        try {
          const j = await r.json();
          refused.message = (j && j.message) || '';
        } catch (e) {
          /* not JSON */
        }
      } else if (!r.ok) {
        let msg = 'HTTP ' + r.status;
        try {
          const j = await r.json();
          if (j && j.message) msg += ': ' + j.message;
        } catch (e) {
          /* not JSON */
        }
        throw new Error(msg);
      }
      if (!refused) {
        d = await r.json();
        if (!d || typeof d !== 'object' || !d.quorum || !Array.isArray(d.masters)) {
          d = null;
          throw new Error('the answer is not a state snapshot');
        }
      }
    } catch (e) {
      S.pollError = e && e.name === 'AbortError' ? 'no answer within ' + POLL_TIMEOUT_MS / 1000 + ' s'
        : (e && e.message) || String(e);
    } finally {
      clearTimeout(timeout);
    }
    if (d) {
      try {
        if (S.needToken) needToken(null);
        accept(d);
        S.pollError = '';
      } catch (e) {
        S.pollError = 'this page could not show the state (' + e.message + ')';
        console.error(e); // a bug in the page, not the agent: let it be seen
      }
    }
    S.inFlight = false;
    if (refused) {
      // An agent listening beyond loopback shows nothing without the right token. Polling again
      // cannot help (and each refusal is a console error): wait for a token (tokenChanged),
      // unless one was saved while this poll was out.
      needToken(refused.had, refused.message);
      if (S.again) schedule(0);
      S.again = false;
      return;
    }
    tick();
    schedule(S.again ? 0 : POLL_MS);
    S.again = false;
  }

  /* Shows (had: whether a token was sent) or clears (had === null) the "needs the admin token"
   * state, in which the page shows nothing else and does not poll. */
  function needToken(had, message) {
    const on = had !== null;
    S.needToken = on;
    document.body.classList.toggle('needs-token', on);
    $('token-needed').hidden = !on;
    if (!on) return;
    S.data = null; // what was shown before may no longer be shown
    S.keys = {};
    S.pollError = '';
    setText($('token-needed-title'), had ? 'The admin token was refused.'
      : 'This agent needs the admin token to show anything.');
    setText($('token-needed-text'), (had ? 'Paste the right one in the box above' : 'Paste it in the box above') +
      ' (the content of the agent\u2019s admin_token_file; it is kept for this tab only).' +
      (message ? ' The agent says: ' + message : ''));
    setText($('last-update'), had ? 'token refused' : 'token needed');
    setAttr($('last-update'), 'data-stale', 'true');
    $('stale-warning').hidden = true;
    document.body.classList.remove('is-stale');
    if (document.activeElement === document.body) $('token-input').focus();
  }

  /* The token was saved or forgotten: poll with it now. */
  function tokenChanged() {
    pollSoon();
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

  /* Every section, in page order. */
  function render(d) {
    renderHeader(d);
    renderQuorum(d);
    renderActionsNotice(d);
    renderMasters(d);
    renderCharts(d, false);
    renderLocks(d);
    renderWaiters(d);
    renderLeaks(d);
    renderEvents(d);
  }

  // ---------------------------------------------------------------- ticker

  /* Updates "updated … ago", the stale warning and every ticking cell. */
  function tick() {
    if (S.needToken) return;
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

  // ---------------------------------------------------------------- start

  function start() {
    initToken();
    initActions();
    initCharts();
    setInterval(tick, TICK_MS);
    poll();
  }

  LW.pollSoon = pollSoon; // for actions.js: show an action's effect at once
  LW.tokenChanged = tokenChanged;

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
