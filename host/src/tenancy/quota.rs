//! Per-tenant quotas: what a tenant may use, with server-wide defaults, changed live by the admin.
//!
//! A tenant's record holds only what the admin set ([`QuotaPatch`]); the quota in force
//! ([`Quota`]) fills in the server's defaults, so changing a default reaches every tenant that
//! did not override it. No quota may exceed the server's own limit of the same kind.

/// The quota in force for a tenant. The field names are the admin API's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Quota {
    /// Largest component it may upload, in bytes.
    pub max_component_bytes: u64,
    /// Method names it may have registered at once.
    pub max_methods: u64,
    /// Bytes of components it may have stored (each distinct component of its own counted once,
    /// whoever else stored the same bytes).
    pub max_stored_bytes: u64,
    /// Linear memory one of its calls may use, in MiB.
    pub memory_per_call_mib: u64,
    /// The longest deadline one of its calls may have, in milliseconds.
    pub max_deadline_ms: u64,
    /// Its calls running at once (more wait in its own bounded queue).
    pub max_concurrent_calls: u64,
    /// Calls it may start per second, on average (a token bucket holding one second's worth);
    /// 0: no limit.
    pub calls_per_second: u64,
}

/// What the admin set for a tenant: each field absent means "the server's default".
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaPatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_component_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_methods: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_stored_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_per_call_mib: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_deadline_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_calls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_second: Option<u64>,
}

macro_rules! each_field {
    ($m:ident) => {
        $m!(max_component_bytes);
        $m!(max_methods);
        $m!(max_stored_bytes);
        $m!(memory_per_call_mib);
        $m!(max_deadline_ms);
        $m!(max_concurrent_calls);
        $m!(calls_per_second);
    };
}

impl QuotaPatch {
    /// The quota in force: these settings over `defaults`.
    pub fn over(&self, defaults: &Quota) -> Quota {
        let mut q = *defaults;
        macro_rules! take {
            ($f:ident) => {
                if let Some(v) = self.$f {
                    q.$f = v;
                }
            };
        }
        each_field!(take);
        q
    }

    /// These settings, then `newer`'s on top (a partial update).
    pub fn merged(&self, newer: &QuotaPatch) -> QuotaPatch {
        let mut p = *self;
        macro_rules! take {
            ($f:ident) => {
                if newer.$f.is_some() {
                    p.$f = newer.$f;
                }
            };
        }
        each_field!(take);
        p
    }

    /// Refuse settings above the server's own limits (`None` there: no server limit) and
    /// settings of zero where zero would make the tenant unusable.
    ///
    /// # Errors
    /// A message naming the first setting that is out of bounds and the limit.
    pub fn check(&self, server: &Quota) -> Result<(), String> {
        let check = |name: &str, value: Option<u64>, limit: u64, zero_ok: bool| match value {
            Some(0) if !zero_ok => Err(format!("{name} must be at least 1")),
            Some(v) if limit > 0 && v > limit => Err(format!(
                "{name} {v} is above this server's limit of {limit}"
            )),
            _ => Ok(()),
        };
        check(
            "max_component_bytes",
            self.max_component_bytes,
            server.max_component_bytes,
            false,
        )?;
        check("max_methods", self.max_methods, server.max_methods, true)?;
        check(
            "max_stored_bytes",
            self.max_stored_bytes,
            server.max_stored_bytes,
            true,
        )?;
        check(
            "memory_per_call_mib",
            self.memory_per_call_mib,
            server.memory_per_call_mib,
            false,
        )?;
        check(
            "max_deadline_ms",
            self.max_deadline_ms,
            server.max_deadline_ms,
            false,
        )?;
        check(
            "max_concurrent_calls",
            self.max_concurrent_calls,
            server.max_concurrent_calls,
            false,
        )?;
        // 0 is "no limit" here, so the server's own rate (0: none) bounds nothing.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Quota {
        Quota {
            max_component_bytes: 32 << 20,
            max_methods: 1000,
            max_stored_bytes: 1 << 30,
            memory_per_call_mib: 256,
            max_deadline_ms: 300_000,
            max_concurrent_calls: 64,
            calls_per_second: 0,
        }
    }

    #[test]
    fn a_patch_overrides_only_what_it_sets() {
        let patch: QuotaPatch = serde_json::from_str(r#"{"max_methods": 3}"#).unwrap();
        let q = patch.over(&defaults());
        assert_eq!(q.max_methods, 3);
        assert_eq!(q.memory_per_call_mib, 256);
        let more: QuotaPatch = serde_json::from_str(r#"{"calls_per_second": 10}"#).unwrap();
        let both = patch.merged(&more);
        assert_eq!(
            (both.max_methods, both.calls_per_second),
            (Some(3), Some(10))
        );
        assert_eq!(
            serde_json::to_string(&both).unwrap(),
            r#"{"max_methods":3,"calls_per_second":10}"#
        );
    }

    #[test]
    fn settings_past_the_server_limits_or_unknown_are_refused() {
        let patch = QuotaPatch {
            memory_per_call_mib: Some(1024),
            ..QuotaPatch::default()
        };
        let err = patch.check(&defaults()).unwrap_err();
        assert_eq!(
            err,
            "memory_per_call_mib 1024 is above this server's limit of 256"
        );
        let zero = QuotaPatch {
            max_concurrent_calls: Some(0),
            ..QuotaPatch::default()
        };
        assert!(zero.check(&defaults()).unwrap_err().contains("at least 1"));
        assert!(serde_json::from_str::<QuotaPatch>(r#"{"max_cpu": 1}"#).is_err());
        let fine = QuotaPatch {
            max_methods: Some(0),
            calls_per_second: Some(1_000_000),
            ..QuotaPatch::default()
        };
        assert!(fine.check(&defaults()).is_ok());
    }
}
