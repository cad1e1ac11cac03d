// The console's entry: the tabs (from the address's #fragment, so Back works and a view can be
// linked), the key prompt, and the server's name in the corner.

import { api, key, onKeyNeeded, setKey } from "./api.js";
import { $, fill } from "./dom.js";
import { showActivity, startActivity, wireActivity } from "./activity.js";
import { showCluster } from "./cluster.js";
import { showMethod, showMethods, wireMethods } from "./methods.js";
import { isAdmin, showTenants } from "./tenants.js";
import { wireTryIt } from "./tryit.js";
import { wireUpload } from "./upload.js";

let pendingKey = null;

/** Ask for a key once, however many requests found they need one at the same moment. */
function askForKey(rejected) {
  if (pendingKey) return pendingKey;
  const dialog = $("key-dialog");
  const input = $("key-input");
  fill("key-error", rejected ? "That key was not accepted (unknown, revoked or mistyped)." : "");
  input.value = "";
  pendingKey = new Promise((resolve) => {
    const done = () => {
      dialog.removeEventListener("close", done);
      pendingKey = null;
      // Escape closes the prompt without a key: the requests waiting on it fail as they are.
      const value = dialog.returnValue === "use" ? input.value.trim() : "";
      if (value) setKey(value);
      updateKeyControls();
      resolve(Boolean(value));
    };
    dialog.addEventListener("close", done);
    dialog.returnValue = "";
    dialog.showModal();
    input.focus();
  });
  return pendingKey;
}

async function updateKeyControls() {
  $("forget-key").hidden = key() === null;
  document.querySelector('[data-tab="tenants"]').hidden = !(key() !== null && (await isAdmin()));
}

const VIEWS = {
  methods: () => showMethods(),
  method: (name, version) => showMethod(name, version ? Number(version) : undefined),
  upload: () => {},
  activity: () => showActivity(),
  cluster: () => showCluster(),
  tenants: () => showTenants(),
};

function route() {
  const [view, ...rest] = (location.hash.slice(1) || "methods").split("/").map(decodeURIComponent);
  const name = view in VIEWS ? view : "methods";
  for (const panel of document.querySelectorAll("[data-panel]")) panel.hidden = panel.dataset.panel !== name;
  for (const link of document.querySelectorAll("nav a")) {
    const current = link.dataset.tab === name || (name === "method" && link.dataset.tab === "methods");
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  VIEWS[name](...rest);
}

async function start() {
  onKeyNeeded(askForKey);
  $("forget-key").addEventListener("click", () => {
    setKey(null);
    location.reload();
  });
  wireMethods();
  wireTryIt();
  wireUpload();
  wireActivity();
  fill("server", location.host);
  window.addEventListener("hashchange", route);
  route();
  updateKeyControls();
  startActivity();
  try {
    await api.ready();
  } catch (e) {
    fill("server", `${location.host} · ${e.message}`);
  }
}

start();
