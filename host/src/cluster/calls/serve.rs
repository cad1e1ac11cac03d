//! Serving calls other workers send to this one, and draining them when it leaves.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt as _;
use wasmrpc_proto::{Code, Tensor};

use super::{
    CODE, Calls, MAX_SERVED, METHOD, NATS_STEP, QUOTA, TENANT, TIMEOUT_MS, VERSION, WORKER, header,
    local, set_error, subject,
};
use crate::cluster::{ClusterError, wire};
use crate::service::{Caller, Service, ServiceError};
use crate::tenancy::{Quota, TenantId};

impl Calls {
    /// Serve calls sent to this worker with `service`, until [`Calls::drain`].
    ///
    /// # Errors
    /// NATS refused the subscription.
    pub async fn serve(self: &Arc<Self>, service: Arc<Service>) -> Result<(), ClusterError> {
        let mut subscriber = self
            .client
            .subscribe(subject(&self.me))
            .await
            .map_err(|e| ClusterError::nats("subscribing to this worker's calls", e))?;
        let this = self.clone();
        let task = tokio::spawn(async move {
            let stopped = this.stop.notified();
            tokio::pin!(stopped);
            let mut draining = false;
            loop {
                let msg = tokio::select! {
                    msg = subscriber.next() => msg,
                    () = &mut stopped, if !draining => {
                        // No new calls; those already delivered are still answered.
                        draining = true;
                        if let Err(e) = subscriber.drain().await {
                            tracing::warn!(error = %e, "draining this worker's calls");
                            break;
                        }
                        continue;
                    }
                };
                let Some(msg) = msg else { break };
                if this.lost.load(Ordering::Acquire) {
                    // The name is another worker's now, and so are its calls (both receive
                    // them; only the holder answers).
                    continue;
                }
                let Ok(permit) = this.served.clone().acquire_owned().await else {
                    break;
                };
                let (this, service) = (this.clone(), service.clone());
                tokio::spawn(async move {
                    this.handle(&service, msg).await;
                    drop(permit);
                });
            }
        });
        *self.serving.lock().unwrap_or_else(PoisonError::into_inner) = Some(task);
        Ok(())
    }

    /// Calls this worker is running for other workers now.
    pub fn serving_now(&self) -> usize {
        MAX_SERVED - self.served.available_permits()
    }

    /// Stop taking calls and wait (at most `timeout`) for those being served to finish.
    pub async fn drain(&self, timeout: Duration) {
        self.stop.notify_one();
        let task = self
            .serving
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let finished = async {
            if let Some(mut task) = task {
                // The subscription ends once NATS confirms the drain; without NATS it never
                // does, and nothing more can arrive anyway.
                let connected =
                    self.client.connection_state() == async_nats::connection::State::Connected;
                if !connected || tokio::time::timeout(NATS_STEP, &mut task).await.is_err() {
                    task.abort();
                }
            }
            let _ = self.served.acquire_many(MAX_SERVED as u32).await;
        };
        if tokio::time::timeout(timeout, finished).await.is_err() {
            tracing::warn!("drain timeout passed with calls from other workers still running");
        }
    }

    async fn handle(&self, service: &Service, msg: async_nats::Message) {
        let Some(reply_to) = msg.reply.clone() else {
            return;
        };
        let result = self.run(service, &msg).await;
        let mut headers = HeaderMap::new();
        headers.insert(WORKER, self.me.as_str());
        let body = match result {
            Ok(outputs) => {
                let body = wire::encode(&outputs);
                match self.outgoing(&mut headers, &body).await {
                    Ok(body) => {
                        headers.insert(CODE, "OK");
                        body
                    }
                    Err(e) => {
                        set_error(&mut headers, e.code(), &e.to_string());
                        Bytes::new()
                    }
                }
            }
            Err(e) => {
                let message = e.public_message().unwrap_or_else(|| {
                    tracing::error!(error = %e, "a call from another worker failed");
                    format!("internal error (logged by worker `{}`)", self.me)
                });
                set_error(&mut headers, e.code(), &message);
                Bytes::new()
            }
        };
        if let Err(e) = self
            .client
            .publish_with_headers(reply_to, headers, body)
            .await
        {
            tracing::warn!(error = %e, "could not send a call's reply");
        }
    }

    async fn run(
        &self,
        service: &Service,
        msg: &async_nats::Message,
    ) -> Result<Vec<Tensor>, ServiceError> {
        let bad = |what: &str| ServiceError::Remote {
            code: Code::InvalidArgument,
            message: format!("a call between workers without a valid {what}"),
        };
        let tenant = TenantId::new(header(msg, TENANT).ok_or_else(|| bad("tenant"))?);
        let name = header(msg, METHOD).ok_or_else(|| bad("method"))?;
        let version = match header(msg, VERSION) {
            Some(v) => Some(v.parse::<u32>().map_err(|_| bad("version"))?),
            None => None,
        };
        let timeout_ms: u64 = header(msg, TIMEOUT_MS)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| bad("timeout"))?;
        let quota: Quota = header(msg, QUOTA)
            .and_then(|q| serde_json::from_str(&q).ok())
            .ok_or_else(|| bad("quota"))?;
        let body = self
            .incoming(msg)
            .await
            .map_err(ServiceError::Unavailable)?;
        let args = wire::decode(&body).map_err(|e| ServiceError::Arguments(e.to_string()))?;
        let caller = Caller { tenant, quota };
        local(
            service,
            &caller,
            &name,
            version,
            args,
            Duration::from_millis(timeout_ms),
        )
        .await
    }
}
