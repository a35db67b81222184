// Loom's web console: a page per route of the hash (#/, #/type/..,
// #/resource/.., #/stuck, #/login), built from the JSON of /ui/api/.
'use strict';

const main = document.getElementById('main');
const pageSize = 50;
let stop = () => {}; // ends what the current page keeps running

// el builds an element: el('a', {href: '#/'}, 'text', child, ...).
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function show(...nodes) { main.replaceChildren(...nodes.flat()); }

async function api(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== '') q.set(k, v);
  const rsp = await fetch('/ui/api/' + path + (q.toString() ? '?' + q : ''), {credentials: 'same-origin'});
  const body = await rsp.json();
  if (rsp.status === 401) { location.hash = '#/login'; throw new Error('log in'); }
  if (!rsp.ok) throw new Error(body.error || rsp.statusText);
  return body;
}

function failed(err) { show(el('p', {class: 'err'}, String(err.message || err))); }

function ago(t) {
  if (!t) return '';
  let s = Math.max(0, (Date.now() - new Date(t).getTime()) / 1000);
  if (s < 60) return Math.floor(s) + 's';
  if ((s /= 60) < 60) return Math.floor(s) + 'm';
  if ((s /= 60) < 48) return Math.floor(s) + 'h';
  return Math.floor(s / 24) + 'd';
}

function resourceHref(l) {
  return '#/resource/' + [l.type, l.partition || '-', l.namespace || '-', l.name].map(encodeURIComponent).join('/');
}
function typeHref(t) { return '#/type/' + encodeURIComponent(t); }
function tenancy(l) { return [l.partition, l.namespace].filter(Boolean).join('/') || '(cluster)'; }

function conditionBadges(statuses) {
  return statuses.flatMap(s => s.conditions.map(c =>
    el('span', {class: 'badge ' + c.state, title: s.key + ': ' + (c.reason || '') + (c.message ? ' — ' + c.message : '')},
      c.type + (c.reason ? ': ' + c.reason : ''))));
}
function statusBadges(statuses) {
  if (!statuses.length) return [el('span', {class: 'muted'}, 'none')];
  return statuses.map(s => el('span', {class: 'badge ' + (s.observed ? 'key' : 'lag'),
    title: 'observed generation ' + (s.observedGeneration || '(none)')}, s.key + (s.observed ? ' ✓' : ' behind')));
}

// ---- Overview ----
async function overview() {
  const o = await api('overview');
  show(
    el('h1', {}, 'Overview'),
    el('div', {class: 'cards'},
      el('div', {class: 'card'}, el('b', {}, 'Version'), o.host.version || '(unknown)'),
      el('div', {class: 'card'}, el('b', {}, 'Storage'), o.host.backend),
      el('div', {class: 'card'}, el('b', {}, 'Uptime'), o.host.uptime)),
    el('h2', {}, 'Types'),
    el('table', {id: 'types'},
      el('thead', {}, el('tr', {}, el('th', {}, 'Type'), el('th', {}, 'Scope'), el('th', {class: 'num'}, 'Resources'),
        el('th', {class: 'num'}, 'Marked for deletion'))),
      el('tbody', {}, o.types.map(t => el('tr', {},
        el('td', {}, el('a', {href: typeHref(t.type)}, t.type)), el('td', {}, t.scope),
        el('td', {class: 'num'}, t.count ?? '?'), el('td', {class: 'num'}, t.deleting))))),
    el('h2', {}, 'Controllers'),
    el('table', {id: 'controllers'},
      el('thead', {}, el('tr', {}, ['Controller', 'Manages', 'State', 'Cache', 'Queue', 'Reconciles/s', 'Errors/s', 'Last error']
        .map((h, i) => el('th', {class: i >= 4 && i <= 6 ? 'num' : ''}, h)))),
      el('tbody', {}, o.controllers.map(c => el('tr', {},
        el('td', {}, c.name), el('td', {}, el('a', {href: typeHref(c.managedType)}, c.managedType)),
        el('td', {class: 'state-' + c.state}, c.state), el('td', {}, c.primed ? 'primed' : 'priming'),
        el('td', {class: 'num'}, c.queueDepth), el('td', {class: 'num'}, c.reconcileRate.toFixed(1)),
        el('td', {class: 'num'}, c.errorRate.toFixed(2)),
        el('td', {class: c.lastError ? 'err' : 'muted'}, c.lastError ? c.lastError + ' (' + ago(c.lastErrorAt) + ' ago)' : '—'))))));
  const timer = setTimeout(route, 5000); // keep the rates current
  stop = () => clearTimeout(timer);
}

// ---- A type ----
function typeRow(r) {
  return el('tr', {'data-key': r.key},
    el('td', {}, el('a', {href: resourceHref(r)}, r.name)),
    el('td', {}, tenancy(r)),
    el('td', {}, ago(r.created)),
    el('td', {title: r.generation}, ago(r.generationAt) + ' ago'),
    el('td', {}, statusBadges(r.statuses)),
    el('td', {}, conditionBadges(r.statuses)),
    el('td', {}, r.finalizers.map(f => el('span', {class: 'badge fin'}, f))),
    el('td', {}, r.deleting ? el('span', {class: 'badge del', title: r.deleting}, 'deleting ' + ago(r.deleting)) : ''));
}

async function typePage(type, params) {
  const f = {prefix: params.get('prefix') || '', partition: params.get('partition') || '',
    namespace: params.get('namespace') || '', selector: params.get('selector') || ''};
  const offset = Number(params.get('offset') || 0);
  const page = await api('rows', {type, ...f, offset, limit: pageSize});
  const rows = new Map(page.rows.map(r => [r.key, r]));
  const tbody = el('tbody', {id: 'rows'});
  const total = el('span', {id: 'total'});
  const live = el('span', {class: 'live off', id: 'live'}, '○ connecting');
  let shown = page.total;
  const render = () => {
    tbody.replaceChildren(...[...rows.keys()].sort().map(k => typeRow(rows.get(k))));
    total.textContent = (rows.size ? (offset + 1) + '–' + (offset + rows.size) + ' of ' : '') + shown + ' resources';
  };
  render();
  const go = (o) => {
    const q = new URLSearchParams({...f, offset: o});
    for (const [k, v] of [...q]) if (!v || v === '0') q.delete(k);
    location.hash = typeHref(type) + (q.toString() ? '?' + q : '');
  };
  const input = (name, ph) => el('input', {name, placeholder: ph, value: f[name]});
  const form = el('form', {class: 'filters', id: 'filters', onsubmit: (e) => {
    e.preventDefault();
    for (const k of Object.keys(f)) f[k] = form.elements[k].value.trim();
    go(0);
  }}, input('prefix', 'name prefix'), input('partition', 'partition'), input('namespace', 'namespace'),
  input('selector', 'label selector, e.g. app=web'), el('button', {type: 'submit'}, 'Filter'));
  const keys = page.rows.map(r => r.key);
  const full = page.rows.length === pageSize;
  show(el('h1', {}, type, live), form,
    el('div', {class: 'pager'},
      el('button', {disabled: offset === 0, onclick: () => go(Math.max(0, offset - pageSize))}, '‹ Previous'),
      total,
      el('button', {disabled: !full || offset + pageSize >= page.total, onclick: () => go(offset + pageSize)}, 'Next ›')),
    el('table', {},
      el('thead', {}, el('tr', {}, ['Name', 'Tenancy', 'Age', 'Generation', 'Observed by', 'Conditions', 'Finalizers', 'Deletion']
        .map(h => el('th', {}, h)))),
      tbody));

  // Live: the changes within this page's window (to its end when the page
  // is not full, so new resources show up).
  // room: how many new rows the page may take before it reloads.
  const q = new URLSearchParams({type, ...f, from: offset > 0 && keys.length ? keys[0] : '', to: full ? keys[keys.length - 1] : '',
    room: pageSize - keys.length});
  const es = new EventSource('/ui/api/events?' + q);
  let queued = false;
  const later = () => { if (!queued) { queued = true; requestAnimationFrame(() => { queued = false; render(); }); } };
  es.onopen = () => { live.className = 'live on'; live.textContent = '● live'; };
  es.addEventListener('upsert', (e) => {
    const r = JSON.parse(e.data);
    if (!rows.has(r.key)) shown++;
    rows.set(r.key, r); later();
  });
  es.addEventListener('delete', (e) => {
    const k = JSON.parse(e.data);
    if (rows.delete(k)) { shown--; later(); }
  });
  let reload;
  const resync = () => { es.close(); reload = setTimeout(route, 200); };
  es.addEventListener('resync', resync);
  es.onerror = () => { live.className = 'live off'; live.textContent = '○ reconnecting'; resync(); };
  stop = () => { es.close(); clearTimeout(reload); };
}

// ---- A resource ----
async function resourcePage(type, partition, namespace, name) {
  const p = {type, partition: partition === '-' ? '' : partition, namespace: namespace === '-' ? '' : namespace, name};
  const r = await api('resource', p);
  const link = (l) => el('a', {href: resourceHref(l)}, l.type + ' ' + tenancy(l) + '/' + l.name);
  show(
    el('h1', {}, el('a', {href: typeHref(r.type)}, r.type), ' / ', r.name),
    el('dl', {class: 'meta', id: 'metadata'},
      el('dt', {}, 'Tenancy'), el('dd', {}, tenancy(r)),
      el('dt', {}, 'Uid'), el('dd', {}, r.uid),
      el('dt', {}, 'Created'), el('dd', {}, r.created ? ago(r.created) + ' ago' : ''),
      el('dt', {}, 'Generation'), el('dd', {}, r.generation + ' (' + ago(r.generationAt) + ' ago)'),
      el('dt', {}, 'Version'), el('dd', {}, r.version),
      el('dt', {}, 'Owner'), el('dd', {id: 'owner'}, r.owner ? link(r.owner) : el('span', {class: 'muted'}, 'none')),
      el('dt', {}, 'Owns'), el('dd', {id: 'owned'}, r.owned.length ? r.owned.map(o => el('div', {}, link(o))) : el('span', {class: 'muted'}, 'nothing')),
      el('dt', {}, 'Finalizers'), el('dd', {}, r.finalizers.map(f => el('span', {class: 'badge fin'}, f))),
      el('dt', {}, 'Deletion'), el('dd', {}, r.deleting ? 'marked ' + r.deleting : '—'),
      Object.entries(r.metadata || {}).flatMap(([k, v]) => [el('dt', {}, 'metadata ' + k), el('dd', {}, v)])),
    el('h2', {}, 'Status'),
    el('table', {id: 'status'},
      el('thead', {}, el('tr', {}, el('th', {}, 'Key'), el('th', {}, 'Observed generation'), el('th', {}, 'Conditions'))),
      el('tbody', {}, r.statuses.map(s => el('tr', {},
        el('td', {}, s.key),
        el('td', {}, s.observedGeneration, ' ', el('span', {class: 'badge ' + (s.observed ? 'key' : 'lag')}, s.observed ? 'current' : 'behind')),
        el('td', {}, s.conditions.map(c => el('div', {}, el('span', {class: 'badge ' + c.state}, c.type + ' ' + c.state),
          ' ', c.reason || '', c.message ? ' — ' + c.message : ''))))))),
    el('h2', {}, 'Data ', el('span', {class: 'muted'}, r.dataType)),
    el('pre', {id: 'data'}, JSON.stringify(r.data, null, 2)),
    el('h2', {}, 'History'),
    r.historyNote ? el('p', {class: 'muted'}, r.historyNote) :
      el('table', {id: 'history'},
        el('thead', {}, el('tr', {}, ['Version', 'When', 'By', 'Generation', ''].map(h => el('th', {}, h)))),
        el('tbody', {}, r.history.map(h => el('tr', {},
          el('td', {}, h.version), el('td', {}, ago(h.time) + ' ago'), el('td', {}, h.by),
          el('td', {}, h.generation), el('td', {}, h.deleted ? 'deleted' : ''))))));
}

// ---- Stuck ----
async function stuckPage() {
  const s = await api('stuck');
  const link = (l) => el('a', {href: resourceHref(l)}, l.type + ' ' + tenancy(l) + '/' + l.name);
  const none = (what) => el('p', {class: 'muted'}, 'No ' + what + '.');
  show(
    el('h1', {}, 'Stuck ', el('span', {class: 'muted'}, 'for longer than ' + s.threshold)),
    s.truncated ? el('p', {class: 'err'}, 'Only the first entries are shown.') : '',
    el('h2', {}, 'Status behind the generation'),
    s.lagging.length ? el('table', {id: 'lagging'},
      el('thead', {}, el('tr', {}, el('th', {}, 'Resource'), el('th', {}, 'Generation since'), el('th', {}, 'Not observed by'))),
      el('tbody', {}, s.lagging.map(l => el('tr', {}, el('td', {}, link(l.resource)),
        el('td', {}, ago(l.generationAt)), el('td', {}, l.keys.map(k => el('span', {class: 'badge lag'}, k)))))))
      : none('resource waits for its controllers'),
    el('h2', {}, 'Waiting on finalizers'),
    s.deleting.length ? el('table', {id: 'deleting'},
      el('thead', {}, el('tr', {}, el('th', {}, 'Resource'), el('th', {}, 'Marked'), el('th', {}, 'Held by'))),
      el('tbody', {}, s.deleting.map(d => el('tr', {}, el('td', {}, link(d.resource)),
        el('td', {}, ago(d.since) + ' ago'), el('td', {}, d.finalizers.map(f => el('span', {class: 'badge fin'}, f)))))))
      : none('deletion waits'),
    el('h2', {}, 'False conditions'),
    s.false.length ? s.false.map(g => el('div', {class: 'false-group'},
      el('h3', {}, g.key, ' · ', g.reason || '(no reason)', ' ', el('span', {class: 'muted'}, g.resources.length)),
      el('table', {}, el('tbody', {}, g.resources.map(x => el('tr', {}, el('td', {}, link(x.resource)),
        el('td', {}, el('span', {class: 'badge False'}, x.condition)), el('td', {}, x.message)))))))
      : none('False condition'));
}

// ---- Login ----
async function loginPage(params) {
  const err = params.get('error');
  show(el('h1', {}, 'Log in'),
    el('form', {class: 'login', method: 'post', action: '/ui/login'},
      el('p', {}, 'This server has ACLs on: the console shows what your ACL token may read.'),
      err ? el('p', {class: 'err'}, err === 'refused' ? 'The server refused that token.' : 'Give a token.') : '',
      el('label', {}, 'ACL token', el('input', {type: 'password', name: 'token', autocomplete: 'off', autofocus: true})),
      el('button', {type: 'submit'}, 'Log in')));
}

async function route() {
  stop(); stop = () => {};
  const [path, query] = (location.hash.slice(1) || '/').split('?');
  const params = new URLSearchParams(query || '');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll('header nav a')) a.classList.toggle('active', a.getAttribute('href') === '#/' + (parts[0] || ''));
  try {
    switch (parts[0]) {
      case undefined: return await overview();
      case 'type': return await typePage(parts[1], params);
      case 'resource': return await resourcePage(parts[1], parts[2], parts[3], parts[4]);
      case 'stuck': return await stuckPage();
      case 'login': return await loginPage(params);
      default: show(el('p', {class: 'err'}, 'No such page.'));
    }
  } catch (err) {
    if (location.hash !== '#/login') failed(err);
  }
}

async function start() {
  try {
    const s = await api('session');
    document.getElementById('logout').hidden = !(s.acls && s.loggedIn);
    if (s.acls && !s.loggedIn && !location.hash.startsWith('#/login')) location.hash = '#/login';
  } catch (err) { /* the page says */ }
  window.addEventListener('hashchange', route);
  route();
}
start();
