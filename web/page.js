// lockwarden operator page: what every part shares. The page state (the last
// snapshot and the monotonic clock it is read against) and the DOM helpers that build nodes,
// reconcile lists and tick live cells. See app.js for the rules all parts keep.
'use strict';

(() => {
  const LW = (window.LW = window.LW || {});

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
    needToken: false, // the agent refused to show its state without the (right) admin token
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

  // ---------------------------------------------------------------- DOM helpers

  const $ = (id) => document.getElementById(id);

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

  /* Runs the _tick of every live node under root. */
  function tickWithin(root) {
    for (const n of root.querySelectorAll('.live')) n._tick && n._tick(n);
  }

  Object.assign(LW, { $, h, s, setText, setAttr, live, reconcile, tickWithin, S, sinceSnapshot,
    agentNow, changed });
})();
