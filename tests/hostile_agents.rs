//! Black-box tests of the trust boundary: agents (and the programs that
//! drive them) are hostile. Each module holds one class of attack against
//! the real `holarchy` binary and shows it closed.

mod common;

#[path = "hostile_agents/amplification.rs"]
mod amplification;
#[path = "hostile_agents/bounds.rs"]
mod bounds;
#[path = "hostile_agents/confinement.rs"]
mod confinement;
#[path = "hostile_agents/connections.rs"]
mod connections;
#[path = "hostile_agents/depth.rs"]
mod depth;
#[path = "hostile_agents/http2.rs"]
mod http2;
#[path = "hostile_agents/network.rs"]
mod network;
#[path = "hostile_agents/output.rs"]
mod output;
#[path = "hostile_agents/paging.rs"]
mod paging;
#[path = "hostile_agents/secrets.rs"]
mod secrets;
#[path = "hostile_agents/tokens.rs"]
mod tokens;
