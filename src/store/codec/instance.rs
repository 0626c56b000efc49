//! Instance records across their versions: version 2 added the agent's
//! context budget and MCP servers, version 3 a GitHub webhook's replay
//! window, version 4 the agent's network policy. An older record reads back with what it lacks unset, so its
//! spec (and digest) is what applying its manifest again gives.

use holarchy_actors::StoreError;
use holarchy_composition::instance::InstanceRecord;
use holarchy_composition::manifest::{Ingress, InstanceSpec, Provider};

use super::{decode_body, encode_as, split_version, FORMAT_VERSION};

/// The version this build writes.
pub const INSTANCE_VERSION: u8 = 4;
const INSTANCE_VERSION_3: u8 = 3;
const INSTANCE_VERSION_2: u8 = 2;

pub fn encode_instance(tree: &'static str, record: &InstanceRecord) -> Result<Vec<u8>, StoreError> {
    encode_as(INSTANCE_VERSION, tree, record)
}

pub fn decode_instance(tree: &'static str, bytes: &[u8]) -> Result<InstanceRecord, StoreError> {
    match split_version(tree, bytes)? {
        (INSTANCE_VERSION, body) => decode_body(tree, body),
        (INSTANCE_VERSION_3, body) => {
            decode_body::<InstanceRecordV3>(tree, body).map(InstanceRecord::from)
        }
        (INSTANCE_VERSION_2, body) => {
            decode_body::<InstanceRecordV2>(tree, body).map(InstanceRecord::from)
        }
        (FORMAT_VERSION, body) => {
            decode_body::<InstanceRecordV1>(tree, body).map(InstanceRecord::from)
        }
        (version, _) => Err(StoreError::UnsupportedVersion { tree, version }),
    }
}

/// An ingress as versions 1 and 2 wrote it: the layout must never change.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
enum IngressV1 {
    Webhook {
        provider: Provider,
        secret_env: String,
        events: Vec<String>,
    },
    Schedule {
        cron: String,
        timezone: Option<String>,
        payload: String,
    },
    Trigger,
    Publish,
}

impl From<IngressV1> for Ingress {
    fn from(v1: IngressV1) -> Self {
        match v1 {
            IngressV1::Webhook {
                provider,
                secret_env,
                events,
            } => Ingress::Webhook {
                provider,
                secret_env,
                events,
                replay_window_s: None,
            },
            IngressV1::Schedule {
                cron,
                timezone,
                payload,
            } => Ingress::Schedule {
                cron,
                timezone,
                payload,
            },
            IngressV1::Trigger => Ingress::Trigger,
            IngressV1::Publish => Ingress::Publish,
        }
    }
}

/// An instance as version 1 wrote it: the layout must never change.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct InstanceRecordV1 {
    spec: InstanceSpecV1,
    digest: String,
    created_at_ms: u64,
    updated_at_ms: u64,
}

#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct InstanceSpecV1 {
    name: String,
    role: Option<holarchy_supervision::Role>,
    brain: Option<holarchy_supervision::BrainConfig>,
    skills: Vec<String>,
    ingress: Vec<IngressV1>,
    limits: holarchy_supervision::ToolLimits,
}

impl From<InstanceRecordV1> for InstanceRecord {
    fn from(v1: InstanceRecordV1) -> Self {
        let spec = v1.spec;
        InstanceRecord {
            spec: InstanceSpec {
                name: spec.name,
                role: spec.role,
                brain: spec.brain,
                skills: spec.skills,
                ingress: spec.ingress.into_iter().map(Ingress::from).collect(),
                limits: spec.limits,
                context_tokens: None,
                mcp_servers: Vec::new(),
                network: Default::default(),
            },
            digest: v1.digest,
            created_at_ms: v1.created_at_ms,
            updated_at_ms: v1.updated_at_ms,
        }
    }
}

/// An instance as version 2 wrote it: the layout must never change.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct InstanceRecordV2 {
    spec: InstanceSpecV2,
    digest: String,
    created_at_ms: u64,
    updated_at_ms: u64,
}

#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct InstanceSpecV2 {
    name: String,
    role: Option<holarchy_supervision::Role>,
    brain: Option<holarchy_supervision::BrainConfig>,
    skills: Vec<String>,
    ingress: Vec<IngressV1>,
    limits: holarchy_supervision::ToolLimits,
    context_tokens: Option<u32>,
    mcp_servers: Vec<String>,
}

impl From<InstanceRecordV2> for InstanceRecord {
    fn from(v2: InstanceRecordV2) -> Self {
        let spec = v2.spec;
        InstanceRecord {
            spec: InstanceSpec {
                name: spec.name,
                role: spec.role,
                brain: spec.brain,
                skills: spec.skills,
                ingress: spec.ingress.into_iter().map(Ingress::from).collect(),
                limits: spec.limits,
                context_tokens: spec.context_tokens,
                mcp_servers: spec.mcp_servers,
                network: Default::default(),
            },
            digest: v2.digest,
            created_at_ms: v2.created_at_ms,
            updated_at_ms: v2.updated_at_ms,
        }
    }
}

/// An instance as version 3 wrote it: the layout must never change.
#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct InstanceRecordV3 {
    spec: InstanceSpecV3,
    digest: String,
    created_at_ms: u64,
    updated_at_ms: u64,
}

#[derive(serde::Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
struct InstanceSpecV3 {
    name: String,
    role: Option<holarchy_supervision::Role>,
    brain: Option<holarchy_supervision::BrainConfig>,
    skills: Vec<String>,
    ingress: Vec<Ingress>,
    limits: holarchy_supervision::ToolLimits,
    context_tokens: Option<u32>,
    mcp_servers: Vec<String>,
}

impl From<InstanceRecordV3> for InstanceRecord {
    fn from(v3: InstanceRecordV3) -> Self {
        let spec = v3.spec;
        InstanceRecord {
            spec: InstanceSpec {
                name: spec.name,
                role: spec.role,
                brain: spec.brain,
                skills: spec.skills,
                ingress: spec.ingress,
                limits: spec.limits,
                context_tokens: spec.context_tokens,
                mcp_servers: spec.mcp_servers,
                network: Default::default(),
            },
            digest: v3.digest,
            created_at_ms: v3.created_at_ms,
            updated_at_ms: v3.updated_at_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::encode;
    use super::*;

    const MANIFEST: &str = r#"
name = "lead"
skills = ["triage"]
[[ingress]]
source = "webhook"
provider = "github"
secret_env = "GH_WEBHOOK_SECRET"
events = ["issues"]
[[ingress]]
source = "schedule"
cron = "0 9 * * *"
[[ingress]]
source = "publish"
"#;

    fn parsed(text: &str) -> InstanceSpec {
        holarchy_composition::manifest::parse(text, &BTreeMap::new()).expect("parses")
    }

    fn old_ingress(spec: &InstanceSpec) -> Vec<IngressV1> {
        spec.ingress
            .iter()
            .map(|ingress| match ingress.clone() {
                Ingress::Webhook {
                    provider,
                    secret_env,
                    events,
                    ..
                } => IngressV1::Webhook {
                    provider,
                    secret_env,
                    events,
                },
                Ingress::Schedule {
                    cron,
                    timezone,
                    payload,
                } => IngressV1::Schedule {
                    cron,
                    timezone,
                    payload,
                },
                Ingress::Trigger => IngressV1::Trigger,
                Ingress::Publish => IngressV1::Publish,
            })
            .collect()
    }

    #[test]
    fn version_1_instances_read_back_with_no_budget_no_mcp_servers_and_the_default_window() {
        let mut spec = parsed(MANIFEST);
        let v1 = InstanceRecordV1 {
            spec: InstanceSpecV1 {
                name: spec.name.clone(),
                role: spec.role.clone(),
                brain: spec.brain.clone(),
                skills: spec.skills.clone(),
                ingress: old_ingress(&spec),
                limits: spec.limits.clone(),
            },
            digest: spec.digest(),
            created_at_ms: 3,
            updated_at_ms: 4,
        };
        let bytes = encode("instances", &v1).expect("encodes");
        let read = decode_instance("instances", &bytes).expect("decodes");
        assert_eq!(read.spec, spec);
        // Its digest is still the one a new apply of the same manifest gets.
        assert_eq!(read.digest, spec.digest());
        spec.context_tokens = Some(8_000);
        spec.mcp_servers = vec!["files".into()];
        let record = InstanceRecord { spec, ..read };
        let again = encode_instance("instances", &record).expect("encodes");
        assert_eq!(again[0], INSTANCE_VERSION);
        assert_eq!(
            decode_instance("instances", &again).expect("decodes"),
            record
        );
    }

    #[test]
    fn version_2_instances_read_back_with_the_default_window() {
        let spec = parsed(&format!("context_tokens = 4000\n{MANIFEST}"));
        let v2 = InstanceRecordV2 {
            spec: InstanceSpecV2 {
                name: spec.name.clone(),
                role: spec.role.clone(),
                brain: spec.brain.clone(),
                skills: spec.skills.clone(),
                ingress: old_ingress(&spec),
                limits: spec.limits.clone(),
                context_tokens: spec.context_tokens,
                mcp_servers: spec.mcp_servers.clone(),
            },
            digest: spec.digest(),
            created_at_ms: 3,
            updated_at_ms: 4,
        };
        let bytes = encode_as(INSTANCE_VERSION_2, "instances", &v2).expect("encodes");
        let read = decode_instance("instances", &bytes).expect("decodes");
        assert_eq!(read.spec, spec);
        assert_eq!(read.digest, spec.digest());

        let windowed = parsed(&MANIFEST.replace(
            "events = [\"issues\"]",
            "events = [\"issues\"]\nreplay_window = \"1h\"",
        ));
        let record = InstanceRecord {
            digest: windowed.digest(),
            spec: windowed,
            ..read
        };
        let again = encode_instance("instances", &record).expect("encodes");
        assert_eq!(
            decode_instance("instances", &again).expect("decodes"),
            record
        );
    }

    #[test]
    fn version_3_instances_read_back_with_the_full_network_and_their_digest() {
        let spec = parsed(&format!("context_tokens = 4000\n{MANIFEST}"));
        let v3 = InstanceRecordV3 {
            spec: InstanceSpecV3 {
                name: spec.name.clone(),
                role: spec.role.clone(),
                brain: spec.brain.clone(),
                skills: spec.skills.clone(),
                ingress: spec.ingress.clone(),
                limits: spec.limits.clone(),
                context_tokens: spec.context_tokens,
                mcp_servers: spec.mcp_servers.clone(),
            },
            digest: spec.digest(),
            created_at_ms: 3,
            updated_at_ms: 4,
        };
        let bytes = encode_as(INSTANCE_VERSION_3, "instances", &v3).expect("encodes");
        let read = decode_instance("instances", &bytes).expect("decodes");
        assert_eq!(read.spec, spec);
        // Applying the same manifest again stays a no-op.
        assert_eq!(read.digest, spec.digest());

        let sealed = parsed(&format!("network = \"none\"\n{MANIFEST}"));
        assert_eq!(sealed.network, holarchy_supervision::NetworkPolicy::None);
        assert_ne!(sealed.digest(), spec.digest());
        let record = InstanceRecord {
            digest: sealed.digest(),
            spec: sealed,
            ..read
        };
        let again = encode_instance("instances", &record).expect("encodes");
        assert_eq!(again[0], INSTANCE_VERSION);
        assert_eq!(
            decode_instance("instances", &again).expect("decodes"),
            record
        );
    }
}
