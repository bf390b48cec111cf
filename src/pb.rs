//! The generated protobuf and gRPC code of `proto/agentvfs/v1` (package
//! `agentvfs.v1`), and the file descriptor set served by reflection.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("agentvfs.v1");

/// Encoded `FileDescriptorSet` of every agentvfs proto, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("agentvfs_descriptor");
