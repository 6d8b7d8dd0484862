#!/usr/bin/env bash
# Builds tilegate-test-image:1, a small local docker image made of Debian 12 packages, and prints its
# name. It stands in for the ROCm image (unreachable off the runner) in CPU tests of
# scripts/mi300x-container.sh: bash, coreutils, findutils, python3 with a venv that can pip-install
# local wheels offline, and /etc/passwd + /etc/group with root, video (44) and render (105).
#
#   scripts/test-container-image.sh          (root; docker daemon running)
#
# Packages come only through apt's configured sources (apt-get download), no registry, no mirror
# URL here. Downloads are kept in $TILEGATE_IMAGE_CACHE (default /var/cache/tilegate-image); a rerun
# with the same package versions and the same script leaves the existing image alone.
set -euo pipefail

IMAGE=tilegate-test-image:1
CACHE=${TILEGATE_IMAGE_CACHE:-/var/cache/tilegate-image}
# what the tests need (dash: /bin/sh, which Python's subprocess and #!/bin/sh scripts expect; grep
# and sed: any base image has them); apt resolves the rest
ROOTS=(base-files bash dash coreutils findutils grep sed
  python3 python3-venv python3-pip-whl python3-setuptools-whl)

log() { printf '%s\n' "$*" >&2; }

docker info >/dev/null 2>&1 || { log "docker daemon not reachable"; exit 1; }
mkdir -p "$CACHE"
# two builds at once would race on the cache and the tag
exec 9>"$CACHE/.lock"
flock 9

work=$(mktemp -d)
dl=
trap 'rm -rf "$work" ${dl:+"$dl"}' EXIT

# what apt's answer depends on: its package lists, its configuration and this script (ROOTS)
lists=/var/lib/apt/lists/ etc=/etc/apt/
eval "$(apt-config shell lists Dir::State::lists/d etc Dir::Etc/d)"
apt_key() {
  { find "$lists" -maxdepth 1 -type f ! -name lock -printf '%p %s %T@\n'
    find "$etc" -type f -printf '%p %s %T@\n'
  } | LC_ALL=C sort | cat - "${BASH_SOURCE[0]}" | sha256sum | cut -c1-64
}
# resolving takes apt seconds (it parses every list), so its answer is kept per apt_key
memo=$CACHE/packages.$(apt_key)
if [ -s "$memo" ]; then
  cp "$memo" "$work/packages"
else
  # apt is asked as if for an empty system (an empty dpkg status): what this host has installed
  # neither counts as available nor satisfies a dependency
  : >"$work/status"
  empty=(-o Dir::State::status="$work/status" -o Debug::NoLocking=1)
  # only refresh the lists when apt can fetch no python3 at all (a fresh machine); otherwise keep
  # what the machine has, so a rerun needs no network (captured first: grep -q quitting early
  # would fail the pipe under pipefail)
  policy=$(apt-cache "${empty[@]}" policy python3 2>/dev/null || true)
  if ! grep -q 'Candidate: [0-9]' <<<"$policy"; then
    apt-get update -q >&2
  fi
  # the closure as apt would install it there: first alternatives, no recommends
  apt-get -s -q "${empty[@]}" install --no-install-recommends "${ROOTS[@]}" |
    awk '$1 == "Inst" { sub(/^\(/, "", $3); print $2 "=" $3 }' | LC_ALL=C sort >"$work/packages"
  [ -s "$work/packages" ] || { log "apt resolved no packages"; exit 1; }
  rm -f "$CACHE"/packages.*
  memo=$CACHE/packages.$(apt_key)   # apt-get update changes the key
  cp "$work/packages" "$memo.tmp" && mv "$memo.tmp" "$memo"
fi

# the image is current when it was made from these exact versions by this exact script
recipe=$(cat "$work/packages" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-64)
have=$(docker image inspect --format '{{.Id}} {{ index .Config.Labels "tilegate.recipe" }}' "$IMAGE" 2>/dev/null || true)
if [ "${have#* }" = "$recipe" ]; then
  echo "$IMAGE"
  exit 0
fi

# the file apt-get download writes for name=version (an epoch's ':' becomes %3a)
deb_of() {
  local name=${1%%=*} ver=${1#*=} f
  for f in "$CACHE/${name}_${ver//:/%3a}_"*.deb; do
    [ -f "$f" ] && { echo "$f"; return 0; }
  done
  return 1
}

missing=()
while read -r p; do
  deb_of "$p" >/dev/null || missing+=("$p")
done <"$work/packages"
if [ "${#missing[@]}" -gt 0 ]; then
  log "downloading ${#missing[@]} packages into $CACHE"
  # apt drops root to _apt for downloads: give it a folder of its own (mktemp's 0700 one it could
  # not reach); beside the cache, so a failed download leaves no partial .deb in it and the
  # move is a rename
  dl=$(mktemp -d "$CACHE/download.XXXXXX")
  chmod 755 "$dl"
  if id _apt >/dev/null 2>&1; then chown _apt "$dl"; fi
  (cd "$dl" && apt-get download -q "${missing[@]}" >&2)
  mv "$dl"/*.deb "$CACHE"/
fi

# Debian 12 is merged-/usr: /bin, /sbin, /lib, /lib64 are links into /usr, which packages still
# name by the old paths (bash: /bin/bash, libc6: /lib64/ld-linux-x86-64.so.2)
root=$work/rootfs
mkdir -p "$root"/usr/{bin,sbin,lib,lib64}
for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
# unpack only (no maintainer scripts); dpkg-deb -x would replace those links with directories,
# tar --keep-directory-symlink keeps them; docs and translations are not needed for tests
while read -r p; do
  dpkg-deb --fsys-tarfile "$(deb_of "$p")" |
    tar -x -C "$root" --keep-directory-symlink \
      --exclude='./usr/share/man/*' --exclude='./usr/share/info/*' \
      --exclude='./usr/share/locale/*' --exclude='./usr/share/doc/*'
done <"$work/packages"

# what the skipped maintainer scripts would have done, as far as the tests need it
[ -e "$root/usr/bin/python3" ] || ln -s python3.11 "$root/usr/bin/python3"
[ -e "$root/usr/bin/awk" ] || ln -s mawk "$root/usr/bin/awk"   # mawk's postinst: alternatives
mkdir -p "$root"/{tmp,root,proc,sys,dev,run,var/tmp}
chmod 1777 "$root/tmp" "$root/var/tmp"
chmod 700 "$root/root"
# root, and the groups the GPU device nodes belong to (the gate passes --group-add 44/105)
printf '%s\n' 'root:x:0:0:root:/root:/bin/bash' \
  'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin' >"$root/etc/passwd"
printf '%s\n' 'root:x:0:' 'video:x:44:' 'render:x:105:' 'nogroup:x:65534:' >"$root/etc/group"

log "importing $IMAGE ($(wc -l <"$work/packages") packages)"
tar -C "$root" --numeric-owner -c . |
  docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --change "LABEL tilegate.recipe=$recipe" \
    --change "LABEL tilegate.packages=\"$(tr '\n' ' ' <"$work/packages")\"" \
    - "$IMAGE" >/dev/null
# the image this one replaces, unless a container or another tag still uses it
if [ -n "$have" ]; then docker rmi "${have%% *}" >/dev/null 2>&1 || true; fi
echo "$IMAGE"
