#!/usr/bin/env bash
# System packages that pip cannot install and the tests need: PostgreSQL's server
# binaries, from which the database tests start a throwaway server on a loopback port.
# Does nothing where they are already installed; needs root (or sudo) otherwise.
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/initdb" > /dev/null; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
else
    as_root=(sudo)
fi
"${as_root[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q postgresql
