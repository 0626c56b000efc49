//! The daemon's secrets: the TCP token, model API keys and any other
//! secret-looking variable of its environment. They are taken out of the
//! environment once, before the daemon starts a thread or a child, handed
//! out only by name (a brain asking for its API key), and redacted from
//! every text the runtime stores: command output, tool calls, replies,
//! messages, work items and events. Trigger tokens, made per wait, are
//! redacted by their shape.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use crate::store::{Batch, Write};

mod store;
pub use store::RedactingStore;

/// What a secret is replaced with.
pub const REDACTED: &str = "<redacted>";
/// Values shorter than this are not redacted: they would mangle ordinary
/// text, and the daemon refuses such short tokens anyway.
const MIN_SECRET_LEN: usize = 8;
/// A trigger token: this prefix and 64 hex digits.
pub const TRIGGER_TOKEN_PREFIX: &str = "htr_";
const TRIGGER_TOKEN_HEX: usize = 64;

/// Suffixes (and one name) of environment variables taken as secrets.
const SECRET_SUFFIXES: &[&str] = &[
    "_KEY",
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_PASSWD",
    "_CREDENTIALS",
];
const SECRET_NAMES: &[&str] = &["HOLARCHY_TOKEN"];

/// Is `name` the name of a variable the daemon treats as a secret?
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_NAMES.contains(&upper.as_str())
        || SECRET_SUFFIXES.iter().any(|suffix| upper.ends_with(suffix))
        || upper.contains("API_KEY")
}

/// The secrets of one daemon.
#[derive(Default)]
pub struct Secrets {
    /// Secret variables taken from the environment at start, by name.
    vars: HashMap<String, String>,
    /// Every value to redact, longest first so a secret that contains
    /// another is replaced whole. Read on every store write, written
    /// rarely (at start, and when a brain names a variable not seen yet).
    values: RwLock<Arc<[String]>>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("values", &self.snapshot().len())
            .finish()
    }
}

impl Secrets {
    /// Takes every secret-looking variable out of the process environment
    /// and keeps it here.
    ///
    /// Call it before the process starts a thread: changing the environment
    /// while another thread reads it is undefined behaviour in libc. The
    /// values stay readable in the kernel's copy of the initial environment
    /// (`/proc/<pid>/environ`), which is why the daemon also makes itself
    /// non-dumpable and confines what agents run (docs/security.md).
    pub fn take_from_env() -> Self {
        let mut vars = HashMap::new();
        for (name, value) in std::env::vars_os() {
            let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
                continue;
            };
            if is_secret_name(name) {
                vars.insert(name.to_owned(), value.to_owned());
            }
        }
        for name in vars.keys() {
            std::env::remove_var(name);
        }
        let secrets = Self {
            vars,
            values: RwLock::default(),
        };
        for value in secrets.vars.values() {
            secrets.add(value);
        }
        secrets
    }

    /// Overwrites every secret in the kernel's copies of this process's
    /// initial environment and command line (what `/proc/<pid>/environ`
    /// and `/proc/<pid>/cmdline` show other processes), through
    /// `/proc/self/mem`. Removing a variable only unlinks it from libc's
    /// table; its text stays in that memory. Call it after
    /// [`Secrets::take_from_env`] and once `--token` (if given) is added.
    pub fn scrub_process_memory(&self) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        let stat = std::fs::read_to_string("/proc/self/stat")?;
        // Fields after the name's ')' start at field 3; arg_start..env_end
        // are fields 48..=51.
        let fields: Vec<u64> = stat
            .get(stat.rfind(')').map_or(0, |i| i + 2)..)
            .unwrap_or_default()
            .split_whitespace()
            .skip(45)
            .take(4)
            .filter_map(|f| f.parse().ok())
            .collect();
        let &[arg_start, _arg_end, env_start, _env_end] = fields.as_slice() else {
            return Err(std::io::Error::other("unexpected /proc/self/stat"));
        };
        let mem = std::fs::OpenOptions::new()
            .write(true)
            .open("/proc/self/mem")?;
        let values = self.snapshot();
        let environ = std::fs::read("/proc/self/environ")?;
        for (offset, range) in self.secret_spans(&environ, &values, true) {
            mem.write_at(&vec![b'*'; range], env_start + offset as u64)?;
        }
        let cmdline = std::fs::read("/proc/self/cmdline")?;
        for (offset, range) in self.secret_spans(&cmdline, &values, false) {
            mem.write_at(&vec![b'*'; range], arg_start + offset as u64)?;
        }
        Ok(())
    }

    /// (offset, length) of each secret in a NUL-separated block: values of
    /// secret-named variables (`by_name`), and every known value.
    fn secret_spans(&self, block: &[u8], values: &[String], by_name: bool) -> Vec<(usize, usize)> {
        let mut spans = Vec::new();
        let mut offset = 0;
        for entry in block.split(|b| *b == 0) {
            if by_name {
                if let Some(eq) = entry.iter().position(|b| *b == b'=') {
                    let name = String::from_utf8_lossy(&entry[..eq]);
                    if is_secret_name(&name) {
                        spans.push((offset + eq + 1, entry.len() - eq - 1));
                    }
                }
            }
            for value in values.iter().map(String::as_bytes) {
                let mut from = 0;
                while let Some(at) = find(&entry[from..], value) {
                    spans.push((offset + from + at, value.len()));
                    from += at + value.len();
                }
            }
            offset += entry.len() + 1;
        }
        spans
    }

    /// The value of a secret variable by name: one taken at start, or (for
    /// a name that does not look secret) the live environment. Either way
    /// the value is redacted from then on.
    pub fn var(&self, name: &str) -> Option<String> {
        let value = match self.vars.get(name) {
            Some(value) => value.clone(),
            None => std::env::var(name).ok()?,
        };
        self.add(&value);
        Some(value)
    }

    /// Adds a value to redact (the TCP token, once known).
    pub fn add(&self, value: &str) {
        if value.len() < MIN_SECRET_LEN {
            return;
        }
        let mut values = self.values.write().unwrap_or_else(PoisonError::into_inner);
        if values.iter().any(|v| v == value) {
            return;
        }
        let mut next: Vec<String> = values.iter().cloned().collect();
        next.push(value.to_owned());
        next.sort_by_key(|v| std::cmp::Reverse(v.len()));
        *values = next.into();
    }

    fn snapshot(&self) -> Arc<[String]> {
        self.values
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces every known secret and every trigger token in `text`.
    pub fn redact(&self, text: &mut String) {
        redact_with(&self.snapshot(), text);
    }

    /// Redacts a stream piece by piece: `held` is what was read and not
    /// yet passed on. Returns the redacted bytes that are final and leaves
    /// in `held` the tail that could still be the start of a secret (all of
    /// it is final `at_end`).
    pub fn redact_stream(&self, held: &mut Vec<u8>, at_end: bool) -> Vec<u8> {
        let values = self.snapshot();
        let keep = if at_end { 0 } else { open_tail(&values, held) };
        // A match starting before `cut` lies wholly inside `held`: one
        // running past its end would make its start a tail still open.
        let cut = held.len().saturating_sub(keep);
        // Secret values, then the trigger token prefix (length 0 marks it).
        let patterns: Vec<(&[u8], usize)> = values
            .iter()
            .map(|v| (v.as_bytes(), v.len()))
            .chain([(TRIGGER_TOKEN_PREFIX.as_bytes(), 0)])
            .collect();
        // Each pattern's next match at or after `at`, searched again only
        // once `at` passes it, so many matches cost one pass, not one each.
        let find = |pattern: &[u8], from: usize| {
            memchr::memmem::find(&held[from..], pattern).map(|found| from + found)
        };
        let mut next: Vec<Option<usize>> = patterns.iter().map(|(p, _)| find(p, 0)).collect();
        let mut out = Vec::with_capacity(cut);
        let mut at = 0;
        while at < cut {
            for (slot, (pattern, _)) in next.iter_mut().zip(&patterns) {
                if slot.is_some_and(|found| found < at) {
                    *slot = find(pattern, at);
                }
            }
            let chosen = next
                .iter()
                .zip(&patterns)
                .filter_map(|(found, (_, len))| Some(((*found)?, *len)))
                .filter(|(found, _)| *found < cut)
                .min_by_key(|(found, len)| (*found, std::cmp::Reverse(*len)));
            let Some((found, len)) = chosen else {
                out.extend_from_slice(&held[at..cut]);
                at = cut;
                break;
            };
            out.extend_from_slice(&held[at..found]);
            at = found;
            if len > 0 {
                out.extend_from_slice(REDACTED.as_bytes());
                at += len;
                continue;
            }
            // A trigger token: the prefix and 64 hex digits.
            let prefix = TRIGGER_TOKEN_PREFIX.len();
            let hex = held[at + prefix..]
                .iter()
                .take(TRIGGER_TOKEN_HEX)
                .take_while(|b| b.is_ascii_hexdigit())
                .count();
            out.extend_from_slice(TRIGGER_TOKEN_PREFIX.as_bytes());
            at += prefix;
            if hex == TRIGGER_TOKEN_HEX {
                out.extend_from_slice(REDACTED.as_bytes());
                at += hex;
            }
        }
        held.drain(..at);
        out
    }

    /// Redacts every text of a batch before it is stored.
    pub fn redact_batch(&self, batch: &mut Batch) {
        // One look at the secrets for the whole batch, not one per text.
        let values = self.snapshot();
        let mut redact = |text: &mut String| redact_with(&values, text);
        for (_, event) in &mut batch.events {
            event.texts_mut(&mut redact);
        }
        for write in &mut batch.writes {
            match write {
                Write::PutMessage(message) | Write::Requeue(message) => {
                    message.texts_mut(&mut redact)
                }
                Write::PutTask(task) | Write::EndTask(task) => task.texts_mut(&mut redact),
                Write::PutWorkItem(item) => item.texts_mut(&mut redact),
                Write::PutWait(wait) | Write::EndWait(wait) => wait.texts_mut(&mut redact),
                // Output is redacted as a stream where it is read (a secret
                // may straddle two chunks); the rest carries no free text
                // an agent or a program wrote.
                Write::PutOutput { .. }
                | Write::DropOutput { .. }
                | Write::CreateAgent(_)
                | Write::PutAgent(_)
                | Write::PutLiveAgent(_)
                | Write::PutIntent(_)
                | Write::DeleteIntent(_)
                | Write::PutWorkspaces(_)
                | Write::AddUsage { .. }
                | Write::DeleteAgent(_) => {}
            }
        }
    }
}

/// How many bytes at the end of `held` could be the start of a secret or
/// of a trigger token that the next read completes: the longest tail that
/// is a proper prefix of one. Only that much is held back, so a quiet
/// command's short lines are passed on as they come, not at its end.
fn open_tail(values: &[String], held: &[u8]) -> usize {
    let secret = values
        .iter()
        .map(|value| prefix_tail(held, value.as_bytes()))
        .max()
        .unwrap_or(0);
    secret.max(trigger_token_tail(held))
}

/// The longest tail of `held` that is a proper prefix of `pattern`.
fn prefix_tail(held: &[u8], pattern: &[u8]) -> usize {
    let longest = held.len().min(pattern.len().saturating_sub(1));
    (1..=longest)
        .rev()
        .find(|&len| held.ends_with(&pattern[..len]))
        .unwrap_or(0)
}

/// The tail of `held` that may be a trigger token still arriving: part of
/// its prefix, or the prefix and fewer hex digits than a token has.
fn trigger_token_tail(held: &[u8]) -> usize {
    let hex = held
        .iter()
        .rev()
        .take(TRIGGER_TOKEN_HEX)
        .take_while(|b| b.is_ascii_hexdigit())
        .count();
    let before = &held[..held.len() - hex];
    if hex < TRIGGER_TOKEN_HEX && before.ends_with(TRIGGER_TOKEN_PREFIX.as_bytes()) {
        return TRIGGER_TOKEN_PREFIX.len() + hex;
    }
    prefix_tail(held, TRIGGER_TOKEN_PREFIX.as_bytes())
}

/// Replaces each of `values` (longest first) and every trigger token in
/// `text`.
fn redact_with(values: &[String], text: &mut String) {
    for value in values {
        if text.contains(value.as_str()) {
            *text = text.replace(value.as_str(), REDACTED);
        }
    }
    if text.contains(TRIGGER_TOKEN_PREFIX) {
        *text = redact_trigger_tokens(text);
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Replaces trigger tokens (`htr_` and 64 hex digits) with a marker.
pub fn redact_trigger_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(TRIGGER_TOKEN_PREFIX) {
        let after = &rest[at + TRIGGER_TOKEN_PREFIX.len()..];
        let hex = after
            .bytes()
            .take(TRIGGER_TOKEN_HEX)
            .take_while(u8::is_ascii_hexdigit)
            .count();
        out.push_str(&rest[..at]);
        out.push_str(TRIGGER_TOKEN_PREFIX);
        if hex == TRIGGER_TOKEN_HEX {
            out.push_str(REDACTED);
            rest = &after[hex..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests;
