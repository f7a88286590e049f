// app.js: the console's shell: sign-in with a token, the navigation, the
// router (#/gpus, #/queue, #/jobs, #/jobs/TEAM/NAME, #/experiments,
// #/experiments/TEAM/NAME, #/teams), and the live refresh: the page on
// screen reads the API again every two seconds while the tab is visible,
// and updates itself in place.

import * as api from "./api.js";
import { h, fill, registerTeams, ago, nowSec } from "./ui.js";
import * as gpus from "./page_gpus.js";
import * as queue from "./page_queue.js";
import * as jobs from "./page_jobs.js";
import * as job from "./page_job.js";
import * as experiments from "./page_experiments.js";
import * as teams from "./page_teams.js";

const REFRESH_MS = 2000;

const routes = [
  { re: /^#\/gpus$/, page: gpus, nav: "gpus" },
  { re: /^#\/queue$/, page: queue, nav: "queue" },
  { re: /^#\/jobs$/, page: jobs, nav: "jobs" },
  { re: /^#\/jobs\/([^/]+)\/([^/]+)$/, page: job, nav: "jobs" },
  { re: /^#\/experiments$/, page: experiments, nav: "experiments" },
  { re: /^#\/experiments\/([^/]+)\/([^/]+)$/, page: experiments, nav: "experiments" },
  { re: /^#\/teams$/, page: teams, nav: "teams" },
];

const NAV = [["gpus", "GPUs"], ["queue", "Queue"], ["jobs", "Jobs"], ["experiments", "Experiments"], ["teams", "Teams"]];

const state = { me: null, page: null, loop: null, updated: 0, error: null };
const root = document.getElementById("app");

function signOut(message) {
  api.setToken(null);
  state.me = null;
  showLogin(message);
}

api.setUnauthorizedHandler((m) => signOut("Signed out: " + m));

// ---- sign in ----
function showLogin(message) {
  stopPage();
  const input = h("input", { type: "password", id: "token", autocomplete: "off", spellcheck: "false",
    placeholder: "token", "aria-label": "API token" });
  const err = h("div", { class: "login-error", role: "alert" }, message || "");
  const form = h("form", { class: "login", onsubmit: async (e) => {
    e.preventDefault();
    const t = input.value.trim();
    if (!t) return;
    try {
      const me = await api.get("/v1/whoami", { token: t });
      api.setToken(t);
      state.me = me;
      if (!location.hash || location.hash === "#/login") location.hash = "#/gpus";
      start();
    } catch (x) {
      fill(err, x.status === 401 ? "This token is not known to the server (or it expired)." : x.message);
    }
  } },
  h("div", { class: "brand-big" }, h("span", { class: "logo" }), "lathe"),
  h("p", { class: "muted" }, "Sign in with your API token: a team's token shows that team's jobs, an admin's every team's."),
  input,
  h("button", { type: "submit", class: "primary" }, "Sign in"),
  err,
  h("p", { class: "fine" }, "The token stays in this browser tab (sessionStorage) and goes to this server in an Authorization header only. ",
    "An admin finds one in the server's data folder (admin-token) or makes one with `lathe server hash-token`."));
  fill(root, h("div", { class: "login-wrap" }, form));
  input.focus();
}

// ---- the shell ----
function shell(active) {
  const who = state.me.admin ? "admin" : "team " + state.me.team;
  const scope = state.me.scope !== "admin" ? " · " + state.me.scope : "";
  return h("div", { class: "shell" },
    h("header", { class: "top" },
      h("a", { class: "brand", href: "#/gpus" }, h("span", { class: "logo" }), "lathe"),
      h("nav", {}, NAV.map(([id, label]) => h("a", { href: "#/" + id, class: id === active ? "active" : "", id: "nav-" + id }, label))),
      h("div", { class: "spacer" }),
      h("span", { class: "live", id: "live" }, "live"),
      h("span", { class: "who", title: state.me.name || "" }, (state.me.name ? state.me.name + " · " : "") + who + scope),
      h("button", { class: "ghost", id: "sign-out", onclick: () => signOut("Signed out.") }, "Sign out")),
    h("div", { id: "banner" }),
    h("main", { id: "main" }));
}

function stopPage() {
  if (state.loop) {
    state.loop.alive = false;
    clearTimeout(state.loop.timer);
  }
  state.loop = null;
  if (state.page && state.page.destroy) state.page.destroy();
  state.page = null;
}

// One refresh loop per page shown: a refresh starts when the last ended.
async function tick(loop) {
  if (!loop.alive || loop.running) return;
  loop.running = true;
  try {
    if (!document.hidden && state.page) {
      await state.page.refresh();
      state.error = null;
      state.updated = nowSec();
    }
  } catch (e) {
    if (e.name !== "AbortError") state.error = e.message;
  } finally {
    loop.running = false;
  }
  if (!loop.alive) return;
  showLive();
  loop.timer = setTimeout(() => tick(loop), REFRESH_MS);
}

function showLive() {
  const el = document.getElementById("live");
  if (!el) return;
  el.className = "live" + (state.error ? " down" : "");
  el.title = state.error ? state.error : "updated " + ago(state.updated);
  fill(el, state.error ? "offline" : "live");
  const banner = document.getElementById("banner");
  if (banner) fill(banner, state.error ? h("div", { class: "alert" }, "The server does not answer: " + state.error + " (retrying)") : budgetNotes());
}

// Teams at 80 % or 100 % of their budget this month (the teams the token sees).
let budgetTeams = [];
function budgetNotes() {
  return budgetTeams.filter((t) => t.budget_threshold >= 0.8).map((t) =>
    h("div", { class: t.budget_threshold >= 1 ? "alert bad" : "alert warn" },
      "Team " + t.name + " has reached " + Math.round(t.budget_threshold * 100) + "% of its budget this month",
      t.budget_threshold >= 1 ? ": its queued jobs wait for the next month or a larger budget." : ".",
      " ", h("a", { href: "#/teams" }, "Teams")));
}

export async function loadTeams() {
  const t = await api.get("/v1/teams");
  budgetTeams = t.items;
  registerTeams(t.items.map((x) => x.name));
  return t.items;
}

function route() {
  if (!state.me) return;
  const hash = location.hash || "#/gpus";
  const r = routes.find((x) => x.re.test(hash));
  if (!r) {
    location.hash = "#/gpus";
    return;
  }
  stopPage();
  const params = hash.match(r.re).slice(1).map(decodeURIComponent);
  fill(root, shell(r.nav));
  const main = document.getElementById("main");
  const ctx = { me: state.me, canWrite: state.me.scope !== "read", loadTeams };
  state.page = r.page.mount(main, params, ctx);
  document.title = "lathe · " + (state.page.title || r.nav);
  const loop = { alive: true, running: false, timer: null };
  state.loop = loop;
  loadTeams().catch(() => {}).finally(() => tick(loop));
}

async function start() {
  try {
    state.me = await api.get("/v1/whoami");
  } catch (e) {
    if (e.status !== 401) showLogin(e.message);
    return;
  }
  route();
}

window.addEventListener("hashchange", route);
document.addEventListener("visibilitychange", () => {
  const loop = state.loop;
  if (!document.hidden && loop && !loop.running) {
    clearTimeout(loop.timer);
    tick(loop);
  }
});

if (api.token()) start();
else showLogin();
