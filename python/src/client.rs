//! [`NativeClient`]: the Rust async client on this process's runtime, reconnected in a forked
//! child (the parent's connection belongs to the parent's runtime).

use std::sync::Mutex;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use wasmrpc_client::{Client, Encoding, Error as Status};

use crate::errors::{invalid_argument, to_pyerr};
use crate::pending::NativePending;
use crate::runtime::wait;
use crate::tensors::{PySpec, specs_from_py, tensors_from_py, tensors_to_py};
use crate::trace;

/// What a connection is made from, kept to make it again after `fork`.
#[derive(Clone)]
struct Settings {
    rpc_layer: String,
    address: String,
    name: String,
    timeout: Duration,
    key: Option<String>,
    ca_certs_pem: Vec<Vec<u8>>,
    encoding: Encoding,
}

impl Settings {
    async fn connect(self) -> Result<Client, Status> {
        let mut builder = Client::builder(&self.rpc_layer, &self.address)
            .name(self.name)
            .timeout(self.timeout)
            .encoding(self.encoding);
        if let Some(key) = self.key {
            builder = builder.key(key);
        }
        for pem in self.ca_certs_pem {
            builder = builder.ca_cert_pem(pem);
        }
        builder.connect().await
    }
}

/// A client connection; cheap to share between threads (calls are multiplexed over one HTTP/2
/// connection).
#[pyclass(frozen, module = "wasmrpc._native")]
pub(crate) struct NativeClient {
    settings: Settings,
    /// The connection and the process it belongs to.
    connection: Mutex<(u32, Client)>,
}

/// Milliseconds as a call timeout: `None` is the client's default, 0 no limit.
fn timeout(ms: Option<u64>) -> Option<Duration> {
    ms.map(Duration::from_millis)
}

impl NativeClient {
    /// This process's connection: after `fork`, a new one (the inherited one is leaked, never
    /// dropped: its tasks lived on the parent's runtime).
    pub(crate) fn client(&self, py: Python<'_>) -> PyResult<Client> {
        let pid = std::process::id();
        {
            let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
            if connection.0 == pid {
                return Ok(connection.1.clone());
            }
        }
        let fresh = wait(py, self.settings.clone().connect())?.map_err(|e| to_pyerr(py, &e))?;
        let mut connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        if connection.0 != pid {
            let inherited = std::mem::replace(&mut *connection, (pid, fresh));
            std::mem::forget(inherited);
        }
        Ok(connection.1.clone())
    }
}

#[pymethods]
impl NativeClient {
    /// Connect and list the server's methods (TF's `Client.create`).
    #[staticmethod]
    #[pyo3(signature = (rpc_layer, address, name, timeout_ms, key=None, ca_certs_pem=Vec::new(), encoding="binary"))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        rpc_layer: String,
        address: String,
        name: String,
        timeout_ms: u64,
        key: Option<String>,
        ca_certs_pem: Vec<Vec<u8>>,
        encoding: &str,
    ) -> PyResult<NativeClient> {
        let encoding = match encoding {
            "binary" => Encoding::Binary,
            "json" => Encoding::Json,
            other => {
                return Err(invalid_argument(
                    py,
                    format!("unknown encoding `{other}`; supported: binary, json"),
                ));
            }
        };
        let settings = Settings {
            rpc_layer,
            address,
            name,
            timeout: Duration::from_millis(timeout_ms),
            key,
            ca_certs_pem,
            encoding,
        };
        let client = wait(py, settings.clone().connect())?.map_err(|e| to_pyerr(py, &e))?;
        Ok(NativeClient {
            settings,
            connection: Mutex::new((std::process::id(), client)),
        })
    }

    /// The server's address, `http://host:port`.
    #[getter]
    fn address(&self) -> String {
        self.connection
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .1
            .address()
            .to_owned()
    }

    /// The client's name, as the server's logs show it.
    #[getter]
    fn name(&self) -> String {
        self.settings.name.clone()
    }

    /// What `create` was given, to make the same connection in another process (pickling):
    /// `(rpc_layer, address, name, timeout_ms, key, ca_certs_pem, encoding)`.
    #[allow(clippy::type_complexity)]
    fn settings(
        &self,
    ) -> (
        String,
        String,
        String,
        u64,
        Option<String>,
        Vec<Vec<u8>>,
        &'static str,
    ) {
        let s = &self.settings;
        (
            s.rpc_layer.clone(),
            s.address.clone(),
            s.name.clone(),
            s.timeout.as_millis() as u64,
            s.key.clone(),
            s.ca_certs_pem.clone(),
            match s.encoding {
                Encoding::Json => "json",
                _ => "binary",
            },
        )
    }

    /// The default call timeout in milliseconds (0: none).
    #[getter]
    fn timeout_ms(&self) -> u64 {
        self.settings.timeout.as_millis() as u64
    }

    /// The methods known at creation or the last refresh, as a JSON array of method infos.
    fn methods_json(&self, py: Python<'_>) -> PyResult<String> {
        let methods = self.client(py)?.list_registered_methods();
        serde_json::to_string(&methods).map_err(|e| invalid_argument(py, e.to_string()))
    }

    /// Fetch the method list again.
    fn refresh(&self, py: Python<'_>) -> PyResult<()> {
        let client = self.client(py)?;
        wait(py, async move { client.refresh().await })?.map_err(|e| to_pyerr(py, &e))
    }

    /// Start a call; returns at once. `traceparent` and `tracestate`: the W3C trace context
    /// it carries, if any.
    #[pyo3(signature = (method_name, args, output_specs=None, timeout_ms=None, traceparent=None, tracestate=None))]
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        py: Python<'_>,
        method_name: String,
        args: &Bound<'_, PyList>,
        output_specs: Option<Vec<PySpec>>,
        timeout_ms: Option<u64>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> PyResult<NativePending> {
        let trace = trace::context(py, traceparent, tracestate)?;
        let args = tensors_from_py(py, args)?;
        let specs = specs_from_py(py, output_specs)?;
        let client = self.client(py)?;
        NativePending::spawn(trace::within(trace, async move {
            client
                .call_async(&method_name, args, specs.as_deref(), timeout(timeout_ms))
                .await
        }))
    }

    /// A call, waited for with the GIL released: the outputs, or the error raised.
    #[pyo3(signature = (method_name, args, output_specs=None, timeout_ms=None, traceparent=None, tracestate=None))]
    #[allow(clippy::too_many_arguments)]
    fn call_blocking<'py>(
        &self,
        py: Python<'py>,
        method_name: String,
        args: &Bound<'py, PyList>,
        output_specs: Option<Vec<PySpec>>,
        timeout_ms: Option<u64>,
        traceparent: Option<String>,
        tracestate: Option<String>,
    ) -> PyResult<Bound<'py, PyList>> {
        let trace = trace::context(py, traceparent, tracestate)?;
        let args = tensors_from_py(py, args)?;
        let specs = specs_from_py(py, output_specs)?;
        let client = self.client(py)?;
        let outputs = wait(
            py,
            trace::within(trace, async move {
                client
                    .call_async(&method_name, args, specs.as_deref(), timeout(timeout_ms))
                    .await
            }),
        )?
        .map_err(|e| to_pyerr(py, &e))?;
        tensors_to_py(py, &outputs)
    }

    /// Register a component (its bytes) under `name`, optionally one `export` of it; returns
    /// the method's info as JSON.
    #[pyo3(signature = (name, component, export=None))]
    fn register(
        &self,
        py: Python<'_>,
        name: String,
        component: &Bound<'_, PyBytes>,
        export: Option<String>,
    ) -> PyResult<String> {
        let bytes = component.as_bytes().to_vec();
        let client = self.client(py)?;
        let info = wait(py, async move {
            client.register(&name, bytes, export.as_deref()).await
        })?
        .map_err(|e| to_pyerr(py, &e))?;
        serde_json::to_string(&info).map_err(|e| invalid_argument(py, e.to_string()))
    }

    /// Arrive at the cluster's barrier `name` as `member` and wait (GIL released) until
    /// `count` members have; `timeout_ms` 0 is the server's longest deadline. Returns the
    /// members.
    fn barrier(
        &self,
        py: Python<'_>,
        name: String,
        member: String,
        count: usize,
        timeout_ms: u64,
    ) -> PyResult<Vec<String>> {
        let client = self.client(py)?;
        wait(py, async move {
            client
                .barrier(&name, &member, count, Duration::from_millis(timeout_ms))
                .await
        })?
        .map_err(|e| to_pyerr(py, &e))
    }

    /// Unregister `name` (every version); returns the versions deleted.
    fn delete(&self, py: Python<'_>, name: String) -> PyResult<Vec<u32>> {
        let client = self.client(py)?;
        wait(py, async move { client.delete(&name).await })?.map_err(|e| to_pyerr(py, &e))
    }
}
