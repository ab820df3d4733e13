// line.js — LINE messages rendered the way the LINE app shows them: text
// (with LINE emoji), stickers, images, video, audio, locations, imagemaps,
// template messages (buttons, confirm, carousel, image carousel) and Flex
// bubbles and carousels. Nothing is fetched: the console works offline, so
// images, stickers and emoji are drawn as labelled placeholders. Every
// string from a message lands as text (dom.js), and every style value is
// checked before it is applied.

import {h} from './dom.js';

// ---- checked style values -------------------------------------------------

const COLOR = /^#[0-9a-fA-F]{6}([0-9a-fA-F]{2})?$/;
const LENGTH = /^-?\d+(\.\d+)?(px|%)$/;

function color(v) { return typeof v === 'string' && COLOR.test(v) ? v : undefined; }
function length(v) { return typeof v === 'string' && LENGTH.test(v) ? v : undefined; }

// LINE's keyword sizes, in px, for spacing/margin/padding.
const SPACE = {none: '0px', xs: '2px', sm: '4px', md: '8px', lg: '12px', xl: '16px', xxl: '20px'};
function space(v) { return SPACE[v] || length(v); }

// Text sizes (LINE's Flex keywords).
const TEXT = {xxs: '11px', xs: '13px', sm: '14px', md: '16px', lg: '19px', xl: '22px', xxl: '29px', '3xl': '35px', '4xl': '48px', '5xl': '74px'};
const ICON = {xxs: '11px', xs: '13px', sm: '14px', md: '16px', lg: '19px', xl: '22px', xxl: '29px', '3xl': '35px', '4xl': '48px', '5xl': '74px'};
const IMAGE = {xxs: '40px', xs: '60px', sm: '80px', md: '100px', lg: '120px', xl: '140px', xxl: '160px', '3xl': '180px', '4xl': '200px', '5xl': '220px', full: '100%'};
const RADIUS = {none: '0px', xs: '2px', sm: '4px', md: '8px', lg: '12px', xl: '16px', xxl: '20px'};
const BORDER = {none: '0px', light: '0.5px', normal: '1px', medium: '2px', 'semi-bold': '3px', bold: '4px'};
const JUSTIFY = {'flex-start': 'flex-start', 'flex-end': 'flex-end', center: 'center', 'space-between': 'space-between', 'space-around': 'space-around', 'space-evenly': 'space-evenly'};
const ALIGN = {start: 'left', end: 'right', center: 'center'};
const GRAVITY = {top: 'flex-start', bottom: 'flex-end', center: 'center'};

// ---- actions ---------------------------------------------------------------

// actionLabel is what an action shows; ctx.act(action) performs a tap.
function actionButton(action, ctx, attrs, ...children) {
  const a = action || {};
  const tappable = ['postback', 'message', 'uri', 'datetimepicker', 'camera', 'cameraRoll', 'location', 'clipboard', 'richmenuswitch'].includes(a.type);
  const title = describeAction(a);
  return h('button', Object.assign({type: 'button', title, 'data-action': a.type || 'none', disabled: !tappable || ctx.readOnly,
    onclick: e => { e.stopPropagation(); ctx.act(a); }}, attrs), ...children);
}

export function describeAction(a) {
  switch (a && a.type) {
    case 'postback': return `postback: ${a.data}` + (a.displayText ? ` (shows "${a.displayText}")` : '');
    case 'message': return `sends the message "${a.text}"`;
    case 'uri': return `opens ${a.uri}`;
    case 'datetimepicker': return `date/time picker → postback ${a.data}`;
    case 'clipboard': return `copies "${a.clipboardText}"`;
    case 'camera': return 'opens the camera (sends an image here)';
    case 'cameraRoll': return 'opens the camera roll (sends an image here)';
    case 'location': return 'sends a location';
    default: return a && a.type ? a.type : 'no action';
  }
}

// ---- text with LINE emoji ----------------------------------------------------

// emojiText renders text whose LINE emoji are given by emojis: placeholders
// at index (UTF-16, as JavaScript counts) of length (a user's "(love)") or,
// in a bot's message, a "$" at index.
function emojiText(text, emojis, cls) {
  const el = h('span', {class: cls});
  if (!Array.isArray(emojis) || emojis.length === 0) {
    el.append(text);
    return el;
  }
  const sorted = emojis.filter(e => Number.isInteger(e.index)).sort((a, b) => a.index - b.index);
  let at = 0;
  for (const e of sorted) {
    const len = Number.isInteger(e.length) && e.length > 0 ? e.length : 1;
    if (e.index < at || e.index + len > text.length) continue;
    el.append(text.slice(at, e.index));
    const shown = text.slice(e.index, e.index + len);
    el.append(h('span', {class: 'line-emoji', role: 'img', 'aria-label': `LINE emoji ${e.productId}/${e.emojiId}`,
      title: `LINE emoji ${e.productId} ${e.emojiId}`}, shown === '$' ? '☺' : shown));
    at = e.index + len;
  }
  el.append(text.slice(at));
  return el;
}

// textV2 substitutes {key}s: mentions and emoji.
function textV2(m) {
  const el = h('span', {class: 'msg-text'});
  const subs = m.substitution || {};
  const parts = String(m.text || '').split(/(\{[A-Za-z0-9_]{1,20}\})/);
  for (const p of parts) {
    const k = p.startsWith('{') && p.endsWith('}') ? p.slice(1, -1) : null;
    const s = k && subs[k];
    if (!s) { el.append(p); continue; }
    if (s.type === 'emoji') el.append(h('span', {class: 'line-emoji', role: 'img', 'aria-label': 'LINE emoji'}, '☺'));
    else if (s.type === 'mention') el.append(h('span', {class: 'mention'}, '@' + (s.mentionee && s.mentionee.userId ? s.mentionee.userId.slice(-4) : 'All')));
    else el.append(p);
  }
  return el;
}

// ---- placeholders ------------------------------------------------------------

function hostOf(u) {
  try { return new URL(u).host; } catch { return ''; }
}

function placeholder(kind, detail, ratio, extra) {
  const [w, hgt] = typeof ratio === 'string' && /^\d+(\.\d+)?:\d+(\.\d+)?$/.test(ratio) ? ratio.split(':').map(Number) : [1, 1];
  return h('div', Object.assign({class: `placeholder placeholder-${kind}`, role: 'img', 'aria-label': `${kind} ${detail || ''}`.trim(),
    style: {'aspect-ratio': `${w} / ${hgt}`}}, extra || {}),
    h('span', {class: 'placeholder-kind'}, kind), detail ? h('span', {class: 'placeholder-detail'}, detail) : null);
}

// ---- Flex --------------------------------------------------------------------

// flex renders a Flex container (bubble or carousel).
export function flex(contents, ctx) {
  if (!contents || typeof contents !== 'object') return h('div', {class: 'msg-invalid'}, '(empty Flex message)');
  if (contents.type === 'carousel') {
    return h('div', {class: 'flex-carousel', role: 'group', 'aria-label': 'carousel'},
      (contents.contents || []).map(b => bubble(b, ctx)));
  }
  return bubble(contents, ctx);
}

function bubble(b, ctx) {
  const size = ['nano', 'micro', 'deca', 'hecto', 'kilo', 'mega', 'giga'].includes(b.size) ? b.size : 'mega';
  const styles = b.styles || {};
  const el = h('div', {class: `flex-bubble size-${size}`, 'data-testid': 'flex-bubble', dir: b.direction === 'rtl' ? 'rtl' : 'ltr'});
  for (const part of ['header', 'hero', 'body', 'footer']) {
    const c = b[part];
    if (!c) continue;
    const st = styles[part] || {};
    const section = h('div', {class: `flex-section flex-${part}`, style: {'background-color': color(st.backgroundColor)}});
    if (st.separator) section.style.borderTop = `1px solid ${color(st.separatorColor) || '#e5e5e5'}`;
    section.append(component(c, ctx, 'vertical', part));
    el.append(section);
  }
  if (b.action) {
    el.classList.add('tappable');
    el.addEventListener('click', () => ctx.act(b.action));
  }
  return el;
}

// component renders one Flex component inside a box of parentLayout.
function component(c, ctx, parentLayout, part) {
  if (!c || typeof c !== 'object') return null;
  let el;
  switch (c.type) {
    case 'box': el = box(c, ctx, part); break;
    case 'text': el = textComponent(c, ctx); break;
    case 'span': el = h('span', spanStyle(c), String(c.text || '')); return el;
    case 'button': el = buttonComponent(c, ctx); break;
    case 'image': el = imageComponent(c, part); break;
    case 'video': el = placeholder('video', hostOf(c.url), c.aspectRatio || '16:9'); break;
    case 'icon': el = h('span', {class: 'flex-icon', role: 'img', 'aria-label': 'icon', style: {width: ICON[c.size] || length(c.size) || '16px', height: ICON[c.size] || length(c.size) || '16px'}}); break;
    case 'separator': el = h('div', {class: 'flex-separator', role: 'separator', style: {'border-color': color(c.color)}}); break;
    case 'filler': el = h('div', {class: 'flex-filler'}); break;
    case 'spacer': el = h('div', {class: 'flex-spacer', style: {'flex-basis': space(c.size) || SPACE.md}}); break;
    default: return h('div', {class: 'msg-invalid'}, `(unknown Flex component ${String(c.type)})`);
  }
  // flex: in a horizontal box a component grows by its flex (default 1),
  // in a vertical one by its flex (default 0).
  const horizontal = parentLayout === 'horizontal' || parentLayout === 'baseline';
  const def = horizontal && c.type !== 'separator' && c.type !== 'spacer' && c.type !== 'icon' && !(c.type === 'box' && c.width) ? 1 : 0;
  const grow = Number.isInteger(c.flex) && c.flex >= 0 ? c.flex : def;
  if (c.type !== 'filler' && c.type !== 'spacer') {
    el.style.flex = grow > 0 ? `${grow} 1 0px` : '0 0 auto';
    if (horizontal && grow > 0) el.style.minWidth = '0px';
  }
  if (c.margin) el.style.setProperty(horizontal ? 'margin-inline-start' : 'margin-top', space(c.margin) || '0px');
  if (c.position === 'absolute') {
    el.style.position = 'absolute';
    for (const side of ['Top', 'Bottom', 'Start', 'End']) {
      const v = space(c['offset' + side]);
      if (v) el.style.setProperty({Top: 'top', Bottom: 'bottom', Start: 'inset-inline-start', End: 'inset-inline-end'}[side], v);
    }
  } else if (c.position === 'relative' || c.offsetTop || c.offsetStart) {
    el.style.position = 'relative';
    if (space(c.offsetTop)) el.style.top = space(c.offsetTop);
    if (space(c.offsetStart)) el.style.insetInlineStart = space(c.offsetStart);
  }
  if (c.gravity && parentLayout !== 'vertical') el.style.alignSelf = GRAVITY[c.gravity] || '';
  return el;
}

function box(c, ctx, part) {
  const layout = ['horizontal', 'vertical', 'baseline'].includes(c.layout) ? c.layout : 'vertical';
  const el = h('div', {class: `flex-box layout-${layout}`, 'data-layout': layout});
  const s = el.style;
  const gap = space(c.spacing);
  if (gap) s.gap = gap;
  if (color(c.backgroundColor)) s.backgroundColor = c.backgroundColor;
  if (c.background && c.background.type === 'linearGradient' && color(c.background.startColor) && color(c.background.endColor)) {
    const angle = /^-?\d+(\.\d+)?deg$/.test(c.background.angle || '') ? c.background.angle : '0deg';
    s.backgroundImage = `linear-gradient(${angle}, ${c.background.startColor}, ${c.background.endColor})`;
  }
  if (color(c.borderColor)) s.borderColor = c.borderColor;
  const bw = BORDER[c.borderWidth] || length(c.borderWidth);
  if (bw) { s.borderWidth = bw; s.borderStyle = 'solid'; }
  const r = RADIUS[c.cornerRadius] || length(c.cornerRadius);
  if (r) { s.borderRadius = r; s.overflow = 'hidden'; }
  for (const [k, p] of [['width', 'width'], ['maxWidth', 'max-width'], ['height', 'height'], ['maxHeight', 'max-height']]) {
    if (length(c[k])) s.setProperty(p, c[k]);
  }
  if (space(c.paddingAll)) s.padding = space(c.paddingAll);
  for (const [k, p] of [['paddingTop', 'padding-top'], ['paddingBottom', 'padding-bottom'], ['paddingStart', 'padding-inline-start'], ['paddingEnd', 'padding-inline-end']]) {
    if (space(c[k])) s.setProperty(p, space(c[k]));
  }
  if (JUSTIFY[c.justifyContent]) s.justifyContent = c.justifyContent;
  if (JUSTIFY[c.alignItems] || ['center', 'flex-start', 'flex-end'].includes(c.alignItems)) s.alignItems = c.alignItems;
  for (const child of c.contents || []) {
    const ce = component(child, ctx, layout, part);
    if (ce) el.append(ce);
  }
  if (c.action) {
    el.classList.add('tappable');
    el.setAttribute('role', 'button');
    el.setAttribute('tabindex', '0');
    el.title = describeAction(c.action);
    const go = e => { e.stopPropagation(); ctx.act(c.action); };
    el.addEventListener('click', go);
    el.addEventListener('keydown', e => { if (e.key === 'Enter' || e.key === ' ') go(e); });
  }
  return el;
}

function spanStyle(c) {
  return {class: 'flex-span', style: {
    color: color(c.color), 'font-size': TEXT[c.size] || length(c.size), 'font-weight': c.weight === 'bold' ? '700' : undefined,
    'font-style': c.style === 'italic' ? 'italic' : undefined,
    'text-decoration': ['underline', 'line-through'].includes(c.decoration) ? c.decoration : undefined,
  }};
}

function textComponent(c, ctx) {
  const el = h('div', {class: 'flex-text' + (c.wrap ? ' wrap' : '')});
  const s = el.style;
  if (color(c.color)) s.color = c.color;
  s.fontSize = TEXT[c.size] || length(c.size) || TEXT.md;
  if (c.weight === 'bold') s.fontWeight = '700';
  if (c.style === 'italic') s.fontStyle = 'italic';
  if (['underline', 'line-through'].includes(c.decoration)) s.textDecoration = c.decoration;
  if (ALIGN[c.align]) s.textAlign = ALIGN[c.align];
  if (length(c.lineSpacing)) s.lineHeight = `calc(1.4em + ${c.lineSpacing})`;
  if (c.wrap && Number.isInteger(c.maxLines) && c.maxLines > 0) { el.classList.add('clamped'); s.webkitLineClamp = String(c.maxLines); }
  if (Array.isArray(c.contents) && c.contents.length) {
    for (const sp of c.contents) if (sp && sp.type === 'span') el.append(h('span', spanStyle(sp), String(sp.text || '')));
  } else {
    el.append(String(c.text ?? ''));
  }
  if (c.action) {
    el.classList.add('tappable');
    el.setAttribute('role', 'button');
    el.setAttribute('tabindex', '0');
    el.title = describeAction(c.action);
    el.addEventListener('click', e => { e.stopPropagation(); ctx.act(c.action); });
  }
  return el;
}

function buttonComponent(c, ctx) {
  const style = ['primary', 'secondary', 'link'].includes(c.style) ? c.style : 'link';
  const el = actionButton(c.action, ctx, {class: `flex-button style-${style} height-${c.height === 'sm' ? 'sm' : 'md'}`},
    String((c.action && c.action.label) || ''));
  if (color(c.color)) {
    if (style === 'link') el.style.color = c.color; else el.style.backgroundColor = c.color;
  }
  return el;
}

function imageComponent(c, part) {
  const ratio = typeof c.aspectRatio === 'string' ? c.aspectRatio : '1:1';
  const el = placeholder('image', hostOf(c.url), ratio, {class: 'placeholder placeholder-image flex-image'});
  const width = IMAGE[c.size] || length(c.size) || (part === 'hero' ? '100%' : IMAGE.md);
  el.style.width = width;
  el.style.maxWidth = '100%';
  if (ALIGN[c.align]) el.style.alignSelf = {left: 'flex-start', right: 'flex-end', center: 'center'}[ALIGN[c.align]];
  else el.style.alignSelf = 'center';
  if (color(c.backgroundColor)) el.style.backgroundColor = c.backgroundColor;
  return el;
}

// ---- templates -----------------------------------------------------------------

function template(m, ctx) {
  const t = m.template || {};
  const actions = (list, cls) => h('div', {class: cls || 'tpl-actions'}, (list || []).map(a => actionButton(a, ctx, {class: 'tpl-action'}, String(a.label || ''))));
  switch (t.type) {
    case 'buttons':
      return h('div', {class: 'tpl tpl-buttons', 'data-testid': 'template'},
        t.thumbnailImageUrl ? placeholder('image', hostOf(t.thumbnailImageUrl), t.imageAspectRatio === 'square' ? '1:1' : '1.51:1') : null,
        h('div', {class: 'tpl-body'}, t.title ? h('div', {class: 'tpl-title'}, String(t.title)) : null, h('div', {class: 'tpl-text'}, String(t.text || ''))),
        actions(t.actions));
    case 'confirm':
      return h('div', {class: 'tpl tpl-confirm', 'data-testid': 'template'},
        h('div', {class: 'tpl-body'}, h('div', {class: 'tpl-text'}, String(t.text || ''))), actions(t.actions, 'tpl-actions row'));
    case 'carousel':
      return h('div', {class: 'flex-carousel', 'data-testid': 'template'}, (t.columns || []).map(col =>
        h('div', {class: 'tpl tpl-buttons'},
          col.thumbnailImageUrl ? placeholder('image', hostOf(col.thumbnailImageUrl), '1.51:1') : null,
          h('div', {class: 'tpl-body'}, col.title ? h('div', {class: 'tpl-title'}, String(col.title)) : null, h('div', {class: 'tpl-text'}, String(col.text || ''))),
          actions(col.actions))));
    case 'image_carousel':
      return h('div', {class: 'flex-carousel', 'data-testid': 'template'}, (t.columns || []).map(col =>
        h('div', {class: 'tpl tpl-image'}, placeholder('image', hostOf(col.imageUrl), '1:1'), actions([col.action]))));
  }
  return h('div', {class: 'msg-invalid'}, `(template ${String(t.type)})`);
}

// ---- one message -------------------------------------------------------------------

// message renders one message object as a bubble's content. ctx.act(action)
// performs a tap; ctx.readOnly disables every control.
export function message(m, ctx) {
  if (!m || typeof m !== 'object') return h('div', {class: 'msg-invalid'}, '(not a message)');
  switch (m.type) {
    case 'text':
      return h('div', {class: 'bubble-text'}, emojiText(String(m.text ?? ''), m.emojis, 'msg-text'));
    case 'textV2':
      return h('div', {class: 'bubble-text'}, textV2(m));
    case 'sticker':
      return h('div', {class: 'sticker', role: 'img', 'aria-label': `sticker ${m.packageId}/${m.stickerId}`, title: `sticker package ${m.packageId}, sticker ${m.stickerId}`},
        h('span', {class: 'sticker-face'}, 'STICKER'), h('span', {class: 'sticker-ids'}, `${m.packageId} / ${m.stickerId}`));
    case 'image':
      return h('div', {class: 'media'}, placeholder('image', m.contentProvider && m.contentProvider.type === 'line' ? 'sent from LINE' : hostOf(m.originalContentUrl), '4:3'));
    case 'video':
      return h('div', {class: 'media'}, placeholder('video', hostOf(m.originalContentUrl), '16:9'));
    case 'audio':
      return h('div', {class: 'bubble-text audio'}, `▶ audio ${m.duration ? Math.round(m.duration / 1000) + ' s' : ''}`);
    case 'file':
      return h('div', {class: 'bubble-text'}, `file: ${String(m.fileName || 'file')}`);
    case 'location':
      return h('div', {class: 'location'}, h('div', {class: 'location-map', role: 'img', 'aria-label': 'map'}, h('span', {class: 'pin'})),
        h('div', {class: 'location-title'}, String(m.title || 'Location')), h('div', {class: 'location-address'}, String(m.address || '')),
        h('div', {class: 'location-coords'}, `${Number(m.latitude).toFixed(5)}, ${Number(m.longitude).toFixed(5)}`));
    case 'imagemap':
      return h('div', {class: 'media'}, placeholder('imagemap', String(m.altText || ''), `${(m.baseSize && m.baseSize.width) || 1040}:${(m.baseSize && m.baseSize.height) || 1040}`),
        h('div', {class: 'tpl-actions'}, (m.actions || []).map(a => actionButton(a, ctx, {class: 'tpl-action'}, String(a.label || a.text || a.linkUri || a.type)))));
    case 'template':
      return template(m, ctx);
    case 'flex':
      return flex(m.contents, ctx);
    case 'coupon':
      return h('div', {class: 'bubble-text'}, `coupon ${String(m.couponId || '')}`);
  }
  return h('div', {class: 'msg-invalid'}, `(message type ${String(m.type)})`);
}

// userEvent renders what a chat user did (a webhook event) as LINE shows it
// to them: their message, or a note for a postback, follow, join…
export function userEvent(ev, displayText) {
  const m = ev.message || {};
  switch (ev.type) {
    case 'message':
      switch (m.type) {
        case 'text': return {bubble: h('div', {class: 'bubble-text'}, emojiText(String(m.text ?? ''), m.emojis, 'msg-text'))};
        case 'sticker': return {bubble: message({type: 'sticker', packageId: m.packageId, stickerId: m.stickerId}, {})};
        case 'image': return {bubble: message({type: 'image', contentProvider: m.contentProvider}, {})};
        case 'location': return {bubble: message(m, {})};
        default: return {bubble: h('div', {class: 'bubble-text'}, `(${String(m.type)})`)};
      }
    case 'messageEdited':
      return {bubble: h('div', {class: 'bubble-text'}, String(m.text ?? `(${String(m.type)})`)), note: 'edited'};
    case 'postback':
      if (displayText) return {bubble: h('div', {class: 'bubble-text'}, displayText), note: `postback ${ev.postback && ev.postback.data}`};
      return {system: `You tapped a button: postback ${clip((ev.postback && ev.postback.data) || '', 32)}`, tap: true};
    case 'follow': return {system: ev.follow && ev.follow.isUnblocked ? 'You unblocked the bot' : 'You added the bot as a friend'};
    case 'unfollow': return {system: 'You blocked the bot'};
    case 'join': return {system: 'The bot joined'};
    case 'leave': return {system: 'The bot left'};
    case 'memberJoined': return {system: 'A member joined'};
    case 'memberLeft': return {system: 'A member left'};
  }
  return {system: `A ${String(ev.type)} event`};
}

function clip(s, n) { s = String(s); return s.length > n ? s.slice(0, n) + '…' : s; }

// quickReply renders a message's quick-reply buttons.
export function quickReply(m, ctx) {
  const items = (m && m.quickReply && m.quickReply.items) || [];
  if (!items.length) return null;
  return h('div', {class: 'quick-reply', role: 'toolbar', 'aria-label': 'quick replies', 'data-testid': 'quick-reply'},
    items.map(it => actionButton(it.action, ctx, {class: 'quick-reply-item'}, String((it.action && it.action.label) || ''))));
}

// altText is a message's one-line summary (chat list, notifications).
export function altText(m) {
  if (!m) return '';
  if (m.type === 'text') return String(m.text || '');
  if (m.altText) return String(m.altText);
  return `(${m.type})`;
}
