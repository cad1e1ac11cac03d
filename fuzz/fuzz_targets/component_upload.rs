//! Any bytes as an uploaded component: the runtime's checks before compiling (size, preamble,
//! static code limits), compiling, the import allow-list and the world check, and asking a
//! component that passes them for its signatures. None may panic or hang; every refusal is an
//! `UploadError` with a code.

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use wasmrpc_host::internals::{Runtime, RuntimeConfig};

fn setup() -> &'static (tokio::runtime::Runtime, Runtime) {
    static SETUP: OnceLock<(tokio::runtime::Runtime, Runtime)> = OnceLock::new();
    SETUP.get_or_init(|| {
        let tokio = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let runtime = Runtime::new(RuntimeConfig {
            // No address-space reservations: libFuzzer limits the process's memory.
            pooling: false,
            compile_timeout: Duration::from_secs(10),
            signatures_deadline: Duration::from_secs(1),
            ..RuntimeConfig::default()
        })
        .expect("an engine");
        (tokio, runtime)
    })
}

fuzz_target!(|data: &[u8]| {
    let (tokio, runtime) = setup();
    let bytes = Arc::new(data.to_vec());
    tokio.block_on(async {
        match runtime.compile(bytes, "fuzz").await {
            Ok(compiled) => {
                if let Err(e) = runtime.describe(compiled).await {
                    let _ = e.code();
                }
            }
            Err(e) => {
                let _ = e.code();
                assert!(!e.to_string().is_empty());
            }
        }
    });
});
