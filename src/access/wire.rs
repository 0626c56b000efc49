//! Protobuf bytes read and rewritten without their message types: the
//! gRPC frame of a unary request, the values of one field, and a field
//! replaced. What the gate needs to name a call's target and to scope it
//! to the caller's namespace, for every method alike.

use prost::bytes::Buf as _;

/// The message of an uncompressed gRPC frame.
pub fn message_of(frame: &[u8]) -> Option<&[u8]> {
    let (&compressed, rest) = frame.split_first()?;
    if compressed != 0 || rest.len() < 4 {
        return None;
    }
    let len = u32::from_be_bytes(rest[..4].try_into().ok()?) as usize;
    rest.get(4..4 + len)
}

/// `message` in an uncompressed gRPC frame.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(0);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// One field of a message: its number, wire type and raw bytes (the key
/// included), and for a length-delimited one its value.
struct Field<'a> {
    number: u32,
    raw: &'a [u8],
    value: Option<&'a [u8]>,
}

/// The fields of `message` in order; stops at the first byte that does
/// not parse.
fn walk(message: &[u8]) -> impl Iterator<Item = Field<'_>> {
    let mut buf = message;
    std::iter::from_fn(move || {
        let start = buf;
        let key = prost::encoding::decode_varint(&mut buf).ok()?;
        let (number, wire) = ((key >> 3) as u32, key & 7);
        let mut value = None;
        match wire {
            0 => {
                prost::encoding::decode_varint(&mut buf).ok()?;
            }
            1 | 5 => {
                let skip = if wire == 1 { 8 } else { 4 };
                if buf.len() < skip {
                    return None;
                }
                buf.advance(skip);
            }
            2 => {
                let len = usize::try_from(prost::encoding::decode_varint(&mut buf).ok()?).ok()?;
                if buf.len() < len {
                    return None;
                }
                value = Some(&buf[..len]);
                buf.advance(len);
            }
            _ => return None,
        }
        let used = start.len() - buf.len();
        Some(Field {
            number,
            raw: &start[..used],
            value,
        })
    })
}

/// The length-delimited values of field `number` in `message`, in order.
pub fn fields(message: &[u8], number: u32) -> impl Iterator<Item = &[u8]> {
    walk(message).filter_map(move |f| (f.number == number).then_some(f.value).flatten())
}

pub fn strings(message: &[u8], number: u32) -> impl Iterator<Item = &str> {
    fields(message, number).filter_map(|bytes| std::str::from_utf8(bytes).ok())
}

fn put_len(out: &mut Vec<u8>, number: u32, value: &[u8]) {
    prost::encoding::encode_key(number, prost::encoding::WireType::LengthDelimited, out);
    prost::encoding::encode_varint(value.len() as u64, out);
    out.extend_from_slice(value);
}

/// `message` with each length-delimited value of field `number` replaced
/// by what `with` makes of it; every other field kept byte for byte.
pub fn map_field(message: &[u8], number: u32, mut with: impl FnMut(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 32);
    for field in walk(message) {
        match field.value {
            Some(value) if field.number == number => put_len(&mut out, number, &with(value)),
            _ => out.extend_from_slice(field.raw),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;
    use crate::api::pb;

    #[test]
    fn a_field_is_replaced_and_the_rest_kept() {
        let send = pb::SendMessageRequest {
            agent_id: "agt_a".into(),
            text: "hello".into(),
            dedupe_key: "k".into(),
        };
        let bytes = send.encode_to_vec();
        let changed = map_field(&bytes, 1, |_| b"agt_other".to_vec());
        let read = pb::SendMessageRequest::decode(changed.as_slice()).expect("decodes");
        assert_eq!(read.agent_id, "agt_other");
        assert_eq!(
            (read.text.as_str(), read.dedupe_key.as_str()),
            ("hello", "k")
        );
        assert_eq!(message_of(&frame(&changed)), Some(changed.as_slice()));
        let many = pb::SendMessagesRequest {
            messages: vec![send.clone(), send],
        };
        let nested = map_field(&many.encode_to_vec(), 1, |item| {
            map_field(item, 1, |_| b"agt_b".to_vec())
        });
        let read = pb::SendMessagesRequest::decode(nested.as_slice()).expect("decodes");
        assert!(read
            .messages
            .iter()
            .all(|m| m.agent_id == "agt_b" && m.text == "hello"));
    }
}
