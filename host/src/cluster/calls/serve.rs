//! Serving calls other workers send to this one, and draining them when it leaves.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use futures_util::StreamExt as _;
use wasmrpc_proto::{Code, Tensor};

use wasmrpc_proto::tensor_list;

use super::{
    CODE, Calls, CarriedLimits, LIMITS, MAX_SERVED, METHOD, NATS_STEP, OBJECT, TENANT, TIMEOUT_MS,
    UNREAD_REPLY_AFTER, VERSION, WORKER, header, set_error, subject,
};
use crate::cluster::ClusterError;
use crate::cluster::trust::Refused;
use crate::error::ServiceError;
use crate::runtime::GuestFailure;
use crate::service::{PeerCall, Service};
use crate::tenancy::TenantId;

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
        // Nothing of a call that is not signed with the cluster's secret is acted on (its body
        // is not even fetched): it is refused, and the refusal logged.
        let result = match self
            .trust
            .check_once(msg.subject.as_str(), msg.headers.as_ref())
        {
            Ok(()) => self.run(service, &msg).await,
            Err(why) => {
                self.trust.refused(Refused::Call, why);
                Err(ServiceError::Remote {
                    code: Code::Unauthenticated,
                    message: "the call was not signed with this cluster's secret: every worker \
                              needs the same --cluster-secret-file"
                        .to_owned(),
                })
            }
        };
        let mut headers = HeaderMap::new();
        headers.insert(WORKER, self.me.as_str());
        let mut logical = Bytes::new();
        let body = match result {
            Ok(outputs) => {
                // Outputs were checked as they left the guest (at most MAX_RANK dimensions), so
                // this does not fail; were it to, the caller gets an error, not a dropped worker.
                let sent = match tensor_list::encode(&outputs) {
                    Ok(encoded) => {
                        logical = encoded.clone();
                        self.outgoing(&mut headers, &encoded).await
                    }
                    Err(e) => Err(ServiceError::Guest(GuestFailure::BadOutput {
                        code: Code::Internal,
                        message: format!("the outputs cannot be sent to the calling worker: {e}"),
                    })),
                };
                match sent {
                    Ok(body) => {
                        headers.insert(CODE, "OK");
                        body
                    }
                    Err(e) => {
                        set_error(&mut headers, e.code(), &e.to_string());
                        logical = Bytes::new();
                        Bytes::new()
                    }
                }
            }
            Err(e) => {
                if let Some(source) = e.logged_source() {
                    tracing::warn!(reason = %e, source, "a call from another worker failed");
                }
                let message = e.public_message().unwrap_or_else(|| {
                    tracing::error!(error = %e, "a call from another worker failed");
                    format!("internal error (logged by worker `{}`)", self.me)
                });
                set_error(&mut headers, e.code(), &message);
                Bytes::new()
            }
        };
        self.trust.sign(reply_to.as_str(), &mut headers, &logical);
        // A reply's object its caller never reads (the caller gone) goes soon, not after the
        // store's max age; the caller reads it at once and deletes it itself.
        let _unread = headers.get(OBJECT).map(|name| {
            let (payloads, name) = (self.payloads.clone(), name.as_str().to_owned());
            tokio::spawn(async move {
                tokio::time::sleep(UNREAD_REPLY_AFTER).await;
                let _ = payloads.delete(&name).await;
            })
        });
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
        let version = header(msg, VERSION)
            .and_then(|v| v.parse::<u32>().ok())
            .ok_or_else(|| bad("version"))?;
        let timeout_ms: u64 = header(msg, TIMEOUT_MS)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| bad("timeout"))?;
        let carried: CarriedLimits = header(msg, LIMITS)
            .and_then(|l| serde_json::from_str(&l).ok())
            .ok_or_else(|| bad("limits"))?;
        let body = self.incoming(msg).await?;
        if let Err(why) = self.trust.check_body(msg.headers.as_ref(), &body) {
            self.trust.refused(Refused::Call, why);
            return Err(ServiceError::Remote {
                code: Code::Unauthenticated,
                message: format!("the call's body could not be trusted ({why})"),
            });
        }
        let args =
            tensor_list::decode(&body).map_err(|e| ServiceError::Arguments(e.to_string()))?;
        // The calling worker's `forward` span, whose child this call's span is.
        let trace = header(msg, crate::otel::context::TRACEPARENT).and_then(|tp| {
            let state = header(msg, crate::otel::context::TRACESTATE);
            crate::otel::SpanContext::from_headers(
                tp.as_bytes(),
                state.as_deref().map(str::as_bytes),
            )
        });
        service
            .serve_peer(PeerCall {
                tenant,
                name,
                version,
                args,
                limits: carried.with_deadline(Duration::from_millis(timeout_ms)),
                trace,
            })
            .await
    }
}
