//! Who may call what: operators' identities and roles, the tokens that
//! carry them, the table of what each gRPC method needs, and the audit
//! trail of what operators did.
//!
//! - [`Role`]: `viewer` reads, `operator` also sends, controls, approves
//!   and applies, `admin` also manages tokens and reads the audit trail.
//! - [`Caller`]: who a request comes from, found once per request by the
//!   daemon's gate (`daemon::gate`) and put in its extensions for the
//!   services to read.
//! - [`tokens`]: scoped tokens, stored hashed; [`policy`]: what each
//!   method needs; [`target`]: what a request acts on, read from its
//!   bytes; [`audit`]: the trail.
//!
//! The records and [`AccessStore`] are defined here and implemented by
//! both stores, which import this module, never the other way round.

use std::fmt;

use holarchy_actors::store::DurableFuture;
use holarchy_actors::StoreError;
use serde::{Deserialize, Serialize};

pub mod audit;
#[cfg(test)]
mod descriptors;
pub mod oidc;
pub mod policy;
pub mod quotas;
pub mod scope;
pub mod target;
pub mod tokens;
pub mod wire;

/// What a caller may do. Ordered: each role may do all that the ones
/// before it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Role {
    /// Reads: agents, messages, events, the tree, tasks' output, status.
    Viewer,
    /// Also writes to agents: create, send, pause, resume, abort,
    /// archive, delete, approve, deny, apply and delete instances,
    /// attach workspaces, write memory, stop tasks.
    Operator,
    /// Also manages tokens and reads the audit trail.
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|role| role.as_str() == text)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a caller proved who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Credential {
    /// The Unix socket, by the peer's user id (only the daemon's user and
    /// root reach it: the socket is 0600).
    Uid(u32),
    /// The daemon's bootstrap token (`<data-dir>/token` or `--token`).
    Bootstrap,
    /// A token made by `holarchy token create`, by its id.
    Token(String),
    /// An OIDC token from the configured issuer, by its subject.
    Oidc(String),
    /// The daemon itself, acting on its own (the console's in-process
    /// calls carry the console caller's credential instead).
    Daemon,
}

impl fmt::Display for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Uid(uid) => write!(f, "uid:{uid}"),
            Credential::Bootstrap => f.write_str("token:bootstrap"),
            Credential::Token(id) => write!(f, "token:{id}"),
            Credential::Oidc(subject) => write!(f, "oidc:{subject}"),
            Credential::Daemon => f.write_str("daemon"),
        }
    }
}

/// Who a request comes from, and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub credential: Credential,
    pub role: Role,
    /// The subject of the client certificate the connection showed, when
    /// the listener asks for one (`serve --tls-client-ca`).
    pub certificate: Option<String>,
    /// Where the request came from: `unix`, or the peer's address.
    pub from: String,
    /// The namespace its calls act in: a scoped token's or an OIDC
    /// token's own; for the machine's operators (the Unix socket, the
    /// bootstrap token) the one they name, `default` if none.
    pub namespace: String,
    /// Whether it may name any namespace (the machine's operators), or
    /// only its own.
    pub global: bool,
}

impl Caller {
    /// The caller as the audit trail and logs name it: the credential,
    /// and the certificate's subject when there is one.
    pub fn who(&self) -> String {
        match &self.certificate {
            Some(subject) => format!("{} ({subject})", self.credential),
            None => self.credential.to_string(),
        }
    }

    pub fn may(&self, needed: Role) -> bool {
        self.role >= needed
    }
}

/// A token made by `holarchy token create`, as stored: its secret only
/// as a SHA-256 hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// A ULID, shown by `token list` and named in the audit trail.
    pub id: String,
    /// SHA-256 of the secret part of the token.
    pub hash: [u8; 32],
    pub role: Role,
    /// The namespace the token's calls act in.
    pub namespace: String,
    /// What the operator called it (`--name`), for `token list`.
    pub name: String,
    pub created_at_ms: u64,
    /// Who made it, as [`Caller::who`] says.
    pub created_by: String,
    /// After this the token is refused; `None`: it does not expire.
    pub expires_at_ms: Option<u64>,
    /// When it was revoked; a revoked token is kept (so the audit trail's
    /// references stay readable) and refused.
    pub revoked_at_ms: Option<u64>,
}

impl TokenRecord {
    /// Whether the token may be used at `now_ms`.
    pub fn usable(&self, now_ms: u64) -> bool {
        self.revoked_at_ms.is_none() && self.expires_at_ms.is_none_or(|at| now_ms < at)
    }
}

/// A namespace's quota, as an admin set it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaRecord {
    pub namespace: String,
    pub quota: holarchy_actors::namespaces::Quota,
    pub set_at_ms: u64,
    /// Who set it, as [`Caller::who`] says.
    pub set_by: String,
}

/// One operator action, as the audit trail keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// A ULID: its time is when the call ended, and entries sort by it.
    pub id: [u8; 16],
    /// Who: [`Caller::who`].
    pub caller: String,
    pub role: Role,
    /// From where: `unix`, or the peer's address.
    pub from: String,
    /// What: the gRPC method (`AgentService/PauseAgent`) or the console's
    /// route.
    pub action: String,
    /// On what: an agent's id or name, an approval, an instance, a token
    /// id; never a message's text or a secret. Empty when the request
    /// named nothing readable.
    pub target: String,
    /// The outcome: `OK` or the gRPC status code's name.
    pub outcome: String,
    /// The refusal's or the error's reason, at most
    /// [`audit::MAX_DETAIL`] bytes.
    pub detail: String,
    /// The namespace the call acted in.
    pub namespace: String,
}

impl AuditEntry {
    /// Milliseconds since the epoch, from the id.
    pub fn at_ms(&self) -> u64 {
        ulid::Ulid::from_bytes(self.id).timestamp_ms()
    }
}

/// A queued audit write, resolved once it is committed.
pub type AuditFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), StoreError>> + Send>>;

/// Where tokens and the audit trail are kept: beside the agents, in the
/// same store, so every daemon on one database sees the same tokens.
/// A write is durable once a later [`AccessStore::flushed`] resolves.
pub trait AccessStore: Send + Sync {
    /// Writes `token` whole (a new one, or one revoked).
    fn put_token(&self, token: &TokenRecord) -> Result<(), StoreError>;
    fn token(&self, id: &str) -> Result<Option<TokenRecord>, StoreError>;
    /// Every token, revoked and expired ones too, oldest first.
    fn tokens(&self) -> Result<Vec<TokenRecord>, StoreError>;
    /// Writes entries, each whole (a new one, or one again with its
    /// outcome); a mark for [`AccessStore::flushed_through`].
    fn append_audit(&self, entries: &[AuditEntry]) -> Result<u64, StoreError>;
    /// The same write, awaited without holding a thread, where the store
    /// queues its writes (PostgreSQL: they ride in the committer's next
    /// transaction); `None` where it has no such path.
    fn append_audit_queued(&self, _entries: &[AuditEntry]) -> Option<AuditFuture> {
        None
    }
    /// Up to `limit` entries with ids in `after..before` (exclusive both
    /// ends, `None` open), oldest first, or newest first if `descending`.
    fn audit_range(
        &self,
        after: Option<[u8; 16]>,
        before: Option<[u8; 16]>,
        limit: usize,
        descending: bool,
    ) -> Result<Vec<AuditEntry>, StoreError>;
    /// Removes up to `limit` of the oldest entries with ids below
    /// `before`; how many it removed.
    fn trim_audit(&self, before: [u8; 16], limit: usize) -> Result<usize, StoreError>;
    /// Writes a namespace's quota whole, or removes it (an unbounded
    /// namespace keeps no record).
    fn put_quota(&self, namespace: &str, quota: Option<&QuotaRecord>) -> Result<(), StoreError>;
    /// Every namespace's quota, by name.
    fn quotas(&self) -> Result<Vec<QuotaRecord>, StoreError>;
    /// Resolves once every write made before the call is durable.
    fn flushed(&self) -> DurableFuture;
    /// Resolves once the write that returned `mark` is durable: at once
    /// if a flush already covered it.
    fn flushed_through(&self, mark: u64) -> DurableFuture;
    /// Whether an entry written before a call's own writes is made durable
    /// by the flush that call awaits (sled: the log is flushed whole), so
    /// the trail can be written ahead at no flush of its own. Where each
    /// statement commits by itself (PostgreSQL), the entry is written
    /// once, after the call.
    fn shares_flushes(&self) -> bool;
}
