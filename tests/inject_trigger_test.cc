// `gpuxray trigger` on a process that stays alive while it captures (a forked child running a
// capture session with the fake CUPTI and a trigger-only plan): the real binary opens a window in
// it, and the file holds exactly what happened inside.

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "inject/capture_session.h"
#include "proto/capture_windows.h"
#include "proto/trace_reader.h"
#include "tests/support/build_outputs.h"
#include "tests/support/fake_cupti.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace gpuxray;
using gpuxray::testing::FakeCupti;
using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;

uint64_t realtimeNow() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

CUpti_ActivityKernel10 kernelAt(uint32_t correlation, uint64_t start) {
  CUpti_ActivityKernel10 kernel{};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.start = start;
  kernel.end = start + 100;
  kernel.correlationId = correlation;
  kernel.gridX = kernel.gridY = kernel.gridZ = kernel.blockX = kernel.blockY = kernel.blockZ = 1;
  kernel.name = "k";
  return kernel;
}

// The child: captures with a trigger-only plan for at most 10 s, records a kernel while the window
// is open and one after it closed, then ends its capture. Exit status 0 when a window opened.
[[noreturn]] void captureUntilTriggered(const std::string& dir) {
  FakeCupti::instance().reset();
  inject::CaptureConfig config;
  config.output_dir = dir;
  config.flush_interval_ms = 20;
  config.log_level = inject::LogLevel::kQuiet;
  config.window.range.kind = format::CaptureRange::Kind::kTrigger;
  inject::CaptureDependencies deps;
  deps.cupti = FakeCupti::instance().api();
  deps.cupti_path = "/fake/libcupti.so.13";
  deps.cupti_api_version = 130001;
  deps.environment = [](const char* name) -> const char* { return std::string(name) == "RANK" ? "5" : nullptr; };
  inject::CaptureSession session(std::move(deps), config);
  if (!session.start()) _exit(3);
  FakeCupti::instance().queue(kernelAt(1, realtimeNow()));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!session.windows()->isOpen() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  bool opened = session.windows()->isOpen();
  FakeCupti::instance().queue(kernelAt(2, realtimeNow()));
  while (session.windows()->isOpen() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  FakeCupti::instance().queue(kernelAt(3, realtimeNow()));
  session.stop(format::CaptureEnd::kProcessExit, "exit");
  _exit(opened ? 0 : 4);
}

}  // namespace

TEST_CASE("gpuxray trigger opens a window in a running capture, which answers in one line", "[trigger]") {
  TempDir dir;
  std::string output = (dir.path() / "traces").string();
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) captureUntilTriggered(output);
  // The child's live marker says it is capturing.
  std::string marker = output + "/" + format::liveMarkerName(static_cast<uint32_t>(child));
  for (int i = 0; i < 500 && access(marker.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(access(marker.c_str(), F_OK) == 0);

  auto result = runCommand(gpuxray::testing::gpuxrayBinary() + " trigger " + output + " --duration 300ms");
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(result.exit_code == 0);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  CHECK(result.out == "rank 5 (pid " + std::to_string(child) + ", " + host + "): capture window open for 300 ms\n");
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(access(marker.c_str(), F_OK) != 0);

  format::TraceReader reader(output + "/rank-00005.gpuxray");
  CHECK(reader.header().capture_window_plan == "on trigger only");
  std::vector<uint32_t> kernels;
  std::vector<format::CaptureWindow> windows;
  format::EventBatch batch;
  while (reader.next(batch)) {
    for (const auto& k : batch.kernels) kernels.push_back(k.correlation_id);
    windows.insert(windows.end(), batch.capture_windows.begin(), batch.capture_windows.end());
  }
  CHECK(kernels == std::vector<uint32_t>{2});
  REQUIRE(windows.size() == 1);
  CHECK(windows[0].started_by == format::WindowEdge::kTrigger);
  CHECK(windows[0].ended_by == format::WindowEdge::kTrigger);
  CHECK(windows[0].end_ns - windows[0].start_ns == 300'000'000);
  CHECK(windows[0].detail == "trigger for 300 ms");

  // Nothing is capturing there any more.
  auto again = runCommand(gpuxray::testing::gpuxrayBinary() + " trigger " + output + " --duration 1s");
  CHECK(again.exit_code == 2);
  CHECK(again.err == "gpuxray: error: " + output + ": no process is capturing there (no live capture markers)\n");
}

TEST_CASE("gpuxray trigger tells a process not started under gpuxray run apart", "[trigger]") {
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("5"), nullptr};
    char* const envp[] = {nullptr};
    execve("/bin/sleep", argv, envp);
    _exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto result = runCommand(gpuxray::testing::gpuxrayBinary() + " trigger " + std::to_string(child) + " --duration 1s");
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  CHECK(result.exit_code == 2);
  CHECK(result.err == "gpuxray: error: pid " + std::to_string(child) +
                          ": not started under gpuxray run (no GPUXRAY_OUTPUT_DIR in its environment)\n");
  auto bad = runCommand(gpuxray::testing::gpuxrayBinary() + " trigger 1 --duration soon");
  CHECK(bad.exit_code == 1);
  CHECK(bad.err == "gpuxray: --duration 'soon': expected a duration such as 10s, 500ms or 2m\n");
}
