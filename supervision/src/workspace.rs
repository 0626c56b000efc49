//! Workspace projections (seed: agent-control-plane-model, "Workspace
//! Projection Model"): the host directories an agent may work in, and the
//! one it works in now. Every agent has its built-in `agent_home`, so it
//! never has no active workspace; attaching and detaching change the set,
//! `UseWorkspace` moves the active one within it.
//!
//! Paths here are already canonical: resolving them (symlinks, `..`) is
//! I/O and happens in the actors; the rules over the set are pure.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ids::{AgentId, TaskId};

/// The id of every agent's built-in workspace.
pub const AGENT_HOME: &str = "agent_home";

/// Longest workspace id, in bytes.
pub const MAX_WORKSPACE_ID_LEN: usize = 64;

/// One attached host directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    pub workspace_id: String,
    /// Canonical, absolute.
    pub root: PathBuf,
}

/// Where the agent works now: a directory inside one attached workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Active {
    pub workspace_id: String,
    /// Canonical, absolute, inside the workspace's root.
    pub dir: PathBuf,
}

/// An agent's workspace projection as the store keeps it. An agent without
/// one has only its `agent_home`, active: idle agents store nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Projection {
    pub agent_id: AgentId,
    /// Attached workspaces besides `agent_home`, in attach order.
    pub attached: Vec<Binding>,
    /// `None` while `agent_home`'s root is active.
    pub active: Option<Active>,
    pub updated_at_ms: u64,
}

/// Why a change to a projection was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceRefusal {
    #[error("workspace ids are 1 to {MAX_WORKSPACE_ID_LEN} bytes of a-z 0-9 - _")]
    BadId,
    #[error("`{AGENT_HOME}` is built in: it cannot be attached or detached")]
    Builtin,
    #[error("a workspace `{0}` is already attached")]
    IdTaken(String),
    #[error("`{0}` is already attached as `{1}`")]
    RootTaken(PathBuf, String),
    #[error("no workspace `{0}` is attached")]
    Unknown(String),
    #[error("`{0}` is not inside workspace `{1}`")]
    OutsideWorkspace(PathBuf, String),
}

/// Checks a workspace id an operator or agent chose.
pub fn check_id(id: &str) -> Result<(), WorkspaceRefusal> {
    if id == AGENT_HOME {
        return Err(WorkspaceRefusal::Builtin);
    }
    let ok = !id.is_empty()
        && id.len() <= MAX_WORKSPACE_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    ok.then_some(()).ok_or(WorkspaceRefusal::BadId)
}

/// How a spawned child's projection is made from its parent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WorkspaceMode {
    /// The child starts in the parent's active workspace.
    #[default]
    Inherit,
    /// The child works in a git worktree of the parent's active workspace,
    /// owned by the parent's task handle on the child.
    Worktree,
    /// The child works in a directory inside the parent's attached set.
    ExplicitRoot,
}

impl WorkspaceMode {
    pub const fn name(self) -> &'static str {
        match self {
            WorkspaceMode::Inherit => "inherit",
            WorkspaceMode::Worktree => "worktree",
            WorkspaceMode::ExplicitRoot => "explicit_root",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Inherit, Self::Worktree, Self::ExplicitRoot]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

/// A git worktree made for a child in `worktree` mode. It belongs to the
/// task that is the parent's handle on the child, not to the child: it goes
/// when that task ends, whoever ends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    /// The repository's git directory (`.git` of its main checkout), so a
    /// worktree made from another worktree still belongs to the repository,
    /// not to a checkout that may go first.
    pub repo: PathBuf,
    pub path: PathBuf,
    pub branch: String,
    /// The commit the branch starts at: the parent's `HEAD` at the spawn.
    pub base: String,
    /// Set once the worktree and its branch are gone from disk and git.
    pub removed: bool,
}

impl Worktree {
    /// The worktree of `task`, placed under `worktree_root`.
    pub fn for_task(repo: PathBuf, base: String, worktree_root: &Path, task: TaskId) -> Self {
        Self {
            repo,
            path: worktree_root.join(task.to_string()),
            branch: format!("holarchy/{task}"),
            base,
            removed: false,
        }
    }
}

/// Where a command task ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    pub workspace_id: String,
    pub dir: PathBuf,
}

impl Projection {
    /// The projection of an agent that has only its `agent_home`.
    pub fn home_only(agent_id: AgentId, now_ms: u64) -> Self {
        Self {
            agent_id,
            attached: Vec::new(),
            active: None,
            updated_at_ms: now_ms,
        }
    }

    pub fn binding(&self, workspace_id: &str) -> Option<&Binding> {
        self.attached
            .iter()
            .find(|b| b.workspace_id == workspace_id)
    }

    /// The attached workspace whose root holds `dir`, the deepest first
    /// (roots may nest); `home` is `agent_home`'s root.
    pub fn owner_of(&self, home: &Path, dir: &Path) -> Option<String> {
        self.attached
            .iter()
            .filter(|b| dir.starts_with(&b.root))
            .max_by_key(|b| b.root.components().count())
            .map(|b| b.workspace_id.clone())
            .or_else(|| dir.starts_with(home).then(|| AGENT_HOME.to_owned()))
    }

    /// The root of an attached workspace, `agent_home` included.
    pub fn root_of(&self, home: &Path, workspace_id: &str) -> Option<PathBuf> {
        if workspace_id == AGENT_HOME {
            return Some(home.to_owned());
        }
        self.binding(workspace_id).map(|b| b.root.clone())
    }

    /// Whether `place` still lies in the workspace it names (attached,
    /// under the same root), so work recorded there can go on there.
    pub fn holds(&self, home: &Path, place: &Place) -> bool {
        self.root_of(home, &place.workspace_id)
            .is_some_and(|root| place.dir.starts_with(root))
    }

    /// Every attached root, `agent_home` first.
    pub fn roots(&self, home: &Path) -> Vec<PathBuf> {
        std::iter::once(home.to_owned())
            .chain(self.attached.iter().map(|b| b.root.clone()))
            .collect()
    }

    /// Where the agent works now.
    pub fn active_place(&self, home: &Path) -> Place {
        match &self.active {
            Some(active) => Place {
                workspace_id: active.workspace_id.clone(),
                dir: active.dir.clone(),
            },
            None => Place {
                workspace_id: AGENT_HOME.to_owned(),
                dir: home.to_owned(),
            },
        }
    }

    /// A free workspace id for a root attached without one: its directory
    /// name, cut to the allowed alphabet, with `-2`, `-3`... if taken.
    pub fn id_for_root(&self, root: &Path) -> String {
        let stem: String = root
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default()
            .chars()
            .map(|c| match c {
                'a'..='z' | '0'..='9' | '-' | '_' => c,
                _ => '-',
            })
            .take(MAX_WORKSPACE_ID_LEN - 8)
            .collect();
        let stem = if check_id(&stem).is_ok() {
            stem
        } else {
            "workspace".to_owned()
        };
        let mut candidate = stem.clone();
        let mut n = 2;
        while self.binding(&candidate).is_some() {
            candidate = format!("{stem}-{n}");
            n += 1;
        }
        candidate
    }

    /// What a public agent created by this one starts with: this agent's
    /// attached set, never its active workspace (seed: agent-profile-model).
    /// `None` when that is only `agent_home`.
    pub fn for_public_child(&self, child: AgentId, now_ms: u64) -> Option<Projection> {
        (!self.attached.is_empty()).then(|| Projection {
            agent_id: child,
            attached: self.attached.clone(),
            active: None,
            updated_at_ms: now_ms,
        })
    }

    /// What a private child in `inherit` mode starts with: the same attached
    /// set and active directory. Homes are per agent, so a parent working in
    /// its own `agent_home` gives the child the child's own home.
    pub fn inherited(&self, child: AgentId, now_ms: u64) -> Option<Projection> {
        let active = self.active.clone().filter(|a| a.workspace_id != AGENT_HOME);
        (!self.attached.is_empty()).then(|| Projection {
            agent_id: child,
            attached: self.attached.clone(),
            active,
            updated_at_ms: now_ms,
        })
    }

    /// A child confined to one root (`worktree` or `explicit_root` mode):
    /// that root is its only attached workspace besides its home, and
    /// `dir`, inside it, is active.
    pub fn confined(
        child: AgentId,
        workspace_id: String,
        root: PathBuf,
        dir: PathBuf,
        now_ms: u64,
    ) -> Projection {
        Projection {
            agent_id: child,
            attached: vec![Binding {
                workspace_id: workspace_id.clone(),
                root,
            }],
            active: Some(Active { workspace_id, dir }),
            updated_at_ms: now_ms,
        }
    }

    pub fn attach(&mut self, binding: Binding) -> Result<(), WorkspaceRefusal> {
        check_id(&binding.workspace_id)?;
        if self.binding(&binding.workspace_id).is_some() {
            return Err(WorkspaceRefusal::IdTaken(binding.workspace_id));
        }
        if let Some(same) = self.attached.iter().find(|b| b.root == binding.root) {
            return Err(WorkspaceRefusal::RootTaken(
                binding.root,
                same.workspace_id.clone(),
            ));
        }
        self.attached.push(binding);
        Ok(())
    }

    /// Removes a binding (the directory stays). An agent working in it goes
    /// back to its `agent_home`.
    pub fn detach(&mut self, workspace_id: &str) -> Result<Binding, WorkspaceRefusal> {
        if workspace_id == AGENT_HOME {
            return Err(WorkspaceRefusal::Builtin);
        }
        let at = self
            .attached
            .iter()
            .position(|b| b.workspace_id == workspace_id)
            .ok_or_else(|| WorkspaceRefusal::Unknown(workspace_id.to_owned()))?;
        if self
            .active
            .as_ref()
            .is_some_and(|a| a.workspace_id == workspace_id)
        {
            self.active = None;
        }
        Ok(self.attached.remove(at))
    }

    /// Makes `dir` (canonical) of workspace `workspace_id` the active one.
    pub fn activate(
        &mut self,
        home: &Path,
        workspace_id: &str,
        dir: PathBuf,
    ) -> Result<(), WorkspaceRefusal> {
        let root = self
            .root_of(home, workspace_id)
            .ok_or_else(|| WorkspaceRefusal::Unknown(workspace_id.to_owned()))?;
        if !dir.starts_with(&root) {
            return Err(WorkspaceRefusal::OutsideWorkspace(
                dir,
                workspace_id.to_owned(),
            ));
        }
        self.active = if workspace_id == AGENT_HOME && dir == home {
            None
        } else {
            Some(Active {
                workspace_id: workspace_id.to_owned(),
                dir,
            })
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests;
