//! Webhook signatures: HMAC-SHA256 over the raw body, compared in constant
//! time, for the `github` and `generic` providers.
