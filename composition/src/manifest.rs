//! Instance manifests: the TOML file an operator applies, parsed, bounded
//! and validated into an `InstanceSpec`.
