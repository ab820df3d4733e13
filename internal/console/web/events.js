// events.js — one row per webhook event (type, chat, outcome, receives,
// latency); opening one shows its timeline and its X-Ray traces as a
// waterfall: the webhook's trace and each receive's worker trace, with the
// links between them.

import {h, replace, shortId, fmtTime, fmtMs} from './dom.js';
import {get, post} from './api.js';

export class EventsPane {
  constructor(root, app) {
    this.app = app;
    this.open = null;
    this.rows = h('tbody');
    this.detail = h('div', {class: 'event-detail', 'aria-live': 'polite'});
    replace(root,
      h('section', {class: 'card', 'aria-labelledby': 'events-h'}, h('h2', {id: 'events-h'}, 'Webhook events ', h('span', {class: 'muted small'}, 'newest first · Enter opens')),
        h('div', {class: 'table-scroll'}, h('table', {class: 'grid events'},
          h('thead', {}, h('tr', {}, ['Received', 'Type', 'Chat', 'Outcome', 'Receives', 'Latency'].map(t => h('th', {scope: 'col'}, t)))),
          this.rows))),
      this.detail);
  }

  renderRows(rows) {
    replace(this.rows, rows.length ? rows.map(r => {
      const tr = h('tr', {'data-testid': 'event-row', 'data-event-id': r.webhookEventId, 'data-outcome': r.outcome, tabindex: '0', role: 'button',
        'aria-label': `${r.type} event ${r.webhookEventId}, ${r.outcome}`, class: r.webhookEventId === this.open ? 'selected' : '',
        onclick: () => this.show(r.webhookEventId), onkeydown: e => { if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); this.show(r.webhookEventId); } }},
      h('td', {}, fmtTime(r.receivedAt)), h('td', {}, r.type), h('td', {title: r.chat || ''}, (r.sourceType || '') + ' ' + shortId(r.chat)),
      h('td', {}, h('span', {class: 'pill ' + r.outcome}, r.outcome)), h('td', {class: 'num'}, String(r.receiveCount)), h('td', {class: 'num'}, fmtMs(r.latencyMs)));
      return tr;
    }) : h('tr', {}, h('td', {colspan: '6', class: 'empty'}, 'No webhook event yet: send a message in the chat.')));
  }

  async show(id) {
    this.open = id;
    for (const tr of this.rows.querySelectorAll('tr')) tr.classList.toggle('selected', tr.dataset.eventId === id);
    await this.refreshDetail();
  }

  async refreshDetail() {
    if (!this.open) return;
    let d;
    try {
      d = await get('/_local/activity/' + encodeURIComponent(this.open));
    } catch (err) {
      replace(this.detail, h('div', {class: 'card bad'}, err.message));
      return;
    }
    const r = d.row;
    const replay = h('button', {type: 'button', 'data-testid': 'replay-button', title: 'through the bus\'s rules again, as an archive replay sends it',
      onclick: async () => {
        try {
          const res = await post('/_local/replay', {webhookEventId: r.webhookEventId});
          note.textContent = `replayed to ${res.targets.join(', ')}: idempotency decides (a handled event is a duplicate)`;
        } catch (err) { note.textContent = err.message; }
        this.app.refresh(['events', 'queues']);
      }}, 'Replay');
    const note = h('span', {class: 'muted small', role: 'status'});
    replace(this.detail, h('section', {class: 'card', 'aria-labelledby': 'detail-h'},
      h('div', {class: 'detail-head'},
        h('h2', {id: 'detail-h'}, `${r.type} `, h('code', {}, r.webhookEventId)),
        h('span', {class: 'pill ' + r.outcome}, r.outcome),
        replay,
        h('button', {type: 'button', onclick: () => this.app.showLogs(r.webhookEventId)}, 'Logs of this event'),
        h('button', {type: 'button', 'aria-label': 'close', onclick: () => { this.open = null; this.detail.replaceChildren(); }}, '×')),
      note,
      h('dl', {class: 'facts'},
        fact('chat', `${r.sourceType || ''} ${r.chat || '—'}`), fact('deliveries', r.deliveries), fact('receives', r.receiveCount),
        fact('duplicates', r.duplicates), fact('latency', fmtMs(r.latencyMs)), r.deadLetterQueue ? fact('in DLQ', r.deadLetterQueue) : null,
        r.error ? fact('error', r.error) : null),
      h('h3', {}, 'Timeline'),
      h('ol', {class: 'timeline', 'data-testid': 'timeline'}, d.steps.map(s => h('li', {class: `step stage-${s.stage} ${s.status}`, 'data-stage': s.stage},
        h('time', {datetime: s.at}, fmtTime(s.at)),
        h('span', {class: 'step-title'}, s.title), s.durationMs ? h('span', {class: 'muted small'}, ` ${fmtMs(s.durationMs)}`) : null,
        s.detail ? h('div', {class: 'muted small'}, s.detail) : null))),
      h('h3', {}, 'X-Ray traces'),
      waterfall(d.traces, r.webhookEventId, r.traceId)));
  }
}

function fact(k, v) {
  return [h('dt', {}, k), h('dd', {}, String(v ?? '—'))];
}

// waterfall draws each trace's segments as bars on one time axis: the
// webhook's trace first, then each worker trace; a worker trace's record
// subsegment names the webhook trace it is linked from.
export function waterfall(traces, eventId, webhookTrace) {
  const all = traces.flatMap(t => t.segments);
  if (!all.length) return h('div', {class: 'muted', 'data-testid': 'trace-waterfall'}, 'No segments yet (they arrive over UDP just after each invocation).');
  const t0 = Math.min(...all.map(s => s.start));
  const t1 = Math.max(...all.map(s => s.end || s.start));
  const span = Math.max(t1 - t0, 0.001);
  const ordered = [...traces].sort((a, b) => (a.traceId === webhookTrace ? -1 : b.traceId === webhookTrace ? 1 : minStart(a) - minStart(b)));
  const axis = h('div', {class: 'wf-axis', 'aria-hidden': 'true'}, [0, 0.25, 0.5, 0.75, 1].map(f =>
    h('span', {style: {left: `${f * 100}%`}}, fmtMs(f * span * 1000))));
  return h('div', {class: 'waterfall', 'data-testid': 'trace-waterfall', role: 'table', 'aria-label': 'X-Ray waterfall'},
    axis,
    ordered.map(t => {
      const depth = depths(t.segments);
      const kind = t.traceId === webhookTrace ? 'webhook' : 'worker';
      const links = (t.links || []).filter(l => l.traceId);
      return h('div', {class: 'wf-trace', 'data-trace-id': t.traceId, id: 'trace-' + t.traceId, role: 'rowgroup'},
        h('div', {class: 'wf-head', role: 'row'}, h('span', {class: 'wf-kind ' + kind}, kind), ' trace ', h('code', {}, t.traceId),
          links.map(l => h('span', {class: 'wf-link', 'data-testid': 'trace-link', 'data-linked-trace': l.traceId},
            ' ← linked from ', h('a', {href: '#trace-' + l.traceId}, l.traceId === webhookTrace ? 'the webhook trace' : l.traceId),
            l.parentId ? h('span', {class: 'muted small'}, ` (segment ${l.parentId})`) : null))),
        [...t.segments].sort((a, b) => a.start - b.start).map(s => {
          const left = ((s.start - t0) / span) * 100;
          const width = Math.max((((s.end || t1) - s.start) / span) * 100, 0.4);
          const mine = s.name === 'record' && s.annotations && s.annotations.webhookEventId === eventId;
          const cls = ['wf-row', s.namespace || s.type, s.fault || s.error || s.httpStatus >= 400 ? 'error' : '', s.inProgress ? 'pending' : '', mine ? 'mine' : ''].join(' ');
          const label = s.method ? `${s.method} ${s.path}` : (s.operation ? `${s.name} ${s.operation}` : s.name);
          return h('div', {class: cls, role: 'row', 'data-segment': s.id, title: `${s.method ? s.name + ' ' : ''}${label} · ${fmtMs(((s.end || s.start) - s.start) * 1000)}${s.httpStatus ? ' · ' + s.httpStatus : ''}${(s.exceptions || []).length ? ' · ' + s.exceptions[0] : ''}`},
            h('div', {class: 'wf-name', role: 'cell', style: {'padding-left': `${(depth.get(s.id) || 0) * 12 + 4}px`}}, label, s.httpStatus ? h('span', {class: 'muted small'}, ` ${s.httpStatus}`) : null),
            h('div', {class: 'wf-lane', role: 'cell'}, h('div', {class: 'wf-bar', style: {left: `${left}%`, width: `${width}%`}}),
              h('span', {class: 'wf-ms', style: {left: `${Math.min(left + width, 92)}%`}}, fmtMs(((s.end || s.start) - s.start) * 1000))));
        }));
    }));
}

function minStart(t) { return Math.min(...t.segments.map(s => s.start)); }

function depths(segs) {
  const byId = new Map(segs.map(s => [s.id, s]));
  const d = new Map();
  const depth = s => {
    if (d.has(s.id)) return d.get(s.id);
    d.set(s.id, 0);
    const p = byId.get(s.parentId);
    const v = p ? depth(p) + 1 : 0;
    d.set(s.id, v);
    return v;
  };
  segs.forEach(depth);
  return d;
}
