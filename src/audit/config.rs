//! The acknowledged-write audit's keys (`workloads[].audit`,
//! `audit_rate`): validation and the line `check-config` prints.

use crate::config::{uri_w, KeyError, TargetConfig, WorkloadConfig};

impl WorkloadConfig {
    /// Whether the workload as configured inserts documents (the audit has
    /// something to check).
    pub fn inserts(&self) -> bool {
        self.kind.params().inserts()
    }

    /// The audit keys of this workload; `uri` is the target's connection
    /// string when known (its `w=0` makes an audit pointless). Keys are
    /// relative to the workload.
    pub(crate) fn validate_audit(
        &self,
        target: &TargetConfig,
        uri: Option<&str>,
    ) -> Result<(), KeyError> {
        if !(self.audit_rate.is_finite() && self.audit_rate >= 0.0) {
            return Err(KeyError::new(
                "audit_rate",
                format!(
                    "must be a number of ids per second ≥ 0, got {}",
                    self.audit_rate
                ),
            ));
        }
        if !self.audit {
            return Ok(());
        }
        if !self.inserts() {
            return Err(KeyError::new(
                "audit",
                format!(
                    "this {} workload inserts nothing as configured: there is nothing to audit",
                    self.kind.name()
                ),
            ));
        }
        let unacknowledged = match target.write_concern_for(self) {
            Some((wc, _)) => !wc.acknowledged(),
            None => uri.and_then(uri_w).as_deref() == Some("0"),
        };
        if unacknowledged {
            return Err(KeyError::new(
                "audit",
                "needs acknowledged writes, but the write concern is w=0",
            ));
        }
        self.kind.check_audit()
    }

    /// check-config's line for this workload's audit.
    pub(crate) fn describe_audit(&self) -> String {
        let mut s = String::new();
        if self.audit {
            let background = if self.audit_rate > 0.0 {
                format!("{} ids/s in the background", self.audit_rate)
            } else {
                "no background checks".into()
            };
            s.push_str(&format!(
                "  audit: on ({background}; a full pass after each failover, at each stage end and on ctl audit)\n"
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load_one as load;
    use crate::config::DEFAULT_AUDIT_RATE;

    #[test]
    fn audits_are_validated() {
        let ok = load("", "kind = \"mixed\"\naudit = true").unwrap();
        assert!(ok.workloads[0].audit);
        assert_eq!(ok.workloads[0].audit_rate, DEFAULT_AUDIT_RATE);
        assert!(ok
            .describe()
            .contains("audit: on (1000 ids/s in the background"));
        for (target, workload, why) in [
            (
                "",
                "kind = \"ycsb\"\naudit = true",
                "workloads[0].audit: this ycsb workload inserts nothing",
            ),
            (
                "write_concern = 0",
                "kind = \"mixed\"\naudit = true",
                "workloads[0].audit: needs acknowledged writes",
            ),
            (
                "",
                "kind = \"mixed\"\naudit = true\naudit_rate = -1",
                "workloads[0].audit_rate: must be",
            ),
            (
                "",
                "kind = \"custom\"\naudit = true\n[[workloads.custom.operations]]\nop = \"insert\"\n\
                 [[workloads.custom.operations]]\nop = \"delete\"\nfilter = { k = 1 }",
                "workloads[0].custom.operations[1].filter: with audit = true",
            ),
            (
                "read_concern = \"eventual\"",
                "kind = \"mixed\"",
                "target.read_concern",
            ),
        ] {
            let e = load(target, workload).unwrap_err();
            assert!(e.contains(why), "{workload}: {e}");
        }
        // A w=0 connection string without a configured concern, too.
        let text = "[target]\nuri = \"mongodb://h/?w=0\"\n[[workloads]]\nname = \"a\"\nkind = \"mixed\"\naudit = true\n\
                    [[workloads.stages]]\nrate = 1\nduration = \"1s\"\n";
        let e =
            crate::config::parse_with_env(text, std::path::Path::new("t.toml"), std::iter::empty())
                .unwrap_err()
                .to_string();
        assert!(e.contains("w=0"), "{e}");
    }
}
