# Sourced by the scripts: one build directory outside the clone, shared by
# every checkout, so RocksDB's C++ (10+ minutes) compiles once per machine.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/agentvfs-target}"
AGENTVFS_BIN="$CARGO_TARGET_DIR/release/agentvfs"
export AGENTVFS_BIN
