"""schemathesis against the live server, driven by the server's own OpenAPI document.

Runs only when `GET /openapi.json` answers 200. Every generated request, valid and invalid, must
get no 5xx (`not_a_server_error`) and an answer that matches the document
(`response_schema_conformance`). By default a short run (a few examples per operation, well under a
minute); WASMRPC_SCHEMATHESIS=long runs for WASMRPC_SCHEMATHESIS_SECONDS (default 600) instead.
"""

import os
import subprocess
import sys

import pytest

from cases import raw

CHECKS = "not_a_server_error,response_schema_conformance"

# Path parameters point at a model that exists, so requests reach the model's code instead of
# stopping at 404 (the names schemathesis does not find in the document are ignored). The model is
# schemathesis's own: the run deletes and unloads what it names, and the other tests' models must
# survive it.
MODEL = "schemathesis_add"
CONFIG = f"""\
[parameters]
"path.name" = "{MODEL}"
"path.model_name" = "{MODEL}"
"path.version" = "1"
"path.model_version" = "1"
"""


def test_openapi_document_holds_against_the_server(url, tmp_path, add_wasm):
    status, _, body = raw(url, "GET", "/openapi.json")
    if status == 404:
        pytest.skip(
            "GET /openapi.json answered 404: this server has no OpenAPI document yet, so "
            "schemathesis has nothing to check against"
        )
    assert status == 200, body[:500]
    status, _, body = raw(url, "PUT", f"/v1/methods/{MODEL}?export=add_float32", add_wasm)
    assert status in (200, 201), body[:500]

    long = os.environ.get("WASMRPC_SCHEMATHESIS") == "long"
    seconds = int(os.environ.get("WASMRPC_SCHEMATHESIS_SECONDS", "600"))
    budget = (
        ["--max-examples", "1000", "--max-time", str(seconds)] if long else ["--max-examples", "10"]
    )
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(tmp_path / "schemathesis.toml"),
        "run",
        f"{url}/openapi.json",
        "--url",
        url,
        "--checks",
        CHECKS,
        "--request-timeout",
        "30",
        *budget,
    ]
    print("running:", " ".join(command), flush=True)
    # In its own directory: schemathesis and hypothesis keep their databases in the working one.
    done = subprocess.run(command, cwd=tmp_path, timeout=(seconds + 120) if long else 120)
    assert done.returncode == 0, "schemathesis found failures (its report is above)"
