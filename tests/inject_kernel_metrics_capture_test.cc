// --kernel-metrics' collection path without a GPU: the capture with the fake CUPTI calls the launch
// callbacks as CUPTI would (runtime launch around the driver's), a fake range profiler plays
// CUPTI's part, and the file is read back and loaded: each profiled launch's counters land on that
// launch, only the first N launches of matching kernels are profiled, and failures are one line.

#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/analysis/activity_totals.h"
#include "analyzer/analysis/session.h"
#include "inject/capture_session.h"
#include "inject/kernel_metric_collector.h"
#include "proto/trace_reader.h"
#include "tests/support/fake_cupti.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace gpuxray;
using gpuxray::testing::FakeCupti;
using gpuxray::testing::TempDir;

// CUPTI's range profiler as the collector uses it: counts calls; evaluation gives metric i the
// value 10 * (i + 1) + the number of launches profiled before.
struct FakeRangeProfiler {
  CUptiResult enable_result = CUPTI_SUCCESS;
  int enables = 0, starts = 0, stops = 0, decodes = 0, evaluations = 0, disables = 0;
  bool running = false;
  int host_objects = 0;

  static FakeRangeProfiler& instance() {
    static FakeRangeProfiler fake;
    return fake;
  }
  void reset() { *this = FakeRangeProfiler{}; }

  static inject::KernelProfilerApi api() {
    inject::KernelProfilerApi api;
    static int object = 0;
    auto* host = reinterpret_cast<CUpti_Profiler_Host_Object*>(&object);
    auto* profiler = reinterpret_cast<CUpti_RangeProfiler_Object*>(&object);
    // As the real CUPTI (H200, CUDA 13.0): PCIe records start its legacy profiling interface, and
    // the range profiler then refuses to initialize.
    api.profilerInitialize = [](CUpti_Profiler_Initialize_Params*) {
      return FakeCupti::instance().isEnabled(CUPTI_ACTIVITY_KIND_PCIE) ? CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED
                                                                        : CUPTI_SUCCESS;
    };
    api.getDeviceId = [](CUcontext, uint32_t* device) {
      *device = 0;
      return CUPTI_SUCCESS;
    };
    api.deviceGetChipName = [](CUpti_Device_GetChipName_Params* p) {
      p->pChipName = "GH100";
      return CUPTI_SUCCESS;
    };
    api.getCounterAvailability = [](CUpti_Profiler_GetCounterAvailability_Params* p) {
      p->counterAvailabilityImageSize = 0;
      return CUPTI_SUCCESS;
    };
    api.hostInitialize = [](CUpti_Profiler_Host_Initialize_Params* p) {
      static int host_object = 0;
      p->pHostObject = reinterpret_cast<CUpti_Profiler_Host_Object*>(&host_object);
      ++instance().host_objects;
      return CUPTI_SUCCESS;
    };
    api.hostDeinitialize = [](CUpti_Profiler_Host_Deinitialize_Params*) {
      --instance().host_objects;
      return CUPTI_SUCCESS;
    };
    api.hostConfigAddMetrics = [](CUpti_Profiler_Host_ConfigAddMetrics_Params*) { return CUPTI_SUCCESS; };
    api.hostGetConfigImageSize = [](CUpti_Profiler_Host_GetConfigImageSize_Params* p) {
      p->configImageSize = 64;
      return CUPTI_SUCCESS;
    };
    api.hostGetConfigImage = [](CUpti_Profiler_Host_GetConfigImage_Params*) { return CUPTI_SUCCESS; };
    api.hostGetNumOfPasses = [](CUpti_Profiler_Host_GetNumOfPasses_Params* p) {
      p->numOfPasses = 8;
      return CUPTI_SUCCESS;
    };
    api.hostEvaluateToGpuValues = [](CUpti_Profiler_Host_EvaluateToGpuValues_Params* p) {
      for (size_t i = 0; i < p->numMetrics; ++i)
        p->pMetricValues[i] = 10.0 * static_cast<double>(i + 1) + instance().evaluations;
      ++instance().evaluations;
      return CUPTI_SUCCESS;
    };
    api.enable = [](CUpti_RangeProfiler_Enable_Params* p) {
      static int range_object = 0;
      ++instance().enables;
      if (instance().enable_result != CUPTI_SUCCESS) return instance().enable_result;
      p->pRangeProfilerObject = reinterpret_cast<CUpti_RangeProfiler_Object*>(&range_object);
      return CUPTI_SUCCESS;
    };
    api.disable = [](CUpti_RangeProfiler_Disable_Params*) {
      ++instance().disables;
      return CUPTI_SUCCESS;
    };
    api.setConfig = [](CUpti_RangeProfiler_SetConfig_Params* p) {
      bool kernel_replay = p->replayMode == CUPTI_KernelReplay && p->range == CUPTI_AutoRange;
      return kernel_replay ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
    };
    api.start = [](CUpti_RangeProfiler_Start_Params*) {
      ++instance().starts;
      instance().running = true;
      return CUPTI_SUCCESS;
    };
    api.stop = [](CUpti_RangeProfiler_Stop_Params* p) {
      ++instance().stops;
      instance().running = false;
      p->isAllPassSubmitted = 1;
      return CUPTI_SUCCESS;
    };
    api.decodeData = [](CUpti_RangeProfiler_DecodeData_Params*) {
      ++instance().decodes;
      return CUPTI_SUCCESS;
    };
    api.getCounterDataSize = [](CUpti_RangeProfiler_GetCounterDataSize_Params* p) {
      p->counterDataSize = 256;
      return CUPTI_SUCCESS;
    };
    api.counterDataImageInitialize = [](CUpti_RangeProfiler_CounterDataImage_Initialize_Params*) {
      return CUPTI_SUCCESS;
    };
    api.getCounterDataInfo = [](CUpti_RangeProfiler_GetCounterDataInfo_Params* p) {
      p->numTotalRanges = 1;
      return CUPTI_SUCCESS;
    };
    api.getResultString = [](CUptiResult result, const char** text) {
      *text = result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES ? "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" : "CUPTI_ERROR";
      return CUPTI_SUCCESS;
    };
    (void)host;
    (void)profiler;
    return api;
  }
};

CUcontext fakeContext() {
  return reinterpret_cast<CUcontext>(0x1000);
}

// cudaLaunchKernel of `symbol`, which calls cuLaunchKernel inside (another correlation id); returns
// whether the range profiler ran while the launch was in flight.
bool launch(const char* symbol, uint32_t correlation) {
  CUpti_CallbackData runtime{};
  runtime.symbolName = symbol;
  runtime.context = fakeContext();
  runtime.correlationId = correlation;
  CUpti_CallbackData driver = runtime;
  driver.correlationId = correlation + 1'000'000;
  auto& cupti = FakeCupti::instance();
  runtime.callbackSite = CUPTI_API_ENTER;
  cupti.call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &runtime);
  driver.callbackSite = CUPTI_API_ENTER;
  cupti.call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &driver);
  bool profiled = FakeRangeProfiler::instance().running;
  driver.callbackSite = CUPTI_API_EXIT;
  cupti.call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &driver);
  runtime.callbackSite = CUPTI_API_EXIT;
  cupti.call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &runtime);
  return profiled;
}

CUpti_ActivityKernel10 kernelRecord(const char* name, uint32_t correlation, uint64_t start, uint64_t duration) {
  return gpuxray::testing::kernelActivity(
      {.name = name, .correlation = correlation, .start = start, .duration = duration, .registers = 32});
}

struct Capture {
  TempDir dir;
  inject::CaptureConfig config;
  std::vector<std::string> logged;

  Capture() {
    FakeCupti::instance().reset();
    FakeRangeProfiler::instance().reset();
    config.output_dir = (dir.path() / "traces").string();
    config.flush_interval_ms = 20;
    config.kernel_metrics = "gemm";
    config.kernel_metrics_count = 2;
  }

  std::unique_ptr<inject::CaptureSession> session(bool with_range_profiler = true) {
    inject::CaptureDependencies deps;
    deps.cupti = FakeCupti::instance().api();
    deps.cupti_path = "/fake/libcupti.so.13";
    deps.cupti_api_version = 130001;
    if (with_range_profiler) deps.kernel_profiler = FakeRangeProfiler::api();
    std::map<std::string, std::string> environment = {{"RANK", "0"}, {"WORLD_SIZE", "1"}};
    deps.environment = [environment](const char* name) -> const char* {
      auto it = environment.find(name);
      return it == environment.end() ? nullptr : it->second.c_str();
    };
    deps.log = [this](const std::string& line) { logged.push_back(line); };
    return std::make_unique<inject::CaptureSession>(std::move(deps), config);
  }
};

std::vector<format::KernelMetricsRecord> kernelMetricsIn(const std::string& path, std::vector<std::string>* warnings) {
  format::TraceReader reader(path);
  std::vector<format::KernelMetricsRecord> all;
  format::EventBatch batch;
  while (reader.next(batch)) all.insert(all.end(), batch.kernel_metrics.begin(), batch.kernel_metrics.end());
  if (warnings != nullptr && reader.trailer()) *warnings = reader.trailer()->warnings;
  return all;
}

}  // namespace

TEST_CASE("kernel metrics: the first N launches of matching kernels are profiled and their counters land on them",
          "[kernel-metrics]") {
  Capture capture;
  auto session = capture.session();
  REQUIRE(session->start());
  auto& cupti = FakeCupti::instance();
  CHECK(
      cupti.enabled_callbacks.contains({CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000}));
  CHECK(cupti.enabled_callbacks.contains({CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx}));

  const char* gemm = "_Z11gemm_kernelPKfS0_Pfi";
  const char* relu = "_Z11relu_kernelPfi";
  CHECK(launch(gemm, 1));
  CHECK_FALSE(launch(relu, 2));
  CHECK(launch(gemm, 3));
  CHECK_FALSE(launch(gemm, 4));  // past --kernel-metrics-count 2
  uint64_t t = 1'000'000;
  // Replayed launches come without times, as CUPTI 13.0 delivers them on an H200.
  cupti.queue(kernelRecord(gemm, 1, 0, 0));
  cupti.queue(kernelRecord(relu, 2, t + 9'000'000, 2'000));
  cupti.queue(kernelRecord(gemm, 3, 0, 0));
  cupti.queue(kernelRecord(gemm, 4, t + 19'000'000, 5'000));
  session->stop(format::CaptureEnd::kProcessExit, "exit");

  auto& profiler = FakeRangeProfiler::instance();
  CHECK(profiler.enables == 1);  // one context
  CHECK(profiler.starts == 2);
  CHECK(profiler.stops == 2);
  CHECK(profiler.decodes == 2);
  std::vector<std::string> warnings;
  auto measured = kernelMetricsIn(session->tracePath(), &warnings);
  REQUIRE(measured.size() == 2);
  CHECK(measured[0].correlation_id == 1);  // the runtime call's id, which the kernel record carries
  CHECK(measured[1].correlation_id == 3);
  CHECK(measured[0].passes == 8);
  CHECK(measured[0].achieved_occupancy_pct == 10.0);  // the first metric of the set
  CHECK(measured[1].achieved_occupancy_pct == 11.0);
  CHECK(measured[0].gpu_duration_ns == 130.0);  // the 13th
  // The one thing left out: PCIe topology, which CUPTI cannot record beside its range profiler.
  REQUIRE(warnings.size() == 1);
  CHECK_THAT(warnings[0], Catch::StartsWith("PCIe topology not recorded"));
  CHECK_FALSE(cupti.isEnabled(CUPTI_ACTIVITY_KIND_PCIE));
  CHECK(cupti.isEnabled(CUPTI_ACTIVITY_KIND_NVLINK));

  analysis::SessionOptions options;
  options.paths = {capture.config.output_dir};
  options.align = false;
  analysis::Session loaded(options);
  const auto& rank = loaded.run().ranks[0];
  REQUIRE(rank.profiled_kernels.size() == 2);
  CHECK(rank.profiled_kernels[0].launch.correlation_id == 1);
  CHECK(rank.profiled_kernels[0].launch.duration() == 0);  // its time is its gpu__time_duration
  CHECK(rank.profiled_kernels[1].launch.correlation_id == 3);
  auto totals = analysis::computeActivityTotals(loaded.input());
  int64_t total_time = 0;
  uint64_t total_count = 0;
  for (const auto& a : totals.gpu) total_time += a.time_ns, total_count += a.count;
  CHECK(total_count == 2);
  CHECK(total_time == 7'000);
}

TEST_CASE("kernel metrics: a range profiler CUPTI refuses is one line, and launches run unmeasured",
          "[kernel-metrics]") {
  Capture capture;
  FakeRangeProfiler::instance().enable_result = CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  auto session = capture.session();
  REQUIRE(session->start());
  CHECK_FALSE(launch("_Z11gemm_kernelPf", 1));
  CHECK_FALSE(launch("_Z11gemm_kernelPf", 2));
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  CHECK(FakeRangeProfiler::instance().enables == 1);  // tried once per context
  std::vector<std::string> warnings;
  CHECK(kernelMetricsIn(session->tracePath(), &warnings).empty());
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(warnings[1], Catch::StartsWith("kernel metrics are off on device 0: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"));
  CHECK(warnings[1].find('\n') == std::string::npos);
  CHECK(FakeRangeProfiler::instance().host_objects == 0);
}

TEST_CASE("kernel metrics: a libcupti without the range profiler is one line", "[kernel-metrics]") {
  Capture capture;
  auto session = capture.session(/*with_range_profiler=*/false);
  REQUIRE(session->start());
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  std::vector<std::string> warnings;
  CHECK(kernelMetricsIn(session->tracePath(), &warnings).empty());
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(warnings[1], Catch::StartsWith("kernel metrics are off: this libcupti lacks the range profiler API"));
}

TEST_CASE("kernel metrics: without a pattern, the kernels with the most time in the first 2 s are measured",
          "[kernel-metrics]") {
  Capture capture;
  capture.config.kernel_metrics.clear();
  capture.config.kernel_metrics_auto = true;
  auto session = capture.session();
  REQUIRE(session->start());
  const char* gemm = "_Z11gemm_kernelPKfS0_Pfi";
  const char* relu = "_Z11relu_kernelPfi";
  CHECK_FALSE(launch(gemm, 1));  // nothing chosen before 2 s of kernels
  auto& cupti = FakeCupti::instance();
  uint64_t t = 1'000'000'000;
  cupti.queue(kernelRecord(gemm, 1, t, 1'000'000'000));
  const char* others[] = {"_Z2k1v", "_Z2k2v", "_Z2k3v", "_Z2k4v", "_Z2k5v"};
  uint64_t at = t + 1'000'000'000;
  for (uint32_t i = 0; i < 5; ++i) {
    uint64_t duration = 50'000'000 * (5 - i);  // k1 250 ms ... k5 50 ms
    cupti.queue(kernelRecord(others[i], 2 + i, at, duration));
    at += duration;
  }
  cupti.queue(kernelRecord(relu, 9, at, 1'000'000));
  cupti.queue(kernelRecord(gemm, 10, t + 1'999'000'000, 2'000'000));  // ends past the first 2 s
  for (int i = 0; i < 100 && !launch(gemm, 100 + static_cast<uint32_t>(i)); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(FakeRangeProfiler::instance().starts == 1);
  CHECK(launch("_Z2k4v", 200));
  CHECK_FALSE(launch("_Z2k5v", 201));  // sixth by time
  CHECK_FALSE(launch(relu, 202));
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  std::vector<std::string> warnings;
  CHECK(kernelMetricsIn(session->tracePath(), &warnings).size() == 2);
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(warnings[1],
             Catch::StartsWith("kernel metrics: measuring the 5 kernels with the most time in the first "
                               "2 s of kernels: gemm_kernel(float const*, float const*, float*, int), k1()"));
}

TEST_CASE("kernel metrics: without a pattern, a run shorter than 2 s of kernels measures nothing and says so",
          "[kernel-metrics]") {
  Capture capture;
  capture.config.kernel_metrics.clear();
  capture.config.kernel_metrics_auto = true;
  auto session = capture.session();
  REQUIRE(session->start());
  FakeCupti::instance().queue(kernelRecord("_Z2k1v", 1, 1'000'000, 5'000));
  CHECK_FALSE(launch("_Z2k1v", 2));
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  std::vector<std::string> warnings;
  CHECK(kernelMetricsIn(session->tracePath(), &warnings).empty());
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(warnings[1], Catch::StartsWith("kernel metrics: no kernel measured: the kernels ran for less than 2 s"));
}
