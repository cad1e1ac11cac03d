//! The WASI 0.2 world a guest gets: empty, deny by default, with a coarse clock.
//!
//! The stock toolchains import most of WASI 0.2 whether a function uses it or not
//! (componentize-py: filesystem and sockets; componentize-js: `wasi:http`), so the interfaces
//! are linked (`runtime/imports.rs` lists them) and what they reach is nothing: no preopened
//! directory, no environment or arguments, an empty stdin, stdout and stderr into the call's
//! capped log, every socket, name lookup and outgoing HTTP request denied when tried, and clocks
//! of [`CLOCK_QUANTUM`]. docs/security.md ("What a guest gets") is the table of it.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};
use wasmtime::component::ResourceTable;
use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpCtx, WasiHttpHooks};

use super::guest_log::GuestLog;

/// What a guest's clocks count in, and the resolution they report.
///
/// Enough for what a function needs of time (a timeout of its own, a rough duration in its
/// log, seconds since 1970 for a timestamp), and a thousand times coarser than the nanosecond
/// clock a guest would otherwise read: too coarse to time a cache hit against a miss, or a
/// branch of another tenant's code sharing the core, with a single reading. It is not a cure
/// for timing channels: a guest can still count its own loop iterations between two ticks of
/// this clock to interpolate. Guests have no threads (no shared memory), so the counter is the
/// guest's own code, slowed by everything else it does, and the epoch deadline bounds how long
/// it can count. The tokio timer that backs `subscribe-duration` has a millisecond granularity
/// too, so a sleep reveals no more than the clock.
pub const CLOCK_QUANTUM: Duration = Duration::from_millis(1);

/// The most host resources (streams, pollables, HTTP fields and bodies…) a call may hold at once.
///
/// Each is host memory outside the call's linear-memory budget, so their number is capped
/// (wasmtime's default is a million). A guest holds a handful: its stdio streams and a pollable
/// or two; the Python and JavaScript runtimes no more.
pub const HOST_RESOURCES_PER_CALL: usize = 1024;

/// The most bytes one set of HTTP headers (`wasi:http/types.fields`) may hold: with
/// [`HOST_RESOURCES_PER_CALL`], bounds what headers a guest keeps in host memory (16 MiB).
/// wasmtime's default is 128 KiB; no request is ever sent, so nothing needs large headers.
pub const HTTP_FIELDS_BYTES: usize = 16 << 10;

/// The most bytes an outgoing HTTP body buffers from one write (one chunk is buffered): with
/// [`HOST_RESOURCES_PER_CALL`], bounds what bodies a guest keeps in host memory (64 MiB).
/// wasmtime's default is 1 MiB.
pub const HTTP_BODY_CHUNK_BYTES: usize = 64 << 10;

/// A call's resource table, capped at [`HOST_RESOURCES_PER_CALL`].
pub fn resource_table() -> ResourceTable {
    let mut table = ResourceTable::new();
    table.set_max_capacity(HOST_RESOURCES_PER_CALL);
    table
}

/// A call's `wasi:http` context, its headers capped at [`HTTP_FIELDS_BYTES`].
pub fn http_ctx() -> WasiHttpCtx {
    let mut ctx = WasiHttpCtx::new();
    ctx.set_field_size_limit(HTTP_FIELDS_BYTES);
    ctx
}

/// The WASI context of one call: made on the guest's first WASI call (`runtime/sandbox.rs`).
pub fn empty_wasi(log: &GuestLog) -> WasiCtx {
    WasiCtxBuilder::new()
        // No preopens, `envs`, `args` or `stdin`: the builder's defaults are none, none, none
        // and a closed stream, which a read sees as the end at once.
        .stdout(log.clone())
        .stderr(log.clone())
        // A guest's host calls run on tokio's worker threads: none may block one.
        .allow_blocking_current_thread(false)
        // Denied before any address is looked at: `create-tcp-socket` and `create-udp-socket`
        // answer `access-denied`, as does `resolve-addresses`.
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        // And should a socket ever be made, no address passes (the builder's default denies
        // all too; said here so that no later default can change it).
        .socket_addr_check(deny_every_address)
        .wall_clock(CoarseWallClock)
        .monotonic_clock(CoarseMonotonicClock::new())
        .build()
}

fn deny_every_address(
    _: SocketAddr,
    _: SocketAddrUse,
) -> std::pin::Pin<Box<dyn Future<Output = bool> + Send + Sync>> {
    Box::pin(std::future::ready(false))
}

/// `time` rounded down to a whole number of quanta.
fn quantized(time: Duration) -> Duration {
    let quantum = CLOCK_QUANTUM.as_nanos();
    let nanos = time.as_nanos() / quantum * quantum;
    // Whole seconds fit u64 for 584 billion years.
    Duration::new(
        u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX),
        (nanos % 1_000_000_000) as u32,
    )
}

/// `wasi:clocks/wall-clock`: the host's time of day, in whole [`CLOCK_QUANTUM`]s.
#[derive(Debug, Clone, Copy)]
pub struct CoarseWallClock;

impl HostWallClock for CoarseWallClock {
    fn resolution(&self) -> Duration {
        CLOCK_QUANTUM
    }

    fn now(&self) -> Duration {
        // A host clock set before 1970 reads as 1970.
        quantized(
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default(),
        )
    }
}

/// `wasi:clocks/monotonic-clock`: time since the call's first use of WASI, in whole
/// [`CLOCK_QUANTUM`]s. Counted from zero in each call, so its readings say nothing about how
/// long the host has been up or when other calls ran.
#[derive(Debug, Clone, Copy)]
pub struct CoarseMonotonicClock {
    start: Instant,
}

impl CoarseMonotonicClock {
    /// A clock reading zero now.
    pub fn new() -> Self {
        CoarseMonotonicClock {
            start: Instant::now(),
        }
    }
}

impl HostMonotonicClock for CoarseMonotonicClock {
    fn resolution(&self) -> u64 {
        CLOCK_QUANTUM.as_nanos() as u64
    }

    fn now(&self) -> u64 {
        u64::try_from(quantized(self.start.elapsed()).as_nanos()).unwrap_or(u64::MAX)
    }
}

/// `wasi:http/outgoing-handler`: every request is answered `HTTP-request-denied` (the
/// `error-code` a guest's `fetch` sees) without a connection being tried. Requests and
/// responses may still be built and read in memory with `wasi:http/types`.
#[derive(Debug, Default, Clone, Copy)]
pub struct DenyOutgoingHttp;

impl WasiHttpHooks for DenyOutgoingHttp {
    fn send_request(
        &mut self,
        _request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> Box<
        dyn Future<
                Output = wasmtime_wasi_http::Result<(
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
                )>,
            > + Send,
    > {
        Box::new(std::future::ready(Err(
            wasmtime_wasi_http::Error::HttpRequestDenied,
        )))
    }

    fn p2_outgoing_body_chunk_size(&mut self) -> usize {
        HTTP_BODY_CHUNK_BYTES
    }

    fn p2_outgoing_body_buffer_chunks(&mut self) -> usize {
        1
    }
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;

    use http_body_util::BodyExt;

    use super::*;

    #[test]
    fn the_wall_clock_is_whole_quanta_and_says_so() {
        let clock = CoarseWallClock;
        assert_eq!(clock.resolution(), CLOCK_QUANTUM);
        for _ in 0..1000 {
            assert_eq!(clock.now().as_nanos() % CLOCK_QUANTUM.as_nanos(), 0);
        }
        let real = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap();
        assert!(real.abs_diff(clock.now()) < Duration::from_secs(1));
    }

    #[test]
    fn the_monotonic_clock_steps_by_whole_quanta_from_zero() {
        let clock = CoarseMonotonicClock::new();
        assert_eq!(clock.resolution(), 1_000_000);
        let quantum = CLOCK_QUANTUM.as_nanos() as u64;
        let first = clock.now();
        assert!(first < 50 * quantum, "{first}");
        let mut last = first;
        let mut steps = 0;
        let started = Instant::now();
        while started.elapsed() < Duration::from_millis(20) {
            let now = clock.now();
            assert_eq!(now % quantum, 0);
            assert!(now >= last);
            if now != last {
                steps += 1;
            }
            last = now;
        }
        assert!(steps >= 5, "{steps} steps in 20 ms");
    }

    #[test]
    fn quantizing_rounds_down_to_the_quantum() {
        assert_eq!(
            quantized(Duration::new(7, 2_999_999)),
            Duration::new(7, 2_000_000)
        );
        assert_eq!(quantized(Duration::ZERO), Duration::ZERO);
        assert_eq!(
            quantized(Duration::new(u64::MAX, 999_999_999)),
            Duration::new(u64::MAX, 999_000_000)
        );
    }

    /// A component importing `imports` (WAT import declarations), linked by the runtime's linker.
    fn link(imports: &str) -> Result<(), String> {
        let mut config = wasmtime::Config::new();
        config.wasm_component_model(true);
        let engine = wasmtime::Engine::new(&config).unwrap();
        let bytes = wat::parse_str(format!("(component {imports})")).unwrap();
        let component = wasmtime::component::Component::new(&engine, bytes).unwrap();
        let linker = super::super::guest_linker(&engine).unwrap();
        linker
            .instantiate_pre(&component)
            .map(drop)
            .map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn the_linker_satisfies_every_wasi_0_2_patch_release_older_or_newer_than_its_own() {
        // The host's WASI is 0.2.12 (wasmtime 48); componentize-py asks for 0.2.9,
        // componentize-js for 0.2.12 and wasi:http 0.2.10; 0.2.99 is a release not made yet.
        for version in ["0.2.0", "0.2.9", "0.2.12", "0.2.99"] {
            let imports = format!(
                r#"(import "wasi:cli/environment@{version}" (instance
                       (export "get-environment" (func (result (list (tuple string string)))))))
                   (import "wasi:clocks/monotonic-clock@{version}" (instance
                       (export "now" (func (result u64)))))
                   (import "wasi:random/random@{version}" (instance
                       (export "get-random-u64" (func (result u64)))))
                   (import "wasi:http/types@{version}" (instance
                       (export "fields" (type (sub resource)))))"#
            );
            link(&imports).unwrap_or_else(|e| panic!("{version}: {e}"));
        }
    }

    #[test]
    fn a_function_the_host_s_wasi_lacks_is_refused_by_the_linker_naming_it() {
        let err = link(
            r#"(import "wasi:cli/environment@0.2.99" (instance
                   (export "get-everything" (func (result u64)))))"#,
        )
        .unwrap_err();
        assert!(err.contains("get-everything"), "{err}");
    }

    #[test]
    fn an_outgoing_http_request_is_denied_without_a_connection() {
        let request = http::Request::builder()
            .uri("http://127.0.0.1:1/")
            .body(
                http_body_util::Empty::new()
                    .map_err(|never| match never {})
                    .boxed_unsync(),
            )
            .unwrap();
        let sent = DenyOutgoingHttp.send_request(request, None, Box::new(async { Ok(()) }));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match Pin::from(sent).as_mut().poll(&mut cx) {
            std::task::Poll::Ready(Err(wasmtime_wasi_http::Error::HttpRequestDenied)) => {}
            std::task::Poll::Ready(Err(other)) => panic!("{other:?}"),
            std::task::Poll::Ready(Ok(_)) => panic!("a request was sent"),
            std::task::Poll::Pending => panic!("the denial waited"),
        }
    }
}
