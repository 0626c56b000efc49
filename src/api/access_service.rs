//! `holarchy.v1.AccessService`: scoped tokens and the audit trail. Who may
//! call each method is decided at the gate (`daemon::gate`), which also
//! puts the [`Caller`] in each request.

use std::sync::Arc;
use std::time::Duration;

use holarchy_actors::StoreError;
use tonic::{Request, Response, Status};

use super::convert::ApiError;
use super::pb;
use super::pb::access_service_server::AccessService;
use crate::access::audit::{self, Audit, Filter};
use crate::access::quotas::Quotas;
use crate::access::tokens::{self, Tokens};
use crate::access::{AuditEntry, Caller, Credential, QuotaRecord, Role, TokenRecord};
use holarchy_actors::namespaces::{NamespaceReport, Quota};

/// The longest a token may be made to last: a token for longer should
/// not expire at all, and say so.
const MAX_EXPIRY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// The most entries one page of the trail answers with.
const MAX_PAGE: usize = 1000;
const DEFAULT_PAGE: usize = 100;

#[derive(Debug, Clone)]
pub struct AccessApi {
    tokens: Arc<Tokens>,
    audit: Arc<Audit>,
    quotas: Quotas,
}

impl AccessApi {
    pub fn new(tokens: Arc<Tokens>, audit: Arc<Audit>, quotas: Quotas) -> Self {
        Self {
            tokens,
            audit,
            quotas,
        }
    }
}

/// The caller the gate found; a call made in process (none) is the
/// daemon's own.
fn caller_of<T>(request: &Request<T>) -> Caller {
    request
        .extensions()
        .get::<Caller>()
        .cloned()
        .unwrap_or(Caller {
            credential: Credential::Daemon,
            role: Role::Admin,
            certificate: None,
            from: "daemon".into(),
            namespace: holarchy_supervision::namespace::DEFAULT.to_owned(),
            global: true,
        })
}

fn info(record: &TokenRecord) -> pb::TokenInfo {
    pb::TokenInfo {
        id: record.id.clone(),
        role: record.role.to_string(),
        namespace: record.namespace.clone(),
        name: record.name.clone(),
        created_at_ms: record.created_at_ms,
        created_by: record.created_by.clone(),
        expires_at_ms: record.expires_at_ms.unwrap_or(0),
        revoked_at_ms: record.revoked_at_ms.unwrap_or(0),
    }
}

fn entry(entry: AuditEntry) -> pb::AuditEntry {
    pb::AuditEntry {
        id: ulid::Ulid::from_bytes(entry.id).to_string(),
        at_ms: entry.at_ms(),
        caller: entry.caller,
        role: entry.role.to_string(),
        from: entry.from,
        action: entry.action,
        target: entry.target,
        outcome: entry.outcome,
        detail: entry.detail,
        namespace: entry.namespace,
    }
}

fn quota_of(quota: &Quota) -> pb::Quota {
    pb::Quota {
        agents: quota.agents,
        turns_per_minute: quota.turns_per_minute,
        commands: quota.commands,
        store_bytes: quota.store_bytes,
    }
}

/// A namespace's report, with who set its quota if the store says.
fn namespace_info(report: NamespaceReport, record: Option<&QuotaRecord>) -> pb::NamespaceInfo {
    pb::NamespaceInfo {
        quota: Some(quota_of(&report.quota)),
        name: report.name,
        agents: report.agents,
        commands: report.commands,
        turns_deferred: report.turns_deferred,
        quota_set_by: record.map(|r| r.set_by.clone()).unwrap_or_default(),
        quota_set_at_ms: record.map_or(0, |r| r.set_at_ms),
        store_bytes: report.store_bytes,
        store_bytes_measured_at_ms: report.measured_at_ms,
    }
}

/// Runs a blocking store call off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| Status::internal(format!("a store call stopped: {err}")))?
        .map_err(|err| ApiError::from(err).into())
}

fn invalid(why: impl Into<String>) -> Status {
    ApiError::InvalidArgument(why.into()).into()
}

/// A token's name checked: short, printable.
fn check_name(name: &str) -> Result<(), Status> {
    if name.len() > tokens::MAX_NAME {
        return Err(invalid(format!(
            "a token's name is at most {} bytes",
            tokens::MAX_NAME
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(invalid("a token's name may not hold control characters"));
    }
    Ok(())
}

#[tonic::async_trait]
impl AccessService for AccessApi {
    async fn who_am_i(
        &self,
        request: Request<pb::WhoAmIRequest>,
    ) -> Result<Response<pb::WhoAmIResponse>, Status> {
        let caller = caller_of(&request);
        Ok(Response::new(pb::WhoAmIResponse {
            caller: caller.credential.to_string(),
            role: caller.role.to_string(),
            namespace: caller.namespace,
            certificate: caller.certificate.unwrap_or_default(),
        }))
    }

    async fn create_token(
        &self,
        request: Request<pb::CreateTokenRequest>,
    ) -> Result<Response<pb::CreateTokenResponse>, Status> {
        let caller = caller_of(&request);
        let req = request.into_inner();
        let role = Role::parse(&req.role).ok_or_else(|| {
            invalid(format!(
                "role `{}` is not one of viewer, operator, admin",
                super::convert::quote(&req.role)
            ))
        })?;
        // An admin of a namespace makes tokens for its own; the machine's
        // operators, for any.
        let namespace = if req.namespace.is_empty() {
            caller.namespace.clone()
        } else {
            req.namespace
        };
        holarchy_supervision::namespace::check(&namespace)
            .map_err(|err| invalid(format!("namespace: {err}")))?;
        if !caller.global && namespace != caller.namespace {
            return Err(Status::permission_denied(format!(
                "an admin of namespace `{}` makes tokens for it only",
                caller.namespace
            )));
        }
        check_name(&req.name)?;
        if req.expires_in_ms > MAX_EXPIRY.as_millis() as u64 {
            return Err(invalid(
                "a token may last at most 10 years: give a shorter --expires, or none for a token that does not expire",
            ));
        }
        let now = audit::now_ms();
        let issued = tokens::issue(TokenRecord {
            id: String::new(),
            hash: [0; 32],
            role,
            namespace,
            name: req.name,
            created_at_ms: now,
            created_by: caller.who(),
            expires_at_ms: (req.expires_in_ms > 0).then(|| now + req.expires_in_ms),
            revoked_at_ms: None,
        })
        .map_err(|err| Status::unavailable(err.to_string()))?;
        let tokens = self.tokens.clone();
        let record = issued.record.clone();
        blocking(move || {
            if tokens.store().tokens()?.len() >= tokens::MAX_TOKENS {
                return Err(StoreError::Precondition(format!(
                    "the daemon keeps at most {} tokens, revoked ones included",
                    tokens::MAX_TOKENS
                )));
            }
            tokens.put(&record)
        })
        .await?;
        self.tokens
            .store()
            .flushed()
            .await
            .map_err(|err| Status::from(ApiError::from(err)))?;
        Ok(Response::new(pb::CreateTokenResponse {
            token: Some(info(&issued.record)),
            secret: issued.text,
        }))
    }

    async fn list_tokens(
        &self,
        request: Request<pb::ListTokensRequest>,
    ) -> Result<Response<pb::ListTokensResponse>, Status> {
        let caller = caller_of(&request);
        let tokens = self.tokens.clone();
        let all = blocking(move || tokens.store().tokens()).await?;
        Ok(Response::new(pb::ListTokensResponse {
            tokens: all
                .iter()
                .filter(|t| caller.global || t.namespace == caller.namespace)
                .map(info)
                .collect(),
        }))
    }

    async fn revoke_token(
        &self,
        request: Request<pb::RevokeTokenRequest>,
    ) -> Result<Response<pb::TokenInfo>, Status> {
        let caller = caller_of(&request);
        let id = request.into_inner().id;
        if ulid::Ulid::from_string(&id).is_err() {
            return Err(invalid(format!(
                "`{}` is not a token id (see `holarchy token list`)",
                super::convert::quote(&id)
            )));
        }
        let tokens = self.tokens.clone();
        let revoked = blocking(move || {
            let Some(mut record) = tokens.store().token(&id)? else {
                return Ok(None);
            };
            // Another namespace's token is no token to its admin.
            if !caller.global && record.namespace != caller.namespace {
                return Ok(None);
            }
            if record.revoked_at_ms.is_none() {
                record.revoked_at_ms = Some(audit::now_ms());
                tokens.put(&record)?;
            }
            Ok(Some(record))
        })
        .await?
        .ok_or_else(|| Status::not_found("no such token (see `holarchy token list`)"))?;
        self.tokens
            .store()
            .flushed()
            .await
            .map_err(|err| Status::from(ApiError::from(err)))?;
        Ok(Response::new(info(&revoked)))
    }

    async fn list_audit(
        &self,
        request: Request<pb::ListAuditRequest>,
    ) -> Result<Response<pb::ListAuditResponse>, Status> {
        let caller = caller_of(&request);
        let req = request.into_inner();
        let from = if req.page_token.is_empty() {
            None
        } else {
            let bytes = hex::decode(&req.page_token)
                .ok()
                .and_then(|b| <[u8; 16]>::try_from(b).ok())
                .ok_or_else(|| invalid("page_token is not one this daemon gave"))?;
            Some(bytes)
        };
        let limit = match req.page_size as usize {
            0 => DEFAULT_PAGE,
            n => n.min(MAX_PAGE),
        };
        // An admin of a namespace reads its own namespace's entries.
        let namespace = if caller.global {
            req.namespace
        } else {
            caller.namespace.clone()
        };
        let filter = Filter {
            caller: req.caller,
            namespace,
            action: req.action,
            since_ms: (req.since_ms > 0).then_some(req.since_ms),
            until_ms: (req.until_ms > 0).then_some(req.until_ms),
        };
        let store = self.audit.store().clone();
        // What a page shows survives a crash: entries still riding on a
        // flush (a refusal's) are on disk first.
        store
            .flushed()
            .await
            .map_err(|err| Status::from(ApiError::from(err)))?;
        let newest_first = req.newest_first;
        let page =
            blocking(move || audit::page(store.as_ref(), &filter, from, newest_first, limit))
                .await?;
        Ok(Response::new(pb::ListAuditResponse {
            entries: page.entries.into_iter().map(entry).collect(),
            next_page_token: page.next.map(hex::encode).unwrap_or_default(),
        }))
    }

    async fn set_quota(
        &self,
        request: Request<pb::SetQuotaRequest>,
    ) -> Result<Response<pb::NamespaceInfo>, Status> {
        let caller = caller_of(&request);
        let req = request.into_inner();
        holarchy_supervision::namespace::check(&req.namespace)
            .map_err(|err| invalid(format!("namespace: {err}")))?;
        // A namespace's own admin bounding it could as well lift it.
        if !caller.global {
            return Err(Status::permission_denied(
                "only an admin of every namespace sets quotas (the daemon's socket, the bootstrap token, or a token of no namespace)",
            ));
        }
        let given = req.quota.unwrap_or_default();
        if given.agents == Some(0)
            || given.turns_per_minute == Some(0)
            || given.commands == Some(0)
            || given.store_bytes == Some(0)
        {
            return Err(invalid(
                "a bound of 0 would stop the namespace: give at least 1, or leave the bound out for none",
            ));
        }
        let record = QuotaRecord {
            namespace: req.namespace.clone(),
            quota: Quota {
                agents: given.agents,
                turns_per_minute: given.turns_per_minute,
                commands: given.commands,
                store_bytes: given.store_bytes,
            },
            set_at_ms: audit::now_ms(),
            set_by: caller.who(),
        };
        let quotas = self.quotas.clone();
        let kept = record.clone();
        blocking(move || quotas.set(&kept)).await?;
        self.quotas
            .store()
            .flushed()
            .await
            .map_err(|err| Status::from(ApiError::from(err)))?;
        let report = self
            .quotas
            .runtime()
            .namespaces()
            .get(&record.namespace)
            .report();
        let set = (!record.quota.is_unbounded()).then_some(&record);
        Ok(Response::new(namespace_info(report, set)))
    }

    async fn list_namespaces(
        &self,
        request: Request<pb::ListNamespacesRequest>,
    ) -> Result<Response<pb::ListNamespacesResponse>, Status> {
        let caller = caller_of(&request);
        // Who set each quota; the quotas in force are the runtime's.
        let store = self.quotas.store().clone();
        let records = blocking(move || store.quotas()).await?;
        let namespaces = self
            .quotas
            .runtime()
            .namespaces()
            .reports()
            .into_iter()
            .filter(|report| caller.global || report.name == caller.namespace)
            .map(|report| {
                let record = records.iter().find(|r| r.namespace == report.name);
                namespace_info(report, record)
            })
            .collect();
        Ok(Response::new(pb::ListNamespacesResponse { namespaces }))
    }
}
