//! The client's copy of the server's method list, and the operations that read or change the
//! server's registrations: [`Client::refresh`], [`Client::list_registered_methods`],
//! [`Client::method`], [`Client::register`], [`Client::describe`], [`Client::delete`].
//!
//! The copy is what lets a [`MethodHandle`] and [`Client::call`] check arguments without a
//! request, and lets NOT_FOUND list what does exist; registering or deleting through this client
//! updates it at once.

use bytes::Bytes;
use http::Method;

use super::{Client, MethodHandle, check_name, decode};
use crate::code::Code;
use crate::error::Error;
use crate::signature::MethodInfo;
use crate::{DeleteResponse, MethodList};

impl Client {
    /// Fetch the method list again (after registrations elsewhere).
    ///
    /// # Errors
    /// UNAVAILABLE when the server cannot be reached, or its error.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// client.refresh().await?;
    /// let addition = client.method("addition")?; // registered by someone else meanwhile
    /// # Ok(()) }
    /// ```
    pub async fn refresh(&self) -> Result<(), Error> {
        let body = self
            .inner
            .transport
            .send(Method::GET, "/v1/methods", None)
            .await?;
        let list: MethodList = decode(&body)?;
        let mut methods = self
            .inner
            .methods
            .write()
            .unwrap_or_else(|e| e.into_inner());
        *methods = list
            .methods
            .into_iter()
            .map(|m| (m.name.clone(), m))
            .collect();
        Ok(())
    }

    /// The methods known at creation or the last [`Client::refresh`], with full signatures
    /// (TF's `list_registered_methods`), sorted by name.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) {
    /// for m in client.list_registered_methods() {
    ///     let inputs: Vec<String> = m.signature.inputs.iter()
    ///         .map(|s| format!("{}: {}{}", s.name, s.dtype, s.shape_text())).collect();
    ///     println!("{}({})", m.name, inputs.join(", "));
    /// }
    /// # }
    /// ```
    pub fn list_registered_methods(&self) -> Vec<MethodInfo> {
        let methods = self.inner.methods.read().unwrap_or_else(|e| e.into_inner());
        methods.values().cloned().collect()
    }

    pub(super) fn known(&self, name: &str) -> Option<MethodInfo> {
        let methods = self.inner.methods.read().unwrap_or_else(|e| e.into_inner());
        methods.get(name).cloned()
    }

    /// A handle for one registered method, TF's dynamically added `client.<method>`.
    ///
    /// # Errors
    /// NOT_FOUND, listing what exists, when no such method was registered at the last refresh.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// use wasmrpc_client::Tensor;
    /// let addition = client.method("addition")?;          // TF: client.addition
    /// let pending = addition.call(vec![Tensor::scalar(2i32), Tensor::scalar(3i32)]);
    /// let sum = pending.get_value().await?;
    /// assert!(client.method("nope").unwrap_err().is_not_found());
    /// # Ok(()) }
    /// ```
    pub fn method(&self, name: &str) -> Result<MethodHandle, Error> {
        match self.known(name) {
            Some(info) => Ok(MethodHandle::new(self.clone(), info)),
            None => Err(Error::new(
                Code::NotFound,
                format!(
                    "no method named `{name}` is registered; {}",
                    self.registered_names()
                ),
            )),
        }
    }

    /// `registered methods: a, b` (or `none`), from the last refresh.
    pub(super) fn registered_names(&self) -> String {
        let methods = self.inner.methods.read().unwrap_or_else(|e| e.into_inner());
        if methods.is_empty() {
            "registered methods: none".into()
        } else {
            let names: Vec<&str> = methods.keys().map(String::as_str).collect();
            format!("registered methods: {}", names.join(", "))
        }
    }

    /// Register a component under `name` (a new version if the name exists); `export` picks one
    /// method of a multi-method component. The new method is added to the client's list, so
    /// [`Client::method`] finds it at once.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a name or export outside `[A-Za-z0-9_.-]`; the server's refusal
    /// (INVALID_ARGUMENT with the reason for a bad component, RESOURCE_EXHAUSTED past a quota).
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// let bytes = std::fs::read("target/guests/wasm32-wasip2/guest/example_add.wasm").unwrap();
    /// let info = client.register("addition", bytes, Some("add")).await?;
    /// println!("addition v{} ({})", info.version, info.digest);
    /// # Ok(()) }
    /// ```
    pub async fn register(
        &self,
        name: &str,
        component: Vec<u8>,
        export: Option<&str>,
    ) -> Result<MethodInfo, Error> {
        check_name(name)?;
        let path = match export {
            Some(e) => {
                check_name(e)?;
                format!("/v1/methods/{name}?export={e}")
            }
            None => format!("/v1/methods/{name}"),
        };
        let body = self
            .inner
            .transport
            .send(
                Method::PUT,
                &path,
                Some((Bytes::from(component), "application/wasm")),
            )
            .await?;
        let info: MethodInfo = decode(&body)?;
        let mut methods = self
            .inner
            .methods
            .write()
            .unwrap_or_else(|e| e.into_inner());
        methods.insert(info.name.clone(), info.clone());
        Ok(info)
    }

    /// One method's metadata from the server: signature, versions, digest, size.
    ///
    /// # Errors
    /// NOT_FOUND when it is not registered; INVALID_ARGUMENT for a malformed name.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// let info = client.describe("addition").await?;
    /// println!("versions {:?}: {}", info.versions, info.signature.doc);
    /// # Ok(()) }
    /// ```
    pub async fn describe(&self, name: &str) -> Result<MethodInfo, Error> {
        check_name(name)?;
        let body = self
            .inner
            .transport
            .send(Method::GET, &format!("/v1/methods/{name}"), None)
            .await?;
        decode(&body)
    }

    /// Unregister every version of `name`; returns the versions removed.
    ///
    /// # Errors
    /// NOT_FOUND when it is not registered; INVALID_ARGUMENT for a malformed name.
    ///
    /// ```no_run
    /// # async fn demo(client: wasmrpc_client::Client) -> Result<(), wasmrpc_client::Error> {
    /// let removed = client.delete("addition").await?;
    /// println!("removed versions {removed:?}");
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self, name: &str) -> Result<Vec<u32>, Error> {
        check_name(name)?;
        let body = self
            .inner
            .transport
            .send(Method::DELETE, &format!("/v1/methods/{name}"), None)
            .await?;
        let deleted: DeleteResponse = decode(&body)?;
        let mut methods = self
            .inner
            .methods
            .write()
            .unwrap_or_else(|e| e.into_inner());
        methods.remove(name);
        Ok(deleted.deleted_versions)
    }
}
