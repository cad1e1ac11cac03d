//! Tenants and keys against the real server: bootstrapping, the cross-tenant matrix, keys that are
//! missing, malformed or revoked, rotation, quotas, metrics, and the `wasmrpc tenant` commands.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::http::Response;
use crate::support::{Http, TestServer, guest, outputs, run_wasmrpc, scalar_f32, tensor};

/// A server with keys: the admin key file lives in its own temporary folder.
pub(crate) struct Keyed {
    pub(crate) server: TestServer,
    admin_key_file: std::path::PathBuf,
    pub(crate) admin: Http,
    _key_dir: tempfile::TempDir,
}

impl Keyed {
    pub(crate) fn start(extra: &[&str]) -> Keyed {
        let key_dir = tempfile::tempdir().expect("temp dir");
        let admin_key_file = key_dir.path().join("admin.key");
        let mut args = vec!["--admin-key-file", admin_key_file.to_str().unwrap()];
        args.extend_from_slice(extra);
        let server = TestServer::start(&args);
        let key = std::fs::read_to_string(&admin_key_file).expect("the server wrote the admin key");
        let admin = server.http().with_key(key.trim());
        Keyed {
            server,
            admin_key_file,
            admin,
            _key_dir: key_dir,
        }
    }

    /// The file the server wrote its admin key to.
    pub(crate) fn admin_key_file(&self) -> &std::path::Path {
        &self.admin_key_file
    }

    /// Create a tenant; its HTTP client (with its key) and the answer.
    pub(crate) fn tenant(&self, name: &str) -> (Http, Value) {
        let r = self
            .admin
            .post_json("/v1/tenants", &json!({ "name": name }));
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let answer = r.json();
        let key = answer["key"].as_str().expect("a key").to_owned();
        (self.server.http().with_key(&key), answer)
    }
}

fn add_args() -> Value {
    json!([
        tensor("int32", &[1], json!([2])),
        tensor("int32", &[1], json!([3]))
    ])
}

fn put(http: &Http, path: &str, package: &str) -> Response {
    http.put(path, &guest(package))
}

fn assert_unauthenticated(r: &Response, what: &str) {
    assert_eq!(
        r.status,
        401,
        "{what}: {}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(r.code(), "UNAUTHENTICATED", "{what}");
    assert_eq!(r.header("www-authenticate"), Some("Bearer"), "{what}");
}

#[test]
fn the_admin_key_file_is_written_once_and_keys_are_needed_everywhere_but_health() {
    let keyed = Keyed::start(&[]);
    let key = std::fs::read_to_string(&keyed.admin_key_file).unwrap();
    assert!(key.trim().starts_with("wrpc_admin_"), "{key}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&keyed.admin_key_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let anonymous = keyed.server.http();
    assert_eq!(anonymous.get("/healthz").status, 200);
    assert_eq!(anonymous.get("/readyz").status, 200);
    for (method, path) in [
        ("GET", "/v1/methods"),
        ("GET", "/v1/methods/add"),
        ("DELETE", "/v1/methods/add"),
        ("POST", "/v1/methods/add/call"),
        ("GET", "/v1/tenants"),
        ("POST", "/v1/tenants"),
        ("GET", "/metrics"),
    ] {
        assert_unauthenticated(&anonymous.request(method, path, None), path);
    }
    // A restart reads the same key back instead of writing a new one.
    let mut server = keyed.server;
    server.kill9_and_restart();
    assert_eq!(std::fs::read_to_string(&keyed.admin_key_file).unwrap(), key);
    assert_eq!(
        server.http().with_key(key.trim()).get("/v1/tenants").status,
        200
    );
}

#[test]
fn a_refused_key_is_answered_before_the_body_is_read() {
    let keyed = Keyed::start(&[]);
    let (_a, answer) = keyed.tenant("team-a");
    let revoked = answer["key"].as_str().unwrap().to_owned();
    let a = keyed.server.http();
    let key_id = answer["key_id"].as_str().unwrap();
    let r = keyed
        .admin
        .delete(&format!("/v1/tenants/team-a/keys/{key_id}"));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    for header in [
        None,
        Some("Bearer".to_owned()),
        Some("Basic dXNlcjpwYXNz".to_owned()),
        Some("Bearer wrpc_0123456789abcdef_not-a-real-secret".to_owned()),
        Some(format!("Bearer {revoked}")),
    ] {
        // Headers that promise a 100 MB upload, and no body at all: the answer must not wait.
        let mut s = a.connect();
        let mut head = String::from(
            "PUT /v1/methods/big HTTP/1.1
Host: x
Connection: close
Content-Length: 100000000
",
        );
        if let Some(h) = &header {
            head.push_str(&format!("Authorization: {h}\r\n"));
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let started = Instant::now();
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).expect("an answer before the body");
            assert!(n > 0, "closed without an answer");
            answer.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 401"), "{header:?}: {text}");
        assert!(
            text.to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{text}"
        );
        assert!(started.elapsed() < Duration::from_secs(2), "{header:?}");
    }
    assert!(
        keyed.admin.get("/v1/methods").status == 403,
        "the admin key is not a tenant's"
    );
}

#[test]
fn another_tenants_methods_are_not_found_exactly_as_missing_ones() {
    let keyed = Keyed::start(&[]);
    let (a, _) = keyed.tenant("team-a");
    let (b, _) = keyed.tenant("team-b");
    assert_eq!(
        put(&a, "/v1/methods/add?export=add", "example-add").status,
        201
    );
    assert_eq!(
        outputs(&a.call("add", add_args(), 0))[0],
        tensor("int32", &[1], json!([5]))
    );

    // What B gets for A's method, on every route…
    let probes = |http: &Http| -> Vec<(u16, Vec<u8>)> {
        [
            http.get("/v1/methods/add"),
            http.get("/v1/methods/add?version=1"),
            http.call("add", add_args(), 0),
            http.request(
                "POST",
                "/v1/methods/add/call?version=1",
                Some(json!({ "args": add_args() }).to_string().as_bytes()),
            ),
            http.delete("/v1/methods/add"),
        ]
        .into_iter()
        .map(|r| (r.status, r.body))
        .collect()
    };
    let against_a = probes(&b);
    for (status, body) in &against_a {
        assert_eq!(*status, 404, "{}", String::from_utf8_lossy(body));
    }
    assert_eq!(b.get("/v1/methods").json()["methods"], json!([]));
    // …is byte for byte what it gets once no tenant has a method of that name.
    assert_eq!(a.delete("/v1/methods/add").status, 200);
    assert_eq!(probes(&b), against_a);

    // The same name in two tenants is each one's own, and deleting one leaves the other.
    assert_eq!(
        put(&a, "/v1/methods/add?export=add", "example-add").status,
        201
    );
    assert_eq!(
        put(&b, "/v1/methods/add?export=add_int64", "example-add").status,
        201
    );
    assert_eq!(a.get("/v1/methods/add").json()["export"], "add");
    assert_eq!(b.get("/v1/methods/add").json()["export"], "add_int64");
    assert_eq!(
        b.get("/v1/methods/add").json()["version"],
        1,
        "B's versions are its own"
    );
    assert_eq!(b.delete("/v1/methods/add").status, 200);
    assert_eq!(
        outputs(&a.call("add", add_args(), 0))[0],
        tensor("int32", &[1], json!([5]))
    );
}

#[test]
fn the_tenant_comes_from_the_key_alone() {
    let keyed = Keyed::start(&[]);
    let (a, _) = keyed.tenant("team-a");
    let (b, _) = keyed.tenant("team-b");
    assert_eq!(
        put(&a, "/v1/methods/secret?export=add", "example-add").status,
        201
    );
    for http in [
        b.with_header("X-Tenant", "team-a"),
        b.with_header("X-Wasmrpc-Tenant", "team-a"),
        b.with_header("Forwarded", "host=team-a"),
    ] {
        assert_eq!(http.get("/v1/methods/secret").status, 404);
        assert_eq!(http.call("secret", add_args(), 0).status, 404);
    }
    // In the query or the body it is refused or ignored, never obeyed.
    assert_ne!(b.get("/v1/methods/secret?tenant=team-a").status, 200);
    let r = b.post_json(
        "/v1/methods/secret/call",
        &json!({ "args": add_args(), "tenant": "team-a" }),
    );
    assert!(r.status == 400 || r.status == 404, "{}", r.status);
    // The path names methods, not tenants.
    assert_eq!(b.get("/v1/tenants/team-a").status, 403);
}

#[test]
fn keys_rotate_without_downtime_and_a_revoked_key_fails_at_once() {
    let keyed = Keyed::start(&[]);
    let (old, created) = keyed.tenant("team-a");
    assert_eq!(
        put(&old, "/v1/methods/add?export=add", "example-add").status,
        201
    );
    let r = keyed.admin.request("POST", "/v1/tenants/team-a/keys", None);
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let new = keyed
        .server
        .http()
        .with_key(r.json()["key"].as_str().unwrap());
    // Both keys work while clients move over; a third is refused.
    assert_eq!(old.call("add", add_args(), 0).status, 200);
    assert_eq!(new.call("add", add_args(), 0).status, 200);
    let third = keyed.admin.request("POST", "/v1/tenants/team-a/keys", None);
    assert_eq!(third.status, 400);
    assert_eq!(third.code(), "FAILED_PRECONDITION");
    let shown = keyed.admin.get("/v1/tenants/team-a").json();
    assert_eq!(shown["keys"].as_array().unwrap().len(), 2);
    assert!(
        !shown.to_string().contains(created["key"].as_str().unwrap()),
        "a key was shown again"
    );
    let old_id = created["key_id"].as_str().unwrap();
    assert_eq!(
        keyed
            .admin
            .delete(&format!("/v1/tenants/team-a/keys/{old_id}"))
            .status,
        200
    );
    assert_unauthenticated(&old.call("add", add_args(), 0), "revoked");
    assert_eq!(new.call("add", add_args(), 0).status, 200);
}

#[test]
fn quotas_are_enforced_live_and_name_themselves() {
    let keyed = Keyed::start(&[]);
    let (a, _) = keyed.tenant("team-a");
    let (b, _) = keyed.tenant("team-b");
    let set = |settings: Value| {
        let r = keyed.admin.request(
            "PUT",
            "/v1/tenants/team-a/quota",
            Some(settings.to_string().as_bytes()),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        r.json()
    };
    // Number of methods.
    let shown = set(json!({ "max_methods": 1 }));
    assert_eq!(shown["quota"]["max_methods"], 1);
    assert_eq!(shown["quota_overrides"], json!({ "max_methods": 1 }));
    assert_eq!(
        put(&a, "/v1/methods/one?export=add", "example-add").status,
        201
    );
    let r = put(&a, "/v1/methods/two?export=add", "example-add");
    assert_eq!(r.status, 429, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "RESOURCE_EXHAUSTED");
    assert!(r.message().contains("max_methods (1)"), "{}", r.message());
    assert_eq!(
        put(&a, "/v1/methods/one?export=add", "example-add").status,
        200,
        "a new version is fine"
    );
    assert_eq!(
        put(&b, "/v1/methods/two?export=add", "example-add").status,
        201,
        "B has its own quota"
    );
    // Component size: refused before the body is stored, naming the quota.
    set(json!({ "max_methods": 0, "max_component_bytes": 1000 }));
    let r = put(&a, "/v1/methods/big?export=add", "example-add");
    assert_eq!(r.status, 413, "{}", String::from_utf8_lossy(&r.body));
    assert!(
        r.message().contains("max_component_bytes (1000)"),
        "{}",
        r.message()
    );
    // Calls per second: a burst of the rate, then 429 with Retry-After.
    set(json!({ "max_component_bytes": 33554432, "calls_per_second": 3 }));
    let mut refused = None;
    for _ in 0..10 {
        let r = a.call("one", add_args(), 0);
        if r.status == 429 {
            refused = Some(r);
            break;
        }
        assert_eq!(r.status, 200);
    }
    let r = refused.expect("the rate was enforced");
    assert!(
        r.message().contains("calls_per_second (3)"),
        "{}",
        r.message()
    );
    let retry: u64 = r
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=2).contains(&retry), "{retry}");
    assert_eq!(
        b.call("two", add_args(), 0).status,
        200,
        "B is not rate limited"
    );
    // Settings past the server's own limits are refused, unknown ones too.
    let r = keyed.admin.request(
        "PUT",
        "/v1/tenants/team-a/quota",
        Some(br#"{"memory_per_call_mib": 1000000}"#),
    );
    assert_eq!(r.code(), "INVALID_ARGUMENT");
    let r = keyed
        .admin
        .request("PUT", "/v1/tenants/team-a/quota", Some(br#"{"cpu": 1}"#));
    assert_eq!(r.code(), "INVALID_ARGUMENT");
}

#[test]
fn deadline_and_memory_quotas_bound_each_call() {
    let keyed = Keyed::start(&["--default-deadline-ms", "5000"]);
    let (a, _) = keyed.tenant("team-a");
    for m in ["spin", "memory_bomb", "echo"] {
        assert_eq!(
            put(&a, &format!("/v1/methods/{m}?export={m}"), "guest-hostile").status,
            201
        );
    }
    let r = keyed.admin.request(
        "PUT",
        "/v1/tenants/team-a/quota",
        Some(br#"{"max_deadline_ms": 300, "memory_per_call_mib": 32}"#),
    );
    assert_eq!(r.status, 200);
    let started = Instant::now();
    let r = a.call("spin", json!([scalar_f32(0.0)]), 60_000);
    assert_eq!(r.code(), "DEADLINE_EXCEEDED");
    assert!(r.message().contains("300 ms"), "{}", r.message());
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let r = a.call("memory_bomb", json!([scalar_f32(0.0)]), 0);
    assert_eq!(r.code(), "RESOURCE_EXHAUSTED");
    assert!(
        r.message().contains(&(32u64 << 20).to_string()),
        "{}",
        r.message()
    );
    assert_eq!(
        outputs(&a.call("echo", json!([scalar_f32(1.5)]), 0))[0],
        scalar_f32(1.5)
    );
}

#[test]
fn metrics_show_a_tenant_only_its_own_series_and_deleting_a_tenant_takes_its_methods() {
    let keyed = Keyed::start(&[]);
    let (a, _) = keyed.tenant("team-a");
    let (b, _) = keyed.tenant("team-b");
    assert_eq!(
        put(&a, "/v1/methods/private_name?export=add", "example-add").status,
        201
    );
    assert_eq!(
        put(&b, "/v1/methods/shared?export=add", "example-add").status,
        201
    );
    assert_eq!(a.call("private_name", add_args(), 0).status, 200);
    assert_eq!(b.call("shared", add_args(), 0).status, 200);
    // A tenant's key sees its own methods' series, nothing of another tenant's.
    let r = b.get("/metrics");
    assert_eq!(r.status, 200);
    let own = String::from_utf8_lossy(&r.body);
    assert!(
        own.contains(r#"wasmrpc_calls_total{tenant="team-b",method="shared",code="OK"} 1"#),
        "{own}"
    );
    assert!(
        !own.contains("private_name") && !own.contains("team-a"),
        "{own}"
    );
    let metrics = keyed.admin.get("/metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        String::from_utf8_lossy(&metrics.body).contains(r#"tenant="team-a",method="private_name""#)
    );

    let listed = keyed.admin.get("/v1/tenants").json();
    let a_row = listed["tenants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "team-a")
        .unwrap();
    assert_eq!(a_row["usage"]["methods"], 1);
    assert!(a_row["usage"]["stored_bytes"].as_u64().unwrap() > 0);
    assert!(a_row.get("key").is_none() && !a_row.to_string().contains("wrpc_"));

    let r = keyed.admin.delete("/v1/tenants/team-a");
    assert_eq!(r.json(), json!({ "name": "team-a", "deleted_methods": 1 }));
    assert_unauthenticated(&a.get("/v1/methods"), "a deleted tenant's key");
    // B shared the bytes; its method is untouched. A new team-a starts empty.
    assert_eq!(b.call("shared", add_args(), 0).status, 200);
    let (a2, _) = keyed.tenant("team-a");
    assert_eq!(a2.get("/v1/methods").json()["methods"], json!([]));
}

#[test]
fn an_upload_that_ends_after_its_tenant_was_deleted_leaves_nothing_for_a_new_tenant_of_the_name() {
    let keyed = Keyed::start(&[]);
    let (_a, answer) = keyed.tenant("team-a");
    let key = answer["key"].as_str().unwrap().to_owned();
    // The upload's key is checked when its headers arrive; its body comes after the delete.
    let component = guest("example-add");
    let (first, rest) = component.split_at(component.len() / 2);
    let mut s = keyed.server.http().connect();
    write!(
        s,
        "PUT /v1/methods/left_behind?export=add HTTP/1.1\r\nHost: localhost\r\n\
         Connection: close\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\n\r\n",
        component.len()
    )
    .unwrap();
    s.write_all(first).unwrap();
    s.flush().unwrap();
    let r = keyed.admin.delete("/v1/tenants/team-a");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    s.write_all(rest).unwrap();
    let r = crate::support::http::read_response(&mut s).unwrap();
    // Before issue 32's fix the upload was registered (201) for a tenant that no longer existed.
    assert_unauthenticated(&r, "an upload whose tenant was deleted while it ran");
    let (a2, _) = keyed.tenant("team-a");
    assert_eq!(a2.get("/v1/methods").json()["methods"], json!([]));
    assert_eq!(a2.call("left_behind", add_args(), 0).status, 404);
    let listed = keyed.admin.get("/v1/tenants/team-a").json();
    assert_eq!(listed["usage"]["methods"], 0, "{listed}");
}

#[test]
fn default_is_reserved_so_no_tenant_inherits_what_was_registered_without_keys() {
    let data = tempfile::tempdir().unwrap();
    {
        let keyless = TestServer::start_in(data.path(), &[]);
        assert_eq!(
            put(
                &keyless.http(),
                "/v1/methods/keyless_add?export=add",
                "example-add"
            )
            .status,
            201
        );
    }
    let key_dir = tempfile::tempdir().unwrap();
    let admin_key_file = key_dir.path().join("admin.key");
    let server = TestServer::start_in(
        data.path(),
        &["--admin-key-file", admin_key_file.to_str().unwrap()],
    );
    let admin_key = std::fs::read_to_string(&admin_key_file).unwrap();
    let admin = server.http().with_key(admin_key.trim());
    // Before issue 32's fix a tenant named `default` was created (201) and called `keyless_add`.
    let r = admin.post_json("/v1/tenants", &json!({ "name": "default" }));
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.code(), "INVALID_ARGUMENT");
    assert!(r.message().contains("reserved"), "{}", r.message());
    // What the keyless server registered stays stored, for it; the admin may remove it.
    let r = admin.delete("/v1/tenants/default");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["deleted_methods"], 1);
    assert_eq!(admin.delete("/v1/tenants/default").status, 404);
}

#[test]
fn a_server_with_keys_may_listen_beyond_loopback_and_one_without_may_not() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("admin.key");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wasmrpc"))
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--admin-key-file")
        .arg(&key_file)
        .env("WASMRPC_LOG", "off")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port = line.trim().rsplit(':').next().unwrap().to_owned();
    assert!(
        line.starts_with("wasmrpc listening on http://0.0.0.0:"),
        "{line}"
    );
    let http = Http::new(&format!("http://127.0.0.1:{port}"));
    assert_eq!(http.get("/v1/methods").status, 401);
    child.kill().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let _ = child.wait();
    assert!(stderr.contains("wrote a new admin key"), "{stderr}");
    assert!(stderr.contains("without TLS"), "{stderr}");

    let (ok, _, err) = run_wasmrpc(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--data-dir",
        dir.path().join("other").to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("refusing") && err.contains("--admin-key-file"),
        "{err}"
    );
}

#[test]
fn the_tenant_commands_manage_tenants_from_the_command_line() {
    let keyed = Keyed::start(&[]);
    let server = keyed.server.url.clone();
    let key_file = keyed.admin_key_file.to_str().unwrap().to_owned();
    let tenant = |args: &[&str]| {
        let mut all = vec!["tenant"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--server", &server, "--admin-key-file", &key_file]);
        run_wasmrpc(&all)
    };
    let (ok, out, err) = tenant(&["create", "team-a"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("created tenant team-a") && out.contains("wrpc_"),
        "{out}"
    );
    let key = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("wrpc_"))
        .map(|k| format!("wrpc_{k}"))
        .unwrap();
    assert_eq!(
        keyed.server.http().with_key(&key).get("/v1/methods").status,
        200
    );

    let (ok, out, _) = tenant(&["list"]);
    assert!(
        ok && out.contains("NAME") && out.contains("team-a"),
        "{out}"
    );
    let (ok, out, _) = tenant(&[
        "quota",
        "team-a",
        "--max-methods",
        "5",
        "--calls-per-second",
        "100",
    ]);
    assert!(ok, "{out}");
    assert!(
        out.contains("* max_methods") && out.contains("* calls_per_second"),
        "{out}"
    );
    let (ok, out, _) = tenant(&["show", "team-a", "--json"]);
    assert!(ok);
    let shown: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["quota"]["max_methods"], 5);
    let old_id = shown["keys"][0]["key_id"].as_str().unwrap().to_owned();
    let (ok, out, _) = tenant(&["rotate", "team-a"]);
    assert!(ok && out.contains("new key"), "{out}");
    let (ok, out, _) = tenant(&["revoke", "team-a", &old_id]);
    assert!(ok && out.contains("revoked"), "{out}");
    assert_eq!(
        keyed.server.http().with_key(&key).get("/v1/methods").status,
        401
    );
    let (ok, _, err) = tenant(&["show", "nobody"]);
    assert!(!ok && err.contains("NOT_FOUND"), "{err}");
    let (ok, out, _) = tenant(&["delete", "team-a"]);
    assert!(ok && out.contains("deleted tenant team-a"), "{out}");
    // Without the admin key the commands say what they need.
    let (ok, _, err) = run_wasmrpc(&["tenant", "list", "--server", &server]);
    assert!(!ok && err.contains("--admin-key-file"), "{err}");
}

/// The 99th percentile of `samples` (the second highest of 200).
fn p99(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[(samples.len() * 99 / 100).min(samples.len() - 1)]
}

/// One tenant keeps fourteen slow calls running (its default quota: all the slots but the eighth
/// kept for others) and more queued; another tenant's latency is measured before and during. The flooding tenant gets RESOURCE_EXHAUSTED for what its queue cannot hold;
/// the other's p99 is printed beside the baseline's. The bound asserted here is generous (a debug
/// build on a shared 2-core machine); the figure to compare with the 1.5x target is the printed
/// one.
#[test]
fn a_tenant_flooding_its_quota_with_slow_calls_barely_moves_another_tenants_p99() {
    let keyed = Keyed::start(&[
        "--max-concurrent-calls",
        "16",
        "--tenant-max-queued-calls",
        "2",
    ]);
    let (flood, _) = keyed.tenant("flood");
    let (quiet, _) = keyed.tenant("quiet");
    assert_eq!(
        put(&flood, "/v1/methods/spin?export=spin", "guest-hostile").status,
        201
    );
    assert_eq!(
        put(&quiet, "/v1/methods/add?export=add", "example-add").status,
        201
    );
    // The default quota: 14 of the 16 slots (an eighth is kept for other tenants).
    let r = keyed.admin.get("/v1/tenants/flood");
    assert_eq!(
        r.json()["quota"]["max_concurrent_calls"],
        14,
        "{}",
        r.json()
    );
    let measure = |n: usize| -> Vec<Duration> {
        (0..n)
            .map(|_| {
                let started = Instant::now();
                let r = quiet.call("add", add_args(), 0);
                assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
                started.elapsed()
            })
            .collect()
    };
    // p99 of 500 calls: the 5th worst, steadier than the 2nd worst of 200 on a shared machine.
    measure(50); // warm up
    let baseline = p99(measure(500));

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooders: Vec<_> = (0..18)
        .map(|_| {
            let (flood, stop) = (flood.clone(), stop.clone());
            std::thread::spawn(move || {
                let (mut done, mut refused) = (0u32, 0u32);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let r = flood.call("spin", json!([scalar_f32(0.0)]), 200);
                    match r.code().as_str() {
                        "DEADLINE_EXCEEDED" => done += 1,
                        "RESOURCE_EXHAUSTED" => {
                            refused += 1;
                            std::thread::sleep(Duration::from_millis(10));
                        }
                        other => panic!("flood got {other}: {}", r.message()),
                    }
                }
                (done, refused)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let flooded = p99(measure(500));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut done, mut refused) = (0, 0);
    for f in flooders {
        let (d, r) = f.join().unwrap();
        done += d;
        refused += r;
    }
    let ratio = flooded.as_secs_f64() / baseline.as_secs_f64();
    println!(
        "fairness: quiet tenant's p99 {baseline:?} alone, {flooded:?} while another tenant floods \
         its quota ({ratio:.2}x); flood ran {done} slow calls and was refused {refused}"
    );
    assert!(
        done > 0 && refused > 0,
        "the flood did not saturate its quota"
    );
    assert!(
        flooded <= baseline * 4 + Duration::from_millis(30),
        "p99 went from {baseline:?} to {flooded:?}"
    );
}

/// The battery's marker test across tenants: what one tenant's call leaves in memory, another
/// tenant's fresh instance never sees (even on the pooling allocator's reused slots).
#[test]
fn one_tenants_memory_never_reaches_another_tenants_call() {
    let keyed = Keyed::start(&[]);
    let (a, _) = keyed.tenant("team-a");
    let (b, _) = keyed.tenant("team-b");
    assert_eq!(
        put(&a, "/v1/methods/write?export=write_marker", "guest-hostile").status,
        201
    );
    assert_eq!(
        put(&b, "/v1/methods/scan?export=scan_marker", "guest-hostile").status,
        201
    );
    for _ in 0..5 {
        outputs(&a.call("write", json!([scalar_f32(0.0)]), 0));
        let r = b.call("scan", json!([scalar_f32(0.0)]), 0);
        assert_eq!(
            outputs(&r)[0]["data"],
            json!([0]),
            "team-a's marker reached team-b"
        );
    }
}
