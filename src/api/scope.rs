//! Which namespace a call acts in, as the gate (`daemon::gate`) found its
//! caller. A call made in process with no caller (the daemon's own, or a
//! test's) acts in `default`; the console hands its caller on.

use holarchy_supervision::namespace::DEFAULT;
use tonic::Request;

use crate::access::Caller;

/// The caller's namespace.
pub fn namespace_of<T>(request: &Request<T>) -> String {
    request
        .extensions()
        .get::<Caller>()
        .map_or_else(|| DEFAULT.to_owned(), |caller| caller.namespace.clone())
}
