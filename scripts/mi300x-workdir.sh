#!/usr/bin/env bash
# The MI300X job's folder on the runner's host: made new for each run, removed whatever the code
# under test left in it, so that nothing of one run (a pull request's records, a folder it made
# unremovable) reaches another. Run on the host, from main's checkout (trusted/).
#
#   scripts/mi300x-workdir.sh start WORK    removes every $RUNNER_TEMP/tilegate* an earlier job
#                                           left (the job stops if one stays), then makes WORK,
#                                           which must be new: $RUNNER_TEMP/tilegate-<run>-<attempt>-...
#   scripts/mi300x-workdir.sh remove WORK   removes WORK; every entry is tried, and it exits 1 if
#                                           anything stays
#
# WORK holds what host steps wrote (the export, the wheels, the collected records); the container
# writes only tmpfs (scripts/mi300x-container.sh). Should anything of the runner's uid there lose
# its permissions (a mode-000 folder), the owner gives them back before removal. No name under WORK
# is printed.
set -uo pipefail  # no -e: one failed removal must not stop the others
usage() { echo "usage: $0 start|remove WORK" >&2; exit 2; }
[ $# -eq 2 ] && [[ $1 =~ ^(start|remove)$ ]] && [ -n "$2" ] || usage
temp=${RUNNER_TEMP:?RUNNER_TEMP is not set}
work=$2
# a run's folder right under $RUNNER_TEMP, named as the workflow's TILEGATE_RUN (no `/`, no `..`)
[[ ${work#"$temp"/} =~ ^tilegate-[A-Za-z0-9_-]{1,100}$ ]] || { echo "mi300x-workdir: $work is not a run's folder in $temp" >&2; exit 2; }

# scrub PATH: removes PATH; succeeds only if nothing of it stays. A link is removed as itself (chmod
# -R would follow one named on its command line); below PATH, chmod -R follows none (-P, GNU's
# default) and rm removes links, never what they point at.
scrub() {
  [ -e "$1" ] || [ -L "$1" ] || return 0
  if [ -L "$1" ]; then
    rm -f -- "$1" 2>/dev/null
  else
    chmod -R u+rwX -- "$1" 2>/dev/null
    rm -rf -- "$1" 2>/dev/null
  fi
  [ ! -e "$1" ] && [ ! -L "$1" ]
}

stayed=0
if [ "$1" = start ]; then
  # an earlier job's folders, however it ended (a cancel, a runner that died, a failed clean-up)
  shopt -s nullglob dotglob
  for old in "$temp"/tilegate*; do scrub "$old" || stayed=$((stayed + 1)); done
  if [ "$stayed" -gt 0 ]; then
    echo "mi300x-workdir: $stayed folder(s) under $temp/tilegate* an earlier job left could not be removed;" >&2
    echo "  the job stops rather than run beside them: take the runner offline and remove them" >&2
    exit 1
  fi
  mkdir -m 0700 -- "$work" || { echo "mi300x-workdir: could not make $work" >&2; exit 1; }
  echo "mi300x-workdir: $work (new)"
else
  scrub "$work" || stayed=1
  # the export's fetch folder, if a cancel cut its trap short
  shopt -s nullglob
  for old in "$temp"/tilegate-fetch.*; do scrub "$old" || stayed=1; done
  if [ "$stayed" -gt 0 ]; then
    echo "mi300x-workdir: $work could not be removed entirely; the next job's start step removes it or stops" >&2
    exit 1
  fi
  echo "mi300x-workdir: $work removed"
fi
