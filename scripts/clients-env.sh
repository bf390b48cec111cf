# Sourced by the client scripts: where the clients' toolchain packages live,
# outside the clone so repeated runs reuse them.
#   AGENTVFS_TOOLS   Go binaries (protoc plugins, grpcurl) in $AGENTVFS_TOOLS/bin
#   AGENTVFS_PYTHON  the Python of a venv holding the Python client's packages
export AGENTVFS_TOOLS="${AGENTVFS_TOOLS:-$HOME/.cache/agentvfs-tools}"
AGENTVFS_VENV="${AGENTVFS_VENV:-$HOME/.cache/agentvfs-venv}"
[ -x "$AGENTVFS_VENV/bin/python" ] || python3 -m venv "$AGENTVFS_VENV"
export AGENTVFS_PYTHON="$AGENTVFS_VENV/bin/python"
