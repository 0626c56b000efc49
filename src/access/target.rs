//! What a write acts on, read from its request's protobuf bytes for the
//! audit trail: an agent's id or name, an approval, an instance, a task, a
//! token. Only fields chosen here are read, so a message's text, a
//! manifest's body or a trigger's token never reach the trail.
//!
//! Reading the bytes at the gate, rather than asking each service, keeps
//! the trail's rule in one table, checked against the compiled
//! descriptors by a test.

use super::wire::{fields, message_of, strings};

/// The most bytes of a target kept.
pub const MAX_TARGET: usize = 200;

/// How a method's target is read from its request.
#[derive(Debug, Clone, Copy)]
enum Rule {
    /// String fields of the request, in this order, joined by spaces.
    Fields(&'static [u32]),
    /// A repeated message field; each one's string field, joined by commas.
    Each(u32, u32),
    /// The instance's `name` in the TOML manifest of field 1.
    ManifestName,
    /// A secret (field 1): only the first bytes of its SHA-256 are kept.
    SecretHash(u32),
}

const RULES: &[(&str, Rule)] = &[
    ("AgentService/CreateAgent", Rule::Fields(&[1])),
    ("AgentService/CreateAgents", Rule::Each(1, 1)),
    ("AgentService/SendMessage", Rule::Fields(&[1])),
    ("AgentService/SendMessages", Rule::Each(1, 1)),
    ("AgentService/ArchiveAgent", Rule::Fields(&[1])),
    ("AgentService/DeleteAgent", Rule::Fields(&[1])),
    ("AgentService/AbortRun", Rule::Fields(&[1, 2])),
    ("AgentService/PauseAgent", Rule::Fields(&[1])),
    ("AgentService/ResumeAgent", Rule::Fields(&[1])),
    ("AgentService/UpdateAgentBrain", Rule::Fields(&[1])),
    ("ApprovalService/Approve", Rule::Fields(&[1])),
    ("ApprovalService/Deny", Rule::Fields(&[1])),
    ("InstanceService/ApplyInstance", Rule::ManifestName),
    ("InstanceService/DeleteInstance", Rule::Fields(&[1])),
    ("InstanceService/PublishEvent", Rule::Fields(&[1, 2])),
    ("MemoryService/WriteMemory", Rule::Fields(&[1, 2])),
    ("ReplayService/StartReplay", Rule::Fields(&[1])),
    ("ReplayService/CancelReplay", Rule::Fields(&[1])),
    ("ReplayService/ResumeReplay", Rule::Fields(&[1])),
    ("ReplayService/DeleteReplay", Rule::Fields(&[1])),
    ("TaskService/SendTaskInput", Rule::Fields(&[1])),
    ("TaskService/StopTask", Rule::Fields(&[1])),
    ("TriggerService/DeliverTrigger", Rule::SecretHash(1)),
    ("WorkspaceService/AttachWorkspace", Rule::Fields(&[1, 2, 3])),
    ("WorkspaceService/DetachWorkspace", Rule::Fields(&[1, 2])),
    ("AccessService/CreateToken", Rule::Fields(&[3, 1, 2])),
    ("AccessService/RevokeToken", Rule::Fields(&[1])),
    ("AccessService/SetQuota", Rule::Fields(&[1])),
];

/// The target of a call to `method` (`Service/Method`) whose request is
/// the gRPC frame `frame` (flag, length, message). Empty when the method
/// has no rule or the bytes cannot be read.
pub fn of(method: &str, frame: &[u8]) -> String {
    let Some((_, rule)) = RULES.iter().find(|(name, _)| *name == method) else {
        return String::new();
    };
    let Some(message) = message_of(frame) else {
        return String::new();
    };
    let found = match *rule {
        Rule::Fields(numbers) => numbers
            .iter()
            .filter_map(|n| strings(message, *n).next())
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        Rule::Each(list, field) => fields(message, list)
            .filter_map(|item| strings(item, field).next())
            .collect::<Vec<_>>()
            .join(","),
        Rule::ManifestName => strings(message, 1)
            .next()
            .and_then(manifest_name)
            .unwrap_or_default(),
        Rule::SecretHash(field) => strings(message, field)
            .next()
            .map(|secret| {
                let hash = super::tokens::hash(secret.as_bytes());
                format!("sha256:{}", hex::encode(&hash[..6]))
            })
            .unwrap_or_default(),
    };
    cut(found)
}

/// `text` cut to [`MAX_TARGET`] bytes at a character boundary, with its
/// control characters replaced: the trail is printed to terminals.
fn cut(text: String) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if out.len() > MAX_TARGET {
        let mut end = MAX_TARGET;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push('…');
    }
    out
}

/// The top-level `name = "..."` of a manifest, read without parsing the
/// rest (the service parses it, with its own bounds).
fn manifest_name(manifest: &str) -> Option<String> {
    manifest
        .lines()
        .take_while(|line| !line.trim_start().starts_with('['))
        .find_map(|line| {
            let (key, value) = line.split_once('=')?;
            if key.trim() != "name" {
                return None;
            }
            let value = value.trim();
            Some(value.trim_matches(|c| c == '"' || c == '\'').to_owned())
        })
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::api::pb;

    fn frame(message: &impl prost::Message) -> Vec<u8> {
        let body = message.encode_to_vec();
        let mut out = vec![0];
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn a_target_names_the_agent_never_the_text() {
        let send = pb::SendMessageRequest {
            agent_id: "worker".into(),
            text: "the password is hunter2".into(),
            dedupe_key: "k".into(),
        };
        assert_eq!(of("AgentService/SendMessage", &frame(&send)), "worker");
        let many = pb::SendMessagesRequest {
            messages: vec![
                send.clone(),
                pb::SendMessageRequest {
                    agent_id: "b".into(),
                    ..send
                },
            ],
        };
        assert_eq!(of("AgentService/SendMessages", &frame(&many)), "worker,b");
    }

    #[test]
    fn a_trigger_token_is_kept_only_as_a_hash() {
        let deliver = pb::DeliverTriggerRequest {
            token: "secret-trigger-token".into(),
            payload: "p".into(),
            dedupe_key: String::new(),
        };
        let target = of("TriggerService/DeliverTrigger", &frame(&deliver));
        assert!(target.starts_with("sha256:"), "{target}");
        assert!(!target.contains("secret"));
    }

    #[test]
    fn a_manifest_gives_its_name_and_junk_gives_nothing() {
        let apply = pb::ApplyInstanceRequest {
            manifest: "# ops\nname = \"triage\"\nrole = \"r\"\n[ingress]\nname = \"x\"\n".into(),
            files: Default::default(),
        };
        assert_eq!(
            of("InstanceService/ApplyInstance", &frame(&apply)),
            "triage"
        );
        assert_eq!(of("AgentService/PauseAgent", &[0, 0, 0, 0, 9, 1]), "");
        assert_eq!(of("AgentService/PauseAgent", &[1, 0, 0, 0, 0]), "");
        assert_eq!(of("AgentService/GetAgent", &frame(&apply)), "");
    }

    #[test]
    fn a_long_or_odd_target_is_cut_and_cleaned() {
        let pause = pb::PauseAgentRequest {
            agent_id: format!("a\u{1b}[2J{}", "é".repeat(300)),
        };
        let target = of("AgentService/PauseAgent", &frame(&pause));
        assert!(target.len() <= MAX_TARGET + '…'.len_utf8());
        assert!(!target.contains('\u{1b}'));
    }

    #[test]
    fn every_rule_names_an_audited_method_and_string_fields_it_has() {
        use prost_types::field_descriptor_proto::Type;
        let api = super::super::descriptors::compiled();
        let (inputs, field_type) = (&api.inputs, |m: &str, n: u32| api.field(m, n));
        for (method, rule) in RULES {
            let needs = super::super::policy::needs(&format!("/holarchy.v1.{method}"));
            assert!(needs.audited, "{method} has a rule but is not audited");
            let input = &inputs[*method];
            match rule {
                Rule::Fields(numbers) => {
                    for n in *numbers {
                        assert_eq!(field_type(input, *n).0, Type::String, "{method} {n}");
                    }
                }
                Rule::Each(list, field) => {
                    let (kind, item) = field_type(input, *list);
                    assert_eq!(kind, Type::Message, "{method}");
                    assert_eq!(field_type(&item, *field).0, Type::String, "{method}");
                }
                Rule::ManifestName | Rule::SecretHash(_) => {
                    assert_eq!(field_type(input, 1).0, Type::String, "{method}");
                }
            }
        }
        for (method, needs) in super::super::policy::all() {
            if needs.audited {
                assert!(
                    RULES.iter().any(|(name, _)| *name == method),
                    "{method} is audited but names no target"
                );
            }
        }
    }
}
