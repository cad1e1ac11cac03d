// Upload: drop or choose a `.wasm` component, name it, pick the export of a multi-method
// component (the server names them when it needs one chosen), and see the new version.

import { api } from "./api.js";
import { $, el, fill, showError, size } from "./dom.js";

let bytes = null;

export function wireUpload() {
  const zone = $("drop-zone");
  const input = $("upload-file");
  input.addEventListener("change", () => input.files[0] && choose(input.files[0]));
  for (const type of ["dragenter", "dragover"]) {
    zone.addEventListener(type, (event) => {
      event.preventDefault();
      zone.classList.add("over");
    });
  }
  for (const type of ["dragleave", "drop"]) zone.addEventListener(type, () => zone.classList.remove("over"));
  zone.addEventListener("drop", (event) => {
    event.preventDefault();
    const file = event.dataTransfer.files[0];
    if (file) choose(file);
  });
  $("upload-form").addEventListener("submit", (event) => {
    event.preventDefault();
    upload();
  });
}

async function choose(file) {
  showError("upload-error", null);
  fill("upload-result");
  $("export-choice").hidden = true;
  fill("upload-export");
  bytes = new Uint8Array(await file.arrayBuffer());
  fill("drop-text", `${file.name} (${size(bytes.length)})`);
  const name = $("upload-name");
  if (!name.value) name.value = file.name.replace(/\.(component\.)?wasm$/, "").replace(/[^A-Za-z0-9_.-]/g, "_").replace(/^[_.-]+/, "");
}

/** The exports a refusal names: "the component exports several methods (a, b); choose one…". */
function exportsNamed(message) {
  const match = /exports several methods \(([^)]*)\)/.exec(message);
  return match ? match[1].split(",").map((s) => s.trim()).filter(Boolean) : null;
}

async function upload() {
  showError("upload-error", null);
  fill("upload-result");
  const name = $("upload-name").value.trim();
  if (!bytes) {
    showError("upload-error", { code: "INVALID_ARGUMENT", message: "choose a .wasm component first" });
    return;
  }
  if (!$("upload-name").checkValidity() || !name) {
    showError("upload-error", { code: "INVALID_ARGUMENT", message: "a method name is 1 to 128 characters from A-Z, a-z, 0-9, _, - and ., starting with a letter or digit" });
    return;
  }
  const exportName = $("export-choice").hidden ? null : $("upload-export").value;
  const button = $("upload-submit");
  button.disabled = true;
  fill("upload-progress", `uploading ${size(bytes.length)}; the server compiles it…`);
  try {
    const info = await api.register(name, bytes, exportName);
    fill("upload-progress");
    fill("upload-result",
      el("p", { class: "ok", role: "status" }, `Registered ${info.name} version ${info.version} (versions ${info.versions.join(", ")}). `,
        el("a", { href: `#method/${encodeURIComponent(info.name)}/${info.version}` }, "Open it")));
  } catch (e) {
    fill("upload-progress");
    const exports = e.code === "INVALID_ARGUMENT" ? exportsNamed(e.message) : null;
    if (exports && $("export-choice").hidden) {
      fill("upload-export", exports.map((x) => el("option", { value: x, selected: x === name }, x)));
      $("export-choice").hidden = false;
      showError("upload-error", { code: "CHOOSE AN EXPORT", message: `this component has ${exports.length} methods; pick one and upload again` });
    } else {
      showError("upload-error", e);
    }
  } finally {
    button.disabled = false;
  }
}
