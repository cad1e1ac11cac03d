// "Try it": a form generated from a method's signature, one field per input, checked as it is
// typed; the call through the v1 API; the answer, the time it took, or the error with its code;
// and the same call as curl and Python lines to copy.

import { api, key } from "./api.js";
import { $, duration, el, fill, showError } from "./dom.js";
import { parse, sample, shapeText } from "./tensors.js";
import { renderOutputs } from "./result.js";

let method = null;

export function wireTryIt() {
  $("try-form").addEventListener("submit", (event) => {
    event.preventDefault();
    call();
  });
  $("try-timeout").addEventListener("input", updateSnippets);
}

export function showTryIt(info) {
  method = info;
  showError("try-error", null);
  fill("try-result");
  fill("try-time");
  fill(
    "try-fields",
    info.signature.inputs.map((spec, i) => {
      const id = `input-${i}`;
      const hint = el("p", { class: "field-hint muted", id: `${id}-hint` }, `${spec.dtype}, ${shapeText(spec.shape)}`);
      const field = el("textarea", {
        id, name: spec.name, rows: 2, spellcheck: "false", "aria-describedby": `${id}-hint`,
        dataset: { input: spec.name },
      });
      field.value = sample(spec, i);
      field.addEventListener("input", () => {
        check(field, spec, hint);
        updateSnippets();
      });
      return el("div", { class: "field" }, el("label", { for: id }, `${spec.name}`), field, hint);
    }),
  );
  if (info.signature.inputs.length === 0) fill("try-fields", el("p", { class: "muted" }, "This method takes no inputs."));
  updateSnippets();
}

function check(field, spec, hint) {
  const parsed = parse(field.value, spec);
  field.setAttribute("aria-invalid", parsed.error ? "true" : "false");
  hint.className = `field-hint ${parsed.error ? "error" : "muted"}`;
  hint.textContent = parsed.error || `${spec.dtype}, shape [${parsed.tensor.shape.join(", ")}]`;
  return parsed;
}

function currentArgs() {
  const args = [];
  const errors = [];
  method.signature.inputs.forEach((spec, i) => {
    const parsed = check($(`input-${i}`), spec, $(`input-${i}-hint`));
    if (parsed.error) errors.push(`${spec.name}: ${parsed.error}`);
    else args.push(parsed.tensor);
  });
  return { args, errors };
}

async function call() {
  const { args, errors } = currentArgs();
  if (errors.length > 0) {
    showError("try-error", { code: "INVALID_ARGUMENT", message: `fix the inputs first: ${errors.join("; ")}` });
    return;
  }
  const button = $("try-call");
  button.disabled = true;
  showError("try-error", null);
  fill("try-result");
  fill("try-time", "calling…");
  const timeout = Number($("try-timeout").value) || 0;
  const started = performance.now();
  try {
    const answer = await api.call(method.name, method.version, args, timeout);
    fill("try-time", `answered in ${duration(performance.now() - started)}`);
    fill("try-result", renderOutputs(answer.outputs, method.signature.outputs));
  } catch (e) {
    fill("try-time", `failed after ${duration(performance.now() - started)}`);
    showError("try-error", e);
  } finally {
    button.disabled = false;
    // A count of finished calls, for whoever waits on the next answer (the browser tests).
    const time = $("try-time");
    time.dataset.finished = String(Number(time.dataset.finished || 0) + 1);
  }
}

const NUMPY = {
  bool: "np.bool_", int8: "np.int8", int16: "np.int16", int32: "np.int32", int64: "np.int64",
  uint8: "np.uint8", uint16: "np.uint16", uint32: "np.uint32", uint64: "np.uint64",
  float16: "np.float16", bfloat16: "ml_dtypes.bfloat16", float32: "np.float32", float64: "np.float64",
  string: "object",
};

function updateSnippets() {
  if (!method) return;
  const texts = method.signature.inputs.map((_, i) => $(`input-${i}`).value.trim());
  const tensors = method.signature.inputs.map((spec, i) => {
    const parsed = parse(texts[i], spec);
    return parsed.tensor || { dtype: spec.dtype, shape: [], data: [] };
  });
  const timeout = Number($("try-timeout").value) || 0;
  const body = JSON.stringify({ args: tensors, timeout_ms: timeout });
  const query = `?version=${method.version}`;
  const keyed = key() !== null;
  const origin = location.origin;
  const curl = [
    `curl -s '${origin}/v1/methods/${method.name}/call${query}'`,
    keyed ? `  -H "Authorization: Bearer $WASMRPC_KEY"` : null,
    `  -H 'content-type: application/json'`,
    `  -d '${body.replaceAll("'", "'\\''")}'`,
  ].filter(Boolean).join(" \\\n");
  fill("try-curl", curl);
  const usesBf16 = method.signature.inputs.some((s) => s.dtype === "bfloat16");
  const identifier = /^[A-Za-z_][A-Za-z0-9_]*$/.test(method.name);
  const literal = (spec, text) => (spec.dtype === "bool" ? text.replace(/\btrue\b/g, "True").replace(/\bfalse\b/g, "False") : text);
  const argList = method.signature.inputs.map((spec, i) => `np.array(${literal(spec, texts[i]) || "[]"}, dtype=${NUMPY[spec.dtype]})`);
  const python = [
    "import numpy as np",
    usesBf16 ? "import ml_dtypes" : null,
    "from wasmrpc import rpc",
    keyed ? "import os" : null,
    "",
    `client = rpc.Client.create("http", "${location.host}", name="console"${keyed ? ', key=os.environ["WASMRPC_KEY"]' : ""}, timeout_in_ms=${timeout})`,
    identifier
      ? `print(client.${method.name}_blocking(${argList.join(", ")}))`
      : `print(client.call(args=[${argList.join(", ")}], method_name="${method.name}").get_value())`,
  ].filter((line) => line !== null).join("\n");
  fill("try-python", python);
}
