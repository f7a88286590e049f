// page_job.js: one job: its state and progress (step, loss and eval loss,
// tokens/s, time left), the loss and throughput curves, its GPUs' history
// (NVML) beside the plan's memory, the plan with its memory breakdown, the
// attempts with their GPUs and cost, the checkpoints, the event timeline
// and the trainer's log as it grows; and Cancel.

import * as api from "./api.js";
import { LineChart } from "./charts.js";
import {
  h, fill, card, stat, table, bar, stateBadge, teamDot, experimentHref, fixed, num, duration, money,
  bytes, pct, clock, ago, parseTime, nowSec, confirmDialog,
} from "./ui.js";

const FINAL = ["succeeded", "failed", "cancelled", "timed_out"];

export function mount(root, params, ctx) {
  const [team, name] = params;
  const el = {
    head: h("div", { class: "page-head job-head" }),
    notice: h("div", {}),
    stats: h("div", { class: "stats job-stats" }),
    charts: h("div", { class: "charts" }),
    plan: h("div", {}),
    attempts: h("div", {}),
    checkpoints: h("div", {}),
    events: h("div", { class: "timeline", id: "events" }),
    log: h("pre", { class: "log", id: "log" }),
  };
  const lossChart = new LineChart({ title: "Loss", height: 240, series: [
    { label: "loss", colour: "#2f6fdb" }, { label: "eval loss", colour: "#c2418a", width: 2, points: true }] });
  const tpsChart = new LineChart({ title: "Tokens per second", height: 240, series: [{ label: "tokens/s", colour: "#1f9e74" }] });
  const gpuChart = new LineChart({ title: "GPU (NVML)", height: 240, x: "time", yLabel: "utilisation %", y2Label: "memory GiB",
    yRange: [0, 100], series: [
      { label: "utilisation %", colour: "#2f6fdb" },
      { label: "memory used GiB", colour: "#c2418a", scale: "y2" },
      { label: "planned GiB", colour: "#c2418a", dash: [6, 4], width: 1.5, scale: "y2" }] });
  fill(el.charts, lossChart.el, tpsChart.el);
  fill(root, el.head, el.notice, el.stats, el.charts,
    h("div", { class: "cols" },
      card("Plan", el.plan),
      h("div", {}, card("Attempts", el.attempts), card("Checkpoints", el.checkpoints))),
    h("div", { class: "cols" }, card("Events", el.events), card("Log (last 200 lines)", el.log)));

  let lastStep = null, lastPoints = 0, gpuShown = false, job = null, pace = null;

  async function cancel() {
    const ok = await confirmDialog("Cancel " + name + "?",
      "It checkpoints and stops (SIGTERM, then SIGKILL after its grace period); a queued job ends at once.", "Cancel the job");
    if (!ok) return;
    try {
      await api.post(api.jobUrl(team, name, "/cancel"));
    } catch (e) {
      fill(el.notice, h("div", { class: "alert bad" }, "Cancel failed: " + e.message));
    }
    page.refresh();
  }

  const page = {
    title: name,
    async refresh() {
      try {
        job = await api.get(api.jobUrl(team, name));
      } catch (e) {
        if (e.status === 404) {
          fill(el.head, h("h1", {}, name));
          fill(el.notice, h("div", { class: "alert" }, "No job " + name + " of team " + team + " (deleted, or another team's)."));
          return;
        }
        throw e;
      }
      renderHead(el.head, job, ctx, cancel);
      renderNotice(el.notice, job);
      const p = job.progress;
      const step = p ? p.step : null;
      if (step !== lastStep || (FINAL.includes(job.state) && lastPoints === 0)) {
        const pr = await api.get(api.jobUrl(team, name, "/progress", { limit: 1000 }));
        lastStep = step;
        lastPoints = pr.items.length;
        const xs = pr.items.map((x) => x.step);
        pace = recentPace(pr.items);
        lossChart.set([xs, pr.items.map((x) => x.loss), pr.items.map((x) => x.eval_loss)]);
        tpsChart.set([xs, pr.items.map((x) => x.tokens_per_second)]);
      }
      // after the progress: the time left at the recent pace needs it
      renderStats(el.stats, job, pace);
      if (job.gpu) {
        if (!gpuShown) {
          el.charts.appendChild(gpuChart.el);
          gpuShown = true;
        }
        const g = await api.get(api.jobUrl(team, name, "/gpu", { limit: 500 }));
        const planned = job.gpu.memory_planned;
        gpuChart.set([g.items.map((x) => parseTime(x.at)), g.items.map((x) => x.util),
          g.items.map((x) => (x.memory_used === null ? null : x.memory_used / 2 ** 30)),
          g.items.map(() => (planned ? planned / 2 ** 30 : null))]);
      }
      renderPlan(el.plan, job);
      const [att, ev] = [await api.get(api.jobUrl(team, name, "/attempts")), await api.get(api.jobUrl(team, name, "/events"))];
      renderAttempts(el.attempts, att.items);
      renderCheckpoints(el.checkpoints, job);
      renderEvents(el.events, ev.items);
      if (job.attempt > 0) {
        try {
          const text = await api.get(api.jobUrl(team, name, "/logs", { tail: 200 }), { text: true });
          showLog(el.log, text);
        } catch (e) {
          if (e.status !== 404) throw e;
          showLog(el.log, "(no output yet)");
        }
      } else {
        showLog(el.log, "(the job has not started)");
      }
    },
    destroy() {
      lossChart.destroy();
      tpsChart.destroy();
      gpuChart.destroy();
    },
  };
  return page;
}

function renderHead(el, j, ctx, cancel) {
  const canCancel = ctx.canWrite && !FINAL.includes(j.state) && j.state !== "stopping";
  fill(el,
    h("div", {}, h("h1", {}, j.name, " ", stateBadge(j.state)),
      h("div", { class: "meta" }, teamDot(j.team),
        j.experiment ? h("span", {}, "experiment ", h("a", { href: experimentHref(j.team, j.experiment) }, j.experiment)) : null,
        h("span", {}, "priority " + (j.priority_class || "default")),
        h("span", {}, "submitted " + ago(parseTime(j.created_at))),
        j.finished_at ? h("span", {}, "ended " + clock(parseTime(j.finished_at))) : null)),
    h("div", { class: "spacer" }),
    canCancel ? h("button", { class: "danger", id: "cancel", onclick: cancel }, "Cancel job") : null);
}

function renderNotice(el, j) {
  if (j.state === "queued") fill(el, h("div", { class: "alert" }, h("strong", {}, "Waiting: "), j.wait_reason || "for the scheduler's next pass"));
  else if (j.exit && FINAL.includes(j.state) && j.state !== "succeeded") {
    const what = { cancelled: "Cancelled", failed: "Failed", timed_out: "Timed out" }[j.state];
    const why = j.exit.reason && j.exit.reason !== j.state ? ": " + j.exit.reason : "";
    const code = j.exit.code !== null && j.exit.code !== undefined ? " (the trainer's exit code " + j.exit.code + ")" : "";
    fill(el, h("div", { class: j.state === "cancelled" ? "alert" : "alert bad" }, what + why + code + ". The events below say what happened."));
  }
  else if (j.state === "succeeded" && j.adapter) fill(el, h("div", { class: "alert ok" }, "Adapter: ", h("code", {}, j.adapter)));
  else fill(el);
}

// Steps per second over the last points of the current run (for a time
// left when the trainer reports none).
function recentPace(items) {
  const pts = items.filter((x) => x.at).slice(-30);
  if (pts.length < 2) return null;
  const a = pts[0], b = pts[pts.length - 1];
  const dt = parseTime(b.at) - parseTime(a.at), ds = b.step - a.step;
  return dt > 0 && ds > 0 ? ds / dt : null;
}

function timeLeft(j, pace) {
  const p = j.progress || {};
  if (!["running", "starting"].includes(j.state)) return ["–", ""];
  if (Number.isFinite(p.eta_seconds) && p.eta_seconds >= 0) return [duration(p.eta_seconds), "the trainer's estimate"];
  if (pace && p.total_steps > p.step) return ["~" + duration((p.total_steps - p.step) / pace), "at " + num(pace, 1) + " steps/s lately"];
  return ["–", ""];
}

function renderStats(el, j, pace) {
  const p = j.progress || {};
  const frac = p.total_steps > 0 ? p.step / p.total_steps : j.state === "succeeded" ? 1 : 0;
  const plan = j.plan || {};
  const pl = j.placement;
  fill(el,
    h("div", { class: "stat wide" }, h("div", { class: "stat-label" }, "progress"),
      h("div", { class: "stat-value" }, p.step >= 0 ? p.step + (p.total_steps ? " / " + p.total_steps : "") : "–"),
      bar(frac), h("div", { class: "stat-sub" }, p.epoch ? "epoch " + fixed(p.epoch, 2) : pct(frac))),
    stat("loss", fixed(p.loss, 4), j.eval ? "eval " + fixed(j.eval.loss, 4) + " · best " + fixed(j.eval.best_loss, 4) + " @" + j.eval.best_step : "no eval yet"),
    stat("tokens/s", num(p.tokens_per_second, 0), p.learning_rate ? "lr " + p.learning_rate.toExponential(2) : ""),
    stat("time left", timeLeft(j, pace)[0], timeLeft(j, pace)[1] || (p.at ? "updated " + ago(parseTime(p.at)) : "")),
    stat("cost", money(j.cost), num(j.gpu_hours, 3) + " GPU-h" + (plan.cost_basis === "run" ? " · plan " + money(plan.cost) : "")),
    stat("placement", pl ? (pl.gpu_type ? pl.gpus.length + " × " + pl.gpu_type : "CPU slot") : "–",
      pl ? pl.node + (pl.gpus && pl.gpus.length ? " GPU " + pl.gpus.join(",") : "") + (pl.share ? " · " + pct(pl.share) + " shared" : "") : "not placed"),
    j.gpu ? stat("GPU use", num(j.gpu.util_avg, 0) + "%", "peak " + bytes(j.gpu.memory_peak) + " · plan " + bytes(j.gpu.memory_planned)) : null);
}

const TERM_NAMES = {
  base_weights_quantised: "base weights (quantised)", base_weights: "base weights", adapter_weights: "adapter",
  gradients: "gradients", optimizer_states: "optimizer", optimizer_states_paged: "optimizer (paged)",
  optimizer_step_temp: "optimizer step", sharding_buffers: "sharding", activations: "activations",
  layer_backward: "layer backward", logits_and_loss: "logits and loss", lm_head_gradient: "LM head gradient",
  weight_temporaries: "weight temporaries", framework: "framework", allocator_slack: "allocator slack", cuda_context: "CUDA context",
};
const TERM_COLOURS = ["#2f6fdb", "#7a5bd6", "#1f9e74", "#b8a11f", "#d9822b", "#c2418a", "#3a9fbf", "#d64545", "#5d8f2f", "#8c6d4f", "#9aa3ad"];

function renderPlan(el, j) {
  const p = j.plan;
  if (!p) return fill(el, h("p", { class: "muted" }, "No plan stored."));
  const m = p.memory || {};
  const terms = m.terms_gib || {};
  const inPeak = (m.in_peak || Object.keys(terms)).filter((k) => terms[k] > 0);
  const peak = p.per_gpu_gib || inPeak.reduce((a, k) => a + terms[k], 0);
  const gpuMem = p.gpu_memory_gib || peak;
  const stack = h("div", { class: "membar", title: "the plan's peak memory of one GPU, by term" },
    inPeak.map((k, i) => h("div", { class: "seg", style: { width: (terms[k] / gpuMem * 100).toFixed(2) + "%", background: TERM_COLOURS[i % TERM_COLOURS.length] },
      title: (TERM_NAMES[k] || k) + ": " + num(terms[k], 2) + " GiB" })));
  const actual = j.gpu && j.gpu.memory_peak ? j.gpu.memory_peak / 2 ** 30 : null;
  if (actual !== null) stack.appendChild(h("div", { class: "marker", style: { left: Math.min(100, actual / gpuMem * 100) + "%" }, title: "measured peak " + num(actual, 1) + " GiB" }));
  fill(el,
    h("dl", { class: "kv" },
      kv("method", (p.method || "") + (p.quant && p.quant !== "none" ? " · " + p.quant : "")),
      kv("GPUs", p.gpus + " × " + p.gpu_type + (p.nodes > 1 ? " on " + p.nodes + " nodes" : "")),
      kv("strategy", p.strategy + (p.tensor_parallel > 1 ? " · TP " + p.tensor_parallel : "") + (p.data_parallel > 1 ? " · DP " + p.data_parallel : "")),
      kv("batch", "micro-batch " + p.micro_batch + " × " + p.gradient_accumulation + " accumulation" + (p.gradient_checkpointing ? " · gradient checkpointing" : "")),
      kv("memory per GPU", num(peak, 1) + " GiB of " + num(gpuMem, 0) + " GiB" + (actual !== null ? " · measured " + num(actual, 1) + " GiB" : "")),
      kv("speed", num(p.tokens_per_second, 0) + " tokens/s · " + (p.steps ? p.steps + " steps" : "steps unknown")),
      kv("estimate", (p.seconds ? duration(p.seconds) + " · " : "") + num(p.gpu_hours, 3) + " GPU-h · " + money(p.cost) + (p.cost_basis === "run" ? "" : " per 1000 steps"))),
    h("div", { class: "mem-title" }, "memory breakdown at the peak (", m.peak_phase || "peak", ")"),
    stack,
    h("div", { class: "mem-legend" }, inPeak.map((k, i) => h("span", { class: "legend-item" },
      h("span", { class: "swatch", style: { background: TERM_COLOURS[i % TERM_COLOURS.length] } }),
      (TERM_NAMES[k] || k) + " " + num(terms[k], 2)))));
}

function kv(k, v) {
  return [h("dt", {}, k), h("dd", {}, v)];
}

function renderAttempts(el, items) {
  fill(el, table([{ title: "#" }, { title: "started" }, { title: "ran", cls: "num" }, { title: "where" },
    { title: "GPU-h", cls: "num" }, { title: "cost", cls: "num" }, { title: "ended" }],
  items.map((a) => {
    const s = parseTime(a.started_at), e = a.ended_at ? parseTime(a.ended_at) : nowSec();
    return { cells: [String(a.number), clock(s), duration(e - s),
      (a.node || "–") + (a.gpus && a.gpus.length ? " [" + a.gpus.join(",") + "]" : "") + (a.gpus_held && a.gpus && a.gpus_held < a.gpus.length ? " · " + pct(a.gpus_held / a.gpus.length) : ""),
      num(a.gpu_hours, 3), money(a.cost),
      a.ended_at ? (a.reason || "ended") + (a.exit_code !== null ? " (" + a.exit_code + ")" : "") : h("span", { class: "badge st-running" }, "running")] };
  }), { empty: "No attempt yet." }));
}

function renderCheckpoints(el, j) {
  const cks = j.checkpoints || [];
  const best = j.eval ? j.eval.best_step : null;
  fill(el, cks.length ? h("ul", { class: "checkpoints" }, cks.slice(-8).reverse().map((c) =>
    h("li", {}, h("span", { class: "ck-step" }, "step " + c.step), c.step === best ? h("span", { class: "badge st-ok" }, "best eval") : null,
      h("code", {}, c.path), h("span", { class: "muted" }, clock(parseTime(c.at))))))
    : h("p", { class: "muted" }, "No checkpoint yet."));
}

const EVENT_CLASS = { failed: "ev-bad", timed_out: "ev-bad", preempting: "ev-warn", preempted: "ev-warn", retrying: "ev-warn",
  replanned: "ev-warn", budget: "ev-warn", succeeded: "ev-ok", checkpoint: "ev-muted", cancelled: "ev-muted" };

function renderEvents(el, items) {
  fill(el, items.slice().reverse().map((e) => h("div", { class: "event " + (EVENT_CLASS[e.type] || "") },
    h("div", { class: "ev-time" }, clock(parseTime(e.at))),
    h("div", { class: "ev-body" }, h("span", { class: "ev-type" }, e.type), h("span", { class: "ev-actor" }, e.actor),
      h("div", { class: "ev-msg" }, e.message)))));
}

function showLog(el, text) {
  const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
  if (el.textContent !== text) el.textContent = text;
  if (atBottom) el.scrollTop = el.scrollHeight;
}
