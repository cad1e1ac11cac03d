//! Idle connections closed: a connection with no request in progress for the idle timeout
//! (`--idle-timeout-s`) is shut down gracefully (HTTP/2: GOAWAY, then close; HTTP/1.1: closed
//! between requests), so a client cannot hold a connection, and its slot under the connection
//! caps, for free. Only requests count as activity: an HTTP/2 client answering the server's
//! PINGs, or sending its own, is idle all the same (PINGs are below the service, which is where
//! requests are counted).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

/// What one connection is doing: requests in progress, and when the last one ended.
pub(super) struct Activity {
    born: Instant,
    busy: AtomicUsize,
    /// Milliseconds after `born` the last request ended (0: none yet).
    last_ended_ms: AtomicU64,
}

impl Activity {
    /// A connection just opened, with no request yet.
    pub(super) fn new() -> Arc<Activity> {
        Arc::new(Activity {
            born: Instant::now(),
            busy: AtomicUsize::new(0),
            last_ended_ms: AtomicU64::new(0),
        })
    }

    /// Resolves once no request has been in progress for `timeout` (never while one is).
    pub(super) async fn idle_for(&self, timeout: Duration) {
        loop {
            // Re-checked on each wake: a request may have begun or ended while asleep.
            let deadline = if self.busy.load(Ordering::Acquire) > 0 {
                Instant::now() + timeout
            } else {
                let ended = Duration::from_millis(self.last_ended_ms.load(Ordering::Acquire));
                let deadline = self.born + ended + timeout;
                if Instant::now() >= deadline {
                    return;
                }
                deadline
            };
            tokio::time::sleep_until(deadline).await;
        }
    }

    fn begin(self: &Arc<Self>) -> Busy {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }
}

/// One request in progress; its end is recorded when dropped.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let ms = u64::try_from(self.0.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        // The end time first, so a watcher that sees no request busy sees when the last ended.
        self.0.last_ended_ms.fetch_max(ms, Ordering::AcqRel);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A hyper service that counts its requests as the connection's activity, from when the
/// request's head arrived (its body is read inside) until its answer is ready. An answer's
/// body still being sent is not counted: a graceful shutdown lets it finish anyway.
#[derive(Clone)]
pub(super) struct CountRequests<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> CountRequests<S> {
    pub(super) fn new(inner: S, activity: Arc<Activity>) -> Self {
        CountRequests { inner, activity }
    }
}

impl<S, R> hyper::service::Service<R> for CountRequests<S>
where
    S: hyper::service::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Counted<S::Future>;

    fn call(&self, req: R) -> Self::Future {
        Counted {
            busy: Some(self.activity.begin()),
            inner: self.inner.call(req),
        }
    }
}

/// A request's answer being made, counted until it is ready.
#[pin_project::pin_project]
pub(super) struct Counted<F> {
    #[pin]
    inner: F,
    busy: Option<Busy>,
}

impl<F: Future> Future for Counted<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let answer = std::task::ready!(this.inner.poll(cx));
        this.busy.take();
        Poll::Ready(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_counts_from_the_last_request_and_never_during_one() {
        let activity = Activity::new();
        let timeout = Duration::from_secs(60);
        let started = Instant::now();
        activity.idle_for(timeout).await;
        assert_eq!(started.elapsed(), timeout);
        let busy = activity.begin();
        let waiting = tokio::spawn({
            let activity = activity.clone();
            async move { activity.idle_for(timeout).await }
        });
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert!(
            !waiting.is_finished(),
            "idle while a request was in progress"
        );
        let ended = Instant::now();
        drop(busy);
        waiting.await.unwrap();
        assert!(ended.elapsed() >= timeout && ended.elapsed() < timeout * 2);
    }
}
