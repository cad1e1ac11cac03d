// Activity: the server's own Prometheus metrics (`GET /metrics`), read every 2 s while the page
// is open, turned into per-method calls, errors and latency percentiles over the last 10 minutes,
// drawn as charts that move as calls arrive.

import { api } from "./api.js";
import { $, duration, el, fill, showError } from "./dom.js";
import { lineChart } from "./charts.js";

const EVERY_MS = 2000;
const KEEP = (10 * 60 * 1000) / EVERY_MS;

/** Samples, oldest first: `{at, methods: Map(label → {calls, errors, buckets: [[le, count]…]})}`. */
const samples = [];
let timer = null;
let failure = null;

export function startActivity() {
  if (timer) return;
  const tick = async () => {
    try {
      samples.push({ at: Date.now(), methods: parseMetrics(await api.metrics()) });
      if (samples.length > KEEP) samples.shift();
      failure = null;
    } catch (e) {
      failure = e;
    }
    if (!$("activity").hidden) render();
  };
  tick();
  timer = setInterval(tick, EVERY_MS);
}

/** The Prometheus text → per method (`tenant/method`, or `method` for the keyless `default`). */
export function parseMetrics(text) {
  const methods = new Map();
  const entry = (labels) => {
    const name = labels.tenant && labels.tenant !== "default" ? `${labels.tenant}/${labels.method}` : labels.method;
    if (!methods.has(name)) methods.set(name, { calls: 0, errors: 0, buckets: [] });
    return methods.get(name);
  };
  for (const line of text.split("\n")) {
    const match = /^(\w+)\{(.*)\}\s+(\S+)$/.exec(line);
    if (!match) continue;
    const [, metric, rawLabels, rawValue] = match;
    const labels = parseLabels(rawLabels);
    const value = Number(rawValue);
    if (metric === "wasmrpc_calls_total" && labels.method !== undefined) {
      const m = entry(labels);
      m.calls += value;
      if (labels.code !== "OK") m.errors += value;
    } else if (metric === "wasmrpc_call_duration_seconds_bucket" && labels.method !== undefined) {
      entry(labels).buckets.push([labels.le === "+Inf" ? Infinity : Number(labels.le), value]);
    }
  }
  return methods;
}

function parseLabels(text) {
  const labels = {};
  const pattern = /(\w+)="((?:[^"\\]|\\.)*)"/g;
  let match;
  while ((match = pattern.exec(text))) labels[match[1]] = match[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
  return labels;
}

/** The q-quantile (seconds) of cumulative buckets `[[le, count]…]`, as Prometheus estimates it. */
export function quantile(q, buckets) {
  const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
  const total = sorted.length ? sorted[sorted.length - 1][1] : 0;
  if (total <= 0) return NaN;
  const rank = q * total;
  let previousLe = 0;
  let previousCount = 0;
  for (const [le, count] of sorted) {
    if (count >= rank) {
      if (le === Infinity) return previousLe;
      const inBucket = count - previousCount;
      return previousLe + (le - previousLe) * (inBucket > 0 ? (rank - previousCount) / inBucket : 0);
    }
    previousLe = le;
    previousCount = count;
  }
  return previousLe;
}

function delta(newer, older) {
  const result = new Map();
  for (const [name, now] of newer.methods) {
    const before = older ? older.methods.get(name) : undefined;
    const beforeBuckets = new Map(before ? before.buckets : []);
    // A counter that went down was reset (the server restarted): what it counts now is new.
    const since = (now, then) => (now >= then ? now - then : now);
    result.set(name, {
      calls: since(now.calls, before ? before.calls : 0),
      errors: since(now.errors, before ? before.errors : 0),
      buckets: now.buckets.map(([le, count]) => [le, since(count, beforeBuckets.get(le) || 0)]),
    });
  }
  return result;
}

function render() {
  if (failure) {
    showError("activity-status", failure.code === "PERMISSION_DENIED"
      ? { code: failure.code, message: `${failure.message}. Use the admin key to see activity.` }
      : failure);
  }
  if (samples.length === 0) return;
  const latest = samples[samples.length - 1];
  if (!failure) fill("activity-status", `${latest.methods.size} method(s) with calls; updated ${new Date(latest.at).toLocaleTimeString()}`);
  const names = [...latest.methods.keys()].sort();
  const window = delta(latest, samples.length > 1 ? samples[0] : null);
  const perInterval = samples.slice(1).map((s, i) => delta(s, samples[i]));
  const sum = (map, field) => [...map.values()].reduce((n, m) => n + m[field], 0);
  const merged = (map) => {
    const byLe = new Map();
    for (const m of map.values()) for (const [le, c] of m.buckets) byLe.set(le, (byLe.get(le) || 0) + c);
    return [...byLe.entries()];
  };
  // The charts: every method together, or the one picked.
  const picker = $("activity-method");
  const picked = picker.value;
  const options = ["", ...names];
  if ([...picker.options].map((o) => o.value).join("\n") !== options.join("\n")) {
    fill(picker, options.map((n) => el("option", { value: n, selected: n === picked }, n || "every method")));
  }
  const only = (d) => (picked ? new Map(d.has(picked) ? [[picked, d.get(picked)]] : []) : d);
  const calls = perInterval.map((d) => sum(only(d), "calls"));
  const errors = perInterval.map((d) => sum(only(d), "errors"));
  const p50 = perInterval.map((d) => quantile(0.5, merged(only(d))) * 1000);
  const p99 = perInterval.map((d) => quantile(0.99, merged(only(d))) * 1000);
  const span = `last ${Math.round((perInterval.length * EVERY_MS) / 1000)} s`;
  const total = (list) => list.reduce((n, v) => n + v, 0);
  fill("activity-charts",
    chart("calls", `Calls per 2 s${picked ? ` (${picked})` : ""}`, [{ values: calls, className: "series-1" }, { values: errors, className: "series-2" }], span, [["l1", `calls (${total(calls)})`], ["l2", `errors (${total(errors)})`]], total(calls)),
    chart("latency", `Latency, ms${picked ? ` (${picked})` : ""}`, [{ values: p50, className: "series-1" }, { values: p99, className: "series-3" }], span, [["l1", "p50"], ["l3", "p99"]]),
  );
  fill($("activity-table").tBodies[0], names.map((name) => {
    const total = latest.methods.get(name);
    const recent = window.get(name);
    const buckets = recent && recent.calls > 0 ? recent.buckets : total.buckets;
    const q = (x) => duration(quantile(x, buckets) * 1000);
    return el("tr", { dataset: { method: name } },
      el("td", {}, name), el("td", {}, total.calls), el("td", {}, total.errors), el("td", {}, q(0.5)), el("td", {}, q(0.9)), el("td", {}, q(0.99)));
  }));
}

function chart(id, title, series, span, legend, total) {
  return el("figure", { class: "chart", dataset: { chart: id, total: total ?? "" } },
    el("h3", {}, title),
    lineChart(series, { title, xLabel: span }),
    el("figcaption", { class: "legend" }, legend.map(([cls, text]) => el("span", { class: cls }, text))));
}

export function showActivity() {
  startActivity();
  render();
}

export function wireActivity() {
  $("activity-method").addEventListener("change", render);
}
