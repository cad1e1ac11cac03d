// Tenants (the admin key only): every tenant with its quota in force and its usage.

import { api } from "./api.js";
import { $, el, fill, showError, size } from "./dom.js";

/** Whether the key in use is the admin key: the tenant list answers only to it. */
export async function isAdmin() {
  try {
    await api.tenants();
    return true;
  } catch {
    return false;
  }
}

export async function showTenants() {
  fill("tenants-status", "Loading…");
  try {
    const { tenants } = await api.tenants();
    fill("tenants-status", `${tenants.length} tenant(s)`);
    fill($("tenants-table").tBodies[0], tenants.map((t) => el("tr", { dataset: { tenant: t.name } },
      el("td", {}, t.name),
      el("td", {}, t.usage.methods),
      el("td", {}, size(t.usage.stored_bytes)),
      el("td", {}, t.quota.max_methods || "no limit"),
      el("td", {}, t.quota.calls_per_second || "no limit"),
      el("td", {}, t.quota.max_concurrent_calls),
      el("td", {}, t.keys.length))));
  } catch (e) {
    showError("tenants-status", e);
  }
}
