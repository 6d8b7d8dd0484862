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
#
# Its output is the job's log, and git prints text of the commit's (fsck quotes a .gitmodules
# value, newlines and all): no line of it may be a workflow command (a forged annotation,
# ::add-mask::, ::stop-commands::). So all of it goes to one stream, stderr (the runner reads
# stdout and stderr on two threads, so a window opened on one does not cover the other), inside a
# ::stop-commands:: window, and every line of git's is escaped as well (scrub below).
set -euo pipefail
exec 1>&2
export LC_ALL=C  # git's messages in ASCII English; sed and the SHA check byte by byte
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
[[ $token =~ ^[0-9a-f]{32}$ ]] || { echo "mi300x-export: no random token from /dev/urandom"; exit 1; }
repo=
finish() {
  [ -z "$repo" ] || rm -rf "$repo" || true
  printf '\n::%s::\n' "$token"  # on a line of its own, whatever came before
}
echo "::stop-commands::$token"
trap finish EXIT
# a cancelled step gets a signal: exit through the trap, so the window is closed
trap 'exit 129' HUP; trap 'exit 130' INT; trap 'exit 143' TERM

# Each line of stdin as printable ASCII, behind PREFIX: sed's `l` writes control and non-ASCII
# bytes (\r included: the runner ends a line at \r too) and backslashes as escapes; then the '#'
# of any "#[" (the runner's older ##[command] form, obeyed anywhere in a line) and a ':' that
# begins the line (after spaces, which the runner trims) are escaped too.
scrub() {
  sed -n 'l 0' | sed -e 's/\$$//' -e "s/^/$1/" -e 's/#\[/\\043[/g' -e 's/^\( *\):/\1\\072/'
}
say() { printf '%s\n' "$*" | scrub ""; }

[ $# -eq 3 ] || { say "usage: $0 REPOSITORY_URL SHA TREE"; exit 2; }
url=$1; sha=$2; tree=$3
[[ $sha =~ ^[0-9a-f]{40}$ ]] || { say "mi300x-export: '$sha' is not a full commit SHA"; exit 2; }
[ ! -e "$tree" ] || { say "mi300x-export: $tree exists; the export goes into a new folder"; exit 2; }

# git reads no system or global config and runs no hook of anyone's
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_TERMINAL_PROMPT=0
repo=$(mktemp -d "${RUNNER_TEMP:-/tmp}/tilegate-fetch.XXXXXX")
git init -q --bare "$repo" 2>&1 | scrub "git: "
safe=(-c core.hooksPath=/dev/null -c core.fsmonitor=false -c protocol.allow=never -c protocol.https.allow=always
      -c protocol.file.allow=always -c fetch.fsckObjects=true -c fetch.fsck.hasDotgit=error
      -c fetch.fsck.hasDotdot=error -c fetch.fsck.hasDot=error)
if [ -n "${GITHUB_TOKEN:-}" ]; then
  auth=$(printf 'x-access-token:%s' "$GITHUB_TOKEN" | base64 -w0)
  export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.extraHeader GIT_CONFIG_VALUE_0="AUTHORIZATION: basic $auth"
fi
# pipefail: the pipeline fails as git does
if ! git -C "$repo" "${safe[@]}" fetch -q --no-tags --depth=1 "$url" "$sha" 2>&1 | scrub "git: "; then
  say "mi300x-export: could not fetch $sha from $url (a commit no longer in the repository, or a tree"
  say "  fsck refused: a .git entry). A fork's labelled commit that was pushed over: label the new head."
  exit 1
fi
# -q: nothing on stderr for a missing commit, which the message says
got=$(git -C "$repo" rev-parse --verify -q "$sha^{commit}" 2>/dev/null) || { say "mi300x-export: $sha is not a commit"; exit 1; }
[ "$got" = "$sha" ] || { say "mi300x-export: fetched $got, asked for $sha"; exit 1; }

# What the archive writes is the tree as stored: its own .gitattributes would otherwise expand files
# on the way out (export-subst, ident, eol and encoding conversion: a small blob, a large file).
# $GIT_DIR/info/attributes comes before every attribute in the tree.
printf '%s\n' '* -export-subst -export-ignore -ident -text -eol -working-tree-encoding -filter' \
  > "$repo/info/attributes"
# The tree's size before any of it is written: a few kilobytes of objects can name one blob, or an
# empty folder, under millions of paths. Every entry counts (folders too: -t); awk stops reading at
# the first cap passed (git then stops on the closed pipe).
max_files=${TILEGATE_EXPORT_MAX_FILES:-200000}; max_bytes=${TILEGATE_EXPORT_MAX_BYTES:-$((4 * 2**30))}
sizes=$(git -C "$repo" "${safe[@]}" ls-tree -r -t -l "$sha" 2>/dev/null | awk -v mf="$max_files" -v mb="$max_bytes" '
  { n++; if ($4 ~ /^[0-9]+$/) b += $4 }
  n > mf || b > mb { over = 1; exit }
  END { print (over ? "over" : "ok"), n + 0, b + 0 }') || true
if [[ $sizes != ok\ * ]]; then
  say "mi300x-export: the commit's tree passes the export's caps ($max_files entries, $max_bytes bytes; at: ${sizes#over })"
  exit 1
fi
mkdir -p "$tree"
# --no-same-owner/--no-same-permissions: the host's user owns the files, with its umask; the
# archive goes to tar on stdout, what either prints to scrub. The stream itself is held to the
# listing's bound (contents, plus a tar header and padding an entry), should git write more.
read -r _ entries bytes <<<"$sizes"
stream_max=$(( bytes + entries * 4096 + 65536 ))
if ! { git -C "$repo" "${safe[@]}" archive --format=tar "$sha" | head -c "$stream_max" \
       | tar -x -C "$tree" --no-same-owner --no-same-permissions --exclude=.git; } 2>&1 | scrub "export: "; then
  say "mi300x-export: the archive of $sha could not be written out, or passed its listing's size"
  rm -rf "$tree"
  exit 1
fi
if [ -n "$(find "$tree" -name .git -print -quit)" ]; then
  say "mi300x-export: a .git entry survived the export; refusing it"
  rm -rf "$tree"
  exit 1
fi
say "mi300x-export: $sha -> $tree ($(find "$tree" -type f | wc -l) files, no .git)"
