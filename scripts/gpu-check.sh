#!/usr/bin/env bash
# The capture's check on a GPU machine, in one run. Runs ON that machine, from the repo root, with
# gpu-check-bundle/ present (made here by scripts/prepare-gpu-check.sh and carried), e.g. through the
# device tool: run(command="bash scripts/gpu-check.sh", carry=["gpu-check-bundle"], timeout_s=420).
#
# What it does (about 3 minutes on one H200; the NCCL part about 1 minute):
#   1. environment report: GPU, driver, CUDA, Python/PyTorch, the libcupti copies there are, what
#      the bundled binaries lack;
#   2. examples/cuda/stream_workload captured three ways: CUDA_INJECTION64_PATH=<lib>,
#      LD_PRELOAD=<lib>, and `gpuxray run`. Each trace is checked against the program's own account:
#      its xray_* kernel count, the durations of its long kernels against its CUDA-event timings
#      (within 2 %), its NVTX ranges, device properties, topology links, copies, memsets,
#      allocations, zero dropped records, a clean end;
#   3. overhead: the launch-bound loop (100k empty kernels) and the GEMM loop, each run three times
#      without and three times with capture, alternating; ratio = median time with / without, on the
#      programs' own timers (the loop and its final sync). Targets: <= 1.05 and <= 1.01;
#   4. examples/pytorch/train_transformer.py without and with `gpuxray run` (emit_nvtx, step ranges);
#   5. NCCL through gpuxray's profiler plugin: examples/nccl/nccl_collectives on one rank, three times
#      without and three times with `gpuxray run` (overhead ratio on its CUDA-event loop time); its
#      trace against its own account (communicator records, the plugin ABI version NCCL picked, one
#      nccl_op per NCCL call, algorithm/protocol on collectives, GPU times); then two ranks sharing
#      the GPU (NCCL_HOSTID makes NCCL take them for two hosts, joined by its socket transport),
#      because NCCL tells the plugin nothing about a one-rank communicator's collectives; then
#      examples/pytorch/ddp_single_rank.py under `gpuxray run` with world size 1 and 2 (PyTorch's own
#      NCCL), and with world size 1 once more with only NCCL_PROFILER_PLUGIN naming the library (the
#      ABI version NCCL chose is reported from the trace's communicator record). Every NCCL run has NCCL_DEBUG=INFO into logs/<run>.nccl.<host>.<pid>; the lines about
#      the profiler plugin are repeated here.
#
#   6. kernel metrics (section kmetrics): stream_workload's elementwise kernel (xray_scale) and its
#      cuBLAS GEMM measured with `gpuxray run --kernel-metrics` and with Nsight Compute (`ncu`, the
#      same metric names), compared metric by metric (scripts/kernel_metrics_vs_ncu.py: within 5 %);
#      the overhead of profiling N launches (the run's wall time with against without, and per
#      measured launch); train_transformer.py with --kernel-metrics, whose X-ray (kmetrics.html)
#      shows the measured kernels.
#
# Every check prints PASS, FAIL or WARN with its figures; the last line counts them. Into $OUT:
#   summary.txt      everything printed here
#   doctor.txt, doctor.json   gpuxray doctor's report of the machine, before any capture
#   figures.txt      the figures as key=value lines
#   traces.tar.gz    traces/<run>/*.gpuxray
#   logs.tar.gz      logs/<run>.{out,err,dump,info.txt,info.json}, logs/<run>.nccl.<host>.<pid>
#   kmetrics.html    the X-ray of train_transformer.py with --kernel-metrics (section kmetrics)
# Exit status: 0 when nothing FAILed, 1 otherwise, 2 when the bundle is missing.
#
# Settings (environment): GPU_CHECK_BUNDLE (default gpu-check-bundle), GPU_CHECK_REPEATS (3),
# GPU_CHECK_LAUNCH_KERNELS (100000), GPU_CHECK_GEMM_N (8192), GPU_CHECK_GEMM_ITERS (500),
# GPU_CHECK_TORCH_STEPS (20), GPU_CHECK_NCCL_ITERS (200), GPU_CHECK_NCCL_SIZES (1K,64K,1M,16M,64M),
# GPU_CHECK_NCCL_RANK_SIZES (1K,64K,1M: the two-rank runs, over sockets), GPU_CHECK_DDP_STEPS (10),
# GPU_CHECK_SECTIONS (workload,overhead,torch,nccl,kmetrics: the sections to run; the environment always
# runs; GPU_CHECK_SECTIONS=kmetrics alone fits in about 3 minutes), GPU_CHECK_KMETRICS_COUNT (3),
# GPU_CHECK_BUDGET_S (240: a section that would start later is skipped),
# GPU_CHECK_DEADLINE_S (330: no run goes past it, so that the files are packed within a 420 s limit).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

BUNDLE_DIR=${GPU_CHECK_BUNDLE:-gpu-check-bundle}
if [[ ! -x "$BUNDLE_DIR/gpuxray" || ! -f "$BUNDLE_DIR/libgpuxray_inject.so" ]]; then
  echo "gpu-check.sh: no bundle at $BUNDLE_DIR: run scripts/prepare-gpu-check.sh first and carry it" >&2
  exit 2
fi
B=$(cd "$BUNDLE_DIR" && pwd)
LIB=$B/libgpuxray_inject.so
OUT=${OUT:-$PWD/gpu-check-out}
mkdir -p "$OUT"
W=$(mktemp -d /tmp/gpu-check.XXXXXX)
LOGS=$W/logs
TR=$W/traces
mkdir -p "$LOGS" "$TR"
FIGURES=$OUT/figures.txt
: > "$FIGURES"

REPEATS=${GPU_CHECK_REPEATS:-3}
LAUNCH_N=${GPU_CHECK_LAUNCH_KERNELS:-100000}
GEMM_N=${GPU_CHECK_GEMM_N:-8192}
GEMM_ITERS=${GPU_CHECK_GEMM_ITERS:-500}
TORCH_STEPS=${GPU_CHECK_TORCH_STEPS:-20}
NCCL_ITERS=${GPU_CHECK_NCCL_ITERS:-200}
NCCL_SIZES=${GPU_CHECK_NCCL_SIZES:-1K,64K,1M,16M,64M}
NCCL_RANK_SIZES=${GPU_CHECK_NCCL_RANK_SIZES:-1K,64K,1M}
DDP_STEPS=${GPU_CHECK_DDP_STEPS:-10}
SECTIONS=",${GPU_CHECK_SECTIONS:-workload,overhead,torch,nccl,kmetrics},"
SECTIONS=${SECTIONS// /,}
BUDGET_S=${GPU_CHECK_BUDGET_S:-240}
DEADLINE_S=${GPU_CHECK_DEADLINE_S:-330}
WORKLOAD_ARGS=(--streams 4 --stream-kernels 8 --copy-mb 32 --long-kernels 3 --long-ms 10 --gemm-n 4096 --gemm-iters 50)
GEMM_ARGS=(--gemm-only --gemm-n "$GEMM_N" --gemm-iters "$GEMM_ITERS" --gemm-warmup 5)

# Nothing of an earlier capture may leak in.
unset CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH LD_PRELOAD NCCL_PROFILER_PLUGIN
for v in $(compgen -e | grep '^GPUXRAY_' || true); do unset "$v"; done
export PYTHONUNBUFFERED=1

npass=0
nfail=0
nwarn=0
failed=()

result() {  # STATUS WHAT [DETAIL]
  printf '%-4s %s%s\n' "$1" "$2" "${3:+ | $3}"
  case "$1" in
    PASS) npass=$((npass + 1)) ;;
    FAIL) nfail=$((nfail + 1)); failed+=("$2") ;;
    WARN) nwarn=$((nwarn + 1)) ;;
  esac
}
figure() { echo "$1=$2" >> "$FIGURES"; }
section() { printf '\n=== %s (t=%ds)\n' "$1" "$SECONDS"; }
out_value() { sed -n "s/^$2=//p" "$LOGS/$1.out" 2>/dev/null | tail -1; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.4f", a/b; else print "nan"}'; }
le() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(a != "nan" && a + 0 <= b + 0)}'; }
over_budget() { (( SECONDS > BUDGET_S )); }
wants() { [[ $SECTIONS == *",$1,"* ]]; }

gx() { LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$B/gpuxray" "$@"; }
dump() { LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$B/trace_dump" "$@"; }

# run_cmd NAME TIMEOUT_S CMD...: stdout and stderr into logs/NAME.*; sets RC and WALL (seconds).
run_cmd() {
  local name=$1 limit=$2
  shift 2
  local t0 t1 left=$((DEADLINE_S - SECONDS))
  if (( left < 5 )); then
    RC=124
    WALL=0
    : > "$LOGS/$name.out"
    : > "$LOGS/$name.err"
    echo "skip $name: past the ${DEADLINE_S} s deadline"
    return
  fi
  (( limit > left )) && limit=$left
  t0=$(date +%s%N)
  timeout -k 10 "$limit" "$@" > "$LOGS/$name.out" 2> "$LOGS/$name.err"
  RC=$?
  t1=$(date +%s%N)
  WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
  echo "ran  $name: exit $RC, ${WALL} s"
  if [[ $RC != 0 ]]; then
    echo "     command: $*"
    tail -n 8 "$LOGS/$name.err" | sed 's/^/     stderr: /'
  fi
}

main() {
  echo "gpuxray GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), bundle $B, work dir $W"
  head -3 "$B/MANIFEST" 2>/dev/null | sed 's/^/bundle: /'

  # --- 1. Environment -------------------------------------------------------------------------
  section "environment"
  echo "host: $(hostname), $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(ldd --version 2>&1 | head -1)"
  if nvidia-smi > "$LOGS/nvidia-smi.txt" 2>&1; then
    cat "$LOGS/nvidia-smi.txt"
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm,clocks.max.sm,power.limit,pstate,persistence_mode \
      --format=csv 2>&1
    nvidia-smi topo -m 2>&1 | head -20
    figure gpu "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
    figure driver "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
    figure gpus "$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)"
  else
    cat "$LOGS/nvidia-smi.txt"
    result FAIL "nvidia-smi" "no working GPU driver?"
  fi
  if command -v nvcc > /dev/null; then nvcc --version | tail -2; else echo "nvcc: not on PATH"; fi
  python3 - <<'EOF' 2>&1 | tee "$LOGS/python.txt"
import sys
print("python", sys.version.split()[0], "at", sys.executable)
try:
    import torch
    print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(),
          torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
    print("torch at", torch.__file__)
except Exception as e:
    print("torch: not importable:", e)
EOF
  echo "libcupti copies on this machine:"
  {
    ls -1 /usr/local/cuda*/extras/CUPTI/lib64/libcupti.so* /usr/local/cuda*/lib64/libcupti.so* \
      /usr/local/cuda*/targets/*/lib/libcupti.so* 2> /dev/null
    python3 -c 'import site, glob
for root in site.getsitepackages() + [site.getusersitepackages()]:
    for path in sorted(glob.glob(root + "/nvidia/**/libcupti.so*", recursive=True) + glob.glob(root + "/torch/lib/libcupti.so*")):
        print(path)' 2> /dev/null
  } | sort -u | sed 's/^/  /'

  # What the bundled binaries lack here.
  EX_LD=${LD_LIBRARY_PATH:-}
  if ldd "$B/stream_workload" 2>&1 | grep -q 'not found'; then
    local cublas_dir
    cublas_dir=$(python3 -c 'import site, glob, os
for root in site.getsitepackages():
    for path in glob.glob(root + "/nvidia/**/libcublas.so.13", recursive=True):
        print(os.path.dirname(path)); raise SystemExit' 2> /dev/null)
    [[ -z "$cublas_dir" ]] && cublas_dir=$(dirname "$(find /usr /opt -name libcublas.so.13 2> /dev/null | head -1)")
    echo "stream_workload: libcublas.so.13 not found by the loader; using $cublas_dir"
    EX_LD="$cublas_dir${EX_LD:+:$EX_LD}"
  fi
  if ldd "$LIB" 2>&1 | grep -q 'not found'; then
    result WARN "injection library's dependencies" "$(ldd "$LIB" | grep 'not found' | tr -s ' \t' ' ' | tr '\n' ';'); adding $B/lib to the jobs' LD_LIBRARY_PATH"
    EX_LD="$B/lib${EX_LD:+:$EX_LD}"
  fi
  export LD_LIBRARY_PATH="$EX_LD"
  # libnccl.so.2 for nccl_collectives, in its own search path (NCCL_LD), so that PyTorch keeps its own
  # NCCL: the loader's choice, else PyTorch's nvidia-nccl wheel, else the CUDA toolkit's, else any.
  NCCL_LD=$EX_LD
  if [[ -x "$B/nccl_collectives" ]] && ldd "$B/nccl_collectives" 2>&1 | grep -q 'libnccl.* not found'; then
    local nccl_dir
    nccl_dir=$(python3 -c 'import site, glob, os
for root in site.getsitepackages() + [site.getusersitepackages()]:
    for path in sorted(glob.glob(root + "/nvidia/**/libnccl.so.2", recursive=True)):
        print(os.path.dirname(path)); raise SystemExit' 2> /dev/null)
    if [[ -z "$nccl_dir" ]]; then
      local candidate
      for candidate in /usr/local/cuda*/lib64/libnccl.so.2 /usr/local/cuda*/targets/*/lib/libnccl.so.2; do
        [[ -f "$candidate" ]] && { nccl_dir=$(dirname "$candidate"); break; }
      done
      [[ -z "$nccl_dir" ]] && candidate=$(find /usr /opt -name libnccl.so.2 2> /dev/null | head -1) &&
        [[ -n "$candidate" ]] && nccl_dir=$(dirname "$candidate")
    fi
    echo "nccl_collectives: libnccl.so.2 not found by the loader; using ${nccl_dir:-nothing (none found)}"
    [[ -n "$nccl_dir" ]] && NCCL_LD="$nccl_dir${EX_LD:+:$EX_LD}"
  fi
  if [[ -x "$B/nccl_collectives" ]]; then
    local nccl_path
    nccl_path=$(LD_LIBRARY_PATH="$NCCL_LD" ldd "$B/nccl_collectives" 2>&1 | awk '/libnccl/ && $3 != "not" {print $3}')
    echo "nccl_collectives: libnccl.so.2 is ${nccl_path:-not found}"
  fi
  echo "libnccl copies on this machine:"
  {
    ls -1 /usr/local/cuda*/lib64/libnccl.so* /usr/lib/*/libnccl.so* 2> /dev/null
    python3 -c 'import site, glob
for root in site.getsitepackages() + [site.getusersitepackages()]:
    for path in sorted(glob.glob(root + "/nvidia/**/libnccl.so*", recursive=True)):
        print(path)' 2> /dev/null
  } | sort -u | sed 's/^/  /'
  local missing=""
  local binaries=(gpuxray trace_dump stream_workload launch_bound_loop libgpuxray_inject.so)
  [[ -x "$B/nccl_collectives" ]] && binaries+=(nccl_collectives)
  for binary in "${binaries[@]}"; do
    local lacks
    if [[ $binary == gpuxray || $binary == trace_dump ]]; then
      lacks=$(LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" ldd "$B/$binary" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' ')
    elif [[ $binary == nccl_collectives ]]; then
      lacks=$(LD_LIBRARY_PATH="$NCCL_LD" ldd "$B/$binary" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' ')
    else
      lacks=$(ldd "$B/$binary" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' ')
    fi
    [[ -n "$lacks" ]] && missing+="$binary lacks $lacks; "
  done
  if [[ -n "$missing" ]]; then result FAIL "bundled binaries load" "$missing"; else result PASS "bundled binaries load" "ldd finds every library"; fi
  echo "libgpuxray_inject.so needs: $(ldd "$LIB" | awk '{print $1}' | tr '\n' ' ')"
  echo "gpuxray: $(gx --version 2>&1)"
  # What gpuxray doctor says about this machine, before anything is captured (kept in $OUT).
  section "gpuxray doctor"
  local doctor_rc=0
  gx doctor -o "$TR/doctor" > "$OUT/doctor.txt" 2>&1 || doctor_rc=$?
  gx doctor -o "$TR/doctor" --format json > "$OUT/doctor.json" 2>&1 || true
  cat "$OUT/doctor.txt"
  if [[ $doctor_rc -eq 0 ]]; then result PASS "gpuxray doctor" "no problem"; else result WARN "gpuxray doctor" "exit $doctor_rc: $(grep -c '^  problem' "$OUT/doctor.txt") problems"; fi

  wants workload && section_workload
  wants overhead && section_overhead
  wants torch && section_torch
  wants nccl && section_nccl
  wants kmetrics && section_kmetrics

  # --- Summary ----------------------------------------------------------------------------------
  section "gpuxray info of every trace directory"
  for dir in "$TR"/*/; do
    [[ -d "$dir" && "$dir" != *_cap_[2-9]/ && "$dir" != */nccl_run_[2-9]/ ]] || continue
    gx info "$dir" 2>&1 | sed "s|$TR/||"
  done

  section "result"
  figure result.pass "$npass"
  figure result.fail "$nfail"
  figure result.warn "$nwarn"
  figure seconds "$SECONDS"
  echo "figures:"
  sed 's/^/  /' "$FIGURES"
  pack
  echo
  echo "RESULT: $npass PASS, $nfail FAIL, $nwarn WARN in ${SECONDS} s${failed[*]:+ | failed: $(printf '%s; ' "${failed[@]}")}"
  [[ $nfail == 0 ]]
}

# --- 2. The mixed workload, captured three ways -----------------------------------------------
section_workload() {
  section "stream_workload without capture"
  run_cmd workload_base 90 "$B/stream_workload" "${WORKLOAD_ARGS[@]}"
  if [[ $RC == 0 ]]; then
    grep -E '^(device|gemm |long_kernel|kernels_launched|peer_copies)' "$LOGS/workload_base.out" | sed 's/^/  /'
    result PASS "stream_workload runs without capture" "$(out_value workload_base kernels_launched) own kernels"
  else
    result FAIL "stream_workload runs without capture" "exit $RC: the example itself is broken here"
  fi

  section "stream_workload, CUDA_INJECTION64_PATH"
  run_cmd workload_inj 90 env CUDA_INJECTION64_PATH="$LIB" GPUXRAY_OUTPUT_DIR="$TR/workload_inj" GPUXRAY_LOG_LEVEL=info \
    "$B/stream_workload" "${WORKLOAD_ARGS[@]}"
  check_workload workload_inj "CUDA_INJECTION64_PATH"

  section "stream_workload, LD_PRELOAD"
  run_cmd workload_preload 90 env LD_PRELOAD="$LIB" GPUXRAY_OUTPUT_DIR="$TR/workload_preload" GPUXRAY_LOG_LEVEL=info \
    "$B/stream_workload" "${WORKLOAD_ARGS[@]}"
  check_workload workload_preload "LD_PRELOAD"

  section "stream_workload, gpuxray run"
  run_cmd workload_run 90 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run -o "$TR/workload_run" --log-level info \
    -- env LD_LIBRARY_PATH="$EX_LD" "$B/stream_workload" "${WORKLOAD_ARGS[@]}"
  check_workload workload_run "gpuxray run"
}

# --- 3. Overhead ------------------------------------------------------------------------------
section_overhead() {
  section "overhead: launch-bound loop ($LAUNCH_N empty kernels), $REPEATS x without / with capture"
  if over_budget; then
    result WARN "launch-bound overhead" "skipped: past the time budget"
  else
    run_cmd launch_warmup 60 "$B/launch_bound_loop" 2000
    local base=() cap=() base_wall=() cap_wall=()
    for i in $(seq 1 "$REPEATS"); do
      run_cmd "launch_base_$i" 60 "$B/launch_bound_loop" "$LAUNCH_N"
      base+=("$(out_value "launch_base_$i" wall_seconds)")
      base_wall+=("$WALL")
      run_cmd "launch_cap_$i" 60 env CUDA_INJECTION64_PATH="$LIB" GPUXRAY_OUTPUT_DIR="$TR/launch_cap_$i" \
        "$B/launch_bound_loop" "$LAUNCH_N"
      cap+=("$(out_value "launch_cap_$i" wall_seconds)")
      cap_wall+=("$WALL")
    done
    overhead_result launch "launch-bound loop overhead" 1.05 base cap base_wall cap_wall
    check_counts launch_cap_1 "launch-bound loop, CUDA_INJECTION64_PATH"
    # Where the per-launch cost goes (figures, no verdict): kernels only, then kernels and API calls.
    local categories
    for categories in kernel kernel,api; do
      local part=() key=launch_${categories//,/_}
      for i in $(seq 1 "$REPEATS"); do
        run_cmd "${key}_$i" 60 env CUDA_INJECTION64_PATH="$LIB" GPUXRAY_OUTPUT_DIR="$TR/${key}_$i" \
          GPUXRAY_CAPTURE="$categories" "$B/launch_bound_loop" "$LAUNCH_N"
        part+=("$(out_value "${key}_$i" wall_seconds)")
      done
      figure "$key.capture_seconds" "$(IFS=,; echo "${part[*]}")"
      figure "$key.ratio" "$(ratio "$(median "${part[@]}")" "$(median "${base[@]}")")"
      echo "  GPUXRAY_CAPTURE=$categories: ${part[*]} s, ratio $(ratio "$(median "${part[@]}")" "$(median "${base[@]}")") against no capture"
    done
  fi

  section "overhead: GEMM loop (bf16 ${GEMM_N}^3 x $GEMM_ITERS), $REPEATS x without / with capture"
  if over_budget; then
    result WARN "GEMM loop overhead" "skipped: past the time budget"
  else
    run_cmd gemm_warmup 60 "$B/stream_workload" --gemm-only --gemm-n "$GEMM_N" --gemm-iters 50
    local gbase=() gcap=() gbase_wall=() gcap_wall=() gbase_ev=() gcap_ev=()
    for i in $(seq 1 "$REPEATS"); do
      run_cmd "gemm_base_$i" 60 "$B/stream_workload" "${GEMM_ARGS[@]}"
      gbase+=("$(out_value "gemm_base_$i" gemm_loop_seconds)")
      gbase_wall+=("$WALL")
      gbase_ev+=("$(sed -n 's/^gemm .*event_mean_ms=\([0-9.]*\).*/\1/p' "$LOGS/gemm_base_$i.out")")
      run_cmd "gemm_cap_$i" 60 env CUDA_INJECTION64_PATH="$LIB" GPUXRAY_OUTPUT_DIR="$TR/gemm_cap_$i" \
        "$B/stream_workload" "${GEMM_ARGS[@]}"
      gcap+=("$(out_value "gemm_cap_$i" gemm_loop_seconds)")
      gcap_wall+=("$WALL")
      gcap_ev+=("$(sed -n 's/^gemm .*event_mean_ms=\([0-9.]*\).*/\1/p' "$LOGS/gemm_cap_$i.out")")
    done
    grep '^gemm ' "$LOGS/gemm_base_1.out" | sed 's/^/  without capture: /'
    grep '^gemm ' "$LOGS/gemm_cap_1.out" | sed 's/^/  with capture:    /'
    overhead_result gemm "GEMM loop overhead" 1.01 gbase gcap gbase_wall gcap_wall
    echo "  per-GEMM CUDA-event time: without $(median "${gbase_ev[@]}") ms, with $(median "${gcap_ev[@]}") ms (medians)"
    figure gemm.event_ms_ratio "$(ratio "$(median "${gcap_ev[@]}")" "$(median "${gbase_ev[@]}")")"
    check_counts gemm_cap_1 "GEMM loop, CUDA_INJECTION64_PATH"
  fi
}

# --- 6. Kernel metrics against Nsight Compute --------------------------------------------------
# One kernel class per run: xray_scale (elementwise, stream_workload's stream kernels) and the
# cuBLAS GEMM of --gemm-only. ncu measures the same first launches with the same metric names, its
# clocks and caches left as the application has them (as CUPTI's kernel replay does).
KMETRICS_NAMES=sm__warps_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,l1tex__t_bytes.sum,l1tex__t_sector_hit_rate.pct,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,gpu__time_duration.sum
section_kmetrics() {
  local count=${GPU_CHECK_KMETRICS_COUNT:-3}
  local ncu_bin
  ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  local -A kargs=(
    [scale]="--streams 1 --stream-kernels $((count + 2)) --copy-mb 256 --long-kernels 0 --gemm-n 256 --gemm-iters 1 --gemm-warmup 0 --dtype fp32"
    [gemm]="--gemm-only --gemm-n 4096 --gemm-iters $((count + 5)) --gemm-warmup 0 --dtype bf16"
  )
  local -A kpattern=([scale]='^xray_scale$' [gemm]='gemm|nvjet|xmma|cutlass|sm90|sm80')
  # timeout runs programs, not shell functions such as gx.
  local gx_run=(env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run)
  local kind
  for kind in scale gemm; do
    over_budget && { result WARN "kernel metrics: $kind" "skipped: past the ${BUDGET_S} s budget"; continue; }
    section "kernel metrics: $kind, without and with --kernel-metrics (first $count launches)"
    # shellcheck disable=SC2086
    run_cmd "kmetrics_${kind}_off" 120 "${gx_run[@]}" -o "$TR/kmetrics_${kind}_off" -- "$B/stream_workload" ${kargs[$kind]}
    local wall_off=$WALL
    # shellcheck disable=SC2086
    run_cmd "kmetrics_${kind}_on" 180 "${gx_run[@]}" -o "$TR/kmetrics_${kind}_on" --log-level info \
      --kernel-metrics="${kpattern[$kind]}" --kernel-metrics-count "$count" -- "$B/stream_workload" ${kargs[$kind]}
    local wall_on=$WALL
    if [[ $RC != 0 ]]; then
      result FAIL "kernel metrics: $kind captured" "exit $RC"
      continue
    fi
    grep -E 'kernel metrics|profiled' "$LOGS/kmetrics_${kind}_on.err" | sed 's/^/  /'
    local profiled
    profiled=$(sed -n 's/.* \([0-9][0-9]*\) kernel launches profiled.*/\1/p' "$LOGS/kmetrics_${kind}_on.err" | tail -1)
    figure "kmetrics.$kind.profiled_launches" "${profiled:-0}"
    figure "kmetrics.$kind.wall_off_s" "$wall_off"
    figure "kmetrics.$kind.wall_on_s" "$wall_on"
    figure "kmetrics.$kind.wall_ratio" "$(ratio "$wall_on" "$wall_off")"
    if [[ ${profiled:-0} -gt 0 ]]; then
      local per_launch
      per_launch=$(awk -v a="$wall_on" -v b="$wall_off" -v n="$profiled" 'BEGIN {printf "%.1f", (a - b) * 1000 / n}')
      figure "kmetrics.$kind.ms_per_profiled_launch" "$per_launch"
      result PASS "kernel metrics: $kind profiled" "$profiled launches; wall ${wall_off} s -> ${wall_on} s (${per_launch} ms per measured launch)"
    else
      result FAIL "kernel metrics: $kind profiled" "no launch measured (see logs/kmetrics_${kind}_on.err)"
      continue
    fi
    gx analyze --format json "$TR/kmetrics_${kind}_on" > "$W/kmetrics_$kind.json" 2> "$LOGS/kmetrics_${kind}_analyze.err"
    gx analyze "$TR/kmetrics_${kind}_on" > "$LOGS/kmetrics_${kind}_analyze.txt" 2>&1
    sed -n '/Inside the kernels/,/^$/p' "$LOGS/kmetrics_${kind}_analyze.txt" | head -20 | sed 's/^/  /'
    if [[ -z "$ncu_bin" ]]; then
      result WARN "kernel metrics: $kind against ncu" "no ncu on this machine"
      continue
    fi
    # shellcheck disable=SC2086
    run_cmd "kmetrics_${kind}_ncu" 240 "$ncu_bin" --metrics "$KMETRICS_NAMES" --kernel-name "regex:${kpattern[$kind]}" \
      --launch-count "$count" --clock-control none --cache-control none --csv --page raw \
      "$B/stream_workload" ${kargs[$kind]}
    if [[ $RC != 0 ]]; then
      result FAIL "kernel metrics: $kind against ncu" "ncu exit $RC (see logs/kmetrics_${kind}_ncu.err)"
      continue
    fi
    if python3 scripts/kernel_metrics_vs_ncu.py "$W/kmetrics_$kind.json" "${kpattern[$kind]}" "$LOGS/kmetrics_${kind}_ncu.out" \
      --figures "$FIGURES" "kmetrics.$kind." > "$LOGS/kmetrics_${kind}_compare.txt" 2>&1; then
      result PASS "kernel metrics: $kind against ncu" "every metric within 5 %"
    else
      result FAIL "kernel metrics: $kind against ncu" "$(tail -1 "$LOGS/kmetrics_${kind}_compare.txt")"
    fi
    sed 's/^/  /' "$LOGS/kmetrics_${kind}_compare.txt"
  done

  over_budget && { result WARN "kernel metrics: PyTorch" "skipped: past the ${BUDGET_S} s budget"; return; }
  section "kernel metrics: train_transformer.py with --kernel-metrics, its X-ray"
  run_cmd kmetrics_torch 180 "${gx_run[@]}" -o "$TR/kmetrics_torch" --log-level info \
    --kernel-metrics='gemm|nvjet|xmma|cutlass|elementwise|softmax|layer_norm' --kernel-metrics-count 2 -- \
    python3 "$B/train_transformer.py" --steps "$TORCH_STEPS"
  if [[ $RC == 0 ]]; then
    gx analyze --html "$OUT/kmetrics.html" "$TR/kmetrics_torch" > "$LOGS/kmetrics_torch_analyze.txt" 2>&1
    local measured
    measured=$(grep -c . <(sed -n '/Inside the kernels/,/^$/p' "$LOGS/kmetrics_torch_analyze.txt"))
    sed -n '/Inside the kernels/,/^$/p' "$LOGS/kmetrics_torch_analyze.txt" | head -30 | sed 's/^/  /'
    if [[ -s "$OUT/kmetrics.html" && $measured -gt 3 ]]; then
      result PASS "kernel metrics: PyTorch X-ray" "kmetrics.html with the measured kernels"
    else
      result FAIL "kernel metrics: PyTorch X-ray" "no measured kernels in the report (logs/kmetrics_torch_analyze.txt)"
    fi
  else
    result FAIL "kernel metrics: PyTorch run" "exit $RC"
  fi
}

# --- 4. PyTorch -------------------------------------------------------------------------------
section_torch() {
  section "PyTorch: train_transformer.py ($TORCH_STEPS steps) without and with gpuxray run"
  if over_budget; then
    result WARN "PyTorch under gpuxray run" "skipped: past the time budget"
  else
    run_cmd torch_base 120 python3 "$B/train_transformer.py" --steps "$TORCH_STEPS"
    grep -E '^(torch|steps|seconds|step_ms|first_step_ms|final_loss)=' "$LOGS/torch_base.out" | sed 's/^/  /'
    run_cmd torch_run 120 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run -o "$TR/torch_run" --log-level info \
      -- env LD_LIBRARY_PATH="$EX_LD" python3 "$B/train_transformer.py" --steps "$TORCH_STEPS"
    grep -E '^(steps|seconds|step_ms|first_step_ms|final_loss)=' "$LOGS/torch_run.out" | sed 's/^/  /'
    check_torch torch_run
    # The capture's cost on a CPU-bound step with ~2,100 NVTX ranges: gpuxray's NVTX recorder, then
    # CUPTI's (GPUXRAY_NVTX_RECORDER=0), which cost 2.3x here before the recorder existed.
    local torch_ratio
    torch_ratio=$(ratio "$(out_value torch_run step_ms)" "$(out_value torch_base step_ms)")
    if le "$torch_ratio" 1.15; then
      result PASS "PyTorch step time with capture (emit_nvtx)" "ratio $torch_ratio (with/without), target <= 1.15"
    else
      result WARN "PyTorch step time with capture (emit_nvtx)" "ratio $torch_ratio (with/without), target <= 1.15"
    fi
    run_cmd torch_run_cupti_nvtx 120 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" GPUXRAY_NVTX_RECORDER=0 "$B/gpuxray" run \
      -o "$TR/torch_run_cupti_nvtx" -- env LD_LIBRARY_PATH="$EX_LD" python3 "$B/train_transformer.py" --steps "$TORCH_STEPS"
    figure "torch.torch_run_cupti_nvtx.step_ms" "$(out_value torch_run_cupti_nvtx step_ms)"
    # Where the cost goes (figures, no verdict): the same run without NVTX recording
    # (GPUXRAY_CAPTURE=all,-nvtx), and both runs without emit_nvtx's operator ranges.
    run_cmd torch_run_no_nvtx_kind 120 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run \
      -o "$TR/torch_run_no_nvtx_kind" --capture all,-nvtx \
      -- env LD_LIBRARY_PATH="$EX_LD" python3 "$B/train_transformer.py" --steps "$TORCH_STEPS"
    run_cmd torch_base_no_ops 120 python3 "$B/train_transformer.py" --steps "$TORCH_STEPS" --no-nvtx
    run_cmd torch_run_no_ops 120 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run \
      -o "$TR/torch_run_no_ops" -- env LD_LIBRARY_PATH="$EX_LD" python3 "$B/train_transformer.py" \
      --steps "$TORCH_STEPS" --no-nvtx
    local k
    for k in torch_run_no_nvtx_kind torch_base_no_ops torch_run_no_ops; do figure "torch.$k.step_ms" "$(out_value "$k" step_ms)"; done
    echo "  ms/step: emit_nvtx on: without capture $(out_value torch_base step_ms), with $(out_value torch_run step_ms)" \
      "(CUPTI recording NVTX: $(out_value torch_run_cupti_nvtx step_ms))," \
      "with capture but no NVTX recording $(out_value torch_run_no_nvtx_kind step_ms);" \
      "emit_nvtx off: without capture $(out_value torch_base_no_ops step_ms), with $(out_value torch_run_no_ops step_ms)"
    # Capture windows: steps 5-9 by the example's own "step N" ranges, then the same steps between
    # torch.cuda.profiler.start() and stop().
    run_cmd torch_steps 120 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run -o "$TR/torch_steps" \
      --log-level info --steps 5-9 --step-marker '^step (\d+)$' \
      -- env LD_LIBRARY_PATH="$EX_LD" python3 "$B/train_transformer.py" --steps "$TORCH_STEPS"
    check_torch_window torch_steps "--steps 5-9"
    run_cmd torch_profiler_api 120 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run \
      -o "$TR/torch_profiler_api" --log-level info --capture-range cudaProfilerApi \
      -- env LD_LIBRARY_PATH="$EX_LD" python3 "$B/train_transformer.py" --steps "$TORCH_STEPS" --profiler-range 5-9
    check_torch_window torch_profiler_api "--capture-range cudaProfilerApi"
  fi
}

# check_torch_window NAME WHAT: a windowed train_transformer.py run holds steps 5-9 and nothing else:
# five "step N" ranges, 5 to 9, and fewer kernels than the whole run.
check_torch_window() {
  local name=$1 what=$2
  grep '^gpuxray' "$LOGS/$name.err" | head -5 | sed 's/^/  [capture] /'
  if [[ $RC != 0 ]] || ! prepare_trace "$name"; then
    result FAIL "PyTorch $what" "exit $RC, or no trace file in $TR/$name"
    return
  fi
  local d=$LOGS/$name.dump steps numbers kernels all
  steps=$(grep -cE '^nvtx kind=range .* name=step [0-9]+$' "$d")
  numbers=$(sed -nE 's/^nvtx kind=range .* name=step ([0-9]+)$/\1/p' "$d" | sort -n | tr '\n' ' ')
  kernels=$(grep -c '^kernel ' "$d")
  all=$(grep -c '^kernel ' "$LOGS/torch_run.dump" 2> /dev/null || echo 0)
  figure "torch.$name.step_ranges" "$steps"
  figure "torch.$name.kernels" "$kernels"
  figure "torch.$name.step_ms" "$(out_value "$name" step_ms)"
  if [[ $numbers == "5 6 7 8 9 " ]]; then
    result PASS "PyTorch $what: steps 5-9 only" "step ranges: $numbers; $kernels kernels of $all in the whole run"
  else
    result FAIL "PyTorch $what: steps 5-9 only" "step ranges: ${numbers:-none}; $kernels kernels of $all in the whole run"
  fi
  # The step range that opened the window is written by the capture itself (CUPTI records its push
  # before the window's kinds are on): it must carry the thread id CUPTI gives the others.
  local threads
  threads=$(sed -nE 's/^nvtx kind=range .* thread=([0-9]+) .*name=step [0-9]+$/\1/p' "$d" | sort -u | tr '\n' ' ')
  figure "torch.$name.step_threads" "$threads"
  if [[ $(wc -w <<< "$threads") == 1 ]]; then
    result PASS "PyTorch $what: step ranges on one thread" "thread $threads"
  else
    result FAIL "PyTorch $what: step ranges on one thread" "threads: ${threads:-none} (the opening range's thread id differs from CUPTI's?)"
  fi
  if [[ $all -gt 0 && $kernels -gt 0 && $kernels -lt $all ]]; then
    result PASS "PyTorch $what: fewer kernels than the whole run" "$kernels of $all"
  else
    result FAIL "PyTorch $what: fewer kernels than the whole run" "$kernels of $all"
  fi
}

# --- 5. NCCL through the profiler plugin ------------------------------------------------------
# What NCCL said about the profiler plugin in run NAME, without the host:pid:tid prefixes.
nccl_log_lines() {
  local lines
  lines=$(cat "$LOGS/$1".nccl.* 2> /dev/null | grep -iE 'profiler' | sed 's/^.*NCCL \(INFO\|WARN\) //' | sort | uniq -c |
    awk '{n = $1; $1 = ""; printf "  [nccl] %s%s\n", substr($0, 2), (n > 1 ? " (x" n ")" : "")}' | head -12)
  if [[ -n "$lines" ]]; then echo "$lines"; else echo "  [nccl] no line about the profiler plugin in $1's NCCL_DEBUG=INFO output"; fi
}

# The profiler-plugin ABI version NCCL should pick from gpuxray's tables (v4, v5, v6): from an NCCL
# version code (22809) or string (2.28.9). NCCL 2.27 has v4 as its newest, 2.28 v5, 2.29+ v6 (or
# newer ABIs, falling back to v6, which gpuxray's newest); older NCCL has none gpuxray exports.
expected_plugin_version() {
  local v=$1 major minor
  if [[ $v =~ ^([0-9]+)\.([0-9]+) ]]; then
    major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
  elif [[ $v =~ ^[0-9]+$ ]]; then
    major=$((v / 10000)) minor=$((v / 100 % 100))
  else
    echo "?"
    return
  fi
  if (( major > 2 || minor >= 29 )); then echo 6
  elif (( minor == 28 )); then echo 5
  elif (( minor == 27 )); then echo 4
  else echo none
  fi
}

# nccl_summary DUMP: per trace file of a dump, one line of key=value: rank, communicators, the
# plugin versions they name, operations (collective, p2p), count per function (funcs=F:N,...),
# collectives without algorithm or protocol (noalgo), operations without GPU times (nogpu: not
# gpu_end >= gpu_start > 0; nogpu0: of those, the ones reporting 0 channels; nogpup2p: those that are
# Send/Recv), network transfers,
# the collectives' algorithm/protocol pairs (algos=Ring/LL:N,...), the operations matched to a CUPTI
# NCCL kernel (kmatched) and the largest clock-mapping error in ns (maxerr).
nccl_summary() {
  awk '
    function flush(   list, pairs, f) {
      if (!file) return
      list = pairs = ""
      for (f in funcs) list = list (list == "" ? "" : ",") f ":" funcs[f]
      for (f in algos) pairs = pairs (pairs == "" ? "" : ",") f ":" algos[f]
      printf "file=%d rank=%s comms=%d versions=%s nranks=%s ops=%d coll=%d p2p=%d funcs=%s noalgo=%d nogpu=%d nogpu0=%d nogpup2p=%d net=%d algos=%s kmatched=%d maxerr=%d\n",
        file, rank, comms, (versions == "" ? "-" : versions), (nranks == "" ? "-" : nranks), ops, coll, p2p,
        (list == "" ? "-" : list), noalgo, nogpu, nogpu0, nogpup2p, net, (pairs == "" ? "-" : pairs), kmatched, maxerr
    }
    # Decimal strings compared as numbers without going through doubles (globaltimer values are ~1.8e18).
    function ge(a, b) { a = a ""; b = b ""; if (length(a) != length(b)) return length(a) > length(b); return a >= b }
    function fields(   i, kv) { delete v; for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = substr($i, length(kv[1]) + 2) } }
    $1 == "file" {
      flush(); file++; rank = "-"; comms = ops = coll = p2p = noalgo = nogpu = nogpu0 = nogpup2p = net = kmatched = maxerr = 0
      versions = ""; nranks = ""; delete funcs; delete algos
    }
    $1 == "header" { fields(); rank = v["rank"] }
    $1 == "nccl_comm" {
      fields(); comms++
      if (index("," versions ",", "," v["version"] ",") == 0) versions = versions (versions == "" ? "" : ",") v["version"]
      if (index("," nranks ",", "," v["nranks"] ",") == 0) nranks = nranks (nranks == "" ? "" : ",") v["nranks"]
    }
    $1 == "nccl_op" {
      fields(); ops++; funcs[v["func"]]++
      if (v["kind"] == "collective") {
        coll++; algos[v["algo"] "/" v["proto"]]++
        if (v["algo"] == "-" || v["proto"] == "-") noalgo++
      } else p2p++
      if (!(v["gpu_start"] != "0" && ge(v["gpu_end"], v["gpu_start"]))) {
        nogpu++; if (v["channels"] == "0") nogpu0++; if (v["kind"] != "collective") nogpup2p++
      }
      if (v["kernel_correlation"] != "0") kmatched++
      if (v["gpu_clock_error_ns"] + 0 > maxerr) maxerr = v["gpu_clock_error_ns"] + 0
    }
    $1 == "net_transfer" { net++ }
    END { flush() }' "$1"
}

# rank_value NAME PREFIX KEY: KEY= of run NAME's output, as rank PREFIX ("" or "rank1.") printed it.
rank_value() { sed -n "s/^$2$3=//p" "$LOGS/$1.out" 2> /dev/null | tail -1; }

# check_plugin_version WHO VERSIONS NCCL_VERSION FIGURE: the ABI version NCCL picked against the one
# its version should pick.
check_plugin_version() {
  local who=$1 picked=$2 nccl=$3 key=$4 expected
  expected=$(expected_plugin_version "$nccl")
  figure "$key.plugin_version" "$picked"
  figure "$key.nccl_version" "${nccl:-?}"
  if [[ $picked == "$expected" ]]; then
    result PASS "$who: profiler-plugin ABI version" "NCCL ${nccl:-?} picked ncclProfiler_v$picked, as expected"
  else
    result WARN "$who: profiler-plugin ABI version" "NCCL ${nccl:-?} picked v$picked; expected v$expected (2.27: v4, 2.28: v5, 2.29+: v6)"
  fi
}

# check_nccl_file NAME MODE RANKS SUMMARY: one trace file of nccl_collectives run NAME (one line of
# nccl_summary) against what that rank printed.
check_nccl_file() {
  local name=$1 mode=$2 ranks=$3 line=$4 kv
  local -A s=() got=()
  for kv in $line; do s[${kv%%=*}]=${kv#*=}; done
  local rank=${s[rank]} prefix="" who=$mode
  if (( ranks > 1 )); then prefix="rank$rank." who="$mode, rank $rank"; fi
  local key=$name${prefix:+.$prefix}
  key=${key%.}

  # Communicator records, and the ABI version NCCL chose.
  if (( s[comms] > 0 )); then
    result PASS "$who: NCCL communicator recorded" "${s[comms]} nccl_comm record(s), nranks ${s[nranks]}, plugin ABI v${s[versions]}"
    check_plugin_version "$who" "${s[versions]}" "$(rank_value "$name" "$prefix" nccl_version_string)" "$key"
  else
    result FAIL "$who: NCCL communicator recorded" "no nccl_comm record: NCCL did not load gpuxray as its profiler plugin, or the plugin's init failed (see the [nccl] lines)"
  fi

  # One nccl_op per NCCL call, function by function.
  local pair pairs=()
  IFS=, read -r -a pairs <<< "${s[funcs]}"
  for pair in "${pairs[@]}"; do
    [[ $pair == *:* ]] && got[${pair%%:*}]=${pair##*:}
  done
  local func count matched="" hidden="" mismatch="" extra="" n
  while read -r func count; do
    n=${got[$func]:-0}
    unset "got[$func]"
    if [[ $n == "$count" ]]; then
      matched+="$func $n/$count, "
    elif (( ranks == 1 )) && [[ $n == 0 && $func != Send && $func != Recv ]]; then
      hidden+="$func 0/$count, "
    else
      mismatch+="$func $n/$count, "
    fi
  done < <(sed -n "s/^${prefix}nccl_calls func=\([A-Za-z]*\) count=\([0-9]*\)$/\1 \2/p" "$LOGS/$name.out")
  for func in "${!got[@]}"; do extra+="$func ${got[$func]}, "; done
  local launched
  launched=$(rank_value "$name" "$prefix" nccl_ops_launched)
  figure "$key.nccl_ops_captured" "${s[ops]}"
  figure "$key.nccl_ops_launched" "${launched:-?}"
  local counts="${s[ops]} nccl_op records, nccl_ops_launched=${launched:-?}; captured/called: ${matched%, }"
  if [[ -z "$launched" ]]; then
    result FAIL "$who: NCCL operation count" "the program printed no nccl_ops_launched (${s[ops]} nccl_op records)"
  elif [[ -n "$mismatch" || -z "$matched" ]]; then
    result FAIL "$who: NCCL operation count" "differs: ${mismatch%, }${mismatch:+; }$counts${extra:+; not called: ${extra%, }}"
  elif [[ -n "$extra" ]]; then
    result WARN "$who: NCCL operation count" "every function the program called matches ($counts), plus ${extra%, }: operations of functions it never called, i.e. NCCL's own internal ones"
  elif [[ ${s[ops]} == "$launched" ]]; then
    result PASS "$who: NCCL operation count" "$counts"
  else
    result PASS "$who: NCCL operation count" "$counts (+ ${hidden%, }: not visible on one rank, below)"
  fi
  if [[ -n "$hidden" ]]; then
    result WARN "$who: collectives of a one-rank communicator" "${hidden%, } in the trace: NCCL runs them as local copies (ncclLaunchOneRank) and never tells the profiler plugin; Send/Recv to itself do reach it. The two-rank run checks collectives"
  fi

  # Fields NCCL fills in: algorithm and protocol of collectives, GPU times of every operation.
  if (( s[coll] > 0 )); then
    if (( s[noalgo] == 0 )); then
      result PASS "$who: algorithm and protocol on collectives" "all ${s[coll]} have both: ${s[algos]//,/, }"
    else
      result FAIL "$who: algorithm and protocol on collectives" "${s[noalgo]} of ${s[coll]} collectives lack one ('-')"
    fi
  fi
  if (( s[ops] > 0 )); then
    if (( s[nogpu] == 0 )); then
      result PASS "$who: GPU times on operations" "gpu_end >= gpu_start > 0 on all ${s[ops]} (GPU globaltimer, from the kernel-channel events)"
    elif [[ ${s[nranks]} == 1 && ${s[nogpu]} == "${s[nogpup2p]}" ]]; then
      result WARN "$who: GPU times on operations" "${s[nogpu]} of ${s[ops]} lack them, all Send/Recv of a one-rank communicator to itself: NCCL reports no kernel-channel events for them (no proxy operation carries a copy to oneself), so their GPU times are not recorded (gpu_start 0); the two-rank run checks GPU times"
    else
      result FAIL "$who: GPU times on operations" "${s[nogpu]} of ${s[ops]} lack gpu_end >= gpu_start > 0 (${s[nogpu0]} of them with channels=0)"
    fi
    figure "$key.ops_matched_to_nccl_kernel" "${s[kmatched]} of ${s[ops]}"
    figure "$key.gpu_clock_max_error_ns" "${s[maxerr]}"
    if (( s[kmatched] * 10 >= s[ops] * 9 )); then
      result PASS "$who: GPU times on the trace clock" "${s[kmatched]} of ${s[ops]} operations matched to their CUPTI ncclDevKernel record; largest mapping error ${s[maxerr]} ns"
    else
      result WARN "$who: GPU times on the trace clock" "only ${s[kmatched]} of ${s[ops]} operations matched to a CUPTI NCCL kernel (largest error ${s[maxerr]} ns)"
    fi
  fi
  figure "$key.net_transfers" "${s[net]}"
  if (( ranks > 1 )) && [[ $(rank_value "$name" "$prefix" shared_gpu) == 1 ]]; then
    if (( s[net] > 0 )); then
      result PASS "$who: network transfers" "${s[net]} net_transfer records (NCCL's socket transport between the two 'hosts')"
    else
      result WARN "$who: network transfers" "no net_transfer record, though the ranks talk through NCCL's socket transport"
    fi
  fi
}

# check_nccl NAME MODE: nccl_collectives run NAME (one rank, or each rank of --ranks N) against its trace.
check_nccl() {
  local name=$1 mode=$2
  grep '^gpuxray' "$LOGS/$name.err" | head -6 | sed 's/^/  [capture] /'
  nccl_log_lines "$name"
  if [[ $RC != 0 ]]; then
    result FAIL "$mode: nccl_collectives exits 0" "exit $RC"
  fi
  if ! prepare_trace "$name"; then
    result FAIL "$mode: trace file" "none in $TR/$name"
    return
  fi
  local ranks line
  ranks=$(out_value "$name" nccl_ranks)
  ranks=${ranks:-1}
  [[ $NFILES == "$ranks" ]] || result FAIL "$mode: trace files" "$NFILES files for $ranks ranks"
  while read -r line; do
    check_nccl_file "$name" "$mode" "$ranks" "$line"
  done < <(nccl_summary "$LOGS/$name.dump")
  check_drops "$name" "$mode"
}

# check_ddp NAME WORLD: ddp_single_rank.py run NAME (world size WORLD) against its trace(s).
check_ddp() {
  local name=$1 world=$2 mode="DDP, world size $2"
  grep '^gpuxray' "$LOGS/$name.err" | head -6 | sed 's/^/  [capture] /'
  nccl_log_lines "$name"
  grep -E '^(torch|nccl_version|world_size|rank_exit|shared_gpu|steps|explicit_all_reduces|seconds)=' "$LOGS/$name.out" | sed 's/^/  /'
  local torch_nccl min
  torch_nccl=$(out_value "$name" nccl_version)
  min=$(out_value "$name" min_all_reduces)
  if [[ $RC == 0 ]]; then
    result PASS "$mode: exits 0 under gpuxray run" "$(out_value "$name" steps) steps, $(out_value "$name" explicit_all_reduces) explicit all_reduce, $(out_value "$name" seconds) s; PyTorch's NCCL ${torch_nccl:-?}"
  else
    result FAIL "$mode: exits 0 under gpuxray run" "exit $RC"
  fi
  if ! prepare_trace "$name"; then
    result FAIL "$mode: trace file" "none in $TR/$name"
    return
  fi
  [[ $NFILES == "$world" ]] || result WARN "$mode: trace files" "$NFILES files for $world processes"
  local line kv
  while read -r line; do
    local -A s=() got=()
    for kv in $line; do s[${kv%%=*}]=${kv#*=}; done
    local who="$mode, rank ${s[rank]}" pair pairs=()
    IFS=, read -r -a pairs <<< "${s[funcs]}"
    for pair in "${pairs[@]}"; do
      [[ $pair == *:* ]] && got[${pair%%:*}]=${pair##*:}
    done
    if (( s[comms] > 0 )); then
      result PASS "$who: NCCL communicator recorded" "${s[comms]} nccl_comm record(s), nranks ${s[nranks]}, plugin ABI v${s[versions]}"
      check_plugin_version "$who (PyTorch's NCCL)" "${s[versions]}" "$torch_nccl" "$name.rank${s[rank]}"
    else
      result FAIL "$who: NCCL communicator recorded" "no nccl_comm record: PyTorch's NCCL did not load gpuxray as its profiler plugin (see the [nccl] lines)"
    fi
    local all_reduce=${got[AllReduce]:-0}
    figure "$name.rank${s[rank]}.all_reduce_ops" "$all_reduce"
    figure "$name.rank${s[rank]}.nccl_ops" "${s[ops]}"
    local ops_text="${s[ops]} nccl_op records (${s[funcs]})"
    if [[ -n "$min" ]] && (( all_reduce >= min )); then
      result PASS "$who: AllReduce operations" "$all_reduce AllReduce >= $min (steps + explicit all_reduce; DDP all-reduces at least one bucket a step); $ops_text"
    elif (( world == 1 && s[ops] == 0 )); then
      result WARN "$who: AllReduce operations" "none, as NCCL runs a one-rank communicator's collectives as local copies without telling the profiler plugin; world size 2 checks them"
    else
      result FAIL "$who: AllReduce operations" "$all_reduce AllReduce, expected >= ${min:-?}; $ops_text"
    fi
    if (( s[ops] > 0 )); then
      if (( s[noalgo] == 0 && s[nogpu] == 0 )); then
        result PASS "$who: operation fields" "algorithm and protocol on all ${s[coll]} collectives, gpu_end >= gpu_start > 0 on all ${s[ops]}"
      else
        result FAIL "$who: operation fields" "${s[noalgo]} of ${s[coll]} collectives lack algorithm or protocol; ${s[nogpu]} of ${s[ops]} lack GPU times"
      fi
    fi
  done < <(nccl_summary "$LOGS/$name.dump")
  check_drops "$name" "$mode"
}

section_nccl() {
  # NCCL's init and environment lines (which profiler plugin it loaded, with which ABI version) go
  # into logs/<run>.nccl.<host>.<pid> (NCCL_DEBUG_FILE, set for each run), one file per process.
  export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV
  section "NCCL: nccl_collectives, one rank ($NCCL_ITERS iterations over $NCCL_SIZES), $REPEATS x without / with gpuxray run"
  local args=(--iters "$NCCL_ITERS" --warmup 2 --sizes "$NCCL_SIZES")
  local ranks_ok=0
  if over_budget; then
    result WARN "NCCL" "skipped: past the time budget"
    return
  elif [[ ! -x "$B/nccl_collectives" ]]; then
    result WARN "NCCL: nccl_collectives" "not in the bundle (NCCL was not found where it was built); only the DDP runs"
  else
    # A short run first: does NCCL work here at all (and load its kernels before the timed runs)?
    run_cmd nccl_warmup 60 env LD_LIBRARY_PATH="$NCCL_LD" NCCL_DEBUG_FILE="$LOGS/nccl_warmup.nccl.%h.%p" "$B/nccl_collectives" --iters 2 --warmup 1 --sizes 1K,1M
    if [[ $RC == 0 ]]; then
      result PASS "nccl_collectives runs without capture" "NCCL $(out_value nccl_warmup nccl_version_string), $(out_value nccl_warmup nccl_ops_launched) NCCL calls"
      figure nccl.version "$(out_value nccl_warmup nccl_version_string)"
      nccl_log_lines nccl_warmup
      local base=() cap=() base_wall=() cap_wall=()
      for i in $(seq 1 "$REPEATS"); do
        run_cmd "nccl_base_$i" 60 env LD_LIBRARY_PATH="$NCCL_LD" NCCL_DEBUG_FILE="$LOGS/nccl_base_$i.nccl.%h.%p" "$B/nccl_collectives" "${args[@]}"
        base+=("$(out_value "nccl_base_$i" loop_seconds)")
        base_wall+=("$WALL")
        run_cmd "nccl_run_$i" 60 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run -o "$TR/nccl_run_$i" --log-level info \
          -- env LD_LIBRARY_PATH="$NCCL_LD" NCCL_DEBUG_FILE="$LOGS/nccl_run_$i.nccl.%h.%p" "$B/nccl_collectives" "${args[@]}"
        cap+=("$(out_value "nccl_run_$i" loop_seconds)")
        cap_wall+=("$WALL")
        [[ $i == 1 ]] && NCCL_RUN1_RC=$RC
      done
      grep -E '^(nccl_version_string|sizes|nccl_ops_launched|loop_seconds|ops_per_second)=' "$LOGS/nccl_base_1.out" | sed 's/^/  without capture: /'
      overhead_result nccl "NCCL loop overhead (one rank, mostly small copies and Send/Recv kernels)" 1.05 base cap base_wall cap_wall soft
      section "NCCL: the one-rank trace (nccl_run_1) against the program's account"
      RC=$NCCL_RUN1_RC
      check_nccl nccl_run_1 "NCCL one rank, gpuxray run"
    else
      result FAIL "nccl_collectives runs without capture" "exit $RC: NCCL or the example is broken here"
      nccl_log_lines nccl_warmup
    fi

    section "NCCL: nccl_collectives, two ranks sharing the GPU (NCCL_HOSTID, socket transport), without and with gpuxray run"
    if over_budget; then
      result WARN "NCCL two ranks" "skipped: past the time budget"
    else
      local rank_args=(--ranks 2 --iters 5 --warmup 1 --sizes "$NCCL_RANK_SIZES" --timeout 80)
      run_cmd nccl_ranks_base 90 env LD_LIBRARY_PATH="$NCCL_LD" NCCL_DEBUG_FILE="$LOGS/nccl_ranks_base.nccl.%h.%p" "$B/nccl_collectives" "${rank_args[@]}"
      if [[ $RC == 0 ]]; then
        ranks_ok=1
        grep -E '^rank[0-9]+\.(shared_gpu|nccl_ops_launched|loop_seconds)=' "$LOGS/nccl_ranks_base.out" | sed 's/^/  without capture: /'
        run_cmd nccl_ranks_run 90 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run -o "$TR/nccl_ranks_run" --log-level info \
          -- env LD_LIBRARY_PATH="$NCCL_LD" NCCL_DEBUG_FILE="$LOGS/nccl_ranks_run.nccl.%h.%p" "$B/nccl_collectives" "${rank_args[@]}"
        check_nccl nccl_ranks_run "NCCL two ranks, gpuxray run"
      else
        result WARN "NCCL two ranks on one GPU" "not possible here without capture (exit $RC; rank_exit=$(out_value nccl_ranks_base rank_exit)): a test set-up, not gpuxray; the two-rank checks are skipped"
        tail -n 4 "$LOGS/nccl_ranks_base.err" | sed 's/^/     /'
      fi
    fi
  fi

  section "NCCL: PyTorch DDP (ddp_single_rank.py, $DDP_STEPS steps) under gpuxray run, world size 1"
  if over_budget; then
    result WARN "DDP under gpuxray run" "skipped: past the time budget"
    return
  fi
  run_cmd ddp_run 120 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run -o "$TR/ddp_run" --log-level info \
    -- env LD_LIBRARY_PATH="$EX_LD" NCCL_DEBUG_FILE="$LOGS/ddp_run.nccl.%h.%p" python3 "$B/ddp_single_rank.py" --steps "$DDP_STEPS"
  check_ddp ddp_run 1

  # The same, as a user who only names the library as NCCL's profiler plugin: no `gpuxray run`, no
  # CUDA injection, so NCCL's first communicator starts the capture (NCCL-only) and the trace's
  # communicator record says which ncclProfiler_vN NCCL chose.
  section "NCCL: PyTorch DDP, world size 1, with only NCCL_PROFILER_PLUGIN set to the library"
  if over_budget; then
    result WARN "DDP with NCCL_PROFILER_PLUGIN" "skipped: past the time budget"
  else
    run_cmd ddp_plugin_run 120 env LD_LIBRARY_PATH="$EX_LD" NCCL_PROFILER_PLUGIN="$LIB" GPUXRAY_OUTPUT_DIR="$TR/ddp_plugin_run" \
      NCCL_DEBUG_FILE="$LOGS/ddp_plugin_run.nccl.%h.%p" python3 "$B/ddp_single_rank.py" --steps "$DDP_STEPS"
    check_ddp ddp_plugin_run 1
  fi

  section "NCCL: PyTorch DDP under gpuxray run, world size 2 (both ranks on the GPU, as above)"
  if over_budget; then
    result WARN "DDP world size 2" "skipped: past the time budget"
  elif [[ $ranks_ok != 1 && -x "$B/nccl_collectives" ]]; then
    result WARN "DDP world size 2" "skipped: two ranks could not share the GPU with nccl_collectives either"
  else
    run_cmd ddp_ranks_run 150 env LD_LIBRARY_PATH="$B/lib${EX_LD:+:$EX_LD}" "$B/gpuxray" run -o "$TR/ddp_ranks_run" --log-level info \
      -- env LD_LIBRARY_PATH="$EX_LD" NCCL_DEBUG_FILE="$LOGS/ddp_ranks_run.nccl.%h.%p" python3 "$B/ddp_single_rank.py" --steps "$DDP_STEPS" --world-size 2 --timeout 130
    check_ddp ddp_ranks_run 2
  fi
}

# prepare_trace NAME: the run's trace directory, its one file's dump and `gpuxray info`. Returns 1 when
# there is no trace file.
prepare_trace() {
  local name=$1 dir=$TR/$1
  local files=()
  [[ -d "$dir" ]] && mapfile -t files < <(find "$dir" -maxdepth 1 -name '*.gpuxray')
  if [[ ${#files[@]} == 0 ]]; then
    return 1
  fi
  dump "$dir" > "$LOGS/$name.dump" 2> "$LOGS/$name.dump.err"
  gx info "$dir" > "$LOGS/$name.info.txt" 2>&1
  INFO_RC=$?
  gx info --format json "$dir" > "$LOGS/$name.info.json" 2> /dev/null
  NFILES=${#files[@]}
  return 0
}

# Kernel count, drops and end of a capture of one of our programs (xray_* kernels).
check_counts() {
  local name=$1 mode=$2
  if ! prepare_trace "$name"; then
    result FAIL "$mode: trace file" "none in $TR/$name"
    return
  fi
  local d=$LOGS/$name.dump expected prefix captured total
  expected=$(out_value "$name" kernels_launched)
  prefix=$(out_value "$name" kernel_prefix)
  captured=$(awk -v p="$prefix" '$1 == "kernel" {i = index($0, " name="); if (index(substr($0, i + 6), p) == 1) c++} END {print c + 0}' "$d")
  total=$(grep -c '^kernel ' "$d")
  figure "$name.kernels_expected" "$expected"
  figure "$name.kernels_captured" "$captured"
  if [[ -n "$expected" && "$captured" == "$expected" ]]; then
    result PASS "$mode: kernel count" "$captured ${prefix}* kernels captured = $expected launched ($total kernels in all)"
  else
    result FAIL "$mode: kernel count" "$captured ${prefix}* kernels captured, ${expected:-?} launched ($total kernels in all)"
  fi
  check_drops "$name" "$mode"
}

check_drops() {
  local name=$1 mode=$2 d=$LOGS/$1.dump dropped counts end
  dropped=$(awk '$1 == "count" {for (f = 2; f <= NF; f++) if ($f ~ /^dropped=/) {split($f, kv, "="); s += kv[2]}} END {print s + 0}' "$d")
  counts=$(awk '$1 == "count" {split($2, c, "="); split($3, r, "="); split($5, x, "="); printf "%s %s%s, ", c[2], r[2], (x[2] > 0 ? " (" x[2] " dropped)" : "")}' "$d")
  end=$(sed -n 's/^trailer end=\([^ ]*\).*/\1/p' "$d" | head -1)
  figure "$name.dropped" "$dropped"
  if [[ "$dropped" == 0 ]]; then
    result PASS "$mode: zero dropped records" "${counts%, }"
  else
    result FAIL "$mode: zero dropped records" "$dropped dropped: ${counts%, }"
  fi
  if [[ "$end" == process_exit && $INFO_RC == 0 ]]; then
    result PASS "$mode: file complete and readable" "ended by process exit; gpuxray info exit 0"
  else
    result FAIL "$mode: file complete and readable" "end=${end:-?}, gpuxray info exit $INFO_RC"
  fi
  grep '^warning' "$d" | head -5 | sed 's/^/     /'
}

# The stream_workload run NAME against its trace.
check_workload() {
  local name=$1 mode=$2
  grep '^gpuxray' "$LOGS/$name.err" | head -10 | sed 's/^/  [capture] /'
  if [[ $RC != 0 ]]; then
    result FAIL "$mode: stream_workload exits 0" "exit $RC"
  fi
  check_counts "$name" "$mode"
  [[ -f "$LOGS/$name.dump" ]] || return
  local d=$LOGS/$name.dump
  grep -m1 '^header ' "$d" | sed 's/^/     /'

  # Long kernels: the i-th xray_spin in start order against the i-th CUDA-event timing.
  grep '^kernel ' "$d" | awk '{i = index($0, " name="); if (substr($0, i + 6) != "xray_spin") next
      for (f = 2; f <= NF; f++) {split($f, kv, "="); v[kv[1]] = kv[2]} print v["start_ns"], v["dur_ns"]}' |
    sort -n -k1,1 | awk '{print $2}' > "$W/$name.spins"
  sed -n 's/^long_kernel .*cuda_event_ms=\([0-9.]*\).*/\1/p' "$LOGS/$name.out" > "$W/$name.events"
  local comparison
  comparison=$(paste "$W/$name.events" "$W/$name.spins" | awk '
      NF == 2 {t = $2 / 1e6; d = (t - $1) / $1 * 100; if (d < 0) d = -d; if (d > worst) worst = d
               line = line sprintf("%s#%d trace %.4f ms vs event %.4f ms (%.2f %%)", (n ? "; " : ""), n, t, $1, d); n++}
      NF == 1 {bad++}
      END {printf "%d %.3f %d %s", n, worst, bad, line}')
  local worst
  read -r _ worst _ <<< "$comparison"
  local events spins
  events=$(wc -l < "$W/$name.events")
  spins=$(wc -l < "$W/$name.spins")
  figure "$name.long_kernel_worst_pct" "$worst"
  if [[ $events -gt 0 && $events == "$spins" ]] && le "$worst" 2; then
    result PASS "$mode: long-kernel durations within 2 % of CUDA events" "${comparison#* * * }"
  else
    result FAIL "$mode: long-kernel durations within 2 % of CUDA events" "$spins in trace, $events timed; ${comparison#* * * }"
  fi

  # NVTX: every default-domain range the program pushed, its start/end range, its domain range, its mark.
  local ranges missing=() r
  IFS=, read -r -a ranges <<< "$(out_value "$name" nvtx_ranges)"
  ranges+=("$(out_value "$name" nvtx_start_end_range)")
  for r in "${ranges[@]}"; do
    [[ -z "$r" ]] && continue
    grep -q "^nvtx kind=range .* name=$r\$" "$d" || missing+=("$r")
  done
  grep -q '^nvtx kind=range .* domain=gpuxray_example name=domain_work$' "$d" || missing+=("gpuxray_example/domain_work")
  local nvtx_total
  nvtx_total=$(grep -c '^nvtx ' "$d")
  if [[ ${#ranges[@]} -gt 1 && ${#missing[@]} == 0 ]]; then
    result PASS "$mode: NVTX ranges" "all ${#ranges[@]} default-domain ranges and the gpuxray_example domain range found ($nvtx_total NVTX records)"
  else
    result FAIL "$mode: NVTX ranges" "missing: ${missing[*]:-(the program printed none)}; $nvtx_total NVTX records"
  fi
  grep -q '^nvtx kind=mark .* name=started$' "$d" || result WARN "$mode: NVTX mark 'started'" "not in the trace"

  # Device properties and topology.
  local device links
  device=$(grep -m1 '^device ' "$d")
  if [[ -n "$device" ]] && ! grep -q 'sms=0 ' <<< "$device" && [[ "$device" != *"name=" ]]; then
    result PASS "$mode: device properties" "${device#device }"
  else
    result FAIL "$mode: device properties" "${device:-no device record}"
  fi
  links=$(grep -c '^link ' "$d")
  figure "$name.links" "$links"
  if [[ $links -gt 0 ]]; then
    result PASS "$mode: topology" "$links links: $(grep '^link ' "$d" | awk '{sub(/^kind=/, "", $3); print $3}' | sort | uniq -c | awk '{printf "%s%s %s", (n++ ? ", " : ""), $1, $2}')"
  else
    result FAIL "$mode: topology" "no NVLink or PCIe link records (nvidia-smi topo -m above shows what there is)"
  fi

  # Copies by kind and memory kinds: issued (program) against captured (trace).
  local copy_report="" copy_fail="" copy_warn=""
  while read -r _ kind src dst count _; do
    kind=${kind#kind=}; src=${src#src=}; dst=${dst#dst=}; count=${count#count=}
    local got
    got=$(awk -v k="$kind" -v s="$src" -v t="$dst" '$1 == "memcpy" && $2 == "kind=" k && $3 == "src=" s && $4 == "dst=" t {c++} END {print c + 0}' "$d")
    copy_report+="$kind $src->$dst $got/$count, "
    if [[ $got -lt $count ]]; then
      case "$kind" in
        HtoH|PtoP) copy_warn+="$kind $src->$dst $got of $count; " ;;
        *) copy_fail+="$kind $src->$dst $got of $count; " ;;
      esac
    elif [[ $got -gt $count ]]; then
      copy_warn+="$kind $src->$dst $got records for $count copies; "
    fi
  done < <(grep '^copy_issued ' "$LOGS/$name.out")
  local other
  other=$(grep '^memcpy ' "$d" | awk '{print $2, $3, $4}' | sort | uniq -c | awk '{printf "%s%s %s %s x%s", (n++ ? ", " : ""), $2, $3, $4, $1}')
  if [[ -z "$copy_report" ]]; then
    result FAIL "$mode: copies" "the program printed no copy_issued lines"
  elif [[ -z "$copy_fail" ]]; then
    result PASS "$mode: copies (captured/issued)" "${copy_report%, }"
  else
    result FAIL "$mode: copies (captured/issued)" "missing: $copy_fail| ${copy_report%, }"
  fi
  [[ -n "$copy_warn" ]] && result WARN "$mode: copies" "$copy_warn| all memcpy records: $other"
  grep -q '^peer_copies=0' "$LOGS/$name.out" && echo "     (no peer copy: $(sed -n 's/^peer_copies=0 reason=//p' "$LOGS/$name.out"))"

  # Memsets, allocations, streams, stream names, synchronization.
  local memsets issued allocs frees want_allocs want_frees
  memsets=$(grep -c '^memset ' "$d")
  issued=$(out_value "$name" memsets_issued)
  if [[ -n "$issued" && $memsets -ge $issued ]]; then
    result PASS "$mode: memsets" "$memsets captured, $issued issued"
  else
    result FAIL "$mode: memsets" "$memsets captured, ${issued:-?} issued"
  fi
  allocs=$(grep -c '^memory op=allocate ' "$d")
  frees=$(grep -c '^memory op=release ' "$d")
  want_allocs=$(out_value "$name" device_allocations)
  want_frees=$(out_value "$name" device_frees)
  if [[ -n "$want_allocs" && $allocs -ge $want_allocs && $frees -ge $want_frees ]]; then
    result PASS "$mode: allocations" "$allocs allocations and $frees releases captured; the program made $want_allocs and $want_frees (cuBLAS adds its own)"
  else
    result WARN "$mode: allocations" "$allocs allocations and $frees releases captured; the program made ${want_allocs:-?} and ${want_frees:-?}"
  fi
  local streams names syncs
  streams=$(grep -c '^stream ' "$d")
  names=$(grep '^resource kind=stream ' "$d" | sed 's/.* name=//' | sort -u | tr '\n' ' ')
  syncs=$(grep '^sync ' "$d" | awk '{print $2}' | sort | uniq -c | awk '{printf "%s%s %s", (n++ ? ", " : ""), $2, $1}')
  echo "     streams: $streams records (program created $(out_value "$name" streams_created)); stream names: ${names:-none}; sync: ${syncs:-none}"
  [[ $names == *worker_0* ]] || result WARN "$mode: NVTX stream names" "worker_0 not among the stream names"
}

# overhead_result KEY WHAT LIMIT BASE_ARRAY CAP_ARRAY BASE_WALL_ARRAY CAP_WALL_ARRAY [soft]
# (soft: over the limit is a WARN, not a FAIL)
overhead_result() {
  local key=$1 what=$2 limit=$3 over=FAIL
  [[ ${8:-} == soft ]] && over=WARN
  local -n b=$4 c=$5 bw=$6 cw=$7
  local mb mc r rw
  mb=$(median "${b[@]}")
  mc=$(median "${c[@]}")
  r=$(ratio "$mc" "$mb")
  rw=$(ratio "$(median "${cw[@]}")" "$(median "${bw[@]}")")
  figure "$key.base_seconds" "$(IFS=,; echo "${b[*]}")"
  figure "$key.capture_seconds" "$(IFS=,; echo "${c[*]}")"
  figure "$key.ratio" "$r"
  figure "$key.process_wall_ratio" "$rw"
  echo "  loop time without capture: ${b[*]} s (median $mb)"
  echo "  loop time with capture:    ${c[*]} s (median $mc)"
  echo "  whole process wall time:   without ${bw[*]} s, with ${cw[*]} s (ratio of medians $rw; includes CUPTI start and the final flush)"
  if [[ ${#b[@]} -gt 0 ]] && le "$r" "$limit"; then
    result PASS "$what" "ratio $r (with/without, median loop time), target <= $limit"
  else
    result "$over" "$what" "ratio $r (with/without, median loop time), target <= $limit"
  fi
}

check_torch() {
  local name=$1
  grep '^gpuxray' "$LOGS/$name.err" | head -10 | sed 's/^/  [capture] /'
  if [[ $RC == 0 ]]; then
    result PASS "PyTorch under gpuxray run exits 0" "step ${TORCH_STEPS}: $(out_value "$name" step_ms) ms/step with capture, $(out_value torch_base step_ms) without"
  else
    result FAIL "PyTorch under gpuxray run exits 0" "exit $RC"
  fi
  figure torch.step_ms_base "$(out_value torch_base step_ms)"
  figure torch.step_ms_capture "$(out_value "$name" step_ms)"
  figure torch.step_ms_ratio "$(ratio "$(out_value "$name" step_ms)" "$(out_value torch_base step_ms)")"
  if ! prepare_trace "$name"; then
    result FAIL "PyTorch: trace file" "none in $TR/$name"
    return
  fi
  local d=$LOGS/$name.dump kernels steps ops
  [[ $NFILES == 1 ]] || result WARN "PyTorch: trace files" "$NFILES files (one process expected)"
  kernels=$(grep -c '^kernel ' "$d")
  steps=$(grep -cE '^nvtx kind=range .* name=step [0-9]+$' "$d")
  ops=$(grep -c '^nvtx kind=range .* name=aten::' "$d")
  figure torch.kernels "$kernels"
  figure torch.step_ranges "$steps"
  figure torch.op_ranges "$ops"
  if [[ $kernels -gt 0 ]]; then result PASS "PyTorch: kernels captured" "$kernels kernels"; else result FAIL "PyTorch: kernels captured" "none"; fi
  if [[ $steps == "$TORCH_STEPS" ]]; then
    result PASS "PyTorch: NVTX step ranges" "$steps 'step N' ranges; $ops emit_nvtx operator ranges"
  else
    result FAIL "PyTorch: NVTX step ranges" "$steps 'step N' ranges of $TORCH_STEPS; $ops emit_nvtx operator ranges"
  fi
  [[ $ops -gt 0 ]] || result WARN "PyTorch: emit_nvtx operator ranges" "none with an aten:: name"
  grep -m1 '^device ' "$d" | sed 's/^/     /'
  check_drops "$name" "PyTorch"
}

# Traces and logs into $OUT, each archive under 16 MiB: leave out the bulkiest runs' files if needed.
pack() {
  local limit=$((15 * 1024 * 1024))
  tar -C "$W" -czf "$OUT/traces.tar.gz" traces
  if [[ $(stat -c %s "$OUT/traces.tar.gz") -gt $limit ]]; then
    echo "traces.tar.gz over 15 MiB: leaving out the repeated overhead runs"
    tar -C "$W" -czf "$OUT/traces.tar.gz" --exclude='traces/launch_cap_[2-9]' --exclude='traces/gemm_cap_[2-9]' \
      --exclude='traces/nccl_run_[2-9]' traces
  fi
  if [[ $(stat -c %s "$OUT/traces.tar.gz") -gt $limit ]]; then
    echo "traces.tar.gz still over 15 MiB: leaving out the PyTorch trace"
    tar -C "$W" -czf "$OUT/traces.tar.gz" --exclude='traces/launch_cap_[2-9]' --exclude='traces/gemm_cap_[2-9]' \
      --exclude='traces/nccl_run_[2-9]' --exclude='traces/torch_run' traces
  fi
  tar -C "$W" -czf "$OUT/logs.tar.gz" logs
  if [[ $(stat -c %s "$OUT/logs.tar.gz") -gt $limit ]]; then
    echo "logs.tar.gz over 15 MiB: leaving out the trace dumps"
    tar -C "$W" -czf "$OUT/logs.tar.gz" --exclude='*.dump' logs
  fi
  ls -la "$OUT"
}

main "$@" 2>&1 | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
