//! Message bodies: inline, or (over the NATS server's max payload) through the payload store;
//! and what a reply comes to.

use async_nats::HeaderMap;
use bytes::Bytes;
use tokio::io::AsyncReadExt as _;
use wasmrpc_proto::{Code, Tensor, tensor_list};

use super::{CODE, Calls, HEADER_ROOM, MESSAGE, OBJECT, PAYLOADS, header};
use crate::cluster::members::subject_token;
use crate::cluster::trust::Refused;
use crate::error::ServiceError;

impl Calls {
    /// The body to send: `body` itself, or (over the max payload) an empty one, the bytes put in
    /// the payload store under a name the headers give.
    pub(super) async fn outgoing(
        &self,
        headers: &mut HeaderMap,
        body: &Bytes,
    ) -> Result<Bytes, ServiceError> {
        let max = self.client.server_info().max_payload;
        if body.len() + HEADER_ROOM <= max {
            return Ok(body.clone());
        }
        let name = format!(
            "{}-{}",
            subject_token(&self.me),
            hex::encode(crate::cluster::rand_id())
        );
        let full = || {
            ServiceError::unavailable(format!(
                "the cluster's payload store is full (it holds at most {} MiB of large call \
                 bodies in flight, --cluster-payload-store-mib): the call was not sent; try \
                 again, or send smaller tensors",
                self.payload_max_bytes >> 20
            ))
        };
        // Checked first: a put that fails part way leaves its chunks (counted against the cap)
        // until the store's max age.
        let held = self
            .js
            .get_stream(format!("OBJ_{PAYLOADS}"))
            .await
            .map_err(|e| {
                ServiceError::unavailable_because(
                    "the cluster could not store a large call body",
                    e,
                )
            })?
            .cached_info()
            .state
            .bytes;
        if held.saturating_add(body.len() as u64) > self.payload_max_bytes {
            return Err(full());
        }
        let mut reader: &[u8] = body;
        self.payloads
            .put(name.as_str(), &mut reader)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, "could not store a large call body");
                full()
            })?;
        headers.insert(OBJECT, name.as_str());
        Ok(Bytes::new())
    }

    /// The body of a received message: its payload, or the object it names (deleted once read).
    pub(super) async fn incoming(&self, msg: &async_nats::Message) -> Result<Bytes, ServiceError> {
        let Some(name) = header(msg, OBJECT) else {
            return Ok(msg.payload.clone());
        };
        let mut object = self.payloads.get(&name).await.map_err(|e| {
            ServiceError::unavailable_because("the cluster could not fetch a large call body", e)
        })?;
        let mut bytes = Vec::new();
        object.read_to_end(&mut bytes).await.map_err(|e| {
            ServiceError::unavailable_because("the cluster could not fetch a large call body", e)
        })?;
        if let Err(e) = self.payloads.delete(&name).await {
            tracing::warn!(error = %e, "could not delete a read call body; it expires by itself");
        }
        Ok(Bytes::from(bytes))
    }

    /// A reply's outcome.
    pub(super) async fn answer(
        &self,
        msg: async_nats::Message,
    ) -> Result<Vec<Tensor>, ServiceError> {
        let code = header(&msg, CODE).unwrap_or_default();
        if code != "OK" {
            let code = code.parse::<Code>().unwrap_or(Code::Unknown);
            let message = header(&msg, MESSAGE).unwrap_or_default();
            return Err(ServiceError::Remote { code, message });
        }
        let body = self.incoming(&msg).await?;
        if let Err(why) = self.trust.check_body(msg.headers.as_ref(), &body) {
            self.trust.refused(Refused::Reply, why);
            return Err(ServiceError::unavailable(format!(
                "a worker's reply could not be trusted ({why}); the call may or may not have run"
            )));
        }
        tensor_list::decode(&body).map_err(|e| ServiceError::Remote {
            code: Code::Internal,
            message: e.to_string(),
        })
    }
}

/// An object of the payload store that goes when this is dropped, however the attempt that
/// wrote it ended (answered, abandoned, its client gone): its reader deletes it too, and one of
/// the two deletes finds nothing. The delete runs in a task of its own, off the call's path.
pub(super) struct Leftover {
    pub(super) payloads: async_nats::jetstream::object_store::ObjectStore,
    pub(super) name: String,
}

impl Drop for Leftover {
    fn drop(&mut self) {
        let (payloads, name) = (self.payloads.clone(), std::mem::take(&mut self.name));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = payloads.delete(&name).await;
            });
        }
    }
}
