// Small charts drawn as SVG: no library to keep up with. A line chart of one or more series over
// time, and a line chart of a 1-D tensor's values.

const NS = "http://www.w3.org/2000/svg";
const W = 320;
const H = 120;
const PAD = { left: 34, right: 6, top: 6, bottom: 16 };

function svg(tag, attributes = {}) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attributes)) node.setAttribute(k, String(v));
  return node;
}

function label(number) {
  if (number === 0) return "0";
  const abs = Math.abs(number);
  if (abs >= 1e6 || abs < 1e-2) return number.toExponential(1);
  return abs >= 100 ? number.toFixed(0) : number.toPrecision(3);
}

/**
 * A line chart: `series` is a list of `{values: [y…], className}` sharing the x axis (0 … n-1).
 * `title` becomes the SVG's accessible name; `xLabel` is written under the axis.
 */
export function lineChart(series, { title, xLabel = "" } = {}) {
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title || "chart" });
  const all = series.flatMap((s) => s.values).filter(Number.isFinite);
  const lo = Math.min(0, ...all);
  const hi = Math.max(lo + 1e-9, ...all);
  const n = Math.max(2, ...series.map((s) => s.values.length));
  const x = (i) => PAD.left + (i / (n - 1)) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - ((v - lo) / (hi - lo)) * (H - PAD.top - PAD.bottom);
  root.append(svg("line", { class: "axis", x1: PAD.left, y1: H - PAD.bottom, x2: W - PAD.right, y2: H - PAD.bottom }));
  root.append(svg("line", { class: "axis", x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: H - PAD.bottom }));
  for (const [v, anchorY] of [[hi, PAD.top + 8], [lo, H - PAD.bottom]]) {
    const t = svg("text", { x: PAD.left - 3, y: anchorY, "text-anchor": "end" });
    t.textContent = label(v);
    root.append(t);
  }
  if (xLabel) {
    const t = svg("text", { x: W - PAD.right, y: H - 3, "text-anchor": "end" });
    t.textContent = xLabel;
    root.append(t);
  }
  for (const s of series) {
    const points = s.values
      .map((v, i) => (Number.isFinite(v) ? `${x(i).toFixed(1)},${y(v).toFixed(1)}` : null))
      .filter(Boolean);
    if (points.length === 0) continue;
    if (points.length === 1) {
      const [cx, cy] = points[0].split(",");
      root.append(svg("circle", { cx, cy, r: 2.5, class: s.className.replace("series", "bar") }));
    } else {
      root.append(svg("polyline", { points: points.join(" "), class: s.className }));
    }
  }
  return root;
}
