// charts.js: line charts on uPlot (lib/console/node_modules/uplot, built
// into lathe with its MIT licence at /vendor/uplot/LICENSE). A chart is made
// once and given new data on every refresh (no flicker, the zoom kept until
// the user double-clicks); it follows its box's width. Without uPlot (a
// build without the npm files) each chart says how to get it.

import { h } from "./ui.js";

export function chartsAvailable() {
  return typeof window.uPlot === "function";
}

// opts: {title, height, x: "step" | "time", series: [{label, colour,
// dash, width, scale, fill}], yLabel, y2Label, yRange: [min, max]}.
export class LineChart {
  constructor(opts) {
    this.opts = opts;
    this.el = h("div", { class: "chart" }, h("div", { class: "chart-title" }, opts.title));
    this.box = h("div", { class: "chart-box" });
    this.el.appendChild(this.box);
    this.plot = null;
    this.key = "";
    if (!chartsAvailable()) {
      this.box.appendChild(h("div", { class: "chart-missing" },
        "Charts need uPlot, which this lathe was built without: run scripts/install-deps.sh and build lathe again."));
    }
    this.resize = new ResizeObserver(() => this.fit());
    this.resize.observe(this.box);
  }

  fit() {
    if (!this.plot) return;
    const w = Math.max(200, this.box.clientWidth);
    if (Math.abs(w - this.plot.width) > 2) this.plot.setSize({ width: w, height: this.opts.height || 220 });
  }

  // data: [xs, ys1, ys2, ...] (null for missing points); series: the
  // series' descriptions (when they change, the chart is made again).
  set(data, series) {
    if (!chartsAvailable()) return;
    series = series || this.opts.series;
    const key = JSON.stringify(series.map((s) => [s.label, s.colour, s.dash, s.scale]));
    if (this.plot && key === this.key) {
      this.plot.setData(data, true);
      return;
    }
    if (this.plot) this.plot.destroy();
    this.key = key;
    this.plot = new window.uPlot(this.config(series), data, this.box);
  }

  config(series) {
    const o = this.opts;
    const time = o.x === "time";
    const scales = { x: { time } };
    if (o.yRange) scales.y = { range: o.yRange };
    const axes = [
      { stroke: "#5b6670", grid: { stroke: "#eef1f4" }, ticks: { stroke: "#dde2e7" },
        label: time ? null : "step", labelSize: time ? 0 : 18 },
      { stroke: "#5b6670", grid: { stroke: "#eef1f4" }, ticks: { stroke: "#dde2e7" },
        label: o.yLabel || null, size: 56, labelSize: o.yLabel ? 18 : 0 },
    ];
    if (series.some((s) => s.scale === "y2")) {
      scales.y2 = {};
      axes.push({ scale: "y2", side: 1, stroke: "#5b6670", grid: { show: false }, label: o.y2Label || null, size: 60 });
    }
    return {
      width: Math.max(200, this.box.clientWidth || 600),
      height: o.height || 220,
      scales,
      axes,
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      series: [
        { label: time ? "time" : "step", value: time ? "{MMM} {D} {HH}:{mm}:{ss}" : (u, v) => (v === null ? "–" : v.toFixed(0)) },
        ...series.map((s) => ({
          label: s.label,
          stroke: s.colour,
          width: s.width || 2,
          dash: s.dash || undefined,
          scale: s.scale || "y",
          fill: s.fill || undefined,
          spanGaps: true,
          points: { show: s.points === true },
          value: (u, v) => (v === null || v === undefined ? "–" : Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(4)),
        })),
      ],
    };
  }

  destroy() {
    this.resize.disconnect();
    if (this.plot) this.plot.destroy();
  }
}

// Joins series sampled at different x (each [[x, y], ...]) into uPlot's
// aligned columns: the sorted union of xs, null where a series has none.
export function align(lists) {
  const xs = [...new Set(lists.flatMap((l) => l.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  const cols = lists.map((l) => {
    const col = new Array(xs.length).fill(null);
    for (const [x, y] of l) col[index.get(x)] = y;
    return col;
  });
  return [xs, ...cols];
}
