//! `holarchy token ...` and `holarchy audit`: scoped tokens, and the trail
//! of what operators did.

use clap::{Args, Subcommand};
use serde_json::json;

use super::output::escape::one_line;
use super::output::table::{self, Table};
use super::output::{emit, Output};
use crate::api::pb;
use crate::client::Clients;

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Make a token, for the namespace this client acts in
    /// (`--namespace`). Its text is printed once: give it to the one who
    /// needs it (`--token` or `HOLARCHY_TOKEN`), it is never shown again.
    Create {
        /// viewer (reads), operator (also sends, controls, approves,
        /// applies) or admin (also manages tokens, reads the audit trail).
        #[arg(long)]
        role: String,
        /// What it is for, shown by `token list`.
        #[arg(long, default_value = "")]
        name: String,
        /// Refused after this long: 90d, 12h, 30m. Never, if not given.
        #[arg(long, value_parser = parse_span)]
        expires: Option<u64>,
    },
    /// Every token, revoked and expired ones too; never their secrets.
    List,
    /// Refuse a token from now on (within seconds on every daemon of a
    /// shared store).
    Revoke {
        /// The token's id (`token list`).
        id: String,
    },
    /// Who this client is to the daemon: its credential and role.
    Whoami,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Only this caller's entries: `token:<id>`, `token:bootstrap`,
    /// `uid:1000` (a prefix matches).
    #[arg(long)]
    pub caller: Option<String>,
    /// Only this namespace's entries.
    #[arg(long)]
    pub namespace: Option<String>,
    /// Only actions containing this: `PauseAgent`, `InstanceService/`.
    #[arg(long)]
    pub action: Option<String>,
    /// Only entries this recent (2h, 7d) or since an RFC 3339 time.
    #[arg(long, value_parser = parse_when)]
    pub since: Option<u64>,
    /// Only entries before this (2h: two hours ago; or RFC 3339).
    #[arg(long, value_parser = parse_when)]
    pub until: Option<u64>,
    /// At most this many entries, the newest (printed oldest first).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

/// `90d`, `12h`, `30m`, `45s`, `2w` in milliseconds.
pub(crate) fn parse_span(text: &str) -> Result<u64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("`{text}` has no unit: write 90d, 12h, 30m or 45s"))?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` does not start with a number: write 90d, 12h, 30m"))?;
    let unit_ms = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "w" => 7 * 86_400_000,
        _ => return Err(format!("`{unit}` is not a unit: use s, m, h, d or w")),
    };
    n.checked_mul(unit_ms)
        .filter(|ms| *ms > 0)
        .ok_or_else(|| format!("`{text}` is not a span this can take"))
}

/// A time: a span ago, or an RFC 3339 time; in milliseconds since the
/// epoch.
fn parse_when(text: &str) -> Result<u64, String> {
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return u64::try_from(at.timestamp_millis())
            .map_err(|_| format!("`{text}` is before 1970"));
    }
    let span = parse_span(text)
        .map_err(|_| format!("`{text}` is neither a span (2h, 7d) nor an RFC 3339 time"))?;
    Ok((table::now_ms() as u64).saturating_sub(span))
}

/// A time for a table, in UTC, to the second.
fn when(at_ms: u64) -> String {
    if at_ms == 0 {
        return "-".into();
    }
    chrono::DateTime::from_timestamp_millis(at_ms as i64)
        .map(|at| at.format("%Y-%m-%d %H:%M:%SZ").to_string())
        .unwrap_or_else(|| "-".into())
}

fn token_json(t: &pb::TokenInfo) -> serde_json::Value {
    json!({
        "id": t.id,
        "role": t.role,
        "namespace": t.namespace,
        "name": t.name,
        "created_at_ms": t.created_at_ms,
        "created_by": t.created_by,
        "expires_at_ms": t.expires_at_ms,
        "revoked_at_ms": t.revoked_at_ms,
    })
}

fn state(t: &pb::TokenInfo, now_ms: u64) -> String {
    if t.revoked_at_ms > 0 {
        format!("revoked {}", when(t.revoked_at_ms))
    } else if t.expires_at_ms > 0 && t.expires_at_ms <= now_ms {
        format!("expired {}", when(t.expires_at_ms))
    } else if t.expires_at_ms > 0 {
        format!("until {}", when(t.expires_at_ms))
    } else {
        "active".into()
    }
}

pub(super) async fn token_command(
    mut clients: Clients,
    command: &TokenCommand,
    out: &Output,
) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create {
            role,
            name,
            expires,
        } => {
            let made = clients
                .access
                .create_token(pb::CreateTokenRequest {
                    role: role.clone(),
                    // The namespace this client acts in (`--namespace`).
                    namespace: String::new(),
                    name: name.clone(),
                    expires_in_ms: expires.unwrap_or(0),
                })
                .await?
                .into_inner();
            let info = made.token.unwrap_or_default();
            if out.json {
                let mut value = token_json(&info);
                value["secret"] = json!(made.secret);
                emit(value);
                return Ok(());
            }
            emit(format!(
                "made token {} ({}, {}), shown once:",
                info.id,
                info.role,
                state(&info, table::now_ms() as u64)
            ));
            emit(&made.secret);
            emit("give it as --token or HOLARCHY_TOKEN; `holarchy token revoke ID` ends it");
        }
        TokenCommand::List => {
            let list = clients
                .access
                .list_tokens(pb::ListTokensRequest {})
                .await?
                .into_inner();
            if out.json {
                list.tokens.iter().for_each(|t| emit(token_json(t)));
                return Ok(());
            }
            let now = table::now_ms() as u64;
            let mut rows =
                Table::new(&["ID", "ROLE", "NAMESPACE", "NAME", "CREATED", "BY", "STATE"]);
            for t in &list.tokens {
                rows.row(vec![
                    t.id.clone(),
                    t.role.clone(),
                    t.namespace.clone(),
                    one_line(&t.name).into_owned(),
                    when(t.created_at_ms),
                    one_line(&t.created_by).into_owned(),
                    state(t, now),
                ]);
            }
            rows.print();
        }
        TokenCommand::Revoke { id } => {
            let t = clients
                .access
                .revoke_token(pb::RevokeTokenRequest { id: id.clone() })
                .await?
                .into_inner();
            if out.json {
                emit(token_json(&t));
            } else {
                emit(format!(
                    "token {} {}",
                    t.id,
                    state(&t, table::now_ms() as u64)
                ));
            }
        }
        TokenCommand::Whoami => {
            let me = clients
                .access
                .who_am_i(pb::WhoAmIRequest {})
                .await?
                .into_inner();
            if out.json {
                emit(json!({
                    "caller": me.caller,
                    "role": me.role,
                    "namespace": me.namespace,
                    "certificate": me.certificate,
                }));
            } else {
                let certificate = if me.certificate.is_empty() {
                    String::new()
                } else {
                    format!(", certificate {}", one_line(&me.certificate))
                };
                emit(format!(
                    "{} ({}, namespace {}{certificate})",
                    me.caller, me.role, me.namespace
                ));
            }
        }
    }
    Ok(())
}

pub(super) async fn audit(
    mut clients: Clients,
    args: &AuditArgs,
    out: &Output,
) -> anyhow::Result<()> {
    let mut entries = Vec::new();
    let mut page_token = String::new();
    while entries.len() < args.limit {
        let page = clients
            .access
            .list_audit(pb::ListAuditRequest {
                caller: args.caller.clone().unwrap_or_default(),
                namespace: args.namespace.clone().unwrap_or_default(),
                action: args.action.clone().unwrap_or_default(),
                since_ms: args.since.unwrap_or(0),
                until_ms: args.until.unwrap_or(0),
                newest_first: true,
                page_size: (args.limit - entries.len()).min(1000) as u32,
                page_token,
            })
            .await?
            .into_inner();
        entries.extend(page.entries);
        if page.next_page_token.is_empty() {
            break;
        }
        page_token = page.next_page_token;
    }
    entries.truncate(args.limit);
    entries.reverse();
    if out.json {
        for e in &entries {
            emit(json!({
                "id": e.id,
                "at_ms": e.at_ms,
                "caller": e.caller,
                "role": e.role,
                "from": e.from,
                "action": e.action,
                "target": e.target,
                "outcome": e.outcome,
                "detail": e.detail,
                "namespace": e.namespace,
            }));
        }
        return Ok(());
    }
    let mut rows = Table::new(&[
        "TIME", "CALLER", "ROLE", "FROM", "ACTION", "TARGET", "OUTCOME",
    ]);
    for e in &entries {
        let outcome = if e.detail.is_empty() || e.outcome == "OK" {
            e.outcome.clone()
        } else {
            format!("{}: {}", e.outcome, one_line(&e.detail))
        };
        rows.row(vec![
            when(e.at_ms),
            one_line(&e.caller).into_owned(),
            e.role.clone(),
            e.from.clone(),
            e.action.clone(),
            one_line(&e.target).into_owned(),
            outcome,
        ]);
    }
    rows.print();
    if entries.is_empty() {
        emit("(no entries match)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_with_their_units_and_junk_is_refused() {
        assert_eq!(parse_span("90d"), Ok(90 * 86_400_000));
        assert_eq!(parse_span("30m"), Ok(1_800_000));
        assert!(parse_span("30").is_err());
        assert!(parse_span("d").is_err());
        assert!(parse_span("0s").is_err());
        assert!(parse_span("3y").is_err());
        assert!(parse_span("99999999999999999999d").is_err());
        assert_eq!(parse_when("2026-01-01T00:00:00Z"), Ok(1_767_225_600_000));
        assert!(parse_when("yesterday").is_err());
    }
}
