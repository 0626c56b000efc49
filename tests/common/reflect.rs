//! The daemon's API walked by its own reflection service: every method of
//! `holarchy.v1` as the running daemon lists it, called with bytes a test
//! writes by hand, as any client could.

use std::collections::BTreeMap;

use prost::Message as _;
use tokio_stream::StreamExt as _;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::Status;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::ServerReflectionRequest;

/// Bytes in, bytes out: calls any method with a request the test writes
/// by hand.
#[derive(Debug, Clone, Default)]
pub struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        use prost::bytes::BufMut as _;
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        use prost::bytes::Buf as _;
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

/// A method the daemon serves, as its reflection describes it.
#[derive(Debug, Clone)]
pub struct Method {
    pub path: String,
    pub name: String,
    pub streams: bool,
    /// The request message's fields: name and number, string ones only.
    pub strings: Vec<(String, u32)>,
}

impl Method {
    /// A read by its name; everything else writes.
    pub fn reads(&self) -> bool {
        ["Get", "List", "Watch", "Read", "Follow", "Search", "WhoAmI"]
            .iter()
            .any(|verb| self.name.starts_with(verb))
    }
}

/// Every method of `holarchy.v1`, from the daemon's reflection service.
pub async fn methods(channel: Channel, token: &str) -> Vec<Method> {
    let mut reflection = ServerReflectionClient::with_interceptor(channel, bearer(token));
    let ask = |message| ServerReflectionRequest {
        host: String::new(),
        message_request: Some(message),
    };
    let mut requests = vec![ask(MessageRequest::ListServices(String::new()))];
    let first = reflection
        .server_reflection_info(tokio_stream::iter(requests.clone()))
        .await
        .expect("reflection answers")
        .into_inner()
        .next()
        .await
        .expect("one answer")
        .expect("a listing");
    let Some(MessageResponse::ListServicesResponse(listing)) = first.message_response else {
        panic!("not a listing: {first:?}");
    };
    let services: Vec<String> = listing
        .service
        .into_iter()
        .map(|s| s.name)
        .filter(|name| name.starts_with("holarchy.v1."))
        .collect();
    assert!(services.len() >= 11, "{services:?}");
    requests = services
        .iter()
        .map(|s| ask(MessageRequest::FileContainingSymbol(s.clone())))
        .collect();
    let mut answers = reflection
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .expect("reflection answers")
        .into_inner();
    let mut files = Vec::new();
    while let Some(answer) = answers.next().await {
        let answer = answer.expect("an answer");
        let Some(MessageResponse::FileDescriptorResponse(response)) = answer.message_response
        else {
            panic!("not files: {answer:?}");
        };
        for bytes in response.file_descriptor_proto {
            files.push(prost_types::FileDescriptorProto::decode(bytes.as_slice()).expect("a file"));
        }
    }
    // Each request message's string fields, whichever file defines it.
    let mut strings_of: BTreeMap<String, Vec<(String, u32)>> = BTreeMap::new();
    for file in &files {
        for message in &file.message_type {
            let strings = message
                .field
                .iter()
                .filter(|f| f.r#type() == prost_types::field_descriptor_proto::Type::String)
                .map(|f| (f.name().to_owned(), f.number() as u32))
                .collect();
            strings_of.insert(format!(".{}.{}", file.package(), message.name()), strings);
        }
    }
    let mut found = BTreeMap::new();
    for file in &files {
        for service in &file.service {
            let full = format!("{}.{}", file.package(), service.name());
            if !services.contains(&full) {
                continue;
            }
            for method in &service.method {
                let path = format!("/{full}/{}", method.name());
                found.insert(
                    path.clone(),
                    Method {
                        path,
                        name: method.name().to_owned(),
                        streams: method.server_streaming(),
                        strings: strings_of
                            .get(method.input_type())
                            .cloned()
                            .unwrap_or_default(),
                    },
                );
            }
        }
    }
    found.into_values().collect()
}

#[derive(Clone)]
pub struct Bearer(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut request: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
        request
            .metadata_mut()
            .insert("authorization", self.0.clone());
        Ok(request)
    }
}

pub fn bearer(token: &str) -> Bearer {
    Bearer(format!("Bearer {token}").parse().expect("header text"))
}

/// Calls `method` with `body` (an encoded request) as `token`; the status
/// of the answer (OK when it answered).
pub async fn call(channel: &Channel, token: &str, method: &Method, body: Vec<u8>) -> Status {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.expect("ready");
    let mut request = tonic::Request::new(body);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("header text"),
    );
    let path = method.path.parse().expect("a path");
    let answered = if method.streams {
        grpc.server_streaming(request, path, Raw).await.map(drop)
    } else {
        grpc.unary(request, path, Raw).await.map(drop)
    };
    match answered {
        Ok(()) => Status::ok(""),
        Err(status) => status,
    }
}
