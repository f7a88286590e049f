// page_teams.js: each team the token sees: its GPU quota by type, what it
// uses, borrows from others' idle quota and lends of its own, its jobs,
// and its budget: spent this month (running attempts included) against
// the budget, the 80 % and 100 % marks, and a burn-down to the month's end
// (the budget left day by day, from GET /v1/cost, and where the month's
// pace so far leads).

import * as api from "./api.js";
import { LineChart } from "./charts.js";
import { h, fill, card, table, bar, stat, teamColour, money, pct, num, parseTime, nowSec } from "./ui.js";

function monthBounds(now) {
  const d = new Date(now * 1000);
  const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1) / 1000;
  const end = Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) / 1000;
  return [start, end];
}

export function mount(root, params, ctx) {
  const list = h("div", { class: "teams", id: "teams" });
  fill(root, h("div", { class: "page-head" }, h("h1", {}, "Teams"),
    h("p", { class: "muted" }, "Quotas, what each team uses, borrows and lends, and its budget this month.")), list);
  const charts = new Map(); // team -> LineChart
  const cards = new Map();  // team -> {el, body, chartBox}

  return {
    title: "Teams",
    async refresh() {
      const now = nowSec();
      const [start, end] = monthBounds(now);
      const teams = await ctx.loadTeams();
      const cost = await api.get("/v1/cost" + api.query({ by: "team", since: new Date(start * 1000).toISOString().replace(/\.\d+Z$/, "Z"), step: "1d" }));
      const byTeam = new Map(cost.items.map((c) => [c.team, c]));
      for (const t of teams) {
        let c = cards.get(t.name);
        if (!c) {
          c = { body: h("div", {}), chartBox: h("div", {}) };
          c.el = h("section", { class: "card team-card", dataset: { team: t.name } },
            h("h2", {}, h("span", { class: "dot big", style: { background: teamColour(t.name) } }), t.name), c.body, c.chartBox);
          cards.set(t.name, c);
          list.appendChild(c.el);
        }
        renderTeam(c.body, t);
        if (t.budget_per_month > 0) {
          let ch = charts.get(t.name);
          if (!ch) {
            ch = new LineChart({ title: "Budget left this month", height: 200, x: "time", yLabel: "money", series: [
              { label: "budget left", colour: teamColour(t.name), width: 2.5 },
              { label: "at this pace", colour: teamColour(t.name), dash: [6, 5], width: 1.5 },
              { label: "80% spent", colour: "#d9822b", dash: [2, 4], width: 1 }] });
            charts.set(t.name, ch);
            c.chartBox.appendChild(ch.el);
          }
          ch.set(burnDown(t, byTeam.get(t.name), cost.step_seconds, start, end, now));
        }
      }
    },
    destroy() {
      for (const c of charts.values()) c.destroy();
    },
  };
}

function renderTeam(el, t) {
  const types = [...new Set([...Object.keys(t.quota), ...Object.keys(t.in_use)])].sort();
  const quotaTable = table([{ title: "GPU type" }, { title: "quota", cls: "num" }, { title: "in use", cls: "num" }, { title: "" },
    { title: "borrowed", cls: "num" }, { title: "lent", cls: "num" }],
  types.map((ty) => {
    const q = t.quota[ty], u = t.in_use[ty] || 0;
    return { cells: [ty, q === undefined ? "no limit" : String(q), String(u),
      q ? bar(u / q, { colour: teamColour(t.name), cls: "thin" }) : "",
      t.borrowed[ty] ? h("span", { class: "borrowed" }, String(t.borrowed[ty])) : "0",
      t.lent[ty] ? h("span", { class: "lent" }, String(t.lent[ty])) : "0"] };
  }), { empty: "No quota and no GPU in use." });
  const budget = t.budget_per_month;
  const used = budget > 0 ? t.spent_this_month / budget : null;
  const level = t.budget_threshold || 0;
  fill(el,
    h("div", { class: "stats" },
      stat("running", String(t.running), t.queued + " queued"),
      stat("fair-share weight", num(t.weight, 2)),
      budget > 0 ? stat("budget used", pct(used), money(t.spent_this_month) + " of " + money(budget) + " this month")
        : stat("spent this month", money(t.spent_this_month), "no budget")),
    budget > 0 ? h("div", { class: "budget" },
      bar(used, { marker: 0.8, markerTitle: "80%", cls: "budget-bar" + (level >= 1 ? " over" : level >= 0.8 ? " warn" : "") }),
      level >= 0.8 ? h("span", { class: "badge " + (level >= 1 ? "st-bad" : "st-stopping") },
        level >= 1 ? "budget spent: its queued jobs wait" : "80% of the budget reached") : null) : null,
    quotaTable);
}

// The budget left at the end of each day so far (the cost series), at
// now (the team's spending this month), and the straight line to the
// month's end at the month's pace so far.
function burnDown(t, c, step, start, end, now) {
  const budget = t.budget_per_month;
  const xs = [start], left = [budget], pace = [null], warn = [budget * 0.2];
  let spent = 0;
  for (const p of (c && c.series) || []) {
    const at = parseTime(p.at) + (step || 86400);
    spent += p.cost;
    if (at >= now) break;
    xs.push(at);
    left.push(budget - spent);
    pace.push(null);
    warn.push(budget * 0.2);
  }
  const nowLeft = budget - t.spent_this_month;
  xs.push(now);
  left.push(nowLeft);
  pace.push(nowLeft);
  warn.push(budget * 0.2);
  const rate = now > start ? t.spent_this_month / (now - start) : 0;
  xs.push(end);
  left.push(null);
  pace.push(nowLeft - rate * (end - now));
  warn.push(budget * 0.2);
  return [xs, left, pace, warn];
}
