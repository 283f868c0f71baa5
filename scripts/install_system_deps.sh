#!/usr/bin/env bash
# System packages that pip cannot install and the tests need: PostgreSQL's server
# binaries, from which the database tests start a throwaway server on a loopback port,
# and Chromium, which the dashboard tests drive headless (through Playwright).
# Installs only what is missing; needs root (or sudo) for that.
set -euo pipefail

missing=()
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" > /dev/null; then
    missing+=(postgresql)
fi
if ! command -v chromium > /dev/null; then
    missing+=(chromium)
fi
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
else
    as_root=(sudo)
fi
"${as_root[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q "${missing[@]}"
