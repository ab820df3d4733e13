// api.js — the console's only way to reach linegate local: JSON under
// /_local/ with the token when the server needs one (a console opened as
// /?token=TOKEN keeps it for the tab and drops it from the address bar), and the server-sent event stream of changes.

const TOKEN_KEY = 'linegate-token';

function token() {
  const q = new URLSearchParams(location.search);
  const t = q.get('token');
  if (t) {
    sessionStorage.setItem(TOKEN_KEY, t);
    q.delete('token');
    const rest = q.toString();
    history.replaceState(null, '', location.pathname + (rest ? '?' + rest : '') + location.hash);
  }
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

const tok = token();

function headers(extra) {
  const h = Object.assign({}, extra);
  if (tok) h['X-Linegate-Token'] = tok;
  return h;
}

// get fetches JSON; it throws an Error carrying the server's message.
export async function get(path) {
  const res = await fetch(path, {headers: headers(), cache: 'no-store'});
  return parse(res, path);
}

// post sends JSON and returns the answer's JSON.
export async function post(path, body) {
  const res = await fetch(path, {method: 'POST', headers: headers({'Content-Type': 'application/json'}), body: JSON.stringify(body || {})});
  return parse(res, path);
}

async function parse(res, path) {
  let body = null;
  try { body = await res.json(); } catch { /* not JSON */ }
  if (!res.ok) {
    const msg = (body && (body.error || body.message)) || `${res.status} ${res.statusText}`;
    const err = new Error(`${path}: ${msg}`);
    err.status = res.status;
    err.body = body;
    throw err;
  }
  return body;
}

// stream listens for changes: onChange(topics) for each "change" event,
// onState(live) when the connection opens or drops (EventSource
// reconnects by itself).
export function stream(onChange, onState) {
  const url = '/_local/stream' + (tok ? '?token=' + encodeURIComponent(tok) : '');
  const es = new EventSource(url);
  es.addEventListener('hello', () => { onState(true); onChange(null); });
  es.addEventListener('change', e => {
    let topics = null;
    try { topics = JSON.parse(e.data).topics; } catch { /* refresh all */ }
    onChange(topics);
  });
  es.onerror = () => onState(false);
  return es;
}
