// Hostile trace files (tests/support/hostile_traces.h) through the real binary: `info` and `analyze`
// each exit 0 or 2, print one line per problem, and take at most 1 s and 64 MiB more memory than on
// a small valid trace. A file that shrinks while it is read loses its rest with a warning.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "proto/trace_reader.h"
#include "tests/support/build_outputs.h"
#include "tests/support/hostile_traces.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

extern char** environ;

namespace {

using gpuxray::testing::TempDir;

struct Run {
  int exit_code = -1;  // -1: killed by a signal or the time limit
  bool timed_out = false;
  double seconds = 0;
  int64_t peak_rss_kib = 0;
  std::vector<std::string> stderr_lines;
  std::vector<std::string> stdout_lines;
};

std::vector<std::string> linesOf(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream text(gpuxray::testing::readWholeFile(path));
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  return lines;
}

// Runs gpuxray with `args`, killing it after `limit_s`; its peak memory comes from wait4().
Run runGpuxray(const std::vector<std::string>& args, const std::string& scratch, double limit_s = 10) {
  std::string err_path = scratch + "/stderr";
  std::string out_path = scratch + "/stdout";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> argv_text{gpuxray::testing::gpuxrayBinary()};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  Run run;
  int spawned = posix_spawn(&pid, gpuxray::testing::gpuxrayBinary().c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return run;
  int status = 0;
  rusage usage{};
  while (wait4(pid, &status, WNOHANG, &usage) == 0) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit_s) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &usage);
      run.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.exit_code = !run.timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.peak_rss_kib = usage.ru_maxrss;
  run.stderr_lines = linesOf(err_path);
  run.stdout_lines = linesOf(out_path);
  return run;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

}  // namespace

TEST_CASE("hostile trace files give exit 0 or 2, one line per problem, in bounded time and memory", "[hostile]") {
  TempDir dir;
  std::vector<gpuxray::testing::HostileTrace> traces = gpuxray::testing::writeHostileTraces(dir.path());
  std::filesystem::path valid = dir.path() / "valid.gpuxray";
  gpuxray::testing::writeValidTrace(valid);

  for (const std::string command : {"info", "analyze"}) {
    Run baseline = runGpuxray({command, valid.string()}, dir.path().string());
    REQUIRE(baseline.exit_code == 0);
    for (const auto& trace : traces) {
      INFO(command << " " << trace.name);
      Run run = runGpuxray({command, trace.path.string()}, dir.path().string());
      std::string err;
      for (const auto& line : run.stderr_lines) err += line + "\n";
      INFO("stderr:\n" << err);
      CHECK_FALSE(run.timed_out);
      CHECK((run.exit_code == 0 || run.exit_code == 2));
      // The sanitizer build is several times slower; its bound is the same work, scaled.
      CHECK(run.seconds <= (kSanitized ? 5.0 : 1.0));
      CHECK(run.peak_rss_kib - baseline.peak_rss_kib <= 64 * 1024);
      // One line per problem: errors on stderr are gpuxray's, and the lines that name the file (its
      // warnings, in the report or on stderr) are a few, none twice.
      for (const auto& line : run.stderr_lines) CHECK(line.rfind("gpuxray: ", 0) == 0);
      std::vector<std::string> problems;
      for (const auto* lines : {&run.stderr_lines, &run.stdout_lines}) {
        for (const auto& line : *lines) {
          if (line.find(trace.path.filename().string() + ":") != std::string::npos) problems.push_back(line);
        }
      }
      std::set<std::string> distinct(problems.begin(), problems.end());
      CHECK(distinct.size() == problems.size());
      CHECK(problems.size() <= 12);
      if (run.exit_code == 2) CHECK_FALSE(run.stderr_lines.empty());
    }
  }
}

TEST_CASE("hostile directory entries are warnings and the valid rank beside them is analyzed", "[hostile]") {
  TempDir dir;
  std::vector<gpuxray::testing::HostileTrace> traces = gpuxray::testing::writeHostileTraces(dir.path());
  auto find = [&](const std::string& name) {
    for (const auto& t : traces)
      if (t.name == name) return t.path;
    FAIL("no hostile trace " << name);
    return std::filesystem::path();
  };
  auto joined = [](const Run& run) {
    std::string text;
    for (const auto& line : run.stderr_lines) text += line + "\n";
    for (const auto& line : run.stdout_lines) text += line + "\n";
    return text;
  };
  using Catch::Matchers::Contains;

  Run fifo_dir = runGpuxray({"analyze", find("fifo in a directory").string()}, dir.path().string());
  CHECK(fifo_dir.exit_code == 0);
  CHECK_THAT(joined(fifo_dir), Contains("rank-00001.gpuxray: not a regular file; skipped"));

  Run loop_dir = runGpuxray({"analyze", find("symlink loop in a directory").string()}, dir.path().string());
  CHECK(loop_dir.exit_code == 0);
  CHECK_THAT(joined(loop_dir), Contains("rank-00001.gpuxray: cannot read: Too many levels of symbolic links"));

  Run fifo = runGpuxray({"info", find("fifo (named)").string()}, dir.path().string());
  CHECK(fifo.exit_code == 2);
  CHECK_THAT(joined(fifo), Contains("fifo.gpuxray: not a regular file (a FIFO)"));

  Run loop = runGpuxray({"analyze", find("symlink loop (named)").string()}, dir.path().string());
  CHECK(loop.exit_code == 2);
  CHECK_THAT(joined(loop), Contains("loop.gpuxray: cannot open: Too many levels of symbolic links"));

  Run world = runGpuxray({"analyze", find("world-size-2^31-1 (directory)").string()}, dir.path().string());
  CHECK(world.exit_code == 0);
  CHECK_THAT(joined(world), Contains("2147483646 of 2147483647 ranks have no file (ranks 1-2147483646)"));

  Run ids = runGpuxray({"analyze", find("interned-ids-2^32-1").string()}, dir.path().string());
  CHECK(ids.exit_code == 0);

  Run release = runGpuxray({"analyze", find("memory-release-2^63-bytes").string()}, dir.path().string());
  CHECK(release.exit_code == 0);
  CHECK_THAT(joined(release), Contains("1 memory allocations or releases of more than 16 TiB ignored"));

  Run times = runGpuxray({"analyze", find("times-near-int64-max").string()}, dir.path().string());
  CHECK(times.exit_code == 0);
  CHECK_THAT(joined(times), Contains("times beyond 2^63 ns (or ending there) were clamped to that limit"));

  Run claims = runGpuxray({"info", find("raw-size-claims-256MiB").string()}, dir.path().string());
  CHECK_THAT(joined(claims), Contains("its zstd frame does not give the size its header does"));

  Run expansion = runGpuxray({"info", find("zstd-12M-empty-records").string()}, dir.path().string());
  CHECK_THAT(joined(expansion), Contains("more than a trace chunk can; skipped"));

  Run resync = runGpuxray({"info", find("false-headers-2MB").string()}, dir.path().string());
  CHECK_THAT(joined(resync), Contains("too many false chunk headers after it to look further"));
}

TEST_CASE("a file that shrinks while it is read loses the rest with a warning, not garbage", "[hostile]") {
  TempDir dir;
  std::string path = dir / "rank-00000.gpuxray";
  gpuxray::testing::writeValidTrace(path);
  gpuxray::format::TraceReader reader(path);
  std::filesystem::resize_file(path, gpuxray::format::kPreambleSize + 40);
  gpuxray::format::EventBatch batch;
  size_t batches = 0;
  while (reader.next(batch)) ++batches;
  CHECK(batches == 0);
  REQUIRE(reader.warnings().size() == 1);
  CHECK_THAT(reader.warnings().front(), Catch::Matchers::Contains("did the file shrink while being read?"));
}
