#!/usr/bin/env bash
# The actions/artifact libraries suite/library/test_artifact_unpacking.py drives, each locked as its
# action release locks it (scripts/artifact-unpack/*/package.json records the release's commit):
#   scripts/artifact-unpack/               download-artifact v8.0.1, the summary job's pin
#   scripts/artifact-unpack/v4.3.0/        download-artifact v4.3.0, the old pin (the attack's proof)
#   scripts/artifact-unpack/upload-v4.6.2/ upload-artifact v4.6.2, the shard jobs' zip
# Needs node and npm. `cd` rather than `npm --prefix`: --prefix also moves npm's global config.
# Safe to run again: npm ci reinstalls each node_modules from its lock.
set -euo pipefail
cd "$(dirname "$0")/artifact-unpack"
for dir in . v4.3.0 upload-v4.6.2; do
  (cd "$dir" && npm ci --no-audit --no-fund)
done
