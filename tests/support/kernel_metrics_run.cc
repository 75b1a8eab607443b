// Writes a small one-rank run with kernels `gpuxray run --kernel-metrics` measured, for the HTML
// report's browser test (web/test/browser_test.mjs, the memory-hierarchy view). The counters are
// chosen by hand; the browser test checks the page draws these very numbers:
//   GEMM: 4 launches of 100 us plus 1 measured; L1 1.5 GiB at 12.5 % hits, L2 512 MiB at 81.5 %,
//     HBM 96 MiB read and 32 MiB written in 98 us, achieved occupancy 21.5 % of 25 % theoretical
//     (128 threads x 128 registers: 4 blocks of 4 warps per SM of 64).
//   An add then a multiply, elementwise, measured one after the other on one stream, without L1
//     counters (the page says "not measured"); the multiply reads back the add's 32 MiB (a fusion
//     candidate saving 64 MiB).
//
//   kernel_metrics_run DIR
#include <cstdio>
#include <exception>

#include "tests/support/run_builder.h"

namespace {

using gpuxray::format::KernelMetricsRecord;

constexpr double kMiB = 1024.0 * 1024.0;

gpuxray::format::DeviceProperties h100() {
  gpuxray::format::DeviceProperties d;
  d.device_id = 0;
  d.name = "NVIDIA H100 80GB HBM3";
  d.sm_count = 132;
  d.compute_major = 9;
  d.max_threads_per_sm = 2048;
  d.max_warps_per_sm = 64;
  d.max_blocks_per_sm = 32;
  d.registers_per_sm = 65536;
  d.registers_per_block = 65536;
  d.shared_memory_per_sm = 233472;
  d.shared_memory_per_block = 49152;
  d.shared_memory_per_block_optin = 232448;
  d.warp_size = 32;
  d.memory_bandwidth_bytes_per_s = 3'350'000'000'000ull;
  d.peak_bf16_flops = 989e12;
  return d;
}

KernelMetricsRecord gemmCounters() {
  KernelMetricsRecord m;
  m.passes = 8;
  m.achieved_occupancy_pct = 21.5;
  m.sm_throughput_pct = 78.0;
  m.tensor_pipe_pct = 61.0;
  m.dram_read_bytes = 96 * kMiB;
  m.dram_write_bytes = 32 * kMiB;
  m.l2_bytes = 512 * kMiB;
  m.l2_hit_rate_pct = 81.5;
  m.l1_bytes = 1536 * kMiB;
  m.l1_hit_rate_pct = 12.5;
  m.shared_wavefronts = 2'000'000;
  m.local_load_bytes = 0;
  m.local_store_bytes = 0;
  m.gpu_duration_ns = 98'000;
  return m;
}

KernelMetricsRecord elementwiseCounters(double achieved, double read_mib, double written_mib, double l2_mib,
                                        double l2_hit, double duration_ns) {
  KernelMetricsRecord m;
  m.passes = 8;
  m.achieved_occupancy_pct = achieved;
  m.sm_throughput_pct = 18.0;
  m.dram_read_bytes = read_mib * kMiB;
  m.dram_write_bytes = written_mib * kMiB;
  m.l2_bytes = l2_mib * kMiB;
  m.l2_hit_rate_pct = l2_hit;
  m.gpu_duration_ns = duration_ns;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kernel_metrics_run DIR\n");
    return 2;
  }
  try {
    gpuxray::testing::RunBuilder run("kernel-metrics", 1);
    auto& r0 = run.rank(0, "node-0");
    r0.header.devices.push_back(h100());
    const std::string gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel";
    for (int i = 0; i < 4; ++i) {
      r0.kernel(gemm, 200.0 * i, 200.0 * i + 100);
      auto& shape = r0.kernels.back().shape;
      shape.grid_x = 264;
      shape.block_x = 128;
      shape.registers_per_thread = 128;
    }
    // The measured launch: replayed 8 times, so its 2 ms on the timeline are not the kernel's.
    r0.kernel(gemm, 1000, 3000).measured(gemmCounters());
    r0.kernels.back().shape = r0.kernels.front().shape;
    r0.kernel("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)", 3100, 3500)
        .measured(elementwiseCounters(88.0, 64, 32, 96, 33.5, 40'000));
    r0.kernel("void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>(int)", 3600, 4000)
        .measured(elementwiseCounters(86.0, 32, 32, 64, 50.0, 30'000));
    run.write(argv[1]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kernel_metrics_run: %s\n", error.what());
    return 1;
  }
  return 0;
}
