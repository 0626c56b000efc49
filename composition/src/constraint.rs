//! The layered constraints on an agent's tool calls: system, then the
//! instance's configuration, then its prompt. A lower layer can narrow what a
//! higher one allows, never widen it.
