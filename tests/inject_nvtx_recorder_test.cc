// gpuxray's own recorder of the default NVTX domain's push/pop ranges: the handlers as NVTX calls
// them, their installation into an NVTX client's function table, and the ranges through a capture
// with the fake CUPTI (whole run, and a --steps window).

#include <pthread.h>

#include <catch2/catch.hpp>
#include <string>
#include <thread>
#include <vector>

#include "inject/capture_session.h"
#include "inject/nvtx_recorder.h"
#include "proto/trace_reader.h"
#include "tests/support/fake_cupti.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuxray::inject::NvtxRecorder;
using gpuxray::inject::NvtxRecorderHooks;
using gpuxray::inject::RecordedRange;
using gpuxray::testing::FakeCupti;
using gpuxray::testing::TempDir;
namespace format = gpuxray::format;
namespace inject = gpuxray::inject;

// A clock that ticks 10 ns a reading.
NvtxRecorderHooks countingHooks(uint64_t& now) {
  NvtxRecorderHooks hooks;
  hooks.clock = [&now] { return now += 10; };
  return hooks;
}

uint64_t thisThread() {
  return static_cast<uint32_t>(pthread_self());
}

}  // namespace

TEST_CASE("nvtx recorder: pushes and pops become ranges with their level, thread and times", "[nvtx-recorder]") {
  uint64_t now = 0;
  NvtxRecorder recorder(countingHooks(now));
  recorder.activate();
  CHECK(NvtxRecorder::rangePushA("step 1") == 0);  // at 10
  CHECK(NvtxRecorder::rangePushA("aten::mm") == 1);  // at 20
  CHECK(NvtxRecorder::rangePop() == 1);              // at 30
  CHECK(NvtxRecorder::rangePop() == 0);              // at 40
  CHECK(NvtxRecorder::rangePop() < 0);               // nothing open: NVTX's error
  recorder.deactivate();

  auto ranges = recorder.collect(false);
  REQUIRE(ranges.size() == 2);
  CHECK(ranges[0].name == "aten::mm");  // in the order they ended
  CHECK(ranges[0].start_ns == 20);
  CHECK(ranges[0].end_ns == 30);
  CHECK(ranges[0].depth == 1);
  CHECK(ranges[0].thread_id == thisThread());
  CHECK(ranges[1].name == "step 1");
  CHECK(ranges[1].start_ns == 10);
  CHECK(ranges[1].end_ns == 40);
  CHECK(ranges[1].depth == 0);
  CHECK(recorder.unmatchedPops() == 1);
  CHECK(recorder.collect(false).empty());  // each range once
}

TEST_CASE("nvtx recorder: a range open at the end is collected open; one pushed before it was active is not",
          "[nvtx-recorder]") {
  uint64_t now = 0;
  NvtxRecorder recorder(countingHooks(now));
  CHECK(NvtxRecorder::rangePushA("before the capture") == 0);  // no recorder active: only counted
  recorder.activate();
  CHECK(NvtxRecorder::rangePushA("inside") == 1);
  CHECK(NvtxRecorder::rangePop() == 1);
  CHECK(NvtxRecorder::rangePop() == 0);  // ends "before the capture", which was never recorded
  CHECK(NvtxRecorder::rangePushA("still open") == 0);
  recorder.deactivate();
  CHECK(NvtxRecorder::rangePop() == 0);  // after the capture: nothing recorded, nothing unmatched

  auto ranges = recorder.collect(true);
  REQUIRE(ranges.size() == 2);
  CHECK(ranges[0].name == "inside");
  CHECK(ranges[1].name == "still open");
  CHECK(ranges[1].end_ns == 0);
  CHECK(recorder.unmatchedPops() == 0);
}

TEST_CASE("nvtx recorder: each thread its own stack and list", "[nvtx-recorder]") {
  std::atomic<uint64_t> now{0};
  NvtxRecorderHooks hooks;
  hooks.clock = [&now] { return now += 10; };
  NvtxRecorder recorder(hooks);
  recorder.activate();
  std::vector<uint64_t> ids(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([t, &ids] {
      ids[t] = static_cast<uint32_t>(pthread_self());
      for (int i = 0; i < 1000; ++i) {
        NvtxRecorder::rangePushA(("outer " + std::to_string(t)).c_str());
        NvtxRecorder::rangePushA("inner");
        NvtxRecorder::rangePop();
        NvtxRecorder::rangePop();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  recorder.deactivate();
  auto ranges = recorder.collect(false);
  REQUIRE(ranges.size() == 8000);
  for (size_t t = 0; t < 4; ++t) {
    auto outer = std::count_if(ranges.begin(), ranges.end(), [&](const RecordedRange& r) {
      return r.name == "outer " + std::to_string(t) && r.thread_id == ids[t] && r.depth == 0;
    });
    CHECK(outer == 1000);
  }
  CHECK(std::all_of(ranges.begin(), ranges.end(), [](const RecordedRange& r) { return r.end_ns > r.start_ns; }));
}

TEST_CASE("nvtx recorder: past its bound a thread's ranges are dropped and counted", "[nvtx-recorder]") {
  uint64_t now = 0;
  NvtxRecorder recorder(countingHooks(now));
  recorder.activate();
  for (size_t i = 0; i < NvtxRecorder::kMaxPendingPerThread + 5; ++i) {
    NvtxRecorder::rangePushA("r");
    NvtxRecorder::rangePop();
  }
  recorder.deactivate();
  CHECK(recorder.collect(false).size() == NvtxRecorder::kMaxPendingPerThread);
  CHECK(recorder.dropped() == 5);
}

TEST_CASE("nvtx recorder: nvtxRangePushEx and nvtxRangePushW keep name, color, category and a scalar payload",
          "[nvtx-recorder]") {
  uint64_t now = 0;
  NvtxRecorder recorder(countingHooks(now));
  recorder.activate();
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.category = 7;
  a.colorType = NVTX_COLOR_ARGB;
  a.color = 0xFF00FF00;
  a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  a.payload.ullValue = 42;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = "forward";
  CHECK(NvtxRecorder::rangePushEx(&a) == 0);
  CHECK(NvtxRecorder::rangePop() == 0);
  CHECK(NvtxRecorder::rangePushW(L"r\u00e9duction") == 0);
  CHECK(NvtxRecorder::rangePop() == 0);
  recorder.deactivate();
  auto ranges = recorder.collect(false);
  REQUIRE(ranges.size() == 2);
  CHECK(ranges[0].name == "forward");
  CHECK(ranges[0].category == 7);
  CHECK(ranges[0].color == 0xFF00FF00);
  REQUIRE(ranges[0].has_payload);
  CHECK(ranges[0].payload.type == format::PayloadField::Type::kUint);
  CHECK(ranges[0].payload.uint_value == 42);
  CHECK(ranges[1].name == "r\xc3\xa9" "duction");
  CHECK_FALSE(ranges[1].has_payload);
}

namespace {

// An NVTX client's core function table, as nvtxImpl.h lays it out: slots the tool writes into.
NvtxFunctionPointer g_slots[NVTX_CBID_CORE_SIZE];
NvtxFunctionPointer* g_table[NVTX_CBID_CORE_SIZE];
unsigned int g_table_size = NVTX_CBID_CORE_SIZE - 1;

int NVTX_API getModuleFunctionTable(NvtxCallbackModule module, NvtxFunctionTable* table, unsigned int* size) {
  if (module != NVTX_CB_MODULE_CORE) return 0;
  *table = g_table;
  *size = g_table_size;
  return 1;
}

const NvtxExportTableCallbacks g_callbacks{sizeof(NvtxExportTableCallbacks), getModuleFunctionTable};

const void* NVTX_API getExportTable(uint32_t id) {
  return id == NVTX_ETID_CALLBACKS ? &g_callbacks : nullptr;
}

void cuptisOwn() {}

}  // namespace

TEST_CASE("nvtx recorder: installed over CUPTI's handlers for the default domain's pushes and pops only",
          "[nvtx-recorder]") {
  for (int i = 0; i < NVTX_CBID_CORE_SIZE; ++i) {
    g_slots[i] = &cuptisOwn;
    g_table[i] = i == 0 ? nullptr : &g_slots[i];
  }
  SECTION("a whole table") {
    g_table_size = NVTX_CBID_CORE_SIZE - 1;
    REQUIRE(NvtxRecorder::install(reinterpret_cast<const void*>(&getExportTable)));
    CHECK(g_slots[NVTX_CBID_CORE_RangePushA] == reinterpret_cast<NvtxFunctionPointer>(&NvtxRecorder::rangePushA));
    CHECK(g_slots[NVTX_CBID_CORE_RangePushW] == reinterpret_cast<NvtxFunctionPointer>(&NvtxRecorder::rangePushW));
    CHECK(g_slots[NVTX_CBID_CORE_RangePushEx] == reinterpret_cast<NvtxFunctionPointer>(&NvtxRecorder::rangePushEx));
    CHECK(g_slots[NVTX_CBID_CORE_RangePop] == reinterpret_cast<NvtxFunctionPointer>(&NvtxRecorder::rangePop));
    CHECK(g_slots[NVTX_CBID_CORE_MarkA] == &cuptisOwn);
    CHECK(g_slots[NVTX_CBID_CORE_RangeStartA] == &cuptisOwn);
  }
  SECTION("a table too small for the pop is left as it is") {
    g_table_size = NVTX_CBID_CORE_RangePop - 1;
    CHECK_FALSE(NvtxRecorder::install(reinterpret_cast<const void*>(&getExportTable)));
    CHECK(g_slots[NVTX_CBID_CORE_RangePushA] == &cuptisOwn);
  }
  CHECK_FALSE(NvtxRecorder::install(nullptr));
}

namespace {

struct NamedRange {
  std::string name;
  uint64_t start_ns;
  uint64_t end_ns;
  uint32_t depth;
};

std::vector<NamedRange> rangesIn(const std::string& path, std::vector<std::string>* warnings = nullptr) {
  format::TraceReader reader(path);
  std::vector<NamedRange> ranges;
  format::EventBatch batch;
  while (reader.next(batch)) {
    for (const auto& r : batch.nvtx_events)
      ranges.push_back({std::string(reader.strings().get(r.name_id)), r.start_ns, r.end_ns, r.depth});
  }
  if (warnings != nullptr && reader.trailer()) *warnings = reader.trailer()->warnings;
  return ranges;
}

std::unique_ptr<inject::CaptureSession> captureSession(const TempDir& dir, inject::CaptureConfig config) {
  FakeCupti::instance().reset();
  config.output_dir = (dir.path() / "traces").string();
  config.flush_interval_ms = 20;
  inject::CaptureDependencies deps;
  deps.cupti = FakeCupti::instance().api();
  deps.cupti_path = "/fake/libcupti.so.13";
  deps.cupti_api_version = 130001;
  deps.environment = [](const char* name) -> const char* {
    std::string_view n(name);
    return n == "RANK" ? "0" : n == "WORLD_SIZE" ? "1" : nullptr;
  };
  deps.log = [](const std::string&) {};
  return std::make_unique<inject::CaptureSession>(std::move(deps), config);
}

}  // namespace

TEST_CASE("nvtx recorder through a capture: the default domain's ranges reach the file", "[nvtx-recorder]") {
  TempDir dir;
  auto session = captureSession(dir, {});
  REQUIRE(session->start());
  NvtxRecorder::rangePushA("train");
  NvtxRecorder::rangePushA("forward");
  NvtxRecorder::rangePop();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a flush in between
  NvtxRecorder::rangePop();
  NvtxRecorder::rangePushA("left open");
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  CHECK(NvtxRecorder::rangePop() == 0);  // after the capture: the job goes on

  std::vector<std::string> warnings;
  auto ranges = rangesIn(session->tracePath(), &warnings);
  REQUIRE(ranges.size() == 3);
  CHECK(ranges[0].name == "forward");
  CHECK(ranges[0].depth == 1);
  CHECK(ranges[1].name == "train");
  CHECK(ranges[1].start_ns < ranges[0].start_ns);
  CHECK(ranges[1].end_ns > ranges[0].end_ns);
  CHECK(ranges[2].name == "left open");
  CHECK(ranges[2].end_ns == ranges[2].start_ns);
  CHECK(std::find(warnings.begin(), warnings.end(), "1 NVTX ranges without a start or an end") != warnings.end());
}

TEST_CASE("nvtx recorder through a capture: --steps keeps the steps' ranges, the opening one once",
          "[nvtx-recorder]") {
  TempDir dir;
  inject::CaptureConfig config;
  config.window.steps = std::pair<int64_t, int64_t>{2, 3};
  auto session = captureSession(dir, config);
  REQUIRE(session->start());
  for (int step = 0; step < 6; ++step) {
    NvtxRecorder::rangePushA(("ProfilerStep#" + std::to_string(step)).c_str());
    NvtxRecorder::rangePushA("aten::mm");
    NvtxRecorder::rangePop();
    NvtxRecorder::rangePop();
  }
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  auto ranges = rangesIn(session->tracePath());
  std::vector<std::string> names;
  for (const auto& r : ranges) names.push_back(r.name);
  CHECK(names == std::vector<std::string>{"aten::mm", "ProfilerStep#2", "aten::mm", "ProfilerStep#3"});
}

TEST_CASE("nvtx recorder through a capture: without the nvtx category nothing is recorded, windows still follow",
          "[nvtx-recorder]") {
  TempDir dir;
  inject::CaptureConfig config;
  config.categories.nvtx = false;
  config.window.steps = std::pair<int64_t, int64_t>{1, 1};
  auto session = captureSession(dir, config);
  REQUIRE(session->start());
  for (int step = 0; step < 3; ++step) {
    NvtxRecorder::rangePushA(("ProfilerStep#" + std::to_string(step)).c_str());
    NvtxRecorder::rangePop();
  }
  REQUIRE(session->windows() != nullptr);
  CHECK(session->windows()->opened() == 1);
  session->stop(format::CaptureEnd::kProcessExit, "exit");
  CHECK(rangesIn(session->tracePath()).empty());
}
