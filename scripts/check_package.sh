#!/usr/bin/env bash
# Checks the release packages as a user gets them:
#
#   scripts/check_package.sh gpuxray_V_ARCH.deb gpuxray-V-linux-ARCH.tar.gz
#
# - the binary and the injection library need no glibc symbol version newer than Debian 12's (2.36),
#   and the library needs nothing but glibc (libstdc++, libgcc and libzstd are linked in);
# - the .deb unpacked with `dpkg -x` into a scratch root, and the tarball unpacked elsewhere, each
#   run `gpuxray --version`, `gpuxray analyze` on a trace (GPUXRAY_SHARED_TRACE, else one of
#   ../shared/traces, else one the packaged gpuxray simulates), `gpuxray doctor` and
#   `gpuxray run -- true`, with an unusable libstdc++.so.6 first on LD_LIBRARY_PATH to show that
#   the packaged copies are the ones used.
set -euo pipefail
cd "$(dirname "$0")/.."
deb=$(realpath "$1")
tarball=$(realpath "$2")
newest_glibc_allowed=2.36

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "check_package.sh: $1" >&2; exit 1; }

dpkg -x "$deb" "$scratch/root"
mkdir -p "$scratch/tar"
tar -xzf "$tarball" -C "$scratch/tar"
tar_top=$(ls -d "$scratch"/tar/gpuxray-*)

for binary in "$scratch/root/usr/bin/gpuxray" "$scratch/root/usr/lib/gpuxray/libgpuxray_inject.so"; do
  [[ -f "$binary" ]] || fail "the .deb lacks ${binary#"$scratch"/root}"
done
newest_overall=0
while IFS= read -r -d '' file; do
  [[ $(head -c 4 "$file") == $'\x7fELF' ]] || continue
  newest=$(objdump -T "$file" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
  [[ $(printf '%s\n%s\n' "$newest" "$newest_glibc_allowed" | sort -V | tail -1) == "$newest_glibc_allowed" ]] ||
    fail "${file#"$scratch"/root} needs glibc $newest, newer than Debian 12's $newest_glibc_allowed"
  newest_overall=$(printf '%s\n%s\n' "$newest" "$newest_overall" | sort -V | tail -1)
done < <(find "$scratch/root" -type f -print0)
echo "check_package.sh: every ELF file of the package needs glibc $newest_overall at most"
library_needs=$(objdump -p "$scratch/root/usr/lib/gpuxray/libgpuxray_inject.so" | awk '/NEEDED/ {print $2}' | tr '\n' ' ')
for needed in $library_needs; do
  [[ $needed =~ ^(libc|libm|libdl|libpthread|librt|ld-linux-x86-64)\.so ]] ||
    fail "libgpuxray_inject.so needs $needed, which the job's machine may lack or have in another version"
done
echo "check_package.sh: libgpuxray_inject.so needs only $library_needs"
for doc in README.md ARCHITECTURE.md docs/doctor.md examples/cuda/stream_workload.cu; do
  [[ -f "$scratch/root/usr/share/doc/gpuxray/$doc" ]] || fail "the .deb lacks share/doc/gpuxray/$doc"
  [[ -f "$tar_top/share/doc/gpuxray/$doc" ]] || fail "the tarball lacks share/doc/gpuxray/$doc"
done

# A libstdc++.so.6 that cannot be loaded, first on the library path: a packaged gpuxray that used the
# system's (or any on LD_LIBRARY_PATH) would fail to start.
mkdir -p "$scratch/old-libs"
echo "not a library" > "$scratch/old-libs/libstdc++.so.6"
trace=${GPUXRAY_SHARED_TRACE:-}
[[ -n "$trace" || ! -d ../shared/traces/hta_nccl_data_rank0_of2 ]] || trace=$(realpath ../shared/traces/hta_nccl_data_rank0_of2)

exercise() {
  local gpuxray=$1 where=$2
  local run_trace=$trace
  export LD_LIBRARY_PATH="$scratch/old-libs"
  "$gpuxray" --version | grep -q '^gpuxray ' || fail "$where: gpuxray --version"
  if [[ -z "$run_trace" ]]; then
    run_trace="$scratch/simulated-$where"
    "$gpuxray" simulate --preset demo -o "$run_trace" > /dev/null || fail "$where: gpuxray simulate"
  fi
  "$gpuxray" analyze "$run_trace" > "$scratch/analyze.txt" || fail "$where: gpuxray analyze $run_trace"
  grep -q '^gpuxray analyze: ' "$scratch/analyze.txt" || fail "$where: gpuxray analyze printed no report"
  local doctor_status=0
  "$gpuxray" doctor -o "$scratch/traces-$where" > "$scratch/doctor.txt" || doctor_status=$?
  [[ $doctor_status -eq 0 || $doctor_status -eq 4 ]] || fail "$where: gpuxray doctor exited $doctor_status"
  grep -q "^  ok       library .*libgpuxray_inject.so" "$scratch/doctor.txt" ||
    fail "$where: gpuxray doctor did not find the packaged library: $(cat "$scratch/doctor.txt")"
  (cd "$scratch" && "$gpuxray" run -o "traces-$where" -- true) || fail "$where: gpuxray run -- true"
  unset LD_LIBRARY_PATH
  echo "check_package.sh: $where: --version, analyze ($(basename "$run_trace")), doctor (exit $doctor_status), run -- true: ok"
}
exercise "$scratch/root/usr/bin/gpuxray" deb
exercise "$tar_top/bin/gpuxray" tarball
