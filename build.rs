//! Compiles `proto/agentvfs/v1/*.proto` into Rust with tonic-prost-build.
//!
//! protox parses the protos in pure Rust, so building needs no `protoc`. The file
//! descriptor set is also written to `OUT_DIR/agentvfs_descriptor.bin` for gRPC
//! server reflection (tonic's `compile_fds` does not write it itself).

use prost::Message;
use std::{env, fs, io, path::PathBuf};

/// The Tools service's typed request messages (and MultiEdit's edit).
const TYPED_TOOL_REQUESTS: [&str; 10] = [
    "LsToolRequest",
    "GlobToolRequest",
    "GrepToolRequest",
    "ReadToolRequest",
    "WriteToolRequest",
    "EditToolRequest",
    "ToolEdit",
    "MultiEditToolRequest",
    "HistoryToolRequest",
    "ApplyPatchToolRequest",
];

fn main() -> io::Result<()> {
    let proto_dir = PathBuf::from("proto");
    let mut files: Vec<PathBuf> = fs::read_dir(proto_dir.join("agentvfs/v1"))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<io::Result<_>>()?;
    files.retain(|p| p.extension().is_some_and(|ext| ext == "proto"));
    files.sort();

    let fds = protox::compile(&files, [&proto_dir]).map_err(io::Error::other)?;
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    fs::write(out_dir.join("agentvfs_descriptor.bin"), fds.encode_to_vec())?;

    // The typed Tools requests serialize to JSON, so `src/server/tools.rs`
    // turns their fields into a tool's arguments by its parameter table
    // (`src/tools/params.rs`) instead of naming each field again.
    let mut builder = tonic_prost_build::configure()
        .build_client(true)
        .build_server(true);
    for message in TYPED_TOOL_REQUESTS {
        builder = builder.message_attribute(
            format!(".agentvfs.v1.{message}"),
            "#[derive(serde::Serialize)]",
        );
    }
    builder.compile_fds(fds)?;

    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
