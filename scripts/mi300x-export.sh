#!/usr/bin/env bash
# The commit under test, as data: a tree of its files with no .git, for the container to mount
# read-only. Run on the MI300X runner's host, from main's checkout (trusted/).
#
#   scripts/mi300x-export.sh REPOSITORY_URL SHA TREE
#
# The commit is fetched by its full SHA (the one the event named: for a fork, the head the
# maintainer's label was put on) into a bare repository this script makes, whose config and hooks
# are its own, then written out with `git archive` into TREE, a new folder. Nothing of the code
# under test becomes a git repository on the host, so no git the host runs later (checkout's post
# step, the next job's checkout) reads a config or hook it wrote. A tree holding a `.git` entry is
# refused at the fetch (fsck), and the extraction drops any that got past it.
# GITHUB_TOKEN, if set, authenticates the fetch (a private repository) through git's environment,
# never its config files or command line.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 REPOSITORY_URL SHA TREE" >&2; exit 2; }
url=$1; sha=$2; tree=$3
[[ $sha =~ ^[0-9a-f]{40}$ ]] || { echo "mi300x-export: '$sha' is not a full commit SHA" >&2; exit 2; }
[ ! -e "$tree" ] || { echo "mi300x-export: $tree exists; the export goes into a new folder" >&2; exit 2; }

# git reads no system or global config and runs no hook of anyone's
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0
repo=$(mktemp -d "${RUNNER_TEMP:-/tmp}/tilegate-fetch.XXXXXX")
trap 'rm -rf "$repo"' EXIT
git init -q --bare "$repo"
safe=(-c core.hooksPath=/dev/null -c core.fsmonitor=false -c protocol.allow=never -c protocol.https.allow=always
      -c protocol.file.allow=always -c fetch.fsckObjects=true -c fetch.fsck.hasDotgit=error
      -c fetch.fsck.hasDotdot=error -c fetch.fsck.hasDot=error)
if [ -n "${GITHUB_TOKEN:-}" ]; then
  auth=$(printf 'x-access-token:%s' "$GITHUB_TOKEN" | base64 -w0)
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.extraHeader GIT_CONFIG_VALUE_0="AUTHORIZATION: basic $auth"
fi
if ! git -C "$repo" "${safe[@]}" fetch -q --no-tags --depth=1 "$url" "$sha"; then
  echo "mi300x-export: could not fetch $sha from $url (a commit no longer in the repository, or a tree" >&2
  echo "  fsck refused: a .git entry). A fork's labelled commit that was pushed over: label the new head." >&2
  exit 1
fi
got=$(git -C "$repo" rev-parse --verify -q "$sha^{commit}") || { echo "mi300x-export: $sha is not a commit" >&2; exit 1; }
[ "$got" = "$sha" ] || { echo "mi300x-export: fetched $got, asked for $sha" >&2; exit 1; }

mkdir -p "$tree"
# --no-same-owner/--no-same-permissions: the host's user owns the files, with its umask
git -C "$repo" "${safe[@]}" archive --format=tar "$sha" \
  | tar -x -C "$tree" --no-same-owner --no-same-permissions --exclude=.git
if [ -n "$(find "$tree" -name .git -print -quit)" ]; then
  echo "mi300x-export: a .git entry survived the export; refusing it" >&2
  rm -rf "$tree"
  exit 1
fi
echo "mi300x-export: $sha -> $tree ($(find "$tree" -type f | wc -l) files, no .git)"
