// The method list (with search) and one method's page: versions, digest, size, signature, doc,
// and deleting a version.

import { api } from "./api.js";
import { $, el, fill, showError, size } from "./dom.js";
import { shapeText } from "./tensors.js";
import { showTryIt } from "./tryit.js";

let all = [];

export async function showMethods() {
  fill("methods-status", "Loading…");
  try {
    all = (await api.methods()).methods;
    fill("methods-status", all.length === 0 ? "No methods yet: upload one." : `${all.length} method(s)`);
  } catch (e) {
    all = [];
    showError("methods-status", e);
  }
  renderList();
}

export function wireMethods() {
  $("search").addEventListener("input", renderList);
  $("version-select").addEventListener("change", () => {
    location.hash = `#method/${encodeURIComponent(current.name)}/${$("version-select").value}`;
  });
  $("delete-version").addEventListener("click", deleteVersion);
}

function signatureLine(signature) {
  const side = (specs) => specs.map((s) => `${s.name}: ${s.dtype}${shapeText(s.shape) === "any shape" ? "" : shapeText(s.shape)}`).join(", ");
  return `(${side(signature.inputs)}) → (${side(signature.outputs)})`;
}

function renderList() {
  const query = $("search").value.trim().toLowerCase();
  const shown = all.filter((m) => m.name.toLowerCase().includes(query));
  fill(
    "method-list",
    shown.map((m) =>
      el("li", { dataset: { method: m.name } },
        el("a", { class: "name", href: `#method/${encodeURIComponent(m.name)}` }, m.name),
        el("span", { class: "muted" }, ` v${m.version}`),
        el("p", { class: "sig" }, signatureLine(m.signature)),
        m.signature.doc ? el("p", {}, m.signature.doc) : null,
      ),
    ),
  );
  if (all.length > 0 && shown.length === 0) fill("methods-status", `No method matches “${query}”.`);
}

let current = null;

export async function showMethod(name, version) {
  fill("method-title", name);
  fill("method-doc");
  fill("method-facts");
  showError("try-error", null);
  try {
    current = await api.method(name, version);
  } catch (e) {
    current = null;
    showError("method-doc", e);
    return;
  }
  const info = current;
  fill("method-doc", info.signature.doc || "");
  fill(
    "version-select",
    info.versions.map((v) => el("option", { value: v, selected: v === info.version }, `${v}${v === Math.max(...info.versions) ? " (newest)" : ""}`)),
  );
  const facts = [
    ["version", `${info.version} of ${info.versions.join(", ")}`],
    ["digest", info.digest],
    ["size", `${size(info.size)} (${info.size} bytes)`],
    ["export", info.export],
    ["registered", new Date(info.created_ms).toLocaleString()],
  ];
  fill("method-facts", facts.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  const rows = (kind, specs) =>
    specs.map((s) => el("tr", {}, el("td", {}, kind), el("td", {}, s.name), el("td", {}, s.dtype), el("td", {}, shapeText(s.shape))));
  fill($("method-signature").tBodies[0], rows("input", info.signature.inputs), rows("output", info.signature.outputs));
  showTryIt(info);
}

async function deleteVersion() {
  if (!current) return;
  const { name, version, versions } = current;
  const only = versions.length === 1;
  const question = only
    ? `Delete ${name}? Version ${version} is its only version, so the method goes away.`
    : `Delete version ${version} of ${name}? Versions ${versions.filter((v) => v !== version).join(", ")} stay.`;
  if (!confirm(question)) return;
  try {
    await api.deleteVersion(name, version);
  } catch (e) {
    showError("try-error", e);
    return;
  }
  location.hash = only ? "#methods" : `#method/${encodeURIComponent(name)}`;
}
