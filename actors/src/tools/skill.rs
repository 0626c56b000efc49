//! `LoadSkill`: the whole text of one of the agent's skills and the files
//! beside it. The context lists an agent's skills by name and description;
//! a brain loads one when it decides to use it.

use std::sync::Arc;

use holarchy_composition::skill::SkillError;
use holarchy_supervision::ToolFamily;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{classified, Classify, ErrorKind, ToolError};
use super::tool::{Caller, Plane, Spec, Tool};
use crate::store::StoreError;
use crate::Ctx;

#[derive(Debug)]
pub struct LoadSkill;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadSkillInput {
    /// The skill's name, as the context lists it.
    name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LoadSkillError {
    #[error("`{0}` is not one of this agent's skills")]
    NotYours(String),
    #[error("skill `{0}` is no longer in the daemon's skill folders")]
    Gone(String),
    #[error("skill `{name}` cannot be read: {source}")]
    Unreadable { name: String, source: SkillError },
    #[error(transparent)]
    Store(#[from] StoreError),
}

classified!(LoadSkillError);

impl Classify for LoadSkillError {
    fn kind(&self) -> ErrorKind {
        match self {
            LoadSkillError::NotYours(_) | LoadSkillError::Gone(_) => ErrorKind::NotFound,
            LoadSkillError::Unreadable { .. } | LoadSkillError::Store(_) => ErrorKind::Failed,
        }
    }
}

impl Tool for LoadSkill {
    const SPEC: Spec = Spec {
        name: "LoadSkill",
        family: ToolFamily::Core,
        plane: Plane::Agent,
        description: "Returns the full text of one of your skills (as listed in your context's `skills`) and the files in its folder.",
    };
    type Input = LoadSkillInput;
    type Error = LoadSkillError;

    async fn run(
        ctx: &Arc<Ctx>,
        caller: Caller,
        input: LoadSkillInput,
    ) -> Result<Value, LoadSkillError> {
        let record = ctx.reads().agent(caller.agent_id)?;
        // Only the skills the agent was composed with: a skill folder is
        // the operator's, not every agent's to read.
        let yours = record
            .as_ref()
            .and_then(|r| r.composition.as_deref())
            .is_some_and(|c| c.skills.contains(&input.name));
        if !yours {
            return Err(LoadSkillError::NotYours(input.name));
        }
        let skill = ctx
            .skills
            .current()
            .get(&input.name)
            .cloned()
            .ok_or_else(|| LoadSkillError::Gone(input.name.clone()))?;
        // Disk reads, bounded but not instant: off the async workers.
        let loaded = tokio::task::spawn_blocking(move || skill.load())
            .await
            .map_err(|err| LoadSkillError::Unreadable {
                name: input.name.clone(),
                source: SkillError::Invalid {
                    path: std::path::PathBuf::new(),
                    detail: err.to_string(),
                },
            })?
            .map_err(|source| LoadSkillError::Unreadable {
                name: input.name.clone(),
                source,
            })?;
        Ok(loaded_json(&loaded))
    }
}

/// A loaded skill as `LoadSkill` answers it (a replay's candidate skills
/// are answered the same way).
pub fn loaded_json(loaded: &holarchy_composition::skill::LoadedSkill) -> Value {
    json!({
        "name": loaded.skill.name,
        "description": loaded.skill.description,
        "tools": loaded.skill.tools,
        "text": loaded.body,
        "files": loaded.files,
        "files_truncated": loaded.files_truncated,
    })
}
