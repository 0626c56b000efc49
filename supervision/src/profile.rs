//! Agent profiles: a stable capability package of visibility, lifecycle
//! ownership and tool families (seed: agent-profile-model). Callers pick a
//! [`Preset`]; the internal [`Profile`] is what every rule reads.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Whether the agent is part of the public, operator-facing surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Visibility {
    Public,
    Private,
}

/// Who owns the agent's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Ownership {
    /// Inside a parent's supervision contract: the parent holds a task
    /// handle and cleaning up the parent cleans up this agent.
    ParentSupervised,
    /// An operator-facing object with its own lifecycle.
    SelfOwned,
}

/// One stable capability family. Tool names may change; families do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolFamily {
    Core,
    LocalEnvironment,
    AgentCreation,
    AuthorityExpansion,
    ExternalTrigger,
}

impl ToolFamily {
    pub const ALL: [ToolFamily; 5] = [
        ToolFamily::Core,
        ToolFamily::LocalEnvironment,
        ToolFamily::AgentCreation,
        ToolFamily::AuthorityExpansion,
        ToolFamily::ExternalTrigger,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            ToolFamily::Core => "core",
            ToolFamily::LocalEnvironment => "local_environment",
            ToolFamily::AgentCreation => "agent_creation",
            ToolFamily::AuthorityExpansion => "authority_expansion",
            ToolFamily::ExternalTrigger => "external_trigger",
        }
    }

    const fn bit(self) -> u8 {
        match self {
            ToolFamily::Core => 1,
            ToolFamily::LocalEnvironment => 1 << 1,
            ToolFamily::AgentCreation => 1 << 2,
            ToolFamily::AuthorityExpansion => 1 << 3,
            ToolFamily::ExternalTrigger => 1 << 4,
        }
    }
}

/// A set of tool families, one bit each: an idle agent keeps its profile in
/// RAM, so it stays a single byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct ToolFamilies(u8);

impl ToolFamilies {
    pub const fn empty() -> Self {
        Self(0)
    }

    pub const fn with(self, family: ToolFamily) -> Self {
        Self(self.0 | family.bit())
    }

    pub const fn contains(self, family: ToolFamily) -> bool {
        self.0 & family.bit() != 0
    }

    pub fn iter(self) -> impl Iterator<Item = ToolFamily> {
        ToolFamily::ALL
            .into_iter()
            .filter(move |f| self.contains(*f))
    }
}

impl FromIterator<ToolFamily> for ToolFamilies {
    fn from_iter<I: IntoIterator<Item = ToolFamily>>(iter: I) -> Self {
        iter.into_iter().fold(Self::empty(), Self::with)
    }
}

impl fmt::Debug for ToolFamilies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(ToolFamily::name))
            .finish()
    }
}

/// The internal profile every rule reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Profile {
    pub visibility: Visibility,
    pub ownership: Ownership,
    pub tool_families: ToolFamilies,
}

impl Profile {
    /// The preset this profile was made from, if it matches one exactly.
    pub fn preset(&self) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.profile() == *self)
    }
}

/// The small public enum callers choose from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Preset {
    /// The default bounded child: private, parent-supervised, no further
    /// children, no authority expansion.
    PrivateChild,
    /// A public, self-owned agent with every first-pass family.
    PublicNamed,
    /// `private_child` plus `agent_creation`, restricted to spawning
    /// private children: the seeds' deferred "child-delegating private
    /// preset", which makes supervision trees deeper than one level.
    PrivateDelegator,
}

impl Preset {
    pub const ALL: [Preset; 3] = [
        Preset::PrivateChild,
        Preset::PublicNamed,
        Preset::PrivateDelegator,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Preset::PrivateChild => "private_child",
            Preset::PublicNamed => "public_named",
            Preset::PrivateDelegator => "private_delegator",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    pub const fn profile(self) -> Profile {
        match self {
            Preset::PrivateChild => Profile {
                visibility: Visibility::Private,
                ownership: Ownership::ParentSupervised,
                tool_families: ToolFamilies::empty()
                    .with(ToolFamily::Core)
                    .with(ToolFamily::LocalEnvironment)
                    .with(ToolFamily::ExternalTrigger),
            },
            Preset::PublicNamed => Profile {
                visibility: Visibility::Public,
                ownership: Ownership::SelfOwned,
                tool_families: ToolFamilies::empty()
                    .with(ToolFamily::Core)
                    .with(ToolFamily::LocalEnvironment)
                    .with(ToolFamily::AgentCreation)
                    .with(ToolFamily::AuthorityExpansion)
                    .with(ToolFamily::ExternalTrigger),
            },
            Preset::PrivateDelegator => Profile {
                visibility: Visibility::Private,
                ownership: Ownership::ParentSupervised,
                tool_families: ToolFamilies::empty()
                    .with(ToolFamily::Core)
                    .with(ToolFamily::LocalEnvironment)
                    .with(ToolFamily::AgentCreation)
                    .with(ToolFamily::ExternalTrigger),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_child_matches_the_seed_table() {
        let p = Preset::PrivateChild.profile();
        assert_eq!(p.visibility, Visibility::Private);
        assert_eq!(p.ownership, Ownership::ParentSupervised);
        // A set: the order families are listed in is no promise.
        let on: std::collections::BTreeSet<_> =
            p.tool_families.iter().map(ToolFamily::name).collect();
        let seed = ["core", "local_environment", "external_trigger"];
        assert_eq!(on, seed.into_iter().collect());
    }

    #[test]
    fn public_named_matches_the_seed_table() {
        let p = Preset::PublicNamed.profile();
        assert_eq!(p.visibility, Visibility::Public);
        assert_eq!(p.ownership, Ownership::SelfOwned);
        assert!(ToolFamily::ALL.iter().all(|f| p.tool_families.contains(*f)));
    }

    #[test]
    fn private_delegator_is_private_child_plus_agent_creation() {
        let child = Preset::PrivateChild.profile();
        let delegator = Preset::PrivateDelegator.profile();
        assert_eq!(delegator.visibility, child.visibility);
        assert_eq!(delegator.ownership, child.ownership);
        assert_eq!(
            delegator.tool_families,
            child.tool_families.with(ToolFamily::AgentCreation)
        );
    }

    #[test]
    fn presets_round_trip_by_name_and_profile() {
        for preset in Preset::ALL {
            assert_eq!(Preset::from_name(preset.name()), Some(preset));
            assert_eq!(preset.profile().preset(), Some(preset));
        }
        assert_eq!(Preset::from_name("root"), None);
    }
}
