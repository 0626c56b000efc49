//! Approvals: a tool call an instance's constraints hold for an operator.
//! The call is parked durably with everything needed to run it later; an
//! operator approves it (it runs once, then its result goes to the agent
//! as a message) or denies it (the agent gets the reason as a tool error).

use holarchy_supervision::workspace::Place;
use holarchy_supervision::{AgentId, ApprovalId, RunId};
use serde::{Deserialize, Serialize};

/// Most calls one agent may have waiting for approval: a brain that asks
/// again and again is refused, not queued without end.
pub const MAX_PENDING_PER_AGENT: usize = 32;
/// Longest reason an operator may give for a denial.
pub const MAX_REASON_BYTES: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ApprovalStatus {
    /// Waiting for an operator.
    Pending,
    /// Approved and running. Found at a start, the call may or may not
    /// have had its effect: it is never run again.
    Running,
    /// Approved and run: the tool's output (JSON text).
    Approved {
        output: String,
        is_error: bool,
    },
    Denied {
        reason: String,
    },
}

impl ApprovalStatus {
    pub fn name(&self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Running => "running",
            ApprovalStatus::Approved { .. } => "approved",
            ApprovalStatus::Denied { .. } => "denied",
        }
    }

    pub fn is_decided(&self) -> bool {
        matches!(
            self,
            ApprovalStatus::Approved { .. } | ApprovalStatus::Denied { .. }
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub id: ApprovalId,
    pub agent_id: AgentId,
    /// The instance whose constraints asked for it.
    pub instance: Option<String>,
    /// The turn that made the call.
    pub run_id: RunId,
    pub tool: String,
    /// The call's input as it would run (placeholders filled), JSON text.
    pub input: String,
    /// The constraint layer that asked for approval.
    pub layer: String,
    pub status: ApprovalStatus,
    /// Whether the agent has been told the outcome (a message on its
    /// queue); a start tells it what a crash left untold.
    pub delivered: bool,
    pub created_at_ms: u64,
    pub decided_at_ms: Option<u64>,
    /// Where the agent worked when the call was parked: the call runs
    /// there once approved, whatever workspace the agent moved to since,
    /// so the operator approves what they were shown. `None` in records
    /// written before it was kept.
    pub place: Option<Place>,
}

impl ApprovalRecord {
    /// What the agent is told once the call is decided: the tool's own
    /// output, or a refusal with the operator's reason; at most `limit`
    /// bytes (a message's bound), the output cut to fit if need be.
    pub fn outcome_message(&self, limit: usize) -> String {
        let whole = self.outcome(None);
        if whole.len() <= limit {
            return whole;
        }
        // The envelope without the output, then as much output as fits.
        let room = limit.saturating_sub(self.outcome(Some(String::new())).len() + 64);
        let text = match &self.status {
            ApprovalStatus::Approved { output, .. } => output.as_str(),
            _ => "",
        };
        self.outcome(Some(format!(
            "{}… (cut: {} bytes)",
            holarchy_supervision::bounds::head(text, room),
            text.len()
        )))
    }

    fn outcome(&self, cut_output: Option<String>) -> String {
        let (status, output, is_error) = match &self.status {
            ApprovalStatus::Approved { output, is_error } => (
                "approved",
                serde_json::from_str(output).unwrap_or(serde_json::Value::String(output.clone())),
                *is_error,
            ),
            ApprovalStatus::Denied { reason } => (
                "denied",
                serde_json::json!({
                    "error": format!("an operator denied this call: {reason}"),
                    "kind": "refused",
                }),
                true,
            ),
            ApprovalStatus::Pending | ApprovalStatus::Running => {
                (self.status.name(), serde_json::Value::Null, false)
            }
        };
        let output = cut_output.map_or(output, serde_json::Value::String);
        serde_json::json!({
            "approval": {
                "approval_id": self.id.to_string(),
                "status": status,
                "tool": self.tool,
                "input": serde_json::from_str::<serde_json::Value>(&self.input)
                    .unwrap_or(serde_json::Value::Null),
                "output": output,
                "is_error": is_error,
            }
        })
        .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: ApprovalStatus) -> ApprovalRecord {
        ApprovalRecord {
            id: ApprovalId::generate(),
            agent_id: AgentId::generate(),
            instance: Some("ops".into()),
            run_id: RunId::generate(),
            tool: "ExecCommand".into(),
            input: r#"{"command":"make release"}"#.into(),
            layer: "config".into(),
            status,
            delivered: false,
            created_at_ms: 1,
            decided_at_ms: None,
            place: None,
        }
    }

    #[test]
    fn the_agent_is_told_the_output_or_the_reason() {
        let ran = record(ApprovalStatus::Approved {
            output: r#"{"exit":"exit code 0"}"#.into(),
            is_error: false,
        });
        let told: serde_json::Value =
            serde_json::from_str(&ran.outcome_message(65_536)).expect("json");
        assert_eq!(told["approval"]["status"], "approved");
        assert_eq!(told["approval"]["output"]["exit"], "exit code 0");
        assert_eq!(told["approval"]["input"]["command"], "make release");
        let denied = record(ApprovalStatus::Denied {
            reason: "not on a Friday".into(),
        });
        let told: serde_json::Value =
            serde_json::from_str(&denied.outcome_message(65_536)).expect("json");
        assert_eq!(told["approval"]["is_error"], true);
        assert_eq!(told["approval"]["output"]["kind"], "refused");
        assert!(told["approval"]["output"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("not on a Friday")));
    }

    #[test]
    fn a_large_output_is_cut_to_the_message_bound() {
        let ran = record(ApprovalStatus::Approved {
            output: serde_json::json!({ "out": "é".repeat(50_000) }).to_string(),
            is_error: false,
        });
        let told = ran.outcome_message(4096);
        assert!(told.len() <= 4096, "{}", told.len());
        let told: serde_json::Value = serde_json::from_str(&told).expect("json");
        assert!(told["approval"]["output"]
            .as_str()
            .is_some_and(|o| o.contains("cut:")));
    }

    #[test]
    fn records_round_trip_through_the_store_encoding() {
        let value = record(ApprovalStatus::Denied {
            reason: "no".into(),
        });
        let config = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(&value, config).expect("encodes");
        let (back, _): (ApprovalRecord, usize) =
            bincode::serde::decode_from_slice(&bytes, config).expect("decodes");
        assert_eq!(back, value);
    }
}
