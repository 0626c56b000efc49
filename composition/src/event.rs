//! The inbound event contract: every event, whatever its source, becomes
//! `{id, source, type, scope, at, subject, dedupe_key, payload}` before it
//! is stored (once per dedupe key) and routed.
