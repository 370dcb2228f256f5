#!/usr/bin/env bash
# Copy the checkout's sources (what a build reads: no .git, results, docs, runs, environments or
# build outputs) into the folder DEST, so that a build writes its own files (build/, the
# egg-info) there and not in the checkout. Usage: bash scripts/copy_sources.sh DEST
set -euo pipefail
cd "$(dirname "$0")/.."
dest="${1:?usage: copy_sources.sh DEST}"
mkdir -p "$dest"
tar -c --exclude=./.git --exclude=./results --exclude=./docs --exclude=./runs --exclude='./.venv*' \
    --exclude=./build --exclude='*.egg-info' --exclude='__pycache__' . | tar -x -C "$dest"
