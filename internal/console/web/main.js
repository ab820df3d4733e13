// main.js — wires the panes to linegate local: fetches what each pane
// shows, and refreshes exactly the panes whose topics the server-sent
// event stream says changed. No page reloads.

import {h, replace, shortId} from './dom.js';
import {get, stream} from './api.js';
import {ChatPane, PhonePane} from './chat.js';
import {PipelinePane} from './pipeline.js';
import {EventsPane} from './events.js';
import {LogsPane} from './logs.js';

const $ = id => document.getElementById(id);

class App {
  constructor(p) {
    this.pipelineInfo = p;
    this.operators = p.operators.length ? p.operators : ['U0000000000000000000000000000cafe'];
    this.alarmQueues = new Map(p.alarms.filter(a => a.queue).map(a => [a.name, a.queue]));
    this.chat = new ChatPane($('chat'), this);
    this.phone = new PhonePane($('phone'), this);
    this.pipeline = new PipelinePane($('tab-pipeline'), this);
    this.events = new EventsPane($('tab-events'), this);
    this.logs = new LogsPane($('tab-logs'));
    this.pipeline.renderTopology(p);
    this.busy = new Map();
    replace($('about'), `${p.bot.displayName} · ${p.realLine ? 'real LINE API' : 'local LINE API'} · time scale ${p.timeScale}`);
    this.tabs();
  }

  // refresh fetches the panes of topics (all when null), one fetch per
  // topic in flight; a change during a fetch fetches again after it.
  refresh(topics) {
    const all = ['chat', 'events', 'queues', 'alarms', 'logs', 'traces'];
    for (const t of topics || all) this.run(t);
  }

  run(topic) {
    const jobs = {
      chat: () => Promise.all([this.chat.refresh(), this.phone.refresh()]),
      events: async () => { this.events.renderRows(await get('/_local/activity?limit=200')); await this.events.refreshDetail(); },
      traces: () => this.events.refreshDetail(),
      queues: async () => this.pipeline.renderQueues(await get('/_local/queues'), this.pipelineInfo),
      alarms: async () => {
        const [as, es] = await Promise.all([get('/_local/alarms'), get('/_local/email')]);
        this.pipeline.renderAlarms(as, this.pipelineInfo);
        this.pipeline.renderEmail(es);
      },
      logs: () => (this.activeTab === 'logs' ? this.logs.refresh() : Promise.resolve()),
      pipeline: async () => this.pipeline.renderQueues(await get('/_local/queues'), this.pipelineInfo),
    };
    const job = jobs[topic];
    if (!job) return;
    const state = this.busy.get(topic);
    if (state) { state.again = true; return; }
    const s = {again: false};
    this.busy.set(topic, s);
    job().catch(err => console.warn(topic, err)).finally(() => {
      this.busy.delete(topic);
      if (s.again) this.run(topic);
    });
  }

  showLogs(id) {
    this.select('logs');
    this.logs.setFilter(id);
  }

  tabs() {
    const tabs = [...document.querySelectorAll('[role=tab]')];
    for (const t of tabs) {
      t.addEventListener('click', () => this.select(t.dataset.tab));
      t.addEventListener('keydown', e => {
        const i = tabs.indexOf(t);
        const next = e.key === 'ArrowRight' ? tabs[(i + 1) % tabs.length] : e.key === 'ArrowLeft' ? tabs[(i + tabs.length - 1) % tabs.length] : null;
        if (next) { e.preventDefault(); this.select(next.dataset.tab); next.focus(); }
      });
    }
    this.select(location.hash.replace('#', '') || 'pipeline');
  }

  select(name) {
    if (!['pipeline', 'events', 'logs'].includes(name)) name = 'pipeline';
    this.activeTab = name;
    for (const t of document.querySelectorAll('[role=tab]')) {
      const on = t.dataset.tab === name;
      t.setAttribute('aria-selected', String(on));
      t.tabIndex = on ? 0 : -1;
      $('tab-' + t.dataset.tab).hidden = !on;
    }
    if (name === 'logs') this.logs.refresh().catch(() => {});
    history.replaceState(null, '', '#' + name);
  }
}

async function main() {
  let p;
  try {
    p = await get('/_local/pipeline');
  } catch (err) {
    replace($('live'), h('span', {class: 'bad'}, err.status === 401 ? 'this console needs the token: open it as /?token=TOKEN' : err.message));
    return;
  }
  const app = new App(p);
  window.linegateConsole = app; // for a developer's console
  stream(topics => app.refresh(topics), live => {
    $('live').className = live ? 'live on' : 'live off';
    $('live').textContent = live ? 'live' : 'reconnecting…';
  });
  document.title = `linegate local · ${shortId(p.operators[0])}`;
}

main();
