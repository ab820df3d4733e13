// dom.js — the only way the console builds DOM: elements with text content
// and checked attributes. Markup is never parsed: whatever a bot or a user
// sends (a message text "<img onerror=…>") is text, never markup.

const SAFE_ATTR = /^(class|id|role|title|tabindex|type|value|name|for|placeholder|disabled|checked|selected|hidden|lang|dir|colspan|datetime|aria-[a-z-]+|data-[a-z0-9-]+|autocomplete|spellcheck|maxlength|rel|target|href|list|min|max|step|open)$/;

// h builds an element: h('div', {class: 'x', 'data-testid': 'y'}, child, 'text', [more]).
// Children are nodes or strings (always text); null/undefined/false are skipped.
// Event handlers go in attrs as functions named on*: {onclick: fn}.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'style' && typeof v === 'object') {
      for (const [p, val] of Object.entries(v)) if (val !== undefined && val !== null && val !== '') el.style.setProperty(p, String(val));
    } else if (SAFE_ATTR.test(k)) {
      if (k === 'href' && !safeURL(v)) continue;
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// safeURL keeps only http(s) links: a javascript: or data: URI from a
// message never becomes a link.
export function safeURL(u) {
  try {
    const url = new URL(String(u), location.href);
    return url.protocol === 'https:' || url.protocol === 'http:';
  } catch { return false; }
}

// replace swaps el's children for the given ones.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

// shortId abbreviates a LINE ID for display: U…cafe.
export function shortId(id) {
  if (!id) return '—';
  return id.length > 12 ? id[0] + '…' + id.slice(-4) : id;
}

export function fmtTime(t) {
  if (!t) return '';
  const d = new Date(t);
  if (isNaN(d)) return '';
  return d.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false});
}

export function fmtMs(ms) {
  if (ms === undefined || ms === null || ms === 0) return '—';
  if (ms < 1) return `${Math.round(ms * 1000)} µs`;
  if (ms < 1000) return `${ms < 10 ? ms.toFixed(1) : Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

export function fmtAge(s) {
  if (!s) return '—';
  if (s < 60) return `${s} s`;
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

// randomId mints a LINE-shaped ID: prefix and 32 lowercase hex digits.
export function randomId(prefix) {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return prefix + Array.from(b, x => x.toString(16).padStart(2, '0')).join('');
}
