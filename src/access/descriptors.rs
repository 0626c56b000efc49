//! The compiled API's descriptors, as the access tables' tests read them:
//! every method's request type, and each message's fields.

use std::collections::HashMap;

use prost::Message as _;
use prost_types::field_descriptor_proto::Type;
use prost_types::DescriptorProto;

/// The API as compiled: messages by name, and each method's
/// (`Service/Method`) request type's name.
pub struct Compiled {
    pub messages: HashMap<String, DescriptorProto>,
    pub inputs: HashMap<String, String>,
}

pub fn compiled() -> Compiled {
    let set = prost_types::FileDescriptorSet::decode(crate::api::pb::FILE_DESCRIPTOR_SET)
        .expect("the compiled descriptors");
    let mut messages = HashMap::new();
    let mut inputs = HashMap::new();
    for file in &set.file {
        for message in &file.message_type {
            messages.insert(message.name().to_owned(), message.clone());
        }
        for service in &file.service {
            for method in &service.method {
                inputs.insert(
                    format!("{}/{}", service.name(), method.name()),
                    method
                        .input_type()
                        .trim_start_matches(".holarchy.v1.")
                        .to_owned(),
                );
            }
        }
    }
    Compiled { messages, inputs }
}

impl Compiled {
    /// Field `number` of `message`: its type, and its message type's name
    /// when it has one.
    pub fn field(&self, message: &str, number: u32) -> (Type, String) {
        self.messages[message]
            .field
            .iter()
            .find(|f| f.number() == number as i32)
            .map(|f| {
                (
                    f.r#type(),
                    f.type_name().trim_start_matches(".holarchy.v1.").to_owned(),
                )
            })
            .unwrap_or_else(|| panic!("{message} has no field {number}"))
    }
}
