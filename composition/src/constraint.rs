//! The layered constraints on an agent's tool calls: system, then the
//! instance's configuration, then its prompt. A lower layer can narrow what a
//! higher one allows, never widen it.
//!
//! [`Policy::evaluate`] answers one question for one tool call: allowed,
//! denied (and by which layer), or parked for an approval. The rules are
//! monotonic on purpose: adding a rule to any layer can only make a verdict
//! stricter, so nothing a prompt or a brain says can lift a deny from the
//! configuration or the system.
//!
//! [`TurnRate`] is the per-instance turn limit (`max_turns_per_hour`), a
//! sliding one-hour window over the starts kept in a bounded [`TurnWindow`].

use std::collections::{BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Where a constraint comes from. `Ord` follows the seed's precedence:
/// `System > Config > Prompt`.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    // Declaration order is the `Ord`: lowest first.
    Prompt,
    Config,
    System,
}

impl Layer {
    /// Every layer, highest precedence first: the order rules are read in.
    pub const HIGHEST_FIRST: [Layer; 3] = [Layer::System, Layer::Config, Layer::Prompt];

    pub const fn as_str(self) -> &'static str {
        match self {
            Layer::System => "system",
            Layer::Config => "config",
            Layer::Prompt => "prompt",
        }
    }

    /// How a reason names the layer to a brain or an operator.
    const fn described(self) -> &'static str {
        match self {
            Layer::System => "the system's hard constraints",
            Layer::Config => "the instance's configuration",
            Layer::Prompt => "the instance's prompt",
        }
    }
}

/// One layer's rules over exact tool names (`ExecCommand`). The default has
/// no rule at all: it allows everything and asks for nothing.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolRules {
    /// When set, the only tools this layer allows.
    pub allow: Option<BTreeSet<String>>,
    pub deny: BTreeSet<String>,
    /// Tools whose calls wait for an operator's approval.
    pub require_approval: BTreeSet<String>,
}

/// A rule set named a tool the catalog does not have; refused when the
/// manifest is applied so that a typo never silently allows a tool.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConstraintError {
    #[error("unknown tool {tool:?} in {list}")]
    UnknownTool { tool: String, list: &'static str },
    #[error("max_turns_per_hour must be between 1 and {max}, got {given}")]
    RateOutOfRange { given: u32, max: u32 },
}

impl ToolRules {
    /// Refuses the first name (allow, then deny, then require_approval, each
    /// in order) that is not in `known_tools`. Since every name must be
    /// known, the sets are bounded by the catalog's size.
    pub fn validate(&self, known_tools: &[&str]) -> Result<(), ConstraintError> {
        let lists = [
            ("allow", self.allow.as_ref()),
            ("deny", Some(&self.deny)),
            ("require_approval", Some(&self.require_approval)),
        ];
        for (list, names) in lists {
            for tool in names.into_iter().flatten() {
                if !known_tools.contains(&tool.as_str()) {
                    return Err(ConstraintError::UnknownTool {
                        tool: tool.clone(),
                        list,
                    });
                }
            }
        }
        Ok(())
    }

    /// Why this layer refuses `tool`, if it does: an explicit deny, or an
    /// allow list that leaves it out.
    fn refusal(&self, tool: &str) -> Option<Refusal> {
        if self.deny.contains(tool) {
            Some(Refusal::Denied)
        } else if self
            .allow
            .as_ref()
            .is_some_and(|allow| !allow.contains(tool))
        {
            Some(Refusal::NotAllowed)
        } else {
            None
        }
    }
}

enum Refusal {
    Denied,
    NotAllowed,
}

/// What [`Policy::evaluate`] says about one call.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    /// `layer` is the highest layer that refuses the tool; `reason` is short
    /// enough to return to the brain as the tool's error.
    Deny {
        layer: Layer,
        reason: String,
    },
    /// Nothing refuses the tool, and `layer` (the highest such) wants an
    /// operator to approve the call first.
    RequireApproval {
        layer: Layer,
    },
}

/// The rules of the three layers of one instance.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct Policy {
    pub system: ToolRules,
    pub config: ToolRules,
    pub prompt: ToolRules,
}

impl Policy {
    /// No rule at any layer.
    pub fn new() -> Self {
        Self::default()
    }

    /// This policy with `layer`'s rules replaced.
    pub fn with(mut self, layer: Layer, rules: ToolRules) -> Self {
        *self.rules_mut(layer) = rules;
        self
    }

    pub fn rules(&self, layer: Layer) -> &ToolRules {
        match layer {
            Layer::System => &self.system,
            Layer::Config => &self.config,
            Layer::Prompt => &self.prompt,
        }
    }

    pub fn rules_mut(&mut self, layer: Layer) -> &mut ToolRules {
        match layer {
            Layer::System => &mut self.system,
            Layer::Config => &mut self.config,
            Layer::Prompt => &mut self.prompt,
        }
    }

    /// The verdict for a call of `tool`. Every layer is read, highest
    /// first; any refusal denies, so a lower layer's allow list never
    /// lifts a higher layer's deny.
    pub fn evaluate(&self, tool: &str) -> Verdict {
        for layer in Layer::HIGHEST_FIRST {
            let reason = match self.rules(layer).refusal(tool) {
                Some(Refusal::Denied) => format!("{tool} is denied by {}", layer.described()),
                Some(Refusal::NotAllowed) => {
                    format!("{tool} is not in the allow list of {}", layer.described())
                }
                None => continue,
            };
            return Verdict::Deny { layer, reason };
        }
        Layer::HIGHEST_FIRST
            .into_iter()
            .find(|&layer| self.rules(layer).require_approval.contains(tool))
            .map_or(Verdict::Allow, |layer| Verdict::RequireApproval { layer })
    }
}

/// The most turns an hour a rate may allow: one a second. It also bounds a
/// [`TurnWindow`], which keeps at most this many starts.
pub const MAX_TURNS_PER_HOUR: u32 = 3600;
pub const HOUR_MS: u64 = 3_600_000;

/// At most `max_per_hour` turn starts in any sliding hour.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnRate {
    max_per_hour: u32,
}

impl TurnRate {
    pub fn new(max_per_hour: u32) -> Result<Self, ConstraintError> {
        if (1..=MAX_TURNS_PER_HOUR).contains(&max_per_hour) {
            Ok(Self { max_per_hour })
        } else {
            Err(ConstraintError::RateOutOfRange {
                given: max_per_hour,
                max: MAX_TURNS_PER_HOUR,
            })
        }
    }

    pub fn max_per_hour(self) -> u32 {
        self.max_per_hour
    }

    /// `Ok` if a turn may start at `now_ms`; else the earliest time one
    /// may, which is always later than `now_ms`.
    pub fn admits(self, window: &TurnWindow, now_ms: u64) -> Result<(), u64> {
        let max = self.max_per_hour as usize;
        // The window is sorted, so the `max`-th most recent start decides:
        // a turn may start once that one is an hour old.
        let Some(index) = window.starts.len().checked_sub(max) else {
            return Ok(());
        };
        let binding = window.starts.get(index).copied().unwrap_or(0);
        let free_at = binding.saturating_add(HOUR_MS);
        if free_at <= now_ms {
            Ok(())
        } else {
            Err(free_at)
        }
    }
}

/// The recent turn starts of one instance, oldest first. Only the last
/// `max_per_hour` starts can ever decide [`TurnRate::admits`], so it keeps
/// no more than that: memory is bounded by [`MAX_TURNS_PER_HOUR`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq, Default)]
pub struct TurnWindow {
    starts: VecDeque<u64>,
}

impl TurnWindow {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a turn that started at `start_ms` (normally one `admits`
    /// accepted). A start earlier than the last one (a clock stepped back)
    /// is kept in order, so the window stays sorted.
    pub fn record(&mut self, rate: TurnRate, start_ms: u64) {
        let at = self.starts.partition_point(|&s| s <= start_ms);
        self.starts.insert(at, start_ms);
        while self.starts.len() > rate.max_per_hour as usize {
            self.starts.pop_front();
        }
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }
}

#[cfg(test)]
#[path = "constraint/tests.rs"]
mod tests;
