// ui.js: small helpers the pages share: building DOM (text only, never
// HTML from data: every name, message and log line is shown as text),
// formatting numbers, times, money and bytes, team colours, badges,
// tables, progress bars and a confirmation dialog.

// h("div", {class: "x", onclick: f}, child, ...): an element. Children
// are nodes or strings (text nodes); null and false are skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "style") Object.assign(el.style, v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Replaces el's children.
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function link(href, text, cls) {
  return h("a", { href, class: cls }, text);
}

// ---- numbers ----
export function num(v, digits = 2) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  return Number(v).toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

export function fixed(v, digits = 4) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  return Number(v).toFixed(digits);
}

// Money as the CLI shows it: two decimals, four below 1.
export function money(v) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  const a = Math.abs(v);
  return a >= 1 || a === 0 ? v.toFixed(2) : v.toFixed(4);
}

export function bytes(v) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return (i >= 3 ? v.toFixed(1) : Math.round(v)) + " " + u[i];
}

export function pct(v, digits = 0) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  return (v * 100).toFixed(digits) + "%";
}

// ---- times ----
export function parseTime(s) {
  return s ? Date.parse(s) / 1000 : 0;
}

export function nowSec() {
  return Date.now() / 1000;
}

// "45s", "12m", "3h 05m", "2d 4h".
export function duration(s) {
  if (s === null || s === undefined || !isFinite(s) || s < 0) return "–";
  s = Math.round(s);
  if (s < 60) return s + "s";
  const m = Math.floor(s / 60);
  if (m < 60) return m + "m " + String(s % 60).padStart(2, "0") + "s";
  const hr = Math.floor(m / 60);
  if (hr < 48) return hr + "h " + String(m % 60).padStart(2, "0") + "m";
  return Math.floor(hr / 24) + "d " + (hr % 24) + "h";
}

export function ago(t) {
  return t ? duration(nowSec() - t) + " ago" : "–";
}

export function clock(t) {
  if (!t) return "–";
  const d = new Date(t * 1000);
  return d.toLocaleString("en-GB", { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
}

// ---- colours ----
// A palette that stays apart on white and in the GPU map's tiles.
const PALETTE = ["#2f6fdb", "#d9822b", "#1f9e74", "#c2418a", "#7a5bd6", "#b8a11f",
                 "#3a9fbf", "#d64545", "#5d8f2f", "#8c6d4f"];

function hash(s) {
  let x = 2166136261;
  for (let i = 0; i < s.length; i++) { x ^= s.charCodeAt(i); x = Math.imul(x, 16777619); }
  return x >>> 0;
}

// Teams get colours in the order they are first seen (the pages register
// every team of /v1/teams first, so the colours are stable on a page).
const teamColours = new Map();
export function teamColour(team) {
  if (!team) return "#9aa3ad";
  if (!teamColours.has(team)) teamColours.set(team, PALETTE[teamColours.size % PALETTE.length]);
  return teamColours.get(team);
}

export function registerTeams(names) {
  for (const n of [...names].sort()) teamColour(n);
}

// A job's shade of its team's colour (jobs of one team stay apart).
export function jobColour(team, job) {
  const base = teamColour(team);
  const k = job ? hash(job) % 4 : 0;
  return shade(base, [0, 0.22, -0.18, 0.38][k]);
}

function shade(hex, f) {
  const n = parseInt(hex.slice(1), 16);
  let r = n >> 16, g = (n >> 8) & 255, b = n & 255;
  const t = f < 0 ? 0 : 255, p = Math.abs(f);
  r = Math.round((t - r) * p + r); g = Math.round((t - g) * p + g); b = Math.round((t - b) * p + b);
  return "#" + ((1 << 24) | (r << 16) | (g << 8) | b).toString(16).slice(1);
}

// Series colours of a chart with many lines (experiments).
export function seriesColour(i) {
  return PALETTE[i % PALETTE.length];
}

// ---- pieces ----
const STATE_CLASS = {
  queued: "st-queued", starting: "st-starting", running: "st-running", stopping: "st-stopping",
  succeeded: "st-ok", failed: "st-bad", cancelled: "st-muted", timed_out: "st-bad",
};

export function stateBadge(state) {
  return h("span", { class: "badge " + (STATE_CLASS[state] || "st-muted") }, state || "?");
}

export function teamDot(team) {
  return h("span", { class: "team" }, h("span", { class: "dot", style: { background: teamColour(team) } }), team);
}

// A bar filled to frac (0..1) with an optional marker (0..1).
export function bar(frac, opts = {}) {
  const f = Math.max(0, Math.min(1, isFinite(frac) ? frac : 0));
  const el = h("div", { class: "bar " + (opts.cls || "") },
    h("div", { class: "fill", style: { width: (f * 100).toFixed(1) + "%", background: opts.colour || null } }));
  if (opts.marker !== undefined) el.appendChild(h("div", { class: "marker", style: { left: (opts.marker * 100) + "%" }, title: opts.markerTitle || "" }));
  return el;
}

// A table: cols [{title, cls}], rows of cells (nodes or text).
export function table(cols, rows, opts = {}) {
  return h("table", { class: "grid " + (opts.cls || "") },
    h("thead", {}, h("tr", {}, cols.map((c) => h("th", { class: c.cls || "" }, c.title)))),
    h("tbody", {}, rows.length ? rows.map((r) => h("tr", { class: r.cls || "" }, r.cells.map((c, i) => h("td", { class: cols[i].cls || "" }, c))))
      : h("tr", {}, h("td", { colspan: cols.length, class: "empty" }, opts.empty || "nothing here"))));
}

export function card(title, ...body) {
  return h("section", { class: "card" }, title ? h("h2", {}, title) : null, ...body);
}

export function stat(label, value, sub) {
  return h("div", { class: "stat" }, h("div", { class: "stat-label" }, label),
    h("div", { class: "stat-value" }, value), sub ? h("div", { class: "stat-sub" }, sub) : null);
}

// A dialog asking to confirm; resolves true or false.
export function confirmDialog(title, text, action) {
  return new Promise((resolve) => {
    const close = (v) => { back.remove(); resolve(v); };
    const ok = h("button", { class: "danger", onclick: () => close(true) }, action);
    const back = h("div", { class: "modal-back", onclick: (e) => { if (e.target === back) close(false); } },
      h("div", { class: "modal", role: "dialog", "aria-modal": "true" },
        h("h3", {}, title), h("p", {}, text),
        h("div", { class: "actions" }, h("button", { onclick: () => close(false) }, "Keep it"), ok)));
    document.body.appendChild(back);
    ok.focus();
  });
}

// A job's page address.
export function jobHref(team, name) {
  return "#/jobs/" + encodeURIComponent(team) + "/" + encodeURIComponent(name);
}

export function experimentHref(team, name) {
  return "#/experiments/" + encodeURIComponent(team) + "/" + encodeURIComponent(name);
}
