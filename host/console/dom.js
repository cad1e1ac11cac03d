// Building the page from data without ever parsing data as HTML: method names, docs and error
// messages come from guests and other people, so they only ever become text nodes.

/** An element with attributes (`on*` functions become listeners) and children (strings → text). */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace the children of the element with id `id`. */
export function fill(id, ...children) {
  const node = typeof id === "string" ? document.getElementById(id) : id;
  node.replaceChildren();
  append(node, children);
  return node;
}

export const $ = (id) => document.getElementById(id);

/** An error for a person: the canonical code in bold, then the server's message. */
export function showError(id, error) {
  if (!error) return fill(id);
  return fill(id, el("code", {}, error.code || "ERROR"), " ", error.message);
}

/** Bytes as people read them. */
export function size(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB"];
  let value = bytes;
  let unit = -1;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

/** Milliseconds as people read them. */
export function duration(ms) {
  if (!Number.isFinite(ms)) return "–";
  if (ms < 1) return `${(ms * 1000).toFixed(0)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 2 : 0)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}
