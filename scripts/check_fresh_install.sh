#!/usr/bin/env bash
# README command 1 as a new user runs it, in a new virtual environment in a temporary
# folder: the runtime set from uv.lock, no extras, then `tensortune --help` and a 4-trial
# tune of a small matmul into a temporary database. On a machine where packages from
# earlier installs linger, this is what shows a runtime dependency missing from
# pyproject.toml (a test environment has every extra installed and cannot).
set -euo pipefail
cd "$(dirname "$0")/.."

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

python3 -m pip install -q uv
UV_PROJECT_ENVIRONMENT="$scratch/venv" uv sync --locked --quiet
tensortune=(env -u PYTHONPATH "$scratch/venv/bin/tensortune")
"${tensortune[@]}" --help > "$scratch/help.txt"
awk 'NF == 0 { blank++ } blank == 2 { exit } { print }' "$scratch/help.txt"
"${tensortune[@]}" tune matmul --shape 64 64 64 --trials 4 --db "sqlite:///$scratch/tune.db"
echo "check_fresh_install: README command 1 works in a new virtual environment"
