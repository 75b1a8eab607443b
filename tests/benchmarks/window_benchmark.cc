// What a kernel launch costs the traced process inside a capture window and outside one, through
// the real capture (CaptureSession, its CUPTI callbacks, translator and writer) with the fake CUPTI
// standing in for libcupti. A simulated launch is what CUPTI does for cudaLaunchKernel: when the
// RUNTIME and CONCURRENT_KERNEL kinds are enabled it writes an API record and a kernel record into
// its buffers; the capture collects, translates and writes them. Process CPU time (every thread:
// the launching one and the capture thread) per launch, from the first launch to the file's end,
// minus the same loop without a capture (bare). Inside, most of it is the fake CUPTI making the
// records (an allocation per record, far slower than a real CUPTI's buffer writes):
//
//   inside           the whole run is one window;
//   outside          a cudaProfilerApi plan whose range has closed: the kinds are off;
//   outside-dropped  the same, but the records are delivered anyway (CUPTI still held some, or
//                    another tool keeps the kinds on): they are left out by time, before translation.
//
//   window_benchmark [--launches N] [--reps N]
//
// Target: outside <= 5 % of inside. Reported, not enforced.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "inject/capture_session.h"
#include "tests/benchmarks/launch_cost_loop.h"
#include "tests/support/fake_cupti.h"

namespace {

using namespace gpuxray;
using gpuxray::testing::FakeCupti;

enum class Mode { kBare, kInside, kOutside, kOutsideDropped };

// CUPTI's side of one cudaLaunchKernel.
void launch(uint32_t correlation, bool deliver) {
  if (deliver) benchmarks::queueLaunchRecords(FakeCupti::instance(), correlation, "gemm_kernel");
}

double nsPerLaunch(Mode mode, uint32_t launches, const std::filesystem::path& dir) {
  auto& fake = FakeCupti::instance();
  fake.reset();
  std::unique_ptr<inject::CaptureSession> session;
  if (mode != Mode::kBare) {
    inject::CaptureConfig config;
    config.output_dir = dir.string();
    config.flush_interval_ms = 10;
    config.log_level = inject::LogLevel::kQuiet;
    if (mode != Mode::kInside) config.window.range.kind = format::CaptureRange::Kind::kProfilerApi;
    inject::CaptureDependencies deps;
    deps.cupti = fake.api();
    deps.cupti_path = "/fake/libcupti.so.13";
    deps.cupti_api_version = 130001;
    deps.environment = [](const char*) -> const char* { return nullptr; };
    session = std::make_unique<inject::CaptureSession>(std::move(deps), config);
    if (!session->start()) {
      fmt::print(stderr, "window_benchmark: the capture did not start\n");
      std::exit(1);
    }
    if (mode != Mode::kInside) {
      fake.callApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_EXIT);
      fake.callApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000, CUPTI_API_ENTER);
      // Outside means after the closed window's kinds went off (they linger 200 ms).
      for (int i = 0; i < 200 && fake.isEnabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  uint64_t start = benchmarks::processCpuNs();
  for (uint32_t i = 1; i <= launches; ++i) {
    // Without a capture no kind is enabled: the bare loop pays the same check.
    launch(i, mode == Mode::kOutsideDropped || fake.isEnabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  }
  if (session) session->stop(format::CaptureEnd::kProcessExit, "benchmark");
  uint64_t spent = benchmarks::processCpuNs() - start;
  std::filesystem::remove_all(dir);
  return static_cast<double>(spent) / launches;
}

}  // namespace

int main(int argc, char** argv) {
  auto options = benchmarks::parseLaunchLoopOptions(argc, argv, "window_benchmark");
  if (!options) return 2;
  const uint32_t launches = options->launches;
  const int reps = options->reps;
  auto dir = std::filesystem::temp_directory_path() / fmt::format("gpuxray-window-benchmark-{}", ::getpid());
  const std::pair<Mode, const char*> modes[] = {{Mode::kBare, "bare"},
                                                {Mode::kInside, "inside"},
                                                {Mode::kOutside, "outside"},
                                                {Mode::kOutsideDropped, "outside-dropped"}};
  std::map<Mode, double> median =
      benchmarks::medianPerMode<Mode>(modes, reps, [&](Mode mode) { return nsPerLaunch(mode, launches, dir); });
  fmt::print("window_benchmark: {} launches x {} reps, process CPU ns per launch (median)\n", launches, reps);
  for (auto [mode, name] : modes) fmt::print("  {:<16} {:9.1f} ns\n", name, median[mode]);
  double inside = median[Mode::kInside] - median[Mode::kBare];
  double outside = median[Mode::kOutside] - median[Mode::kBare];
  double dropped = median[Mode::kOutsideDropped] - median[Mode::kBare];
  fmt::print("overhead per launch over bare: inside {:.1f} ns, outside {:.1f} ns, outside-dropped {:.1f} ns\n", inside,
             outside, dropped);
  fmt::print("ratio outside/inside = {:.4f} (target <= 0.05); outside-dropped/inside = {:.4f}\n", outside / inside,
             dropped / inside);
  return 0;
}
