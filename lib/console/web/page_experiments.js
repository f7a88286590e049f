// page_experiments.js: the experiments (GET /v1/experiments) and one of
// them: its jobs' loss curves on one chart (r8 / r16 / r32 ...), their eval
// losses, what each cost, and the best job marked (the lowest eval loss,
// else the lowest training loss).

import * as api from "./api.js";
import { LineChart, align } from "./charts.js";
import {
  h, fill, table, card, stat, teamDot, stateBadge, jobHref, experimentHref, fixed, num, money, seriesColour,
} from "./ui.js";

export function mount(root, params, ctx) {
  return params.length ? detail(root, params[0], params[1], ctx) : list(root);
}

function list(root) {
  const body = h("div", { id: "experiments" });
  fill(root, h("div", { class: "page-head" }, h("h1", {}, "Experiments"),
    h("p", { class: "muted" }, "Experiments expand one job into variants (ranks, learning rates) that run side by side.")), body);
  return {
    title: "Experiments",
    async refresh() {
      const x = await api.get("/v1/experiments");
      fill(body, table([{ title: "experiment" }, { title: "team" }, { title: "jobs", cls: "num" }, { title: "states" }],
        x.items.map((e) => ({ cells: [
          h("a", { href: experimentHref(e.team, e.name), class: "exp-link" }, e.name), teamDot(e.team), String(e.jobs),
          h("span", { class: "states" }, Object.entries(e.states || {}).filter(([, n]) => n > 0).map(([s, n]) => [stateBadge(s), " " + n + " "])),
        ] })), { empty: "No experiment yet: submit a LoRAExperiment with `lathe submit`." }));
    },
  };
}

// The job's LoRA rank and learning rate, from its resolved spec.
function variant(job) {
  const s = job.spec && (job.spec.spec || job.spec);
  if (!s) return {};
  return { rank: s.lora ? s.lora.rank : null, lr: s.hyperparams ? s.hyperparams.learningRate : null };
}

// The best job: the lowest best eval loss; without evaluations, the lowest
// latest training loss.
function bestOf(jobs) {
  const withEval = jobs.filter((j) => j.eval && isFinite(j.eval.best_loss));
  if (withEval.length) return withEval.reduce((a, b) => (b.eval.best_loss < a.eval.best_loss ? b : a));
  const withLoss = jobs.filter((j) => j.progress && isFinite(j.progress.loss));
  return withLoss.length ? withLoss.reduce((a, b) => (b.progress.loss < a.progress.loss ? b : a)) : null;
}

function detail(root, team, name, ctx) {
  const head = h("div", { class: "page-head" });
  const stats = h("div", { class: "stats" });
  const rows = h("div", { id: "exp-jobs" });
  const chart = new LineChart({ title: "Loss by job (dashed: eval loss)", height: 320, series: [] });
  fill(root, head, stats, card(null, chart.el), card("Jobs", rows));
  const cache = new Map(); // job name -> {step, points, variant}

  return {
    title: name,
    async refresh() {
      const x = await api.get("/v1/experiments/" + encodeURIComponent(name) + api.query({ team }));
      const jobs = x.jobs.slice().sort((a, b) => a.name.localeCompare(b.name, "en", { numeric: true }));
      for (const j of jobs) {
        let c = cache.get(j.name);
        if (!c) {
          const full = await api.get(api.jobUrl(j.team, j.name));
          c = { step: null, points: [], variant: variant(full), planned: full.plan && full.plan.cost_basis === "run" ? full.plan.cost : null };
          cache.set(j.name, c);
        }
        const step = j.progress ? j.progress.step : null;
        if (step !== c.step) {
          c.points = (await api.get(api.jobUrl(j.team, j.name, "/progress", { limit: 500 }))).items;
          c.step = step;
        }
      }
      const best = bestOf(jobs);
      fill(head, h("h1", {}, name), h("div", { class: "meta" }, teamDot(team),
        h("span", {}, jobs.length + " jobs"), x.max_concurrent ? h("span", {}, "at most " + x.max_concurrent + " at once") : null));
      const cost = jobs.reduce((a, j) => a + (j.cost || 0), 0);
      const planned = jobs.reduce((a, j) => a + (cache.get(j.name).planned || 0), 0);
      fill(stats,
        stat("best", best ? best.name : "–", best ? (best.eval ? "eval loss " + fixed(best.eval.best_loss, 4) : "loss " + fixed(best.progress.loss, 4)) : "no loss yet"),
        stat("cost", money(cost), planned ? "planned " + money(planned) : ""),
        stat("GPU-hours", num(jobs.reduce((a, j) => a + (j.gpu_hours || 0), 0), 3)),
        stat("states", h("span", { class: "states" }, Object.entries(x.states || {}).filter(([, n]) => n > 0).map(([s, n]) => [stateBadge(s), " " + n + " "]))));
      const series = [], lists = [];
      jobs.forEach((j, i) => {
        const pts = cache.get(j.name).points;
        const colour = seriesColour(i);
        const mark = best && best.name === j.name ? " ★" : "";
        series.push({ label: j.name + mark, colour, width: mark ? 3 : 2 });
        lists.push(pts.filter((p) => p.loss !== null).map((p) => [p.step, p.loss]));
        if (pts.some((p) => p.eval_loss !== null)) {
          series.push({ label: j.name + " eval", colour, dash: [5, 4], width: 1.5, points: true });
          lists.push(pts.filter((p) => p.eval_loss !== null).map((p) => [p.step, p.eval_loss]));
        }
      });
      if (lists.length) chart.set(align(lists), series);
      fill(rows, table([{ title: "" }, { title: "job" }, { title: "rank", cls: "num" }, { title: "lr", cls: "num" }, { title: "state" },
        { title: "step", cls: "num" }, { title: "loss", cls: "num" }, { title: "best eval", cls: "num" }, { title: "tokens/s", cls: "num" },
        { title: "GPU-h", cls: "num" }, { title: "cost", cls: "num" }, { title: "planned", cls: "num" }],
      jobs.map((j, i) => {
        const c = cache.get(j.name), p = j.progress || {}, isBest = best && best.name === j.name;
        return { cls: isBest ? "best" : "", cells: [
          h("span", { class: "swatch", style: { background: seriesColour(i) } }),
          h("span", {}, h("a", { href: jobHref(j.team, j.name), class: "job-link" }, j.name), isBest ? h("span", { class: "badge st-ok best-badge" }, "★ best") : null),
          c.variant.rank ? "r" + c.variant.rank : "–", c.variant.lr ? String(c.variant.lr) : "–", stateBadge(j.state),
          p.step >= 0 ? p.step + (p.total_steps ? "/" + p.total_steps : "") : "–", fixed(p.loss, 4),
          j.eval ? fixed(j.eval.best_loss, 4) : "–", num(p.tokens_per_second, 0), num(j.gpu_hours, 3), money(j.cost),
          c.planned !== null ? money(c.planned) : "–",
        ] };
      })));
    },
    destroy() {
      chart.destroy();
    },
  };
}
