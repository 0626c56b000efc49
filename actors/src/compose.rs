//! An agent's composition as the turn uses it: the role its brain is
//! given, and the tool policy its calls are checked against, the layers in
//! the seed's precedence (system > config > prompt).

pub mod instance;

use std::collections::BTreeSet;

use holarchy_composition::constraint::{Layer, Policy, ToolRules, Verdict};
use holarchy_supervision::Composition;

use crate::store::InstanceStore;
use serde::Serialize;

/// The composition an agent runs under now: its instance's skills and
/// constraints as last applied, when the instance still exists, with its
/// own role. A child keeps the copy it was spawned with only as a fallback
/// (its instance deleted), so tightening a manifest reaches every
/// descendant from its next turn.
pub fn current(store: &dyn InstanceStore, stored: &Composition) -> Composition {
    let applied = stored
        .instance
        .as_deref()
        .and_then(|name| store.instance(name).ok().flatten());
    match applied {
        // The role is the agent's own (a spawn may name one, and the
        // instance's agent gets the new one at each apply); the rest is
        // the instance's.
        Some(instance) => Composition {
            role: stored.role.clone(),
            ..instance.composition()
        },
        None => stored.clone(),
    }
}

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

/// `policy` with its prompt layer asking approval for every one of
/// `calls`: what a brain's decision with `requires_approval` means.
pub fn asking_approval(policy: &Policy, calls: &[crate::step::ToolCall]) -> Policy {
    let rules = ToolRules {
        require_approval: calls.iter().map(|c| c.name.clone()).collect(),
        ..ToolRules::default()
    };
    policy.clone().with(Layer::Prompt, rules)
}

/// What the policy says of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    Allow,
    /// Refused, with the reason the brain is told.
    Refuse(String),
    /// Parked until an operator approves it; the layer that asks.
    Approve(Layer),
}

pub fn check(policy: &Policy, tool: &str) -> Check {
    match policy.evaluate(tool) {
        Verdict::Allow => Check::Allow,
        Verdict::Deny { reason, .. } => Check::Refuse(reason),
        Verdict::RequireApproval { layer } => Check::Approve(layer),
    }
}

/// Why the policy refuses `tool` outright, if it does; a call that only
/// needs approval is not refused (for a call an operator approved).
pub fn denial(policy: &Policy, tool: &str) -> Option<String> {
    match check(policy, tool) {
        Check::Refuse(reason) => Some(reason),
        Check::Allow | Check::Approve(_) => None,
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
        assert!(denial(&closed, "CreateExternalTrigger").is_some());
        assert_eq!(check(&closed, "AgentGet"), Check::Allow);
        let open = policy(&composed(ToolLimits::default(), true));
        assert_eq!(check(&open, "CreateExternalTrigger"), Check::Allow);
    }

    #[test]
    fn the_manifest_denies_and_allows() {
        let limits = ToolLimits {
            allow: Some(vec!["AgentGet".into(), "ExecCommand".into()]),
            deny: vec!["ExecCommand".into()],
            ..Default::default()
        };
        let p = policy(&composed(limits, true));
        assert_eq!(check(&p, "AgentGet"), Check::Allow);
        let denied = denial(&p, "ExecCommand").expect("denied");
        assert!(denied.contains("configuration"), "{denied}");
        assert!(denial(&p, "Sleep").is_some(), "not on the allow list");
    }

    #[test]
    fn a_brain_asking_approval_parks_its_calls_but_never_lifts_a_denial() {
        let limits = ToolLimits {
            deny: vec!["DetachWorkspace".into()],
            ..Default::default()
        };
        let p = policy(&composed(limits, true));
        let calls = [
            crate::step::ToolCall {
                name: "AgentGet".into(),
                input: serde_json::Value::Null,
            },
            crate::step::ToolCall {
                name: "DetachWorkspace".into(),
                input: serde_json::Value::Null,
            },
        ];
        let asked = asking_approval(&p, &calls);
        assert_eq!(check(&asked, "AgentGet"), Check::Approve(Layer::Prompt));
        assert!(matches!(check(&asked, "DetachWorkspace"), Check::Refuse(_)));
    }

    #[test]
    fn a_call_that_needs_approval_is_parked_not_refused() {
        let limits = ToolLimits {
            require_approval: vec!["ExecCommand".into()],
            ..Default::default()
        };
        let p = policy(&composed(limits, true));
        assert_eq!(check(&p, "ExecCommand"), Check::Approve(Layer::Config));
        assert_eq!(denial(&p, "ExecCommand"), None);
    }
}
