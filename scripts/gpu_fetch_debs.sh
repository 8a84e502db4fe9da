#!/usr/bin/env bash
# Downloads (never installs) the Debian packages attnbench's build needs into .deb/, so that a
# machine with no network and no package registry (a GPU machine, say) can unpack them into a
# private prefix: scripts/gpu_run.sh does that there, with .deb/ copied beside the checkout (it is
# git-ignored). Run it on a Debian machine with apt.
#
#   bash scripts/gpu_fetch_debs.sh               # the -dev packages and the runtime libraries
#   bash scripts/gpu_fetch_debs.sh --with-cmake  # also cmake and its libraries (about +22 MiB),
#                                                # for a machine with no cmake at all
#   bash scripts/gpu_fetch_debs.sh --dest DIR    # somewhere other than .deb/
#
# Prints every file and the total size; fails if a downloaded package needs another one that is
# neither downloaded nor part of every Linux userland (libc6, libstdc++6, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { awk 'NR > 1 && (!/^#( |$)/ || /^# shellcheck/) {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; }

dest=.deb
with_cmake=0
while (($#)); do
  case "$1" in
    --with-cmake) with_cmake=1 ;;
    --dest) dest="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "gpu_fetch_debs.sh: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# The headers, CMake package files and shared libraries of every find_package() in
# CMakeLists.txt, plus ninja. OpenBLAS: the pthread flavour, its -dev (cblas.h, libopenblas.so)
# and the Fortran runtime it links.
packages=(
  catch2 libeigen3-dev libfmt-dev libfmt9 libbenchmark-dev libbenchmark1debian
  libtomlplusplus-dev libtomlplusplus3 libcli11-dev nlohmann-json3-dev
  libcsv-dev libcsv3
  libopenblas-dev libopenblas0 libopenblas-pthread-dev libopenblas0-pthread libgfortran5
  libquadmath0
  ninja-build
)
if ((with_cmake)); then
  packages+=(cmake cmake-data libjsoncpp25 librhash0 libuv1 libarchive13 libcurl4 libnghttp2-14
             libpsl5 librtmp1 libssh2-1 libldap-2.5-0 libsasl2-2 libsasl2-modules-db libbrotli1
             libnettle8 libxml2 libicu72 liblz4-1 libacl1)
fi

# Needed by a package above but present on any glibc Linux with a C++ compiler, or only
# documentation/config: not downloaded.
base_packages=" libc6 libgcc-s1 libstdc++6 gcc-12-base zlib1g pkg-config libbz2-1.0 liblzma5
  libexpat1 procps libgnutls30 libssl3 libidn2-0 libgssapi-krb5-2 libkrb5-3 libk5crypto3
  libkrb5support0 libcom-err2 libunistring2 libgmp10 libhogweed6 libp11-kit0 libtasn1-6 libffi8
  libdb5.3 libkeyutils1 debconf libzstd1 "
read -ra base_list <<<"$(echo "$base_packages" | tr '\n' ' ')"
base_packages=" ${base_list[*]} "  # one space between names, and around them

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if ! apt-cache show --no-all-versions libfmt-dev >/dev/null 2>&1; then
  echo "gpu_fetch_debs: no package lists yet: apt-get update"
  $sudo apt-get update -qq
fi
for package in "${packages[@]}"; do
  if ! apt-cache show --no-all-versions "$package" >/dev/null 2>&1; then
    echo "gpu_fetch_debs.sh: error: apt knows no package '$package' (run apt-get update?)" >&2
    exit 1
  fi
done

mkdir -p "$dest"
rm -f "$dest"/*.deb  # one version of each package: two would be unpacked over each other
echo "gpu_fetch_debs: downloading ${#packages[@]} packages into $dest/"
# As root, apt drops to the _apt user for downloads, which cannot write here: download as root.
(cd "$dest" && apt-get download -qq -o APT::Sandbox::User=root "${packages[@]}")

# Every dependency of a downloaded package must be downloaded too, or be a base package.
declare -A have=()
for deb in "$dest"/*.deb; do have[$(dpkg-deb -f "$deb" Package)]=1; done
missing=()
for deb in "$dest"/*.deb; do
  depends="$(dpkg-deb -f "$deb" Depends),$(dpkg-deb -f "$deb" Pre-Depends)"
  IFS=',' read -ra clauses <<<"$depends"
  for clause in "${clauses[@]}"; do
    [ -n "${clause// /}" ] || continue
    satisfied=0
    IFS='|' read -ra alternatives <<<"$clause"
    for alternative in "${alternatives[@]}"; do
      name=$(echo "$alternative" | sed 's/([^)]*)//; s/:any//' | tr -d ' ')
      if [ -n "${have[$name]:-}" ] || [[ "$base_packages" == *" $name "* ]]; then satisfied=1; fi
    done
    ((satisfied)) || missing+=("$(dpkg-deb -f "$deb" Package) needs ${clause# }")
  done
done

debs=("$dest"/*.deb)
for deb in "${debs[@]}"; do printf '  %9d  %s\n' "$(stat -c %s "$deb")" "$deb"; done
total=$(cat "${debs[@]}" | wc -c)
count=${#debs[@]}
echo "gpu_fetch_debs: $count packages, $((total / 1024)) KiB ($(awk "BEGIN{printf \"%.1f\", $total/1048576}") MiB) in $dest/"
if ((${#missing[@]})); then
  printf 'gpu_fetch_debs.sh: error: unmet dependency: %s\n' "${missing[@]}" >&2
  exit 1
fi
if ((total > 40 * 1024 * 1024)); then
  echo "gpu_fetch_debs.sh: error: over 40 MiB: .deb/ is meant to travel beside the checkout" >&2
  exit 1
fi
echo "gpu_fetch_debs: copy $dest beside the checkout on the GPU machine, then: bash scripts/gpu_run.sh"
