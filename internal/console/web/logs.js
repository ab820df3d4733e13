// logs.js — the functions' JSON logs (never a secret, token or message
// text), filterable by webhookEventId.

import {h, replace, fmtTime} from './dom.js';
import {get} from './api.js';

export class LogsPane {
  constructor(root) {
    this.filter = h('input', {id: 'log-filter', type: 'search', placeholder: 'webhookEventId', autocomplete: 'off', spellcheck: 'false', 'data-testid': 'log-filter',
      oninput: () => { clearTimeout(this.t); this.t = setTimeout(() => this.refresh(), 200); }});
    this.body = h('tbody');
    this.count = h('span', {class: 'muted small', role: 'status'});
    replace(root, h('section', {class: 'card', 'aria-labelledby': 'logs-h'},
      h('div', {class: 'detail-head'}, h('h2', {id: 'logs-h'}, 'Logs'), h('label', {for: 'log-filter'}, 'Filter by webhookEventId '), this.filter,
        h('button', {type: 'button', onclick: () => { this.filter.value = ''; this.refresh(); }}, 'Clear'), this.count),
      h('div', {class: 'table-scroll tall'}, h('table', {class: 'grid logs'},
        h('thead', {}, h('tr', {}, ['Time', 'Level', 'Function', 'Message', 'webhookEventId', 'More'].map(t => h('th', {scope: 'col'}, t)))), this.body))));
  }

  setFilter(id) { this.filter.value = id; this.refresh(); }

  async refresh() {
    const id = this.filter.value.trim();
    const lines = await get('/_local/logs?limit=300' + (id ? '&webhookEventId=' + encodeURIComponent(id) : ''));
    this.count.textContent = `${lines.length} line(s)`;
    replace(this.body, [...lines].reverse().map(l => {
      const rest = Object.assign({}, l);
      for (const k of ['time', 'timestamp', 'level', 'msg', 'message', 'function', 'webhookEventId']) delete rest[k];
      return h('tr', {class: 'lvl-' + String(l.level || '').toLowerCase()},
        h('td', {}, fmtTime(l.timestamp || l.time)), h('td', {}, String(l.level || '')), h('td', {}, String(l.function || '')),
        h('td', {}, String(l.message || l.msg || '')),
        h('td', {}, l.webhookEventId ? h('button', {type: 'button', class: 'linkish', title: 'only this event', onclick: () => this.setFilter(l.webhookEventId)}, String(l.webhookEventId)) : ''),
        h('td', {}, h('code', {class: 'small'}, JSON.stringify(rest))));
    }));
  }
}
