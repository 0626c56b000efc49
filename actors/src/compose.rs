//! An agent's composition as the turn uses it: the role its brain is
//! given, and the tool policy its calls are checked against, the layers in
//! the seed's precedence (system > config > prompt).

use std::collections::BTreeSet;

use holarchy_composition::constraint::{Layer, Policy, ToolRules, Verdict};
use holarchy_supervision::Composition;
use serde::Serialize;

/// The role a brain is given with every step.
#[derive(Debug, Clone, Serialize)]
pub struct RoleView {
    /// `sha256:` and 12 hex digits of the prompt.
    pub version: String,
    pub prompt: String,
}

pub fn role(composition: &Composition) -> Option<RoleView> {
    composition.role.as_ref().map(|role| RoleView {
        version: role.version(),
        prompt: role.text.clone(),
    })
}

/// The tools a composed agent's calls are checked against. The system
/// layer is what the runtime itself withholds from an instance (external
/// triggers, unless its ingress declares them); the configuration layer
/// is the manifest's `constraints`.
pub fn policy(composition: &Composition) -> Policy {
    let mut system = ToolRules::default();
    if !composition.triggers {
        system.deny.insert("CreateExternalTrigger".to_owned());
    }
    let limits = &composition.limits;
    let set = |names: &[String]| names.iter().cloned().collect::<BTreeSet<_>>();
    let config = ToolRules {
        allow: limits.allow.as_deref().map(set),
        deny: set(&limits.deny),
        require_approval: set(&limits.require_approval),
    };
    Policy::new()
        .with(Layer::System, system)
        .with(Layer::Config, config)
}

/// Why a call may not run now, or `None` when it may.
pub fn refusal(policy: &Policy, tool: &str) -> Option<String> {
    match policy.evaluate(tool) {
        Verdict::Allow => None,
        Verdict::Deny { reason, .. } => Some(reason),
        Verdict::RequireApproval { layer } => Some(format!(
            "{tool} needs an operator's approval ({}), and this daemon does not take approvals yet: the call did not run",
            layer.as_str()
        )),
    }
}

#[cfg(test)]
mod tests {
    use holarchy_supervision::ToolLimits;

    use super::*;

    fn composed(limits: ToolLimits, triggers: bool) -> Composition {
        Composition {
            instance: Some("lead".into()),
            limits,
            triggers,
            ..Default::default()
        }
    }

    #[test]
    fn an_instance_without_trigger_ingress_arms_no_trigger() {
        let closed = policy(&composed(ToolLimits::default(), false));
        assert!(refusal(&closed, "CreateExternalTrigger").is_some());
        assert!(refusal(&closed, "AgentGet").is_none());
        let open = policy(&composed(ToolLimits::default(), true));
        assert!(refusal(&open, "CreateExternalTrigger").is_none());
    }

    #[test]
    fn the_manifest_denies_and_allows() {
        let limits = ToolLimits {
            allow: Some(vec!["AgentGet".into(), "ExecCommand".into()]),
            deny: vec!["ExecCommand".into()],
            ..Default::default()
        };
        let p = policy(&composed(limits, true));
        assert!(refusal(&p, "AgentGet").is_none());
        let denied = refusal(&p, "ExecCommand").expect("denied");
        assert!(denied.contains("configuration"), "{denied}");
        assert!(refusal(&p, "Sleep").is_some(), "not on the allow list");
    }
}
