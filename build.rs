//! Compiles the protobuf API with protox (pure Rust, no system `protoc`),
//! writes the descriptor set for server reflection, and generates the tonic
//! client and server code.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let files = [
        "proto/holarchy/v1/agent.proto",
        "proto/holarchy/v1/runtime.proto",
        "proto/holarchy/v1/task.proto",
        "proto/holarchy/v1/supervision.proto",
        "proto/holarchy/v1/work.proto",
        "proto/holarchy/v1/trigger.proto",
        "proto/holarchy/v1/workspace.proto",
        "proto/holarchy/v1/instance.proto",
        "proto/holarchy/v1/approval.proto",
        "proto/holarchy/v1/memory.proto",
        "proto/holarchy/v1/access.proto",
        "proto/holarchy/v1/replay.proto",
    ];
    let descriptors = protox::compile(files, ["proto"])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("holarchy_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
