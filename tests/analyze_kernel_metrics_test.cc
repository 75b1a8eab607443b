// The counters of `gpuxray run --kernel-metrics` in the analyses: they land on the launch they name,
// the replayed launch's duration stays out of the time figures, and the kernel-metrics analysis
// gives achieved occupancy against theoretical, the bound, GEMM FLOPs and fusion candidates.

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "analyzer/analysis/activity_totals.h"
#include "analyzer/analysis/kernel_metrics.h"
#include "analyzer/analysis/kernels.h"
#include "analyzer/analysis/session.h"
#include "analyzer/analysis/time_breakdown.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

namespace analysis = gpuxray::analysis;
using gpuxray::format::KernelMetricsRecord;
using gpuxray::testing::RunBuilder;
using gpuxray::testing::TempDir;

gpuxray::format::DeviceProperties h100() {
  gpuxray::format::DeviceProperties d;
  d.name = "NVIDIA H100";
  d.sm_count = 132;
  d.compute_major = 9;
  d.max_threads_per_sm = 2048;
  d.max_warps_per_sm = 64;
  d.registers_per_sm = 65536;
  d.registers_per_block = 65536;
  d.shared_memory_per_sm = 233472;
  d.shared_memory_per_block = 49152;
  d.shared_memory_per_block_optin = 232448;
  d.warp_size = 32;
  d.memory_bandwidth_bytes_per_s = 3'350'000'000'000ull;
  return d;
}

KernelMetricsRecord counters(double achieved, double sm, double read, double written, double duration_ns) {
  KernelMetricsRecord m;
  m.device = 0;
  m.passes = 8;
  m.achieved_occupancy_pct = achieved;
  m.sm_throughput_pct = sm;
  m.dram_read_bytes = read;
  m.dram_write_bytes = written;
  m.gpu_duration_ns = duration_ns;
  return m;
}

std::unique_ptr<analysis::Session> prepared(const std::filesystem::path& dir) {
  analysis::SessionOptions options;
  options.paths = {dir.string()};
  options.align = false;
  return std::make_unique<analysis::Session>(options);
}

const std::string kAdd = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)";
const std::string kMul = "void at::native::vectorized_elementwise_kernel<4, at::native::MulFunctor<float>>(int)";

}  // namespace

TEST_CASE("kernel metrics: a profiled launch's counters land on it and its replayed time enters no time figure",
          "[kernel-metrics]") {
  TempDir dir;
  RunBuilder run("profiled", 1);
  auto& r0 = run.rank(0, "node-0");
  r0.header.devices.push_back(h100());
  // No launch calls: activity totals place a kernel by its launch, and the first launch would come
  // before the run's first GPU activity.
  r0.kernel("gemm_kernel", 0, 100, gpuxray::testing::kComputeStream, -1);
  // Replayed 8 times inside its launch: 5 ms on the timeline for 90 us of kernel.
  r0.kernel("gemm_kernel", 200, 5200, gpuxray::testing::kComputeStream, -1)
      .measured(counters(20, 85, 1e7, 1e6, 90'000));
  r0.kernel("gemm_kernel", 5300, 5400, gpuxray::testing::kComputeStream, -1);
  run.write(dir.path());

  auto session = prepared(dir.path());
  const auto& rank = session->run().ranks[0];
  REQUIRE(rank.profiled_kernels.size() == 1);
  CHECK(rank.profiled_kernels[0].launch_found);
  CHECK(rank.profiled_kernels[0].launch.duration() == 5'000'000);
  CHECK(rank.profiled_kernels[0].metrics.achieved_occupancy_pct == 20.0);
  CHECK(session->run().stats.value(gpuxray::report::Stat::kernels_profiled) == 1);

  auto totals = analysis::computeActivityTotals(session->input());
  REQUIRE(totals.gpu.size() == 1);
  CHECK(totals.gpu[0].count == 2);
  CHECK(totals.gpu[0].time_ns == 200'000);

  auto kernels = analysis::computeKernels(session->input());
  REQUIRE(kernels.kernels.size() == 1);
  CHECK(kernels.kernels[0].time_ns == 200'000);
  CHECK(kernels.compute_time_ns == 200'000);
  REQUIRE(kernels.kernels[0].achieved_occupancy_pct);
  CHECK(*kernels.kernels[0].achieved_occupancy_pct == 20.0);

  auto breakdown = analysis::computeTimeBreakdown(session->input());
  REQUIRE(breakdown.ranks.size() == 1);
  CHECK(breakdown.ranks[0].totals.compute == 200'000);

  auto measured = analysis::computeKernelMetrics(session->input());
  CHECK(measured.profiled_launches == 1);
  REQUIRE(measured.kernels.size() == 1);
  const auto& k = measured.kernels[0];
  CHECK(k.name == "gemm_kernel");
  REQUIRE(k.theoretical_occupancy_pct);
  CHECK(*k.theoretical_occupancy_pct == Approx(100.0));
  CHECK(k.bound == analysis::KernelBound::kCompute);
  REQUIRE(k.dram_throughput_pct);
  CHECK(*k.dram_throughput_pct == Approx(100.0 * 1.1e7 / 90e-6 / 3.35e12));
  CHECK_FALSE(k.arithmetic_intensity);
  CHECK(k.flops_source == "no matrix-product op with recorded input shapes launched it");

  gpuxray::report::Report report;
  analysis::presentKernelMetrics(measured, report);
  REQUIRE(report.findings.size() == 1);
  CHECK(report.findings[0].summary == "kernel gemm_kernel reaches 20.0 % achieved occupancy of 100.0 % theoretical");
}

TEST_CASE(
    "kernel metrics: consecutive elementwise kernels on a stream moving a tensor through HBM are a fusion "
    "candidate",
    "[kernel-metrics]") {
  TempDir dir;
  RunBuilder run("fusion", 1);
  auto& r0 = run.rank(0, "node-0");
  r0.header.devices.push_back(h100());
  r0.kernel(kAdd, 0, 400).measured(counters(90, 20, 8e8, 4e8, 380'000));
  r0.kernel(kMul, 500, 900).measured(counters(90, 20, 4e8, 4e8, 370'000));
  // A kernel between two others on the stream: they are not consecutive.
  r0.kernel("other_kernel", 1000, 1100);
  r0.kernel(kAdd, 1200, 1600).measured(counters(90, 20, 8e8, 4e8, 380'000));
  r0.kernel("other_kernel", 1700, 1800);
  r0.kernel(kMul, 1900, 2300).measured(counters(90, 20, 4e8, 4e8, 370'000));
  run.write(dir.path());

  auto session = prepared(dir.path());
  auto measured = analysis::computeKernelMetrics(session->input());
  REQUIRE(measured.fusion.size() == 1);
  CHECK(measured.fusion[0].first == kAdd);
  CHECK(measured.fusion[0].second == kMul);
  CHECK(measured.fusion[0].bytes_saved == 8e8);
  REQUIRE(measured.kernels.size() == 2);
  for (const auto& k : measured.kernels) {
    // 1.2 GB in 380 us, 0.8 GB in 370 us against 3.35 TB/s: DRAM is the busy unit.
    CHECK(k.bound == analysis::KernelBound::kMemory);
    CHECK(k.flops_source == "an elementwise kernel: its FLOPs are not recorded");
  }
  gpuxray::report::Report report;
  analysis::presentKernelMetrics(measured, report);
  REQUIRE(report.findings.size() == 1);
  CHECK_THAT(report.findings[0].summary, Catch::StartsWith("fusion candidate on rank 0 stream 7: "));
}

TEST_CASE("kernel metrics: a kernel keeping neither the SMs nor DRAM busy is latency-bound", "[kernel-metrics]") {
  TempDir dir;
  RunBuilder run("latency", 1);
  auto& r0 = run.rank(0, "node-0");
  r0.header.devices.push_back(h100());
  r0.kernel("small_kernel", 0, 50).measured(counters(12, 15, 1e6, 1e6, 4'000));
  run.write(dir.path());
  auto session = prepared(dir.path());
  auto measured = analysis::computeKernelMetrics(session->input());
  REQUIRE(measured.kernels.size() == 1);
  CHECK(measured.kernels[0].bound == analysis::KernelBound::kLatency);
  CHECK_THAT(measured.kernels[0].evidence[0], Catch::StartsWith("neither unit is busy: SM throughput 15.0 %"));
}

TEST_CASE("kernel metrics: counters whose launch is not in the file are counted, not shown", "[kernel-metrics]") {
  TempDir dir;
  RunBuilder run("orphan", 1);
  auto& r0 = run.rank(0, "node-0");
  r0.kernel("gemm_kernel", 0, 100);
  KernelMetricsRecord orphan = counters(50, 50, 1, 1, 1000);
  r0.kernel_metrics.push_back(orphan);
  r0.kernel_metrics.back().correlation_id = 999;
  run.write(dir.path());
  auto session = prepared(dir.path());
  CHECK(session->run().stats.value(gpuxray::report::Stat::kernel_metrics_without_launch) == 1);
  CHECK(session->run().ranks[0].activities.size() == 1);
  auto measured = analysis::computeKernelMetrics(session->input());
  CHECK(measured.launches_not_found == 1);
  CHECK(measured.kernels.empty());
}

TEST_CASE("kernel metrics: FLOPs of matrix products from their recorded input shapes", "[kernel-metrics]") {
  CHECK(analysis::gemmFlops("aten::mm", "float[512, 1024], float[1024, 256]") == 2.0 * 512 * 1024 * 256);
  CHECK(analysis::gemmFlops("aten::addmm", "float[256], float[512, 1024], float[1024, 256], Scalar, Scalar") ==
        2.0 * 512 * 1024 * 256);
  CHECK(analysis::gemmFlops("aten::bmm", "c10::BFloat16[8, 128, 64], c10::BFloat16[8, 64, 32]") ==
        2.0 * 8 * 128 * 64 * 32);
  CHECK(analysis::gemmFlops("aten::linear", "float[4, 16, 1024], float[4096, 1024], float[4096]") ==
        2.0 * 64 * 1024 * 4096);
  CHECK_FALSE(analysis::gemmFlops("aten::mm", "float[512, 1024], float[999, 256]"));
  CHECK_FALSE(analysis::gemmFlops("aten::mm", "float[512, ?], float[?, 256]"));
  CHECK_FALSE(analysis::gemmFlops("aten::mm", "Scalar"));
}

TEST_CASE("kernel metrics: digests carry the measured launches, so analyze DIGESTS reports them as analyze DIR does",
          "[kernel-metrics][digest]") {
  TempDir dir;
  RunBuilder run("digested", 1);
  auto& r0 = run.rank(0, "node-0");
  r0.header.devices.push_back(h100());
  r0.kernel("gemm_kernel", 0, 100);
  r0.kernel(kAdd, 200, 600).measured(counters(20, 20, 8e8, 4e8, 380'000));
  r0.kernel(kMul, 700, 1100).measured(counters(90, 20, 4e8, 4e8, 370'000));
  std::string traces = dir / "traces", digests = dir / "digests";
  std::filesystem::create_directories(traces);
  run.write(traces);
  const std::string gpuxray = gpuxray::testing::gpuxrayBinary();
  auto made = gpuxray::testing::runCommand(gpuxray + " digest " + traces + " -o " + digests);
  INFO(made.err);
  REQUIRE(made.exit_code == 0);
  auto report = [&](const std::string& path) {
    auto analyzed = gpuxray::testing::runCommand(gpuxray + " analyze --format json " + path);
    INFO(analyzed.err);
    REQUIRE(analyzed.exit_code == 0);
    return nlohmann::json::parse(analyzed.out);
  };
  nlohmann::json from_traces = report(traces), from_digests = report(digests);
  REQUIRE(from_traces["results"].contains("kernel_metrics"));
  // Two measured kernels, the fusion candidate and the occupancy finding: theoretical occupancy
  // needs the device, which the digest names by id.
  CHECK(from_digests["results"]["kernel_metrics"] == from_traces["results"]["kernel_metrics"]);
  CHECK(from_digests["findings"] == from_traces["findings"]);
  CHECK(from_digests["results"]["kernels"] == from_traces["results"]["kernels"]);
}
