// What --kernel-metrics costs a launch that it does not measure, through the real capture
// (CaptureSession and its launch callbacks) with the fake CUPTI: CUPTI calls the collector at the
// entry and exit of cudaLaunchKernel and of the cuLaunchKernel inside it, and CUPTI delivers the
// API and kernel records as in window_benchmark. Process CPU time per launch, from the first launch
// to the file's end:
//
//   capture          the capture without --kernel-metrics (the peer: what every launch costs today);
//   unmatched        --kernel-metrics set, the kernel's name does not match;
//   matched-done     the name matches, its launches to measure are used up.
//
//   kernel_metrics_benchmark [--launches N] [--reps N]
//
// Reported as ns per launch and as the ratio to `capture`; the target is <= 1.10. A measured launch
// itself costs its replays on the GPU (docs/kernel-metrics.md): that is timed by scripts/gpu-check.sh.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string_view>
#include <vector>

#include "inject/capture_session.h"
#include "tests/benchmarks/launch_cost_loop.h"
#include "tests/support/fake_cupti.h"

namespace {

using namespace gpuxray;
using gpuxray::testing::FakeCupti;

enum class Mode { kCapture, kUnmatched, kMatchedDone };

const char* kSymbol = "_Z11gemm_kernelPKfS0_Pfi";

void launch(uint32_t correlation) {
  auto& fake = FakeCupti::instance();
  CUpti_CallbackData runtime{};
  runtime.symbolName = kSymbol;
  runtime.context = reinterpret_cast<CUcontext>(0x1000);
  runtime.correlationId = correlation;
  CUpti_CallbackData driver = runtime;
  runtime.callbackSite = driver.callbackSite = CUPTI_API_ENTER;
  fake.call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &runtime);
  fake.call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &driver);
  runtime.callbackSite = driver.callbackSite = CUPTI_API_EXIT;
  fake.call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &driver);
  fake.call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &runtime);
  benchmarks::queueLaunchRecords(fake, correlation, kSymbol);
}

double nsPerLaunch(Mode mode, uint32_t launches, const std::filesystem::path& dir) {
  auto& fake = FakeCupti::instance();
  fake.reset();
  inject::CaptureConfig config;
  config.output_dir = dir.string();
  config.flush_interval_ms = 10;
  config.log_level = inject::LogLevel::kQuiet;
  if (mode == Mode::kUnmatched) config.kernel_metrics = "^nothing_matches_this$";
  // A count of 1 with a profiler that does not initialize: the first launch's attempt fails once
  // (one line), and every later launch of the kernel finds its count used up.
  if (mode == Mode::kMatchedDone) config.kernel_metrics = "gemm", config.kernel_metrics_count = 1;
  inject::CaptureDependencies deps;
  deps.cupti = fake.api();
  deps.cupti_path = "/fake/libcupti.so.13";
  deps.cupti_api_version = 130001;
  deps.kernel_profiler.enable = [](CUpti_RangeProfiler_Enable_Params*) { return CUPTI_ERROR_NOT_SUPPORTED; };
  deps.kernel_profiler.profilerInitialize = [](CUpti_Profiler_Initialize_Params*) { return CUPTI_ERROR_NOT_SUPPORTED; };
  deps.environment = [](const char*) -> const char* { return nullptr; };
  deps.log = [](const std::string&) {};
  inject::CaptureSession session(std::move(deps), config);
  if (!session.start()) {
    fmt::print(stderr, "kernel_metrics_benchmark: the capture did not start\n");
    std::exit(1);
  }
  uint64_t start = benchmarks::processCpuNs();
  for (uint32_t i = 1; i <= launches; ++i) launch(i);
  session.stop(format::CaptureEnd::kProcessExit, "benchmark");
  uint64_t spent = benchmarks::processCpuNs() - start;
  std::filesystem::remove_all(dir);
  return static_cast<double>(spent) / launches;
}

}  // namespace

int main(int argc, char** argv) {
  auto options = benchmarks::parseLaunchLoopOptions(argc, argv, "kernel_metrics_benchmark");
  if (!options) return 2;
  const uint32_t launches = options->launches;
  const int reps = options->reps;
  auto dir = std::filesystem::temp_directory_path() / fmt::format("gpuxray-kernel-metrics-benchmark-{}", ::getpid());
  const std::pair<Mode, const char*> modes[] = {
      {Mode::kCapture, "capture"}, {Mode::kUnmatched, "unmatched"}, {Mode::kMatchedDone, "matched-done"}};
  std::map<Mode, double> median =
      benchmarks::medianPerMode<Mode>(modes, reps, [&](Mode mode) { return nsPerLaunch(mode, launches, dir); });
  fmt::print("kernel_metrics_benchmark: {} launches, median of {} runs (process CPU time per launch)\n", launches,
             reps);
  for (auto [mode, name] : modes) {
    fmt::print("  {:<13} {:8.1f} ns/launch   ratio to capture {:.3f}\n", name, median[mode],
               median[mode] / median[Mode::kCapture]);
  }
  return 0;
}
