//! Secrets kept out of what the server shows: the user, password or token in a URL's userinfo
//! (`nats://USER:PASSWORD@HOST`, `nats://TOKEN@HOST`) becomes `***` in every log line, error and
//! help text that names the URL. Any setting that carries a credential inside a URL goes
//! through [`redact_url`] (or [`redact_urls`] for a comma-separated list) before it is printed,
//! and its flag hides its environment value from `--help` (clap's `hide_env_values`).

/// `url` with its userinfo, if any, replaced by `***`; a URL without one is returned as it is.
/// Works without a scheme too (`USER:PASSWORD@HOST:PORT`), as the NATS client accepts that.
pub fn redact_url(url: &str) -> String {
    let url = url.trim();
    let start = url.find("://").map_or(0, |i| i + 3);
    // The authority ends at the path, query or fragment; an `@` after it is not userinfo.
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    match url[start..end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..start], &url[start + at..]),
        None => url.to_owned(),
    }
}

/// Each URL of a comma-separated list through [`redact_url`].
pub fn redact_urls(urls: &str) -> String {
    urls.split(',')
        .map(redact_url)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_replaced_and_the_rest_kept() {
        assert_eq!(
            redact_url("nats://user:s3cret@nats.example:4222"),
            "nats://***@nats.example:4222"
        );
        assert_eq!(redact_url("tls://t0ken@10.0.0.7"), "tls://***@10.0.0.7");
        assert_eq!(redact_url("user:pw@localhost:4222"), "***@localhost:4222");
        assert_eq!(redact_url("nats://p@ss:w@rd@h:1"), "nats://***@h:1");
        assert_eq!(redact_url("nats://h:4222/a@b"), "nats://h:4222/a@b");
        assert_eq!(redact_url("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        assert_eq!(
            redact_urls("nats://a:x@h1:1, nats://h2:2,nats://tok@h3:3"),
            "nats://***@h1:1,nats://h2:2,nats://***@h3:3"
        );
    }
}
