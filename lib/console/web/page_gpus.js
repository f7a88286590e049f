// page_gpus.js: the cluster's GPU map (GET /v1/nodes): nodes, their NVLink
// groups, and each GPU coloured by the team and job on it. A shared GPU is
// split into its jobs' parts; a free GPU is white, a free GPU that no
// waiting job's shape can use (its node has too few free GPUs) is hatched
// as fragmented. GPUs NVML samples show their utilisation, memory, power
// and temperature.

import * as api from "./api.js";
import { h, fill, teamColour, jobColour, jobHref, bytes, num, pct, stat } from "./ui.js";

export function mount(root, params, ctx) {
  const summary = h("div", { class: "stats" });
  const legend = h("div", { class: "legend" });
  const map = h("div", { class: "gpu-map", id: "gpu-map" });
  fill(root,
    h("div", { class: "page-head" }, h("h1", {}, "GPUs"),
      h("p", { class: "muted" }, "Every GPU of the cluster, by node and NVLink group, coloured by the team and job using it.")),
    summary, legend, map);

  return {
    title: "GPUs",
    async refresh() {
      const [nodes, teams] = [await api.get("/v1/nodes"), await ctx.loadTeams()];
      render(nodes, teams, summary, legend, map, ctx);
    },
  };
}

function render(nodes, teams, summary, legend, map, ctx) {
  let total = 0, used = 0, free = 0, frag = 0, down = 0;
  for (const n of nodes.items)
    for (const g of n.gpus) {
      total++;
      if (n.state !== "ready") down++;
      else if (g.jobs.length) used++;
      else if (g.fragmented) frag++;
      else free++;
    }
  fill(summary,
    stat("GPUs", num(total), nodes.items.length + " node" + (nodes.items.length === 1 ? "" : "s") + " · " + nodes.source),
    stat("in use", num(used), total ? pct(used / total) + " of all" : ""),
    stat("free", num(free + frag), frag ? frag + " fragmented" : "none fragmented"),
    down ? stat("not ready", num(down), "draining or down") : null,
    nodes.cpu_mode ? stat("CPU slots", nodes.cpu_slots_in_use + " / " + nodes.cpu_slots, "no GPU: jobs run in CPU slots") : null);
  fill(legend,
    teams.map((t) => h("span", { class: "legend-item" }, h("span", { class: "swatch", style: { background: teamColour(t.name) } }), t.name)),
    h("span", { class: "legend-item" }, h("span", { class: "swatch free" }), "free"),
    h("span", { class: "legend-item" }, h("span", { class: "swatch frag" }), "fragmented"));
  if (nodes.cpu_mode) {
    fill(map, h("div", { class: "empty-state" }, "This server has no GPU: jobs run in its " + nodes.cpu_slots + " CPU slots (",
      nodes.cpu_slots_in_use + " in use). The Queue and Jobs pages show them."));
    return;
  }
  fill(map, nodes.items.map((n) => nodeCard(n, ctx)));
}

function nodeCard(n, ctx) {
  const groups = new Map();
  for (const g of n.gpus) {
    if (!groups.has(g.nvlink_group)) groups.set(g.nvlink_group, []);
    groups.get(g.nvlink_group).push(g);
  }
  const freeCount = n.gpus.filter((g) => !g.jobs.length).length;
  const linked = [...groups.values()].some((l) => l.length > 1);
  return h("section", { class: "node" + (n.state !== "ready" ? " node-" + n.state : ""), dataset: { node: n.name } },
    h("div", { class: "node-head" },
      h("span", { class: "node-name" }, n.name),
      h("span", { class: "node-type" }, n.gpu_type),
      n.state !== "ready" ? h("span", { class: "badge st-bad" }, n.state) : null,
      h("span", { class: "muted" }, freeCount + " of " + n.gpus.length + " free"),
      n.rack && n.rack !== n.name ? h("span", { class: "muted" }, "rack " + n.rack) : null),
    h("div", { class: "node-note" }, n.virtual ? "virtual GPUs: the work runs on the CPU" : "this machine's GPUs, sampled through NVML"),
    linked ? h("div", { class: "groups" }, [...groups.entries()].map(([gi, list]) =>
      h("div", { class: "nvgroup" + (list.length > 1 ? "" : " solo") },
        h("div", { class: "nvgroup-label" }, list.length > 1 ? "NVLink " + gi : "no NVLink"),
        h("div", { class: "gpus" }, list.map((g) => gpuTile(n, g, ctx))))))
      : h("div", { class: "gpus" }, n.gpus.map((g) => gpuTile(n, g, ctx))));
}

function gpuTile(n, g, ctx) {
  const s = g.sample;
  const taken = g.jobs.reduce((a, j) => a + j.share, 0);
  const cls = "gpu" + (g.jobs.length ? " busy" : g.fragmented ? " frag" : " free") + (g.jobs.length > 1 || (g.jobs.length && taken < 0.999) ? " shared" : "");
  const parts = g.jobs.map((j) => {
    const label = j.name || "(another team's job)";
    const part = h(j.name ? "a" : "div", {
      class: "part", href: j.name ? jobHref(j.team, j.name) : null,
      style: { flexGrow: String(j.share), background: jobColour(j.team, j.name || "") },
      title: label + " · team " + j.team + (j.share < 0.999 ? " · " + pct(j.share) + " of the GPU (shared)" : ""),
    },
    h("span", { class: "part-job" }, label),
    h("span", { class: "part-team" }, j.share < 0.999 ? pct(j.share) : j.team));
    return part;
  });
  if (g.jobs.length && taken < 0.999) parts.push(h("div", { class: "part rest", style: { flexGrow: String(1 - taken) }, title: pct(1 - taken) + " of the GPU free" }, h("span", { class: "part-team" }, pct(1 - taken) + " free")));
  const body = g.jobs.length ? h("div", { class: "parts" }, parts)
    : h("div", { class: "idle" }, g.fragmented ? "fragmented" : "free");
  return h("div", { class: cls, dataset: { gpu: n.name + "/" + g.index }, title: tileTitle(n, g) },
    h("div", { class: "gpu-index" }, "GPU " + g.index),
    body,
    s ? h("div", { class: "sample" },
      h("div", { class: "util" }, h("div", { class: "util-fill", style: { width: Math.max(0, Math.min(100, s.util || 0)) + "%" } })),
      h("div", { class: "sample-text" }, num(s.util, 0) + "% busy" + (s.temperature !== null ? " · " + num(s.temperature, 0) + "°C" : "")),
      h("div", { class: "sample-text" }, bytes(s.memory_used) + (s.power !== null ? " · " + num(s.power, 0) + " W" : ""))) : null);
}

function tileTitle(n, g) {
  const parts = [n.name + " GPU " + g.index];
  if (g.model) parts.push(g.model);
  if (g.uuid) parts.push(g.uuid);
  if (g.fragmented) parts.push("free, but no waiting job's shape fits on this node's free GPUs");
  if (g.sample) parts.push("NVML: " + num(g.sample.util, 0) + "% busy, " + bytes(g.sample.memory_used) + " of " + bytes(g.sample.memory_total));
  return parts.join("\n");
}
