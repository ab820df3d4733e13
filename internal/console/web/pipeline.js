// pipeline.js — the template's topology as it runs: the webhook, the bus
// and its rules, every queue and DLQ with visible / in-flight / oldest age,
// every alarm with its state and history; and the actions that make each
// failure path of the README happen: redrive a DLQ, LINE faults, a crash.

import {h, replace, fmtAge, fmtTime} from './dom.js';
import {get, post} from './api.js';

export class PipelinePane {
  constructor(root, app) {
    this.app = app;
    this.flow = h('div', {class: 'flow', 'aria-label': 'the flow of an event'});
    this.queues = h('tbody');
    this.alarms = h('ul', {class: 'alarms', 'aria-label': 'alarms'});
    this.emails = h('ul', {class: 'emails', 'aria-label': 'email deliveries'});
    this.rules = h('div', {class: 'rules'});
    this.result = h('div', {class: 'action-result', role: 'status', 'aria-live': 'polite'});
    const fault = (f, label, title) => h('button', {type: 'button', title, 'data-fault': f, onclick: () => this.act(() => post('/_local/line/faults', {fault: f, times: 3}), `LINE fault ${label}`)}, label);
    replace(root,
      h('section', {class: 'card', 'aria-labelledby': 'flow-h'}, h('h2', {id: 'flow-h'}, 'Flow'), this.flow, this.rules),
      h('section', {class: 'card', 'aria-labelledby': 'alarms-h'}, h('h2', {id: 'alarms-h'}, 'Alarms'), this.alarms),
      h('section', {class: 'card', 'aria-labelledby': 'email-h'}, h('h2', {id: 'email-h'}, 'Email (AlertEmail)'), this.emails),
      h('section', {class: 'card', 'aria-labelledby': 'queues-h'}, h('h2', {id: 'queues-h'}, 'Queues'),
        h('table', {class: 'grid queues'},
          h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Queue'), h('th', {scope: 'col', class: 'num'}, 'Visible'), h('th', {scope: 'col', class: 'num'}, 'In flight'),
            h('th', {scope: 'col', class: 'num'}, 'Oldest'), h('th', {scope: 'col'}, ''))),
          this.queues)),
      h('section', {class: 'card', 'aria-labelledby': 'actions-h'}, h('h2', {id: 'actions-h'}, 'Make it fail'),
        h('div', {class: 'actions', role: 'group', 'aria-label': 'inject faults'},
          h('span', {class: 'label'}, 'Next 3 LINE replies and pushes:'),
          fault('429', '429', 'rate limited: the worker backs off and retries'),
          fault('500', '500', 'a LINE server error: retried with backoff'),
          fault('slow', 'slow (3 s)', 'LINE answers after 3 s'),
          fault('expired-reply-token', 'expired reply token', 'replies refused with "Invalid reply token": the bot pushes with the retry key instead')),
        h('div', {class: 'actions'},
          h('button', {type: 'button', class: 'danger', 'data-testid': 'crash-button', onclick: () => this.act(() => post('/_local/workers/crash', {}), 'worker crash')}, 'Crash the worker'),
          h('span', {class: 'hint'}, 'In-flight batches are abandoned; their messages come back after the visibility timeout. Nothing is lost.')),
        this.result));
  }

  async act(fn, what) {
    this.result.textContent = `${what}…`;
    try {
      const r = await fn();
      this.result.textContent = `${what}: ${r.result || 'done'}`;
      this.result.classList.remove('bad');
    } catch (err) {
      this.result.textContent = `${what}: ${err.message}`;
      this.result.classList.add('bad');
    }
    this.app.refresh(['queues', 'events', 'alarms']);
  }

  renderTopology(p) {
    const byId = new Map(p.queues.map(q => [q.logicalId, q]));
    const name = id => (byId.get(id) || {name: id}).name;
    const fn = p.functions;
    const webhook = fn.find(f => f.trigger === 'api');
    const stage = (title, sub, cls) => h('div', {class: 'stage ' + (cls || '')}, h('div', {class: 'stage-title'}, title), sub ? h('div', {class: 'stage-sub'}, sub) : null);
    const arrow = () => h('div', {class: 'arrow', 'aria-hidden': 'true'}, '→');
    const workers = fn.filter(f => f.role === 'worker');
    const notifier = fn.find(f => f.role === 'notifier');
    replace(this.flow,
      stage('LINE', 'signed webhook', 'ext'), arrow(),
      stage(webhook ? webhook.name : 'webhook', 'verify · split · hand off · 200', 'fn'), arrow(),
      h('div', {class: 'fork'},
        stage(`bus ${p.bus}`, `${p.rules.length} rule(s), archived`, 'bus'),
        stage(webhook && webhook.sends && webhook.sends.length ? webhook.sends.map(name).join(', ') : 'chat queue', 'FIFO, one group per chat', 'q')),
      arrow(),
      h('div', {class: 'fork'}, workers.map(w => stage(w.name, (w.reads || []).map(name).join(', '), 'fn'))), arrow(),
      stage('LINE API', p.realLine ? 'api.line.me' : 'local Messaging API', 'ext'),
      notifier ? h('div', {class: 'flow-ops'}, 'alarms → SNS → ', stage(notifier.name, (notifier.reads || []).map(name).join(', ') + ' → operator cards', 'fn')) : null);
    replace(this.rules, h('details', {}, h('summary', {}, `Rules of the bus (${p.rules.length})`), h('table', {class: 'grid rules-table'},
      h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'Rule'), h('th', {scope: 'col'}, 'Pattern'), h('th', {scope: 'col'}, 'Targets'))),
      h('tbody', {}, p.rules.map(r => h('tr', {},
        h('td', {}, r.name), h('td', {}, h('code', {class: 'pattern'}, JSON.stringify(r.pattern))),
        h('td', {}, r.targets.map(t => h('div', {}, name(t.queue), t.messageGroupId ? ` (group "${t.messageGroupId}")` : '', t.dlq ? h('span', {class: 'muted'}, ` · DLQ ${name(t.dlq)}`) : null)))))))));
  }

  renderQueues(qs, p) {
    const info = new Map(((p && p.queues) || []).map(q => [q.logicalId, q]));
    replace(this.queues, qs.map(q => {
      const i = info.get(q.logicalId) || {};
      const dead = q.deadLetter;
      return h('tr', {'data-testid': 'queue-row', 'data-queue': q.logicalId, 'data-visible': String(q.visible), class: dead && q.visible > 0 ? 'dlq-full' : ''},
        h('th', {scope: 'row'}, h('div', {class: 'qname'}, q.name, dead ? h('span', {class: 'badge dlq'}, 'DLQ') : null, i.fifo ? h('span', {class: 'badge'}, 'FIFO') : null),
          h('div', {class: 'muted small qsub'}, q.logicalId + (i.dlq ? ` → ${info.get(i.dlq)?.logicalId || i.dlq} after ${i.maxReceiveCount} receives` : '') + (i.source ? ` ← dead letters of ${info.get(i.source)?.logicalId || i.source}` : ''))),
        h('td', {class: 'num'}, h('span', {class: 'count' + (q.visible > 0 ? ' nonzero' : '')}, String(q.visible))),
        h('td', {class: 'num'}, String(q.inFlight)),
        h('td', {class: 'num'}, fmtAge(q.oldestAgeSeconds)),
        h('td', {}, dead ? h('button', {type: 'button', 'data-testid': 'redrive-button', 'data-queue': q.logicalId, disabled: q.visible === 0 && q.inFlight === 0,
          title: i.source ? `move the messages back to ${info.get(i.source)?.name}` : 'put the events back on the bus',
          onclick: () => this.act(() => post('/_local/redrive', {queue: q.logicalId}), `redrive ${q.name}`)}, 'Redrive') : null));
    }));
  }

  // renderEmail lists what the template's email subscriptions would have
  // sent (the escalation topic's, unfiltered: the alert path's own alarms).
  renderEmail(es) {
    if (!es.length) {
      replace(this.emails, h('li', {class: 'muted small'}, 'No email. Start with ALERT_EMAIL=you@example.com (AlertEmail, strongly advised in a deployment): the alert path\'s own alarms reach it when LINE cannot.'));
      return;
    }
    replace(this.emails, [...es].reverse().map(e => h('li', {class: 'email', 'data-testid': 'email', 'data-alarm': e.alarm || '', 'data-state': e.state || ''},
      h('details', {},
        h('summary', {}, h('time', {datetime: e.at}, fmtTime(e.at)), ' ', h('span', {class: 'muted small'}, `to ${e.to} · ${e.topic}`), ' ',
          e.state ? h('span', {class: 'pill ' + e.state.toLowerCase()}, e.state) : null, ' ', e.alarm || e.subject || '(no subject)'),
        h('pre', {class: 'email-body small'}, e.message)))));
  }

  renderAlarms(as, p) {
    const meta = new Map(((p && p.alarms) || []).map(a => [a.name, a]));
    const order = {ALARM: 0, INSUFFICIENT_DATA: 1, OK: 2};
    const sorted = [...as].sort((a, b) => (order[a.state] - order[b.state]) || a.name.localeCompare(b.name));
    replace(this.alarms, sorted.map(a => h('li', {class: 'alarm state-' + a.state.toLowerCase(), 'data-testid': 'alarm', 'data-alarm': a.name, 'data-state': a.state},
      h('details', {},
        h('summary', {}, h('span', {class: 'pill ' + a.state.toLowerCase()}, a.state), ' ', h('span', {class: 'alarm-name'}, a.name),
          a.silenced ? h('span', {class: 'badge'}, 'silenced') : null, h('span', {class: 'muted small'}, ` since ${fmtTime(a.since)}`)),
        h('div', {class: 'alarm-detail'},
          h('div', {class: 'muted small'}, (meta.get(a.name) || {}).metric || ''),
          h('div', {class: 'small'}, a.reason),
          a.history && a.history.length ? h('ol', {class: 'history', 'aria-label': 'history'}, [...a.history].reverse().map(t =>
            h('li', {}, h('time', {datetime: t.at}, fmtTime(t.at)), ` ${t.from} → ${t.to}`))) : h('div', {class: 'muted small'}, 'no state change yet'))))));
  }
}
