//! Hostile agents: responses that would outgrow a gRPC message.
