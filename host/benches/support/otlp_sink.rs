//! The OTLP/HTTP sink of `wrk.sh WRK_TRACING=1`: a listener that takes every export, reads its
//! body into one reused megabyte and keeps nothing, answering each with an empty
//! `ExportTraceServiceResponse` (all taken).
//!
//! It is HTTP/1.1 as the exporter speaks it (a `Content-Length` body, keep-alive), not a
//! general server: it shares the two CPUs with the server being measured, and a collector's
//! cost is not the server's, so it does as little as a sink can. axum's `Bytes` extractor, the
//! sink before this one, took 0.5–0.7 µs of CPU a traced call gathering bodies of 750 KB in
//! small reads (docs/benchmarks.md, "Tracing").

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

const ANSWER: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";

/// Take exports on `listener` until the process ends.
pub async fn serve(listener: TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(async move {
            let _ = connection(stream).await;
        });
    }
}

async fn connection(mut stream: TcpStream) -> std::io::Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    let mut have = 0;
    loop {
        let head_end = loop {
            if let Some(i) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            if have == buf.len() {
                return Err(std::io::Error::other("a request head past a megabyte"));
            }
            let n = stream.read(&mut buf[have..]).await?;
            if n == 0 {
                return Ok(());
            }
            have += n;
        };
        let mut left = content_length(&buf[..head_end]);
        // The body's first bytes may have come with the head.
        let in_buf = (have - head_end).min(left);
        left -= in_buf;
        buf.copy_within(head_end + in_buf..have, 0);
        have -= head_end + in_buf;
        while left > 0 {
            let n = stream.read(&mut buf[..left.min(1 << 20)]).await?;
            if n == 0 {
                return Ok(());
            }
            left -= n;
        }
        stream.write_all(ANSWER).await?;
    }
}

/// The `Content-Length` of a request head (0 without one).
fn content_length(head: &[u8]) -> usize {
    let head = String::from_utf8_lossy(head);
    head.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0)
}
