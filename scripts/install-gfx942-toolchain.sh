#!/usr/bin/env bash
# Installs the gfx942 cross toolchain on a Debian 12 machine with no ROCm and no GPU:
#   - clang-19, lld-19, llvm-19 from Debian 12 itself (system packages);
#   - HIP headers (libamdhip64-dev 6.4, Debian sid) and the AMDGPU device libraries
#     (rocm-device-libs-17, Debian trixie), downloaded with a private apt state and
#     unpacked into a prefix with dpkg -x: nothing from sid/trixie enters the system.
#   - an empty <rocwmma/rocwmma.hpp>: TileLang's HIP common.h includes it, uses none of it,
#     and no registry here ships rocWMMA.
# Why sid's HIP 6.4 and not trixie's 5.7: the 5.7 headers lack platform detection and
# hip_bfloat16 (measured, see DESIGN.md).
#
#   usage: scripts/install-gfx942-toolchain.sh [PREFIX]     (default: .toolchain/gfx942)
# Idempotent: a prefix holding a complete install is kept.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-${TILEGATE_TOOLCHAIN:-$here/.toolchain/gfx942}}
hip_pkg="libamdhip64-dev=${TILEGATE_HIP_VERSION:-6.4.3-5}"
devlibs_pkg="rocm-device-libs-17=${TILEGATE_DEVLIBS_VERSION:-6.0+git20231212.5a852ed-2}"

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

need_system=()
for tool in clang++-19 clang-offload-bundler-19 llvm-objdump-19 llvm-readelf-19 llvm-mca-19 ld.lld-19; do
  command -v "$tool" >/dev/null || need_system=(clang-19 lld-19 llvm-19)
done
if [ ${#need_system[@]} -gt 0 ]; then
  echo "installing Debian 12 packages: ${need_system[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_system[@]}"
fi

if [ -f "$prefix/.complete" ]; then
  echo "gfx942 toolchain prefix already complete: $prefix"
  exit 0
fi

apt_state=$(mktemp -d)
trap 'rm -rf "$apt_state"' EXIT
mkdir -p "$apt_state/lists/partial" "$apt_state/cache/archives/partial" "$apt_state/debs"
cat > "$apt_state/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main
SRC
apt_opts=(-o "Dir::Etc::sourcelist=$apt_state/sources.list" -o "Dir::Etc::sourceparts=-"
          -o "Dir::State::Lists=$apt_state/lists" -o "Dir::Cache=$apt_state/cache"
          -o "APT::Get::List-Cleanup=0" -o "APT::Sandbox::User=root" -qq)
apt-get "${apt_opts[@]}" update
(cd "$apt_state/debs" && apt-get "${apt_opts[@]}" download "$hip_pkg" "$devlibs_pkg")

rm -rf "$prefix"
mkdir -p "$prefix/shim/rocwmma"
for deb in "$apt_state"/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
printf '// Empty on purpose: TileLang includes this header without using it.\n' \
  > "$prefix/shim/rocwmma/rocwmma.hpp"
ls "$apt_state"/debs > "$prefix/PACKAGES"
for f in usr/include/hip/hip_runtime.h usr/lib/llvm-17/lib/clang/17/amdgcn/bitcode/oclc_isa_version_942.bc; do
  [ -f "$prefix/$f" ] || { echo "toolchain install incomplete: $prefix/$f missing" >&2; exit 1; }
done
touch "$prefix/.complete"
echo "gfx942 toolchain ready in $prefix:"; sed 's/^/  /' "$prefix/PACKAGES"
