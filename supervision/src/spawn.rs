//! Who may spawn what. The answer depends on the caller's profile only,
//! never on who sent the message the caller is handling.

use crate::ids::AgentId;
use crate::profile::{Ownership, Preset, Profile, ToolFamily, Visibility};

/// Why a `SpawnAgent` call was refused; the brain reads the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SpawnRefusal {
    #[error("this agent's profile has no agent_creation family: it may not spawn agents")]
    NoAgentCreation,
    #[error("a private agent may spawn only private children")]
    PrivateMayNotSpawnPublic,
    #[error("initial_message is required for a parent-supervised child")]
    MissingInitialMessage,
}

/// Decides whether `caller` may spawn an agent of `preset`.
pub fn may_spawn(
    caller: Profile,
    preset: Preset,
    initial_message: Option<&str>,
) -> Result<(), SpawnRefusal> {
    if !caller.tool_families.contains(ToolFamily::AgentCreation) {
        return Err(SpawnRefusal::NoAgentCreation);
    }
    let child = preset.profile();
    if caller.visibility == Visibility::Private && child.visibility == Visibility::Public {
        return Err(SpawnRefusal::PrivateMayNotSpawnPublic);
    }
    let needs_message = match child.ownership {
        Ownership::ParentSupervised => true,
        Ownership::SelfOwned => false,
    };
    if needs_message && initial_message.is_none_or(|m| m.trim().is_empty()) {
        return Err(SpawnRefusal::MissingInitialMessage);
    }
    Ok(())
}

/// The two relations of an agent spawned by `caller`: lineage always, and
/// supervision only for a parent-supervised child.
pub fn relations(caller: AgentId, preset: Preset) -> (Option<AgentId>, Option<AgentId>) {
    let supervisor = match preset.profile().ownership {
        Ownership::ParentSupervised => Some(caller),
        Ownership::SelfOwned => None,
    };
    (Some(caller), supervisor)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn arb_preset() -> impl Strategy<Value = Preset> {
        prop::sample::select(Preset::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn only_agent_creation_spawns_and_private_callers_spawn_private(
            caller in arb_preset(),
            preset in arb_preset(),
            message in proptest::option::of("[a-z ]{0,8}"),
        ) {
            let verdict = may_spawn(caller.profile(), preset, message.as_deref());
            let caller_p = caller.profile();
            if !caller_p.tool_families.contains(ToolFamily::AgentCreation) {
                prop_assert_eq!(verdict, Err(SpawnRefusal::NoAgentCreation));
            } else if caller_p.visibility == Visibility::Private {
                prop_assert!(verdict.is_err() || preset.profile().visibility == Visibility::Private);
            }
            if verdict.is_ok() && preset.profile().ownership == Ownership::ParentSupervised {
                prop_assert!(message.as_deref().is_some_and(|m| !m.trim().is_empty()));
            }
        }

        #[test]
        fn a_supervised_child_is_supervised_by_its_creator(caller in any::<u128>(), preset in arb_preset()) {
            let caller = AgentId::from_u128(caller);
            let (lineage, supervisor) = relations(caller, preset);
            prop_assert_eq!(lineage, Some(caller));
            let supervised = preset.profile().ownership == Ownership::ParentSupervised;
            prop_assert_eq!(supervisor.is_some(), supervised);
        }
    }

    #[test]
    fn the_seed_cases() {
        let child = Preset::PrivateChild.profile();
        let public = Preset::PublicNamed.profile();
        let delegator = Preset::PrivateDelegator.profile();
        assert_eq!(
            may_spawn(child, Preset::PrivateChild, Some("x")),
            Err(SpawnRefusal::NoAgentCreation)
        );
        assert_eq!(
            may_spawn(delegator, Preset::PublicNamed, None),
            Err(SpawnRefusal::PrivateMayNotSpawnPublic)
        );
        assert_eq!(
            may_spawn(delegator, Preset::PrivateDelegator, Some("go")),
            Ok(())
        );
        assert_eq!(may_spawn(public, Preset::PublicNamed, None), Ok(()));
        assert_eq!(
            may_spawn(public, Preset::PrivateChild, Some("  ")),
            Err(SpawnRefusal::MissingInitialMessage)
        );
    }
}
