#!/usr/bin/env bash
# The MI300X runner's job-started hook (ACTIONS_RUNNER_HOOK_JOB_STARTED, docs/runner.md): the
# runner runs it before every job it is given, and a job it exits non-zero for never starts. It
# accepts only the self-hosted jobs of main's .github/workflows/gate-mi300x.yml, for the events that
# workflow's trust rules are written for. Anything else that asks for the runner's labels (a fork's
# edited gate-cpu.yml on pull_request, a workflow pushed to another branch, a copy of this workflow
# under another name) is refused here, whatever its `runs-on:` says.
#
# Installed outside any workspace, with the repository it serves in job-started.allow beside it
# (one line: OWNER/NAME). It reads only GitHub's default variables, which no workflow can set.
set -euo pipefail
allow_file="$(dirname "$0")/job-started.allow"
refuse() {
  echo "tilegate runner: refused: $*" >&2
  echo "tilegate runner: this runner runs only main's gate-mi300x.yml (docs/runner.md)" >&2
  exit 1
}
[ -f "$allow_file" ] || refuse "no $allow_file naming the repository this runner serves"
repo=$(tr -d '[:space:]' < "$allow_file")
[[ $repo =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] || refuse "$allow_file holds no OWNER/NAME"

want_workflow="$repo/.github/workflows/gate-mi300x.yml@refs/heads/main"
[ "${GITHUB_REPOSITORY:-}" = "$repo" ] || refuse "repository '${GITHUB_REPOSITORY:-}' is not $repo"
[ "${GITHUB_WORKFLOW_REF:-}" = "$want_workflow" ] || refuse "workflow '${GITHUB_WORKFLOW_REF:-}' is not $want_workflow"
case ${GITHUB_EVENT_NAME:-} in
  push|pull_request_target|schedule|workflow_dispatch) ;;
  *) refuse "event '${GITHUB_EVENT_NAME:-}' is not one the gate's trust rules cover" ;;
esac
# pull_request_target runs the base branch's workflow: a pull request into another branch would run
# that branch's copy of it
[ "${GITHUB_REF:-}" = refs/heads/main ] || refuse "ref '${GITHUB_REF:-}' is not refs/heads/main"
case ${GITHUB_JOB:-} in
  gate|deep) ;;
  *) refuse "job '${GITHUB_JOB:-}' is not a self-hosted job of gate-mi300x.yml" ;;
esac
echo "tilegate runner: accepted $GITHUB_WORKFLOW_REF, job $GITHUB_JOB, event $GITHUB_EVENT_NAME"
