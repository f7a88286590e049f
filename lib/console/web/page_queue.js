// page_queue.js: what waits and why: every queued job (and those starting
// or stopping) with the scheduler's own sentence for it, in the order the
// scheduler weighs them (priority, then age), and each team's queue.

import * as api from "./api.js";
import { h, fill, table, teamDot, stateBadge, jobHref, duration, parseTime, nowSec, stat, num } from "./ui.js";

export function mount(root, params, ctx) {
  const summary = h("div", { class: "stats" });
  const list = h("div", { id: "queue" });
  fill(root,
    h("div", { class: "page-head" }, h("h1", {}, "Queue"),
      h("p", { class: "muted" }, "Jobs waiting for GPUs, with the scheduler's reason for each, highest priority first.")),
    summary, list);
  return {
    title: "Queue",
    async refresh() {
      const [jobs, teams] = [
        await api.get("/v1/jobs" + api.query({ state: "queued,starting,stopping", limit: 1000 })),
        await ctx.loadTeams(),
      ];
      render(jobs.items, teams, summary, list);
    },
  };
}

function render(items, teams, summary, list) {
  const now = nowSec();
  const queued = items.filter((j) => j.state === "queued");
  items.sort((a, b) => (a.state === "queued") - (b.state === "queued") || b.priority - a.priority ||
    parseTime(a.created_at) - parseTime(b.created_at));
  fill(summary,
    stat("waiting", num(queued.length), queued.length ? "oldest " + duration(now - Math.min(...queued.map((j) => parseTime(j.created_at)))) : "none"),
    teams.map((t) => stat(t.name, num(t.queued) + " queued",
      t.queued_since ? "longest wait " + duration(now - parseTime(t.queued_since)) : t.running + " running")));
  const rows = items.map((j) => {
    const waited = now - parseTime(j.created_at);
    const notBefore = j.not_before ? parseTime(j.not_before) - now : 0;
    return {
      cls: "job-row",
      cells: [
        h("a", { href: jobHref(j.team, j.name), class: "job-link" }, j.name),
        teamDot(j.team),
        stateBadge(j.state),
        j.priority_class || "default",
        duration(waited),
        h("span", { class: "reason" }, j.state === "queued" ? (j.wait_reason || "waiting for the scheduler's next pass") :
          j.state === "starting" ? "placed: its trainer is starting" : "checkpointing and stopping",
        notBefore > 0 ? h("span", { class: "muted" }, " (backoff: " + duration(notBefore) + " left)") : null),
      ],
    };
  });
  fill(list, table([{ title: "job" }, { title: "team" }, { title: "state" }, { title: "priority" },
    { title: "waiting", cls: "num" }, { title: "why it waits (the scheduler's words)", cls: "wide" }], rows,
  { empty: "Nothing waits: every job runs or has ended." }));
}
