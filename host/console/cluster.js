// Cluster: the live workers of this server's cluster with their rank, address and state, and
// what the one answering is running for the others. Every worker serves the same methods (the
// registry is shared), so the method list is the cluster's.

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
    if (e.code === "FAILED_PRECONDITION") {
      fill("cluster-status", "This server runs alone (it was not started with --cluster).");
    } else {
      showError("cluster-status", e);
    }
    return;
  }
  const workers = answer.workers || [];
  fill("cluster-status",
    `${workers.length} live worker(s), all serving the same methods. This one is ${answer.this}, `
    + `running ${answer.serving} call(s) for other workers now.`);
  table.hidden = false;
  fill(table.tBodies[0], workers.map((w) => el("tr", { dataset: { worker: w.name } },
    el("td", {}, w.name === answer.this ? `${w.name} (this one)` : w.name),
    el("td", {}, w.rank),
    el("td", {}, `${w.ip}:${w.port}`),
    el("td", {}, w.draining ? "draining: finishing its calls, taking no new ones" : "serving"),
    el("td", {}, new Date(w.joined_ms).toLocaleString()))));
}
