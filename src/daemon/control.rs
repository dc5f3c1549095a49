//! Answers a control command (from the socket, `mongoload ctl`) against
//! the daemon's current workloads: applies it to the workload's
//! [`crate::control::ControlState`], queues an audit pass, or lists the workloads. The
//! socket server ([`crate::control::server`]) hands every parsed command here.

use serde_json::json;

use super::status::{ControlSnapshot, WorkloadsReply};
use super::supervisor::Slots;
use crate::control::{Command, ControlMetrics};

/// Answers a control command against the current workloads; every change
/// is logged and reflected in `mongoload_paused` (the engine re-publishes
/// the stage and the target gauges follow).
pub(crate) fn answer(
    slots: &Slots,
    metrics: &ControlMetrics,
    command: Command,
) -> Result<serde_json::Value, String> {
    let list = slots.list();
    let Some(name) = command.workload() else {
        let reply = WorkloadsReply {
            workloads: list.iter().map(|s| s.snapshot()).collect(),
        };
        return serde_json::to_value(reply).map_err(|e| e.to_string());
    };
    let Some(slot) = list.iter().find(|s| s.name == name) else {
        let names: Vec<&str> = list.iter().map(|s| s.name.as_str()).collect();
        return Err(format!(
            "no workload {name:?} (workloads: {})",
            names.join(", ")
        ));
    };
    if let Command::Audit(_) = command {
        let Some(audit) = slot.audit() else {
            return Err(format!(
                "workload {name:?} has no audit (set audit = true in its [[workloads]] table)"
            ));
        };
        let summary = audit.request_pass();
        tracing::info!(workload = %slot.name, "control: audit: a full pass is queued");
        return Ok(json!({
            "workload": slot.name,
            "audit": summary,
            "message": format!(
                "workload {}: audit pass queued; so far {} acknowledged ids in the ledger, {} missing{}",
                slot.name,
                summary.acknowledged,
                summary.missing,
                if summary.missing_ids.is_empty() {
                    String::new()
                } else {
                    format!(" (first: {})", summary.missing_ids.join(", "))
                }
            ),
        }));
    }
    let before = slot.control.borrow().clone();
    slot.control.send_modify(|s| command.apply(s));
    let after = slot.control.borrow().clone();
    metrics.set_paused(&slot.name, after.paused);
    tracing::info!(workload = %slot.name, "control: {command}: {before} → {after}");
    Ok(json!({
        "workload": slot.name,
        "control": ControlSnapshot::from(&after),
        "message": format!("workload {}: {after}", slot.name),
    }))
}
