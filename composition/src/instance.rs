//! An applied instance as the store keeps it: its spec and the digest that
//! makes applying the same manifest twice a no-op. Its agent is the public
//! agent of the same name whose composition names this instance.

use serde::{Deserialize, Serialize};

use crate::manifest::InstanceSpec;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceRecord {
    pub spec: InstanceSpec,
    /// [`InstanceSpec::digest`] of `spec`.
    pub digest: String,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

impl InstanceRecord {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// The composition its agent runs under.
    pub fn composition(&self) -> holarchy_supervision::Composition {
        let spec = &self.spec;
        holarchy_supervision::Composition {
            instance: Some(spec.name.clone()),
            role: spec.role.clone(),
            skills: spec.skills.clone(),
            limits: spec.limits.clone(),
            triggers: spec.has("trigger"),
        }
    }
}
