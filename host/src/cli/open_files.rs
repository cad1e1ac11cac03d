//! The process's open-file limit, raised at start-up: every connection is a descriptor, and the
//! usual soft limit (1 024 on many systems) is far below `--max-connections` (10 000). The soft
//! limit is raised to the hard one, which an unprivileged process may do; when even that is too
//! low for the connection cap, the server says so, because past it new connections fail at
//! `accept` instead of getting the cap's fast 503.
//!
//! Registered components count too: each holds one descriptor for its copy-on-write memory image
//! (its mapped artifact file, or a memfd without an artifact cache; `runtime/epoch.rs`,
//! `runtime/kept.rs`). They are not known at start, so the warning is about connections
//! only; docs/operations.md ("Open files") says what a deployment should allow for them.

/// Descriptors the server keeps besides its connections: the store, blobs, logs, compile
/// children's pipes, NATS, the metrics listener.
const OTHER_FILES: u64 = 256;

/// Raise the soft open-file limit to the hard one; returns the soft limit now in force and, when
/// it is below what `max_connections` needs, a warning to print.
pub fn raise_for(max_connections: usize) -> (u64, Option<String>) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return (0, None);
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given; raising the soft limit up to the hard
        // one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    let soft = limit.rlim_cur;
    let needed = max_connections as u64 + OTHER_FILES;
    let warning = (soft < needed).then(|| {
        format!(
            "the open-file limit is {soft}, below the {needed} that --max-connections {max_connections} \
             needs: past about {} connections new ones fail instead of getting a fast 503; raise \
             the hard limit (`ulimit -Hn`, LimitNOFILE= in a systemd unit) or lower --max-connections",
            soft.saturating_sub(OTHER_FILES)
        )
    });
    (soft, warning)
}
