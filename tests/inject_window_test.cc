// Capture windows: the state machine on its own, then through a capture session with the fake
// CUPTI (records before, inside and after each window; the header and batches that describe them).

#include <generated_nvtx_meta.h>
#include <pthread.h>
#include <time.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <thread>

#include "inject/capture_config.h"
#include "inject/capture_session.h"
#include "inject/capture_window.h"
#include "proto/capture_windows.h"
#include "proto/trace_reader.h"
#include "tests/support/fake_cupti.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace gpuxray;
using format::WindowEdge;
using gpuxray::testing::FakeCupti;
using gpuxray::testing::TempDir;

inject::EnvironmentLookup environmentOf(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> const char* {
    auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  };
}

uint64_t realtimeNow() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

// Makes sure consecutive clock readings differ (the fake CUPTI's clock is CLOCK_REALTIME).
uint64_t nowAfterAWhile() {
  std::this_thread::sleep_for(std::chrono::microseconds(200));
  return realtimeNow();
}

CUpti_ActivityKernel10 kernelAt(uint32_t correlation, uint64_t start) {
  return gpuxray::testing::kernelActivity({.name = "k",
                                           .correlation = correlation,
                                           .start = start,
                                           .duration = 100,
                                           .grid_x = 1,
                                           .block_x = 1,
                                           .registers = 0});
}

CUpti_ActivityAPI launchAt(uint32_t correlation, uint64_t start) {
  return gpuxray::testing::launchActivity(correlation, start, 50);
}

struct NamedRange {
  std::string name;
  uint64_t start_ns;
  uint64_t end_ns;
  uint64_t thread_id;
};

struct WindowedFile {
  format::FileHeader header;
  std::vector<uint32_t> kernels;  // correlation ids
  std::vector<uint32_t> api_calls;
  std::vector<format::CaptureWindow> windows;
  std::vector<NamedRange> nvtx_ranges;
};

WindowedFile readWindowed(const std::string& path) {
  format::TraceReader reader(path);
  WindowedFile file{reader.header(), {}, {}, reader.header().capture_windows, {}};
  format::EventBatch batch;
  while (reader.next(batch)) {
    for (const auto& r : batch.nvtx_events) {
      if (r.kind == format::NvtxEventKind::kRange)
        file.nvtx_ranges.push_back({std::string(reader.strings().get(r.name_id)), r.start_ns, r.end_ns, r.thread_id});
    }
    for (const auto& k : batch.kernels) file.kernels.push_back(k.correlation_id);
    for (const auto& c : batch.api_calls) file.api_calls.push_back(c.correlation_id);
    file.windows.insert(file.windows.end(), batch.capture_windows.begin(), batch.capture_windows.end());
  }
  return file;
}

struct WindowFixture {
  TempDir dir;
  inject::CaptureConfig config;
  std::vector<std::string> logged;

  WindowFixture() {
    FakeCupti::instance().reset();
    config.output_dir = (dir.path() / "traces").string();
    config.flush_interval_ms = 20;
  }
  std::unique_ptr<inject::CaptureSession> session() {
    inject::CaptureDependencies deps;
    deps.cupti = FakeCupti::instance().api();
    deps.cupti_path = "/fake/libcupti.so.13";
    deps.cupti_api_version = 130001;
    deps.environment = environmentOf({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
    deps.log = [this](const std::string& line) { logged.push_back(line); };
    return std::make_unique<inject::CaptureSession>(std::move(deps), config);
  }
};

bool kernelsEnabled() {
  return FakeCupti::instance().isEnabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
}

}  // namespace

TEST_CASE("window values: durations, capture ranges and step ranges", "[window]") {
  CHECK(format::parseDurationNs("10s") == 10'000'000'000u);
  CHECK(format::parseDurationNs("1.5s") == 1'500'000'000u);
  CHECK(format::parseDurationNs("250ms") == 250'000'000u);
  CHECK(format::parseDurationNs("2m") == 120'000'000'000u);
  CHECK(format::parseDurationNs("7") == 7'000'000'000u);
  CHECK_FALSE(format::parseDurationNs("-1s"));
  CHECK_FALSE(format::parseDurationNs("10 parsecs"));
  CHECK_FALSE(format::parseDurationNs(""));
  format::CaptureRange range;
  CHECK_FALSE(format::parseCaptureRange("nvtx:train@MyLib", range));
  CHECK(range.kind == format::CaptureRange::Kind::kNvtx);
  CHECK(range.nvtx_name == "train");
  CHECK(range.nvtx_domain == "MyLib");
  CHECK(format::parseCaptureRange("gpu", range) == "cudaProfilerApi, nvtx:NAME[@DOMAIN] or trigger");
  int64_t first = 0;
  int64_t last = 0;
  CHECK_FALSE(format::parseStepRange("100-110", first, last));
  CHECK((first == 100 && last == 110));
  CHECK(format::parseStepRange("10-5", first, last) == "a step range A-B with A <= B");
}

TEST_CASE("bad window variables are one warning each and the whole run is captured", "[window]") {
  auto config = inject::readCaptureConfig(
      environmentOf({{"GPUXRAY_STEPS", "10-5"}, {"GPUXRAY_DELAY", "-1s"}, {"GPUXRAY_CAPTURE_RANGE", "gpu"}}));
  REQUIRE(config.warnings.size() == 3);
  CHECK(config.warnings[0] == "GPUXRAY_DELAY='-1s' is not a duration such as 30s, 500ms or 2m; using no delay");
  CHECK(config.warnings[1] ==
        "GPUXRAY_CAPTURE_RANGE='gpu' is not cudaProfilerApi, nvtx:NAME[@DOMAIN] or trigger; using the whole run");
  CHECK(config.warnings[2] == "GPUXRAY_STEPS='10-5' is not a step range A-B with A <= B; using the whole run");
  CHECK(config.window.wholeRun());

  auto good = inject::readCaptureConfig(environmentOf({{"GPUXRAY_CAPTURE_RANGE", "nvtx:train"}}));
  CHECK(good.warnings.empty());
  CHECK(good.window.range_count == 1);
  CHECK(good.window.describe() == "NVTX range 'train', 1 range");
}

TEST_CASE("a delayed window opens and closes at the planned times, whenever the clock ticks", "[window]") {
  inject::WindowPlan plan;
  plan.delay_ns = 1000;
  plan.duration_ns = 500;
  inject::CaptureWindows windows(plan, 10'000);
  CHECK_FALSE(windows.isOpen());
  CHECK(windows.nextTimedEdge() == 11'000);
  windows.tick(10'900);
  CHECK_FALSE(windows.isOpen());
  windows.tick(11'200);
  CHECK(windows.isOpen());
  CHECK(inject::captureWindowOpen());
  CHECK(windows.nextTimedEdge() == 11'500);
  windows.tick(12'000);
  CHECK_FALSE(windows.isOpen());
  CHECK_FALSE(inject::captureWindowOpen());
  windows.snapshot();
  CHECK_FALSE(windows.contains(10'999));
  CHECK(windows.contains(11'000));
  CHECK(windows.contains(11'499));
  CHECK_FALSE(windows.contains(11'500));
  auto closed = windows.takeClosed();
  REQUIRE(closed.size() == 1);
  CHECK(closed[0] == format::CaptureWindow{11'000, 11'500, WindowEdge::kDelay, WindowEdge::kDuration, ""});
  CHECK(windows.takeClosed().empty());
}

TEST_CASE("cudaProfilerStart/Stop ranges repeat; a count limits them", "[window]") {
  inject::WindowPlan plan;
  plan.range.kind = format::CaptureRange::Kind::kProfilerApi;
  SECTION("every range") {
    inject::CaptureWindows windows(plan, 0);
    windows.profilerStop(50);  // a stop with nothing open changes nothing
    windows.profilerStart(100);
    windows.profilerStart(150);  // the runtime's call made the driver's
    windows.profilerStop(200);
    windows.profilerStart(300);
    windows.profilerStop(400);
    auto closed = windows.takeClosed();
    REQUIRE(closed.size() == 2);
    CHECK(closed[0] == format::CaptureWindow{100, 200, WindowEdge::kProfilerApi, WindowEdge::kProfilerApi, ""});
    CHECK(closed[1].start_ns == 300);
    windows.snapshot();
    CHECK(windows.contains(100));
    CHECK_FALSE(windows.contains(250));
    CHECK(windows.contains(399));
  }
  SECTION("the first one, cut at --duration; the capture's end closes what is open") {
    plan.range_count = 1;
    plan.duration_ns = 50;
    inject::CaptureWindows windows(plan, 0);
    windows.profilerStart(100);
    windows.tick(160);
    CHECK_FALSE(windows.isOpen());
    windows.profilerStart(300);
    CHECK_FALSE(windows.isOpen());
    auto closed = windows.takeClosed();
    REQUIRE(closed.size() == 1);
    CHECK(closed[0] == format::CaptureWindow{100, 150, WindowEdge::kProfilerApi, WindowEdge::kDuration, ""});
  }
}

TEST_CASE("an NVTX capture range opens at its push and closes at its own pop", "[window]") {
  inject::WindowPlan plan;
  plan.range = {format::CaptureRange::Kind::kNvtx, "train", ""};
  plan.range_count = 2;
  inject::CaptureWindows windows(plan, 0);
  windows.rangePush(nullptr, "setup", 10);
  windows.rangePop(nullptr, 20);
  windows.rangePush(nullptr, "train", 30);
  CHECK(windows.isOpen());
  windows.rangePush(nullptr, "train", 40);  // nested: the outer one holds the window
  windows.rangePop(nullptr, 50);
  CHECK(windows.isOpen());
  windows.rangePush(nullptr, "forward", 55);
  windows.rangePop(nullptr, 58);
  windows.rangePop(nullptr, 60);
  CHECK_FALSE(windows.isOpen());
  // Another thread's pops do not close this thread's range.
  windows.rangePush(nullptr, "train", 70);
  std::thread([&] { windows.rangePop(nullptr, 75); }).join();
  CHECK(windows.isOpen());
  windows.rangePop(nullptr, 80);
  windows.rangePush(nullptr, "train", 90);  // a third range: past the count
  CHECK_FALSE(windows.isOpen());
  auto closed = windows.takeClosed();
  REQUIRE(closed.size() == 2);
  CHECK(closed[0] == format::CaptureWindow{30, 60, WindowEdge::kNvtxRange, WindowEdge::kNvtxRange, "train"});
  CHECK(closed[1] == format::CaptureWindow{70, 80, WindowEdge::kNvtxRange, WindowEdge::kNvtxRange, "train"});
}

TEST_CASE("an NVTX start/end range is a capture range too: process-wide, closed by its own end", "[window]") {
  inject::WindowPlan plan;
  plan.range = {format::CaptureRange::Kind::kNvtx, "train", ""};
  plan.range_count = 2;
  inject::CaptureWindows windows(plan, 0);
  windows.rangeStart(nullptr, "setup", 1, 10);
  windows.rangeEnd(nullptr, 1, 20);
  CHECK_FALSE(windows.isOpen());
  windows.rangeStart(nullptr, "train", 2, 30);
  CHECK(windows.isOpen());
  // Overlapping ranges, pushes and pops, and another range's end leave it open.
  windows.rangeStart(nullptr, "train", 3, 35);
  windows.rangePush(nullptr, "forward", 40);
  windows.rangePop(nullptr, 45);
  windows.rangeEnd(nullptr, 3, 50);
  windows.rangeEnd(nullptr, 99, 52);
  CHECK(windows.isOpen());
  // Its end, on another thread.
  std::thread([&] { windows.rangeEnd(nullptr, 2, 60); }).join();
  CHECK_FALSE(windows.isOpen());
  // A pop does not close a window a start opened; a push range's window is not closed by an end.
  windows.rangeStart(nullptr, "train", 4, 70);
  windows.rangePop(nullptr, 75);
  CHECK(windows.isOpen());
  windows.rangeEnd(nullptr, 4, 80);
  windows.rangeStart(nullptr, "train", 5, 90);  // past the count of two
  CHECK_FALSE(windows.isOpen());
  auto closed = windows.takeClosed();
  REQUIRE(closed.size() == 2);
  CHECK(closed[0] == format::CaptureWindow{30, 60, WindowEdge::kNvtxRange, WindowEdge::kNvtxRange, "train"});
  CHECK(closed[1] == format::CaptureWindow{70, 80, WindowEdge::kNvtxRange, WindowEdge::kNvtxRange, "train"});

  SECTION("in a named domain, with the domain's own end") {
    inject::WindowPlan named;
    named.range = {format::CaptureRange::Kind::kNvtx, "train", "MyLib"};
    inject::CaptureWindows in_domain(named, 0);
    int handle = 0;
    in_domain.rangeStart(&handle, "train", 7, 10);  // before the domain is known
    CHECK_FALSE(in_domain.isOpen());
    in_domain.domainCreated("MyLib", &handle);
    in_domain.rangeStart(nullptr, "train", 8, 20);  // the default domain
    CHECK_FALSE(in_domain.isOpen());
    in_domain.rangeStart(&handle, "train", 9, 30);
    CHECK(in_domain.isOpen());
    in_domain.rangeEnd(nullptr, 9, 35);  // the same id in another domain
    CHECK(in_domain.isOpen());
    in_domain.rangeEnd(&handle, 9, 40);
    CHECK_FALSE(in_domain.isOpen());
  }
}

TEST_CASE("an NVTX capture range in a named domain matches only that domain", "[window]") {
  inject::WindowPlan plan;
  plan.range = {format::CaptureRange::Kind::kNvtx, "train", "MyLib"};
  plan.range_count = 0;
  inject::CaptureWindows windows(plan, 0);
  int other_domain = 0;
  int my_domain = 0;
  windows.domainCreated("Other", &other_domain);
  windows.domainCreated("MyLib", &my_domain);
  windows.rangePush(nullptr, "train", 10);
  windows.rangePush(&other_domain, "train", 20);
  CHECK_FALSE(windows.isOpen());
  windows.rangePush(&my_domain, "train", 30);
  CHECK(windows.isOpen());
  windows.rangePop(nullptr, 40);
  windows.rangePop(&other_domain, 45);
  CHECK(windows.isOpen());
  windows.rangePop(&my_domain, 50);
  CHECK_FALSE(windows.isOpen());
}

TEST_CASE("steps A-B (--steps) open as step A begins and closes as step B ends", "[window]") {
  inject::WindowPlan plan;
  plan.steps = std::pair<int64_t, int64_t>{2, 3};
  SECTION("ProfilerStep#N") {
    inject::CaptureWindows windows(plan, 0);
    for (int64_t step = 0; step < 6; ++step) {
      windows.rangePush(nullptr, ("ProfilerStep#" + std::to_string(step)).c_str(), 100 * static_cast<uint64_t>(step));
      windows.rangePush(nullptr, "aten::mm", 100 * static_cast<uint64_t>(step) + 10);
      windows.rangePop(nullptr, 100 * static_cast<uint64_t>(step) + 20);
      windows.rangePop(nullptr, 100 * static_cast<uint64_t>(step) + 90);
    }
    auto closed = windows.takeClosed();
    REQUIRE(closed.size() == 1);
    CHECK(closed[0] == format::CaptureWindow{200, 390, WindowEdge::kStep, WindowEdge::kStep, "ProfilerStep#2"});
  }
  SECTION("the range that opened the window is kept for the file: CUPTI records it before the kinds are on") {
    inject::CaptureWindows windows(plan, 0);
    windows.rangePush(nullptr, "forward", 150);
    windows.rangePush(nullptr, "ProfilerStep#2", 200);
    CHECK(windows.takeOpeningRanges(false).empty());  // not ended yet
    windows.rangePop(nullptr, 290);
    windows.rangePush(nullptr, "ProfilerStep#3", 300);  // inside the window: CUPTI's own record
    windows.rangePop(nullptr, 390);
    windows.rangePop(nullptr, 400);
    auto ranges = windows.takeOpeningRanges(true);
    REQUIRE(ranges.size() == 1);
    CHECK(ranges[0].name == "ProfilerStep#2");
    CHECK(ranges[0].domain.empty());
    CHECK(ranges[0].start_ns == 200);
    CHECK(ranges[0].end_ns == 290);
    CHECK(ranges[0].depth == 1);
    CHECK(ranges[0].thread_id == static_cast<uint32_t>(pthread_self()));
  }
  SECTION("an opening range still open at the end is returned as never ended") {
    inject::CaptureWindows windows(plan, 0);
    windows.rangePush(nullptr, "ProfilerStep#2", 200);
    CHECK(windows.takeOpeningRanges(false).empty());
    auto ranges = windows.takeOpeningRanges(true);
    REQUIRE(ranges.size() == 1);
    CHECK(ranges[0].end_ns == 0);
  }
  SECTION("a marker of one's own, counted when it has no number") {
    plan.step_marker = "^iteration$";
    inject::CaptureWindows windows(plan, 0);
    for (uint64_t step = 0; step < 6; ++step) {
      windows.rangePush(nullptr, "iteration", 100 * step);
      windows.rangePop(nullptr, 100 * step + 90);
    }
    auto closed = windows.takeClosed();
    REQUIRE(closed.size() == 1);
    CHECK(closed[0].start_ns == 200);
    CHECK(closed[0].end_ns == 390);
  }
}

namespace {

// One data-parallel step as DDP issues it: the forward pass reduces nothing, then the gradient
// buckets are all-reduced during backward (a small first bucket, two full ones, the rest), with one
// all-reduce of another (tensor-parallel) communicator among them.
int kDataParallel = 0;
int kTensorParallel = 0;
void ddpStep(inject::CaptureWindows& windows, uint64_t step_start) {
  windows.collectiveStarted(&kDataParallel, 1u << 20, step_start + 400);
  windows.collectiveStarted(&kTensorParallel, 4096, step_start + 450);
  windows.collectiveStarted(&kDataParallel, 25u << 20, step_start + 500);
  windows.collectiveStarted(&kDataParallel, 25u << 20, step_start + 600);
  windows.collectiveStarted(&kDataParallel, 10u << 20, step_start + 700);
}

}  // namespace

TEST_CASE("steps A-B without step ranges: counted by the repeating all-reduce", "[window]") {
  inject::WindowPlan plan;
  plan.steps = std::pair<int64_t, int64_t>{3, 4};
  inject::CaptureWindows windows(plan, 0);
  // A warm-up all-reduce (the loss of a first batch) that is not part of the pattern.
  windows.collectiveStarted(&kDataParallel, 8, 50);
  ddpStep(windows, 0);
  ddpStep(windows, 1000);
  CHECK(windows.collectiveStep() == -1);  // two periods are not yet a pattern
  ddpStep(windows, 2000);
  // Three periods: the pattern (5 all-reduces) is found, steps numbered from the first that fits it.
  CHECK(windows.collectiveStep() == 2);
  CHECK_FALSE(windows.isOpen());
  ddpStep(windows, 3000);
  CHECK(windows.isOpen());
  CHECK(windows.collectiveStep() == 3);
  // An all-reduce off the pattern (an evaluation's) is skipped.
  windows.collectiveStarted(&kDataParallel, 12345, 3800);
  ddpStep(windows, 4000);
  CHECK(windows.isOpen());
  ddpStep(windows, 5000);
  CHECK_FALSE(windows.isOpen());
  ddpStep(windows, 6000);
  auto closed = windows.takeClosed();
  REQUIRE(closed.size() == 1);
  // From the all-reduce that begins step 3 (after the forward pass's pause) to the one of step 5.
  CHECK(closed[0] == format::CaptureWindow{3400, 5400, WindowEdge::kStep, WindowEdge::kStep, "all-reduce step 3"});
}

TEST_CASE("steps counted by all-reduces: one per step, NVTX steps taking over, and no pattern", "[window]") {
  inject::WindowPlan plan;
  plan.steps = std::pair<int64_t, int64_t>{1, 1};
  SECTION("one all-reduce per step, and a step that began before the pattern was found") {
    inject::CaptureWindows windows(plan, 0);
    for (uint64_t step = 0; step < 3; ++step) windows.collectiveStarted(&kDataParallel, 1u << 26, 100 * step + 90);
    // Found at the third (step 2): step 1 was over, and a window never opens in the past.
    CHECK(windows.collectiveStep() == 2);
    for (uint64_t step = 3; step < 8; ++step) windows.collectiveStarted(&kDataParallel, 1u << 26, 100 * step + 90);
    CHECK(windows.opened() == 0);
  }
  SECTION("one all-reduce per step, steps 4-5") {
    plan.steps = std::pair<int64_t, int64_t>{4, 5};
    inject::CaptureWindows windows(plan, 0);
    for (uint64_t step = 0; step < 8; ++step) windows.collectiveStarted(&kDataParallel, 1u << 26, 100 * step + 90);
    auto closed = windows.takeClosed();
    REQUIRE(closed.size() == 1);
    CHECK(closed[0].start_ns == 490);
    CHECK(closed[0].end_ns == 690);
  }
  SECTION("ProfilerStep ranges, once seen, number the steps") {
    inject::CaptureWindows windows(plan, 0);
    windows.rangePush(nullptr, "ProfilerStep#0", 0);
    windows.rangePop(nullptr, 90);
    for (uint64_t step = 1; step < 8; ++step) ddpStep(windows, 1000 * step);
    CHECK(windows.collectiveStep() == -1);
    CHECK_FALSE(windows.isOpen());
  }
  SECTION("all-reduces that never repeat open nothing, in bounded memory") {
    inject::CaptureWindows windows(plan, 0);
    for (uint64_t i = 0; i < 20000; ++i) windows.collectiveStarted(&kDataParallel, i, i);
    CHECK(windows.collectiveStep() == -1);
    CHECK(windows.opened() == 0);
  }
  SECTION("a step marker of one's own: the job marks its steps, all-reduces are not counted") {
    plan.step_marker = "^iteration$";
    inject::CaptureWindows windows(plan, 0);
    windows.countStepsByCollectives([] { return uint64_t{0}; });
    for (int i = 0; i < 10; ++i) inject::noteNcclCollective(&kDataParallel, "AllReduce", 100, "ncclFloat32");
    CHECK(windows.collectiveStep() == -1);
  }
}

TEST_CASE("NCCL's collective starts reach the step counter; only all-reduces count", "[window]") {
  inject::WindowPlan plan;
  plan.steps = std::pair<int64_t, int64_t>{3, 3};
  uint64_t clock = 0;
  {
    inject::CaptureWindows windows(plan, 0);
    windows.countStepsByCollectives([&clock] { return clock; });
    for (int step = 0; step < 5; ++step) {
      clock = 1000u * static_cast<uint64_t>(step) + 500;
      inject::noteNcclCollective(&kDataParallel, "AllGather", 4096, "ncclBfloat16");
      inject::noteNcclCollective(&kDataParallel, "AllReduce", 1u << 20, "ncclBfloat16");
      clock += 100;
      inject::noteNcclCollective(&kDataParallel, "AllReduce", 1u << 20, "ncclFloat32");
    }
    // Two all-reduces a step (their types differ), found at step 2's second; AllGathers not counted.
    CHECK(windows.collectiveStep() == 4);
    auto closed = windows.takeClosed();
    REQUIRE(closed.size() == 1);
    CHECK(closed[0] == format::CaptureWindow{3500, 4500, WindowEdge::kStep, WindowEdge::kStep, "all-reduce step 3"});
  }
  // The capture is gone: a collective start is one atomic load and nothing else.
  inject::noteNcclCollective(&kDataParallel, "AllReduce", 1u << 20, "ncclFloat32");
}

TEST_CASE("a trigger opens a window for its duration", "[window]") {
  inject::WindowPlan plan;
  plan.range.kind = format::CaptureRange::Kind::kProfilerApi;
  inject::CaptureWindows windows(plan, 0);
  CHECK(windows.trigger(1000, 500));
  CHECK(windows.isOpen());
  windows.tick(1600);
  CHECK_FALSE(windows.isOpen());
  auto closed = windows.takeClosed();
  REQUIRE(closed.size() == 1);
  CHECK(closed[0] ==
        format::CaptureWindow{1000, 1500, WindowEdge::kTrigger, WindowEdge::kTrigger, "trigger for 500 ns"});
}

TEST_CASE("cudaProfilerApi through a capture: only records inside the ranges reach the file", "[window]") {
  WindowFixture fixture;
  fixture.config.window.range.kind = format::CaptureRange::Kind::kProfilerApi;
  auto session = fixture.session();
  REQUIRE(session->start());
  auto& fake = FakeCupti::instance();
  CHECK_FALSE(kernelsEnabled());
  CHECK(fake.enabled_kinds.count(CUPTI_ACTIVITY_KIND_NAME) == 1);
  CHECK(fake.enabled_callbacks.count({CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000}) ==
        1);

  uint64_t before = nowAfterAWhile();
  fake.callApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_ENTER);
  fake.callApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_EXIT);
  CHECK(kernelsEnabled());
  CHECK(fake.runtime_disabled.count(CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020) == 1);
  uint64_t first_inside = nowAfterAWhile();
  fake.callApi(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000, CUPTI_API_ENTER);
  uint64_t between = nowAfterAWhile();
  fake.callApi(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_API_EXIT);
  uint64_t second_inside = nowAfterAWhile();
  fake.callApi(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, CUPTI_API_ENTER);
  uint64_t after = nowAfterAWhile();

  fake.queue(kernelAt(1, before));
  fake.queue(launchAt(1, before));
  fake.queue(kernelAt(2, first_inside));
  fake.queue(launchAt(2, first_inside));
  fake.queue(kernelAt(3, between));
  fake.queue(kernelAt(4, second_inside));
  fake.queue(kernelAt(5, after));
  // Once the windows have been closed a while, their kinds are switched off.
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  CHECK_FALSE(kernelsEnabled());
  session->stop(format::CaptureEnd::kProcessExit, "exit");

  auto file = readWindowed(session->tracePath());
  CHECK(file.header.capture_window_plan == "cudaProfilerStart/Stop, every range");
  CHECK(file.kernels == std::vector<uint32_t>{2, 4});
  CHECK(file.api_calls == std::vector<uint32_t>{2});
  REQUIRE(file.windows.size() == 2);
  CHECK(file.windows[0].started_by == WindowEdge::kProfilerApi);
  CHECK(file.windows[0].ended_by == WindowEdge::kProfilerApi);
  CHECK((file.windows[0].start_ns > before && file.windows[0].start_ns < first_inside));
  CHECK((file.windows[1].start_ns > between && file.windows[1].end_ns < after));
  CHECK(fixture.logged.empty());
}

TEST_CASE("an NVTX range through a capture, from CUPTI's NVTX callbacks", "[window]") {
  WindowFixture fixture;
  fixture.config.window.range = {format::CaptureRange::Kind::kNvtx, "train", ""};
  fixture.config.window.range_count = 1;
  auto session = fixture.session();
  REQUIRE(session->start());
  auto& fake = FakeCupti::instance();
  auto push = [&](const char* name) {
    nvtxRangePushA_params params{name};
    CUpti_NvtxData data{"nvtxRangePushA", &params, nullptr};
    fake.call(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePushA, &data);
  };
  auto pop = [&] {
    CUpti_NvtxData data{"nvtxRangePop", nullptr, nullptr};
    fake.call(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangePop, &data);
  };
  uint64_t before = nowAfterAWhile();
  push("train");
  uint64_t inside = nowAfterAWhile();
  CHECK(kernelsEnabled());
  pop();
  uint64_t after = nowAfterAWhile();
  push("train");  // past the count of one
  pop();
  fake.queue(kernelAt(1, before));
  fake.queue(kernelAt(2, inside));
  fake.queue(kernelAt(3, after));
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  auto file = readWindowed(session->tracePath());
  CHECK(file.kernels == std::vector<uint32_t>{2});
  REQUIRE(file.windows.size() == 1);
  CHECK(file.windows[0].detail == "train");
  CHECK(file.windows[0].started_by == WindowEdge::kNvtxRange);
  // The range that opened the window is in the file, from its push to its pop, on this thread.
  REQUIRE(file.nvtx_ranges.size() == 1);
  CHECK(file.nvtx_ranges[0].name == "train");
  CHECK(file.nvtx_ranges[0].start_ns > before);
  CHECK(file.nvtx_ranges[0].start_ns < inside);
  CHECK(file.nvtx_ranges[0].end_ns > inside);
  CHECK(file.nvtx_ranges[0].end_ns < after);
  CHECK(file.nvtx_ranges[0].thread_id == static_cast<uint32_t>(pthread_self()));
}

TEST_CASE("an NVTX start/end range through a capture, from CUPTI's NVTX callbacks", "[window]") {
  WindowFixture fixture;
  fixture.config.window.range = {format::CaptureRange::Kind::kNvtx, "epoch", ""};
  fixture.config.window.range_count = 1;
  auto session = fixture.session();
  REQUIRE(session->start());
  auto& fake = FakeCupti::instance();
  CHECK(fake.enabled_callbacks.contains({CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangeStartA}));
  CHECK(fake.enabled_callbacks.contains({CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangeEnd}));
  // CUPTI's callback carries the id the start returns; the end names it.
  auto start = [&](const char* name, nvtxRangeId_t id) {
    nvtxRangeStartA_params params{name};
    CUpti_NvtxData data{"nvtxRangeStartA", &params, &id};
    fake.call(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangeStartA, &data);
  };
  auto end = [&](nvtxRangeId_t id) {
    nvtxRangeEnd_params params{id};
    CUpti_NvtxData data{"nvtxRangeEnd", &params, nullptr};
    fake.call(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_nvtxRangeEnd, &data);
  };
  uint64_t before = nowAfterAWhile();
  start("epoch", 41);
  uint64_t inside = nowAfterAWhile();
  CHECK(kernelsEnabled());
  std::thread([&] { end(41); }).join();
  uint64_t after = nowAfterAWhile();
  fake.queue(kernelAt(1, before));
  fake.queue(kernelAt(2, inside));
  fake.queue(kernelAt(3, after));
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  auto file = readWindowed(session->tracePath());
  CHECK(file.kernels == std::vector<uint32_t>{2});
  REQUIRE(file.windows.size() == 1);
  CHECK(file.windows[0].detail == "epoch");
  CHECK(file.windows[0].started_by == WindowEdge::kNvtxRange);
  CHECK(file.windows[0].ended_by == WindowEdge::kNvtxRange);
}

TEST_CASE("delay and duration (--delay, --duration) through a capture; a window still open ends with the capture", "[window]") {
  WindowFixture fixture;
  uint64_t t0 = realtimeNow();
  fixture.config.window.delay_ns = 150'000'000;
  SECTION("delay and duration") {
    fixture.config.window.duration_ns = 100'000'000;
    auto session = fixture.session();
    REQUIRE(session->start());
    CHECK_FALSE(kernelsEnabled());
    // CUPTI delivers records after they happened: these come once the window has closed.
    std::this_thread::sleep_for(std::chrono::milliseconds(320));
    auto& fake = FakeCupti::instance();
    fake.queue(kernelAt(1, t0 + 50'000'000));
    fake.queue(kernelAt(2, t0 + 200'000'000));
    fake.queue(kernelAt(3, t0 + 300'000'000));
    session->stop(format::CaptureEnd::kProcessExit, "exit");
    auto file = readWindowed(session->tracePath());
    CHECK(file.header.capture_window_plan == "after 150 ms, for 100 ms");
    CHECK(file.kernels == std::vector<uint32_t>{2});
    REQUIRE(file.windows.size() == 1);
    CHECK(file.windows[0].started_by == WindowEdge::kDelay);
    CHECK(file.windows[0].ended_by == WindowEdge::kDuration);
    CHECK(file.windows[0].end_ns - file.windows[0].start_ns == 100'000'000);
  }
  SECTION("delay only") {
    auto session = fixture.session();
    REQUIRE(session->start());
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    CHECK(kernelsEnabled());
    FakeCupti::instance().queue(kernelAt(1, t0 + 100'000'000));
    FakeCupti::instance().queue(kernelAt(2, t0 + 240'000'000));
    session->stop(format::CaptureEnd::kProcessExit, "exit");
    auto file = readWindowed(session->tracePath());
    CHECK(file.header.capture_window_plan == "after 150 ms");
    CHECK(file.kernels == std::vector<uint32_t>{2});
    REQUIRE(file.windows.size() == 1);
    CHECK(file.windows[0].ended_by == WindowEdge::kCaptureEnd);
  }
}

TEST_CASE("without a window plan nothing changes: every record, no windows in the file", "[window]") {
  WindowFixture fixture;
  auto session = fixture.session();
  REQUIRE(session->start());
  CHECK(kernelsEnabled());
  CHECK(inject::captureWindowOpen());
  FakeCupti::instance().queue(kernelAt(1, 5));
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  auto file = readWindowed(session->tracePath());
  CHECK(file.kernels == std::vector<uint32_t>{1});
  CHECK(file.windows.empty());
  CHECK(file.header.capture_window_plan.empty());
}
