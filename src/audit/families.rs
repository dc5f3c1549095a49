//! The acknowledged-write audit's families (what they count:
//! [`crate::audit`]); the audit resolves one workload's handles from them.

use prometheus::{IntCounterVec, IntGaugeVec};

use crate::family::families;

families! {
    /// The audit families, registered once per process.
    #[derive(Clone)]
    pub struct AuditFamilies {
        pub(crate) checked: IntCounterVec = "mongoload_audit_checked_total",
            "Acknowledged ids checked against the server (again in every pass).",
            labels ["workload"];
        pub(crate) missing: IntCounterVec = "mongoload_audit_missing_total",
            "Acknowledged ids not deleted on purpose that the server no longer has (each counted once).",
            labels ["workload"];
        pub(crate) acknowledged: IntCounterVec = "mongoload_audit_acknowledged_total",
            "Ids added to the audit ledger: inserts the server acknowledged.",
            labels ["workload"];
        pub(crate) forgotten: IntCounterVec = "mongoload_audit_forgotten_total",
            "Ids taken out of the audit ledger because the workload deletes them on purpose.",
            labels ["workload"];
        pub(crate) ledger_ids: IntGaugeVec = "mongoload_audit_ledger_ids",
            "Ids in the audit ledger: present (acknowledged, still to be found) or missing.",
            labels ["workload", "state"];
        pub(crate) ledger_bytes: IntGaugeVec = "mongoload_audit_ledger_bytes",
            "Approximate memory of the audit ledger.",
            labels ["workload"];
        pub(crate) passes: IntCounterVec = "mongoload_audit_passes_total",
            "Completed verification passes over the whole ledger, by trigger.",
            labels ["workload", "trigger"];
        pub(crate) errors: IntCounterVec = "mongoload_audit_errors_total",
            "Failed audit queries (retried), by class.",
            labels ["workload", "kind"];
    }
}

impl AuditFamilies {
    /// Creates the families in `registry` (the daemon does, once).
    pub fn register_in(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let f = AuditFamilies::new()?;
        f.register(registry)?;
        Ok(f)
    }
}
