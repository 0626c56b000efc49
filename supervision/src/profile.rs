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
    /// The agent's own durable notes and their search: every preset has it.
    Memory,
    /// Tools of the MCP servers the agent is allowed (`mcp__<server>__<tool>`).
    /// Every preset has it: which servers an agent may use is part of the
    /// agent (its record's `mcp_servers`), so an agent allowed none sees no
    /// tool of this family.
    Mcp,
}

impl ToolFamily {
    pub const ALL: [ToolFamily; 7] = [
        ToolFamily::Core,
        ToolFamily::LocalEnvironment,
        ToolFamily::AgentCreation,
        ToolFamily::AuthorityExpansion,
        ToolFamily::ExternalTrigger,
        ToolFamily::Memory,
        ToolFamily::Mcp,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            ToolFamily::Core => "core",
            ToolFamily::LocalEnvironment => "local_environment",
            ToolFamily::AgentCreation => "agent_creation",
            ToolFamily::AuthorityExpansion => "authority_expansion",
            ToolFamily::ExternalTrigger => "external_trigger",
            ToolFamily::Memory => "memory",
            ToolFamily::Mcp => "mcp",
        }
    }

    const fn bit(self) -> u8 {
        match self {
            ToolFamily::Core => 1,
            ToolFamily::LocalEnvironment => 1 << 1,
            ToolFamily::AgentCreation => 1 << 2,
            ToolFamily::AuthorityExpansion => 1 << 3,
            ToolFamily::ExternalTrigger => 1 << 4,
            ToolFamily::Memory => 1 << 5,
            ToolFamily::Mcp => 1 << 6,
        }
    }
}

/// A set of tool families, one bit each: an idle agent keeps its profile in
/// RAM, so it stays a single byte.
///
/// Read back from storage, a set always has [`ToolFamily::Memory`] and
/// [`ToolFamily::Mcp`]: records written before those families existed lack
/// their bits, yet every profile came from a preset and every preset now
/// has both, so an old agent keeps matching its preset and gets its memory
/// tools (and no MCP tool: it was allowed no server).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(from = "StoredFamilies")]
pub struct ToolFamilies(u8);

/// The stored form of [`ToolFamilies`]: the same single byte.
#[derive(Deserialize)]
struct StoredFamilies(u8);

impl From<StoredFamilies> for ToolFamilies {
    fn from(stored: StoredFamilies) -> Self {
        Self(stored.0)
            .with(ToolFamily::Memory)
            .with(ToolFamily::Mcp)
    }
}

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
                    .with(ToolFamily::ExternalTrigger)
                    .with(ToolFamily::Memory)
                    .with(ToolFamily::Mcp),
            },
            Preset::PublicNamed => Profile {
                visibility: Visibility::Public,
                ownership: Ownership::SelfOwned,
                tool_families: ToolFamilies::empty()
                    .with(ToolFamily::Core)
                    .with(ToolFamily::LocalEnvironment)
                    .with(ToolFamily::AgentCreation)
                    .with(ToolFamily::AuthorityExpansion)
                    .with(ToolFamily::ExternalTrigger)
                    .with(ToolFamily::Memory)
                    .with(ToolFamily::Mcp),
            },
            Preset::PrivateDelegator => Profile {
                visibility: Visibility::Private,
                ownership: Ownership::ParentSupervised,
                tool_families: ToolFamilies::empty()
                    .with(ToolFamily::Core)
                    .with(ToolFamily::LocalEnvironment)
                    .with(ToolFamily::AgentCreation)
                    .with(ToolFamily::ExternalTrigger)
                    .with(ToolFamily::Memory)
                    .with(ToolFamily::Mcp),
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
        let seed = [
            "core",
            "local_environment",
            "external_trigger",
            "memory",
            "mcp",
        ];
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
    fn a_profile_stored_before_the_memory_family_reads_back_with_it() {
        // The bits of public_named before the memory family existed.
        let old: ToolFamilies = serde_json::from_str("31").expect("a stored byte");
        assert!(old.contains(ToolFamily::Memory));
        assert_eq!(old, Preset::PublicNamed.profile().tool_families);
    }

    #[test]
    fn a_profile_stored_before_the_mcp_family_still_matches_its_preset() {
        // private_child's bits before the mcp family existed (core,
        // local_environment, external_trigger, memory).
        let old: ToolFamilies = serde_json::from_str("51").expect("a stored byte");
        assert!(old.contains(ToolFamily::Mcp));
        assert_eq!(old, Preset::PrivateChild.profile().tool_families);
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
