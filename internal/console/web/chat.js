// chat.js — the two phones: the chat user's (pick or create a user, group
// or room; send text, LINE emoji, a sticker, a location, an image; follow,
// unfollow, join, leave; tap buttons and quick replies), in the channel the
// channel picker names when linegate local serves several (--channel), and
// the operator's (alert and crash cards with their buttons live).

import {h, replace, shortId, fmtTime, randomId, safeURL} from './dom.js';
import {message, userEvent, quickReply, describeAction} from './line.js';
import {get, post} from './api.js';

export const DEFAULT_USER = 'U0000000000000000000000000000user';

// A few of LINE's own emoji (product 5ac1bfd5040ab15980c9b435), inserted as
// LINE inserts them in a user's text: a "(name)" placeholder.
const EMOJI = [['(love)', '001'], ['(happy)', '002'], ['(wink)', '003'], ['(ok)', '004']];
const LINE_EMOJI_PRODUCT = '5ac1bfd5040ab15980c9b435';

// Transcript keeps one chat's entries (of one channel: '' the default),
// fetched incrementally.
class Transcript {
  constructor(chatId, channel) { this.chatId = chatId; this.channel = channel || ''; this.entries = []; this.last = 0; }
  async refresh() {
    const ch = this.channel ? `&channel=${encodeURIComponent(this.channel)}` : '';
    const more = await get(`/_local/chat?chatId=${encodeURIComponent(this.chatId)}${ch}&after=${this.last}`);
    for (const e of more) if (e.seq > this.last) { this.entries.push(e); this.last = e.seq; }
    if (this.entries.length > 2000) this.entries.splice(0, this.entries.length - 2000);
    return more.length > 0;
  }
}

// sendEvent posts one event from a chat through the local LINE platform, to
// the webhook of channel ('' the default), signed with its secret.
async function sendEvent(chat, me, kind, extra, channel) {
  const c = {userId: me};
  if (chat.startsWith('C')) c.groupId = chat;
  else if (chat.startsWith('R')) c.roomId = chat;
  else c.userId = chat;
  if ((kind === 'join' || kind === 'leave') && chat[0] !== 'U') delete c.userId;
  const body = Object.assign({chat: c, kind}, extra || {});
  if (channel) body.channel = channel;
  return post('/_local/send', body);
}

function meta(e) {
  if (e.kind === 'reply') return `reply (free) · ${fmtTime(e.at)} · request ${e.requestId || ''}`;
  if (e.kind === 'push') return `push · ${fmtTime(e.at)} · X-Line-Retry-Key ${e.retryKey || '(none)'} · request ${e.requestId || ''}`;
  return fmtTime(e.at);
}

// tapHandler turns a tap on a button into what LINE does with it.
// getChannel names the channel the tap is in ('' the default; the
// operator's phone is the default channel's).
function tapHandler(getChat, me, status, displayTexts, refresh, getChannel) {
  return async action => {
    const chat = getChat();
    const ch = getChannel ? getChannel() : '';
    try {
      switch (action && action.type) {
        case 'postback': {
          const r = await sendEvent(chat, me(), 'postback', {data: String(action.data || '')}, ch);
          if (action.displayText || action.text) displayTexts.set(r.webhookEventId, String(action.displayText || action.text));
          break;
        }
        case 'datetimepicker':
          await sendEvent(chat, me(), 'postback', {data: String(action.data || '')}, ch);
          break;
        case 'message':
          await sendEvent(chat, me(), 'text', {text: String(action.text || '')}, ch);
          break;
        case 'camera': case 'cameraRoll':
          await sendEvent(chat, me(), 'image', undefined, ch);
          break;
        case 'location':
          await sendEvent(chat, me(), 'location', {title: 'Shibuya', address: 'Shibuya, Tokyo', latitude: 35.6591, longitude: 139.7037}, ch);
          break;
        case 'uri':
          if (safeURL(action.uri)) window.open(action.uri, '_blank', 'noopener,noreferrer');
          return;
        case 'clipboard':
          await navigator.clipboard?.writeText(String(action.clipboardText || ''));
          status('copied');
          return;
        default:
          status(`${describeAction(action)}: not available in the console`);
          return;
      }
      status('');
      refresh();
    } catch (err) {
      status(err.message, true);
    }
  };
}

// ChatPane is the chat user's phone.
export class ChatPane {
  constructor(root, app) {
    this.app = app;
    this.me = DEFAULT_USER;
    this.chatId = DEFAULT_USER;
    this.transcripts = new Map();
    this.known = new Map([[DEFAULT_USER, 'user']]);
    this.displayTexts = new Map();
    this.channel = '';
    this.act = tapHandler(() => this.chatId, () => this.me, (m, bad) => this.status(m, bad), this.displayTexts, () => this.refresh(), () => this.channel);

    // The channel picker: shown when linegate local serves named channels
    // (--channel); the chat list, the transcript and what is sent are the
    // chosen channel's.
    const channels = (app.pipelineInfo && app.pipelineInfo.channels) || [];
    this.channelSel = h('select', {id: 'chat-channel', 'data-testid': 'chat-channel', 'aria-label': 'channel', hidden: channels.length === 0,
      onchange: () => this.selectChannel(this.channelSel.value)},
      h('option', {value: ''}, 'default channel'), ...channels.map(c => h('option', {value: c}, `channel ${c}`)));

    this.target = h('select', {id: 'chat-target', 'data-testid': 'chat-target', 'aria-label': 'chat', onchange: () => this.select(this.target.value)});
    this.list = h('div', {class: 'messages', role: 'log', 'aria-live': 'polite', 'aria-label': 'conversation'});
    this.quick = h('div', {class: 'quick-area'});
    this.statusEl = h('div', {class: 'phone-status', role: 'status'});
    this.input = h('input', {id: 'chat-input', 'data-testid': 'chat-input', type: 'text', autocomplete: 'off', maxlength: '5000',
      placeholder: 'Message (Enter sends)', 'aria-label': 'message', onkeydown: e => { if (e.key === 'Enter' && !e.isComposing) { e.preventDefault(); this.sendText(); } }});
    this.more = h('div', {class: 'more', hidden: true, role: 'group', 'aria-label': 'more to send'},
      h('button', {type: 'button', onclick: () => this.send('sticker', {packageId: '446', stickerId: '1988'})}, 'Sticker'),
      h('button', {type: 'button', onclick: () => this.send('location', {title: 'LINE Corporation', address: 'Shinjuku, Tokyo', latitude: 35.6870, longitude: 139.7040})}, 'Location'),
      h('button', {type: 'button', onclick: () => this.send('image')}, 'Image'),
      ...EMOJI.map(([t]) => h('button', {type: 'button', class: 'emoji-btn', title: `insert LINE emoji ${t}`, onclick: () => this.insertEmoji(t)}, t)),
      h('span', {class: 'sep'}),
      h('button', {type: 'button', onclick: () => this.send('follow')}, 'Follow'),
      h('button', {type: 'button', onclick: () => this.send('unfollow')}, 'Unfollow'),
      h('button', {type: 'button', onclick: () => this.send('join')}, 'Join'),
      h('button', {type: 'button', onclick: () => this.send('leave')}, 'Leave'));
    const moreBtn = h('button', {type: 'button', class: 'icon-btn', 'aria-label': 'more: sticker, location, image, emoji, follow…', 'aria-expanded': 'false',
      onclick: () => { this.more.hidden = !this.more.hidden; moreBtn.setAttribute('aria-expanded', String(!this.more.hidden)); }}, '+');

    replace(root,
      h('div', {class: 'phone-head'},
        h('label', {for: 'chat-channel', class: 'sr-only'}, 'Channel'), this.channelSel,
        h('label', {for: 'chat-target', class: 'sr-only'}, 'Chat'), this.target,
        h('div', {class: 'new-chat', role: 'group', 'aria-label': 'new chat'},
          h('button', {type: 'button', title: 'a new user (one-to-one chat)', onclick: () => this.create('U')}, '+ User'),
          h('button', {type: 'button', title: 'a new group with you in it', onclick: () => this.create('C')}, '+ Group'),
          h('button', {type: 'button', title: 'a new multi-person chat', onclick: () => this.create('R')}, '+ Room'))),
      this.list, this.quick, this.statusEl, this.more,
      h('div', {class: 'composer'}, moreBtn, this.input, h('button', {type: 'button', class: 'send-btn', onclick: () => this.sendText()}, 'Send')));
    this.renderTargets([]);
  }

  status(msg, bad) {
    this.statusEl.textContent = msg || '';
    this.statusEl.classList.toggle('bad', !!bad);
  }

  insertEmoji(t) {
    const i = this.input.selectionStart ?? this.input.value.length;
    this.input.value = this.input.value.slice(0, i) + t + this.input.value.slice(i);
    this.input.focus();
  }

  // emojis finds the LINE emoji placeholders in text (UTF-16 indexes).
  emojis(text) {
    const out = [];
    for (const [t, id] of EMOJI) {
      let i = text.indexOf(t);
      while (i >= 0) { out.push({index: i, length: t.length, productId: LINE_EMOJI_PRODUCT, emojiId: id}); i = text.indexOf(t, i + t.length); }
    }
    return out.sort((a, b) => a.index - b.index);
  }

  async sendText() {
    const text = this.input.value;
    if (!text.trim()) return;
    this.input.value = '';
    const emojis = this.emojis(text);
    await this.send('text', emojis.length ? {text, emojis} : {text});
  }

  async send(kind, extra) {
    try {
      const r = await sendEvent(this.chatId, this.me, kind, extra, this.channel);
      this.status(r.status === 200 ? '' : `webhook answered ${r.status}`, r.status !== 200);
      this.refresh();
    } catch (err) {
      this.status(err.message, true);
    }
  }

  create(prefix) {
    const id = randomId(prefix);
    this.known.set(id, {U: 'user', C: 'group', R: 'room'}[prefix]);
    if (prefix === 'U') this.me = id;
    this.select(id);
  }

  // selectChannel switches the phone to channel ch ('' the default): the
  // same chat, as a user of that channel's bot.
  selectChannel(ch) {
    this.channel = ch || '';
    this.channelSel.value = this.channel;
    this.select(this.chatId);
  }

  select(id) {
    if (!this.known.has(id)) this.known.set(id, {U: 'user', C: 'group', R: 'room'}[id[0]] || 'user');
    this.chatId = id;
    if (id[0] === 'U') this.me = id;
    this.renderTargets(this.lastChats || []);
    this.list.replaceChildren();
    this.rendered = 0;
    this.refresh();
  }

  renderTargets(chats) {
    this.lastChats = chats;
    for (const c of chats) {
      if ((c.channel || '') !== this.channel) continue;
      if (!this.known.has(c.id) && !this.app.operators.includes(c.id)) this.known.set(c.id, c.type);
    }
    const opts = [...this.known.entries()].map(([id, type]) => h('option', {value: id, selected: id === this.chatId},
      `${type === 'user' ? 'User' : type === 'group' ? 'Group' : 'Room'} ${shortId(id)}`));
    replace(this.target, opts);
    this.target.value = this.chatId;
  }

  async refresh() {
    try {
      this.renderTargets(await get('/_local/chats'));
      const key = `${this.channel}/${this.chatId}`;
      let t = this.transcripts.get(key);
      if (!t) { t = new Transcript(this.chatId, this.channel); this.transcripts.set(key, t); }
      await t.refresh();
      if (key === `${this.channel}/${this.chatId}`) this.render(t); // else the phone moved on meanwhile
    } catch (err) {
      this.status(err.message, true);
    }
  }

  render(t) {
    const stick = this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 40;
    const rows = [];
    let lastBot = null, userAfter = false, loading = null;
    const readUpTo = readMark(t.entries);
    for (const e of t.entries) {
      if (e.from === 'user') {
        rows.push(userRow(e, this.displayTexts.get(e.webhookEventId), e.seq <= readUpTo));
        userAfter = true;
        continue;
      }
      if (e.kind === 'read') continue;
      if (e.kind === 'loading') { loading = e; continue; }
      loading = loading && new Date(e.at) > new Date(loading.at) ? null : loading;
      for (const m of e.messages || []) {
        rows.push(botRow(e, m, {act: this.act}));
        lastBot = m;
        userAfter = false;
      }
    }
    if (loading) {
      const until = new Date(loading.at).getTime() + loading.loadingSeconds * 1000;
      if (Date.now() < until) {
        rows.push(h('div', {class: 'row from-bot', 'data-testid': 'loading', 'aria-label': 'the bot is working'},
          h('div', {class: 'avatar', 'aria-hidden': 'true'}, 'B'), h('div', {class: 'bubble bot-bubble loading-bubble'}, h('span'), h('span'), h('span'))));
        clearTimeout(this.loadingTimer);
        this.loadingTimer = setTimeout(() => this.render(t), until - Date.now() + 50);
      }
    }
    replace(this.list, rows.length ? rows : h('div', {class: 'empty'}, 'Say hello: type below and press Enter. Try "menu", "order", "ask …" (in several quick messages), "slow report" or "probe:fail".'));
    replace(this.quick, !userAfter && lastBot ? quickReply(lastBot, {act: this.act}) : null);
    if (stick || this.rendered !== rows.length) this.list.scrollTop = this.list.scrollHeight;
    this.rendered = rows.length;
  }
}

// readMark is the number of the newest user entry the bot marked read:
// LINE's mark as read covers the chat's messages up to and including the
// message whose token was used (a mark naming no message the transcript
// holds covers what came before the mark).
function readMark(entries) {
  let upTo = 0;
  for (const r of entries) {
    if (r.kind !== 'read') continue;
    let covered = 0;
    for (const e of entries) {
      if (e.from !== 'user' || e.seq > r.seq) continue;
      covered = e.seq;
      if (messageId(e) === r.readMessageId) break;
    }
    upTo = Math.max(upTo, covered);
  }
  return upTo;
}

function messageId(e) {
  try {
    const ev = typeof e.event === 'object' ? e.event : JSON.parse(e.event);
    return ev.message && ev.message.id;
  } catch { return undefined; }
}

function userRow(e, displayText, read) {
  let ev = {};
  try { ev = typeof e.event === 'object' ? e.event : JSON.parse(e.event); } catch { /* shown as unknown */ }
  const r = userEvent(ev, displayText);
  const who = ev.source && ev.source.type !== 'user' && ev.source.userId ? shortId(ev.source.userId) : '';
  if (r.system) return h('div', {class: 'row system', 'data-testid': 'chat-message', 'data-from': 'user', 'data-event-id': e.webhookEventId},
    h('span', {}, who && r.system.startsWith('You ') ? `${who} ${r.system.slice(4)}` : r.system));
  const bare = ev.type === 'message' && ev.message && ev.message.type !== 'text';
  return h('div', {class: 'row from-user', 'data-testid': 'chat-message', 'data-from': 'user', 'data-event-id': e.webhookEventId, 'data-read': read ? 'true' : 'false', title: `${fmtTime(e.at)} · webhookEventId ${e.webhookEventId}`},
    h('div', {class: 'user-line'}, read ? h('span', {class: 'read-mark', 'data-testid': 'read'}, 'Read') : null,
      h('div', {class: 'bubble user-bubble' + (bare ? ' bare' : '')}, who ? h('div', {class: 'sender'}, who) : null, r.bubble)),
    h('div', {class: 'meta'}, fmtTime(e.at) + (r.note ? ' · ' + r.note : '')));
}

function botRow(e, m, ctx) {
  const content = message(m, ctx);
  const wide = m.type === 'flex' || m.type === 'template';
  return h('div', {class: 'row from-bot' + (wide ? ' wide' : ''), 'data-testid': 'chat-message', 'data-from': 'bot', 'data-via': e.kind, title: meta(e)},
    h('div', {class: 'avatar', 'aria-hidden': 'true'}, 'B'),
    h('div', {class: 'bot-col'}, h('div', {class: 'bubble bot-bubble' + (wide ? ' bare' : '') + (m.type === 'sticker' ? ' bare' : '')}, content),
      h('div', {class: 'meta'}, meta(e))));
}

// ---- the operator's phone -------------------------------------------------

// card reads an alert card's state and subject from the notifier's Flex
// layout (header: badge, title) or its text fallback ("[ALARM] name").
function cardInfo(m) {
  if (m.type === 'flex' && m.contents && m.contents.header) {
    const hc = m.contents.header.contents || [];
    const badge = String((hc[0] && hc[0].text) || '');
    return {state: badge.split(/\s/)[0], title: String((hc[1] && hc[1].text) || ''), badge};
  }
  if (m.type === 'text') {
    const mt = /^\[([A-Z_]+)[^\]]*\]\s*([^\n]*)/.exec(m.text || '');
    if (mt) return {state: mt[1], title: mt[2], badge: mt[1]};
  }
  return null;
}

export class PhonePane {
  constructor(root, app) {
    this.app = app;
    this.operator = app.operators[0];
    this.t = new Transcript(this.operator);
    this.displayTexts = new Map();
    this.act = tapHandler(() => this.operator, () => this.operator, (m, bad) => this.status(m, bad), this.displayTexts, () => this.refresh());
    this.list = h('div', {class: 'messages phone-cards', role: 'log', 'aria-live': 'polite', 'aria-label': 'operator notifications'});
    this.statusEl = h('div', {class: 'phone-status', role: 'status'});
    replace(root, h('div', {class: 'phone-head operator-head'}, h('span', {class: 'phone-title'}, 'Operator'), h('span', {class: 'phone-sub', title: this.operator}, shortId(this.operator))),
      this.list, this.statusEl);
  }

  status(msg, bad) {
    this.statusEl.textContent = msg || '';
    this.statusEl.classList.toggle('bad', !!bad);
  }

  async refresh() {
    try {
      await this.t.refresh();
      this.render();
    } catch (err) {
      this.status(err.message, true);
    }
  }

  render() {
    const stick = this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 40;
    // The newest state of each alarm, to mark earlier ALARM cards resolved.
    const cards = [];
    for (const e of this.t.entries) {
      if (e.from === 'user') { cards.push({e, user: true}); continue; }
      for (const m of e.messages || []) cards.push({e, m, info: cardInfo(m)});
    }
    const okAfter = new Map();
    for (let i = cards.length - 1; i >= 0; i--) {
      const c = cards[i];
      if (!c.info) continue;
      if (c.info.state === 'OK') okAfter.set(c.info.title, c.e.at);
      else if (c.info.state === 'ALARM') c.resolvedAt = okAfter.get(c.info.title);
      if (c.info.state === 'ALARM') okAfter.delete(c.info.title);
    }
    const rows = cards.map(c => {
      if (c.user) return userRow(c.e, this.displayTexts.get(c.e.webhookEventId));
      if (!c.info) return botRow(c.e, c.m, {act: this.act});
      const queueOf = this.app.alarmQueues.get(c.info.title);
      const body = message(c.m, {act: this.act});
      for (const b of body.querySelectorAll('button')) {
        if (b.textContent === 'Redrive') {
          b.setAttribute('data-testid', 'redrive-button');
          if (queueOf) b.setAttribute('data-queue', queueOf);
        }
      }
      const resolved = !!c.resolvedAt;
      return h('div', {class: 'operator-card state-' + c.info.state.toLowerCase() + (resolved ? ' resolved' : ''), 'data-testid': 'operator-card',
        'data-state': c.info.state, 'data-alarm': c.info.title, 'data-resolved': resolved ? 'true' : 'false', title: meta(c.e)},
        resolved ? h('div', {class: 'resolved-banner', role: 'note'}, `✓ Resolved: OK at ${fmtTime(c.resolvedAt)}`) : null,
        body, h('div', {class: 'meta'}, meta(c.e)));
    });
    replace(this.list, rows.length ? rows : h('div', {class: 'empty'}, 'Alert and crash cards for the operator land here. Send "probe:fail" or "probe:panic" in the chat.'));
    if (stick || this.rendered !== rows.length) this.list.scrollTop = this.list.scrollHeight;
    this.rendered = rows.length;
  }
}
