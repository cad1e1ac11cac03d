//! `wasmrpc serve`'s log lines: `tracing_subscriber`'s default format (time, level, spans,
//! target, fields), with the context of the request being handled (`api/context.rs`) printed
//! where its span used to be, only for the lines actually written.

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The format; see the module's documentation.
#[derive(Debug, Default)]
pub struct WithRequestContext;

impl<S, N> FormatEvent<S, N> for WithRequestContext
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let ansi = writer.has_ansi_escapes();
        let meta = event.metadata();
        paint(&mut writer, ansi, DIM, |w| SystemTime.format_time(w))?;
        writer.write_char(' ')?;
        paint(&mut writer, ansi, level_colour(meta.level()), |w| {
            write!(w, "{:>5}", meta.level())
        })?;
        writer.write_char(' ')?;
        let mut any_context = false;
        // Only when no span carries it (`api/context.rs`), so it is never written twice.
        let request = crate::api::context::with_current(|request| {
            (!request.in_a_span()).then(|| paint(&mut writer, ansi, BOLD, |w| request.write(w)))
        });
        if let Some(Some(written)) = request {
            written?;
            any_context = true;
        }
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                paint(&mut writer, ansi, BOLD, |w| w.write_str(span.name()))?;
                let extensions = span.extensions();
                if let Some(fields) = extensions.get::<FormattedFields<N>>()
                    && !fields.is_empty()
                {
                    write!(writer, "{{{fields}}}")?;
                }
                writer.write_char(':')?;
                any_context = true;
            }
        }
        if any_context {
            writer.write_char(' ')?;
        }
        paint(&mut writer, ansi, DIM, |w| write!(w, "{}:", meta.target()))?;
        writer.write_char(' ')?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";

fn level_colour(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "\x1b[35m",
        Level::DEBUG => "\x1b[34m",
        Level::INFO => "\x1b[32m",
        Level::WARN => "\x1b[33m",
        Level::ERROR => "\x1b[31m",
    }
}

/// Write with `write` in `style` when the writer takes escape codes, plainly otherwise.
fn paint(
    writer: &mut Writer<'_>,
    ansi: bool,
    style: &str,
    write: impl FnOnce(&mut Writer<'_>) -> std::fmt::Result,
) -> std::fmt::Result {
    if ansi {
        writer.write_str(style)?;
        write(writer)?;
        writer.write_str("\x1b[0m")
    } else {
        write(writer)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::body::Body;
    use tower::ServiceExt as _;

    use super::WithRequestContext;
    use crate::api::context::{RequestContextLayer, printed_by_the_format, record_tenant};

    /// Log lines written while a request is handled carry its context, as its span did; lines
    /// outside a request do not.
    #[tokio::test]
    async fn lines_written_during_a_request_carry_its_context() {
        printed_by_the_format();
        let lines = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || Sink(sink.clone()))
            .with_ansi(false)
            .event_format(WithRequestContext)
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let counted = Arc::new(Mutex::new(Vec::new()));
        let count = counted.clone();
        let app = axum::Router::new()
            .route(
                "/v1/methods/{name}/call",
                axum::routing::post(|| async {
                    tracing::info!(target: "audit", "before the tenant is known");
                    record_tenant("team-a");
                    tracing::warn!(target: "audit", "after");
                }),
            )
            .layer(RequestContextLayer::new(Arc::new(move |client: &str| {
                count.lock().unwrap().push(client.to_owned());
            })));
        let request = axum::http::Request::post("/v1/methods/add/call")
            .header("x-wasmrpc-client", "me")
            .body(Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        tracing::info!(target: "audit", "outside");
        let text = String::from_utf8(lines.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].ends_with(
                r#" INFO request{method=POST path=/v1/methods/add/call client="me"}: audit: before the tenant is known"#
            ),
            "{text}"
        );
        assert!(
            lines[1].ends_with(
                r#" WARN request{method=POST path=/v1/methods/add/call client="me" tenant="team-a"}: audit: after"#
            ),
            "{text}"
        );
        assert!(lines[2].ends_with("  INFO audit: outside"), "{text}");
        assert_eq!(*counted.lock().unwrap(), ["me"]);
    }

    /// Where the log format is another's (a program embedding the server), each request gets a
    /// `request` span with the same fields instead.
    #[tokio::test]
    async fn elsewhere_a_request_gets_a_span_with_its_context() {
        let lines = Arc::new(Mutex::new(Vec::<u8>::new()));
        let sink = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || Sink(sink.clone()))
            .with_ansi(false)
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let app = axum::Router::new()
            .route(
                "/healthz",
                axum::routing::get(|| async {
                    record_tenant("team-a");
                    tracing::info!(target: "audit", "inside");
                }),
            )
            .layer(RequestContextLayer::with_spans(
                Arc::new(|_: &str| {}),
                true,
            ));
        let request = axum::http::Request::get("/healthz")
            .body(Body::empty())
            .unwrap();
        assert_eq!(app.oneshot(request).await.unwrap().status(), 200);
        let text = String::from_utf8(lines.lock().unwrap().clone()).unwrap();
        assert!(
            text.trim_end().ends_with(
                r#" INFO request{method=GET path=/healthz client="-" tenant="team-a"}: audit: inside"#
            ),
            "{text}"
        );
    }

    /// A `MakeWriter` output into a shared buffer.
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
}
