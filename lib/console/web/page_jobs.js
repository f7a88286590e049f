// page_jobs.js: the jobs the token sees, newest first: state, progress,
// loss, throughput, time left, GPU-hours and cost. A filter keeps the
// active ones or shows all.

import * as api from "./api.js";
import { h, fill, table, teamDot, stateBadge, jobHref, experimentHref, bar, fixed, num, duration, money } from "./ui.js";

export function mount(root, params, ctx) {
  let filter = sessionStorage.getItem("lathe.jobs.filter") || "all";
  const list = h("div", { id: "jobs" });
  const chips = h("div", { class: "chips" });
  const page = {
    title: "Jobs",
    async refresh() {
      const states = filter === "active" ? "queued,starting,running,stopping" : filter === "ended" ? "succeeded,failed,cancelled,timed_out" : undefined;
      const jobs = await api.get("/v1/jobs" + api.query({ state: states, limit: 500 }));
      render(jobs.items, list);
    },
  };
  const drawChips = () => fill(chips, [["all", "All"], ["active", "Active"], ["ended", "Ended"]].map(([id, label]) =>
    h("button", { class: "chip" + (filter === id ? " on" : ""), onclick: () => {
      filter = id;
      sessionStorage.setItem("lathe.jobs.filter", id);
      drawChips();
      page.refresh();
    } }, label)));
  drawChips();
  fill(root, h("div", { class: "page-head" }, h("h1", {}, "Jobs"), chips), list);
  return page;
}

function render(items, list) {
  const rows = items.map((j) => {
    const p = j.progress || {};
    const frac = p.total_steps > 0 ? p.step / p.total_steps : j.state === "succeeded" ? 1 : 0;
    return {
      cells: [
        h("a", { href: jobHref(j.team, j.name), class: "job-link" }, j.name),
        teamDot(j.team),
        j.experiment ? h("a", { href: experimentHref(j.team, j.experiment) }, j.experiment) : h("span", { class: "muted" }, "–"),
        stateBadge(j.state),
        h("div", { class: "progress-cell" }, bar(frac, { cls: "thin" }),
          h("span", { class: "muted" }, p.step >= 0 && p.total_steps ? p.step + "/" + p.total_steps : "")),
        fixed(p.loss, 4),
        j.eval ? fixed(j.eval.best_loss, 4) : "–",
        num(p.tokens_per_second, 0),
        ["running", "starting"].includes(j.state) && Number.isFinite(p.eta_seconds) ? duration(p.eta_seconds) : "–",
        num(j.gpu_hours, 3),
        money(j.cost),
      ],
    };
  });
  fill(list, table([{ title: "job" }, { title: "team" }, { title: "experiment" }, { title: "state" },
    { title: "progress" }, { title: "loss", cls: "num" }, { title: "best eval", cls: "num" },
    { title: "tokens/s", cls: "num" }, { title: "ETA", cls: "num" }, { title: "GPU-h", cls: "num" },
    { title: "cost", cls: "num" }], rows, { empty: "No job yet: submit one with `lathe submit job.yaml`." }));
}
