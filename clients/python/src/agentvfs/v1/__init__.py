"""Generated protobuf and gRPC stubs of agentvfs.v1 (scripts/generate-clients)."""
