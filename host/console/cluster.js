// Cluster: the live workers of this server's cluster with their rank, address and what they run.

import { api } from "./api.js";
import { $, el, fill, showError } from "./dom.js";

export async function showCluster() {
  const table = $("cluster-table");
  fill("cluster-status", "Loading…");
  let answer;
  try {
    answer = await api.workers();
  } catch (e) {
    table.hidden = true;
    if (e.code === "FAILED_PRECONDITION" || e.code === "NOT_FOUND" || e.code === "UNIMPLEMENTED") {
      fill("cluster-status", "This server runs alone (not started with --cluster).");
    } else {
      showError("cluster-status", e);
    }
    return;
  }
  const workers = answer.workers || [];
  fill("cluster-status", `${workers.length} live worker(s); this one is ${answer.this}.`);
  table.hidden = false;
  fill(table.tBodies[0], workers.map((w) => el("tr", { dataset: { worker: w.name } },
    el("td", {}, w.name === answer.this ? `${w.name} (this one)` : w.name),
    el("td", {}, w.rank),
    el("td", {}, `${w.ip}:${w.port}`),
    el("td", {}, running(w)))));
}

function running(worker) {
  const parts = [];
  if (worker.serving !== undefined) parts.push(`${worker.serving} call(s) now`);
  if (Array.isArray(worker.methods)) parts.push(worker.methods.join(", "));
  return parts.join("; ") || "–";
}
