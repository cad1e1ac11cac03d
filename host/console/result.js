// An answer shown for a person: every output as a table, a 1-D numeric output also as a chart,
// a 2-D one (or 3-D with 1, 3 or 4 channels) also as an image.

import { lineChart } from "./charts.js";
import { el } from "./dom.js";
import { values } from "./tensors.js";

const MAX_CELLS = 1000;

export function renderOutputs(outputs, specs) {
  return outputs.map((tensor, i) => {
    const name = specs[i] ? specs[i].name : `output ${i}`;
    const data = values(tensor);
    return el("div", { class: "output", dataset: { output: name } },
      el("h3", {}, `${name}: ${tensor.dtype} [${tensor.shape.join(", ")}]`),
      picture(tensor, data),
      table(tensor, data),
    );
  });
}

function numeric(data) {
  return data.length > 0 && data.every((v) => typeof v === "number");
}

function picture(tensor, data) {
  if (!numeric(data)) return null;
  const shape = tensor.shape;
  if (shape.length === 1 && data.length >= 2) {
    const chart = lineChart([{ values: data, className: "series-1" }], { title: `chart of ${data.length} values`, xLabel: `index 0…${data.length - 1}` });
    return el("div", { class: "chart" }, chart);
  }
  const channels = shape.length === 3 ? shape[2] : 1;
  if ((shape.length === 2 || (shape.length === 3 && [1, 3, 4].includes(channels))) && shape[0] * shape[1] <= 512 * 512) {
    return image(shape[0], shape[1], channels, data);
  }
  return null;
}

function image(height, width, channels, data) {
  const canvas = el("canvas", { width, height, class: "result-image", role: "img", "aria-label": `image ${height}×${width}` });
  const lo = Math.min(...data);
  const hi = Math.max(...data);
  const scale = hi > lo ? 255 / (hi - lo) : 0;
  const context = canvas.getContext("2d");
  const pixels = context.createImageData(width, height);
  for (let p = 0; p < width * height; p++) {
    for (let c = 0; c < 4; c++) {
      let v;
      if (c === 3) v = channels === 4 ? data[p * 4 + 3] : hi;
      else v = channels === 1 ? data[p] : data[p * channels + c];
      pixels.data[p * 4 + c] = c === 3 && channels !== 4 ? 255 : Math.round((v - lo) * scale);
    }
  }
  context.putImageData(pixels, 0, 0);
  return canvas;
}

function table(tensor, data) {
  const shown = data.slice(0, MAX_CELLS);
  const columns = tensor.shape.length >= 2 ? tensor.shape[tensor.shape.length - 1] : Math.max(1, shown.length);
  const rows = [];
  for (let start = 0; start < shown.length; start += columns) {
    rows.push(el("tr", {}, shown.slice(start, start + columns).map((v) => el("td", {}, String(v)))));
  }
  if (shown.length === 0) rows.push(el("tr", {}, el("td", {}, "(no elements)")));
  return [
    el("table", { class: "grid result", "aria-label": "values" }, el("tbody", {}, rows)),
    data.length > MAX_CELLS ? el("p", { class: "muted" }, `the first ${MAX_CELLS} of ${data.length} values`) : null,
  ];
}
