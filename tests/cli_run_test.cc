// `gpuxray run`: the child's environment as a function (run_environment.h), then the real binary:
// exit codes, signals in both directions, the environment the command sees, errors.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/analysis/session.h"
#include "analyzer/cli/kernel_metrics_selection.h"
#include "analyzer/cli/run_environment.h"
#include "analyzer/errors.h"
#include "tests/support/build_outputs.h"
#include "tests/support/run_builder.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

extern char** environ;  // NOLINT: POSIX declares it nowhere else.

namespace {

namespace fs = std::filesystem;
using namespace gpuxray::cli;
using gpuxray::UsageError;
using gpuxray::testing::CommandResult;
using gpuxray::testing::readWholeFile;
using gpuxray::testing::runCommand;
using gpuxray::testing::TempDir;

// --- Helpers for the real binary -----------------------------------------------------------------

std::string quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// A scratch directory that is the working directory of gpuxray, with a stand-in for the injection
// library (run only passes its path on; its start checks, which load the library, are off here and
// tested in cli_doctor_test.cc).
struct RunFixture {
  TempDir dir;
  std::string library = dir / "libgpuxray_inject.so";

  RunFixture() { std::ofstream(library) << "not really a library"; }

  // A shell script that starts gpuxray run with `args` in `dir`, from a clean capture environment
  // plus `exports` ("NAME=value ..."). gpuxray replaces the shell, so its own death is seen.
  std::string script(const std::string& args, const std::string& exports = "") const {
    return "cd " + quote(dir.path().string()) +
           " && unset GPUXRAY_RUN_ID GPUXRAY_OUTPUT_DIR CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH GPUXRAY_CAPTURE"
           " GPUXRAY_BUFFER_LIMIT_MB GPUXRAY_FLUSH_INTERVAL_MS GPUXRAY_METRICS GPUXRAY_METRIC_INTERVAL_US"
           " GPUXRAY_LOG_LEVEL && export GPUXRAY_RUN_CHECKS=0 GPUXRAY_INJECT_LIBRARY=" +
           quote(library) + (exports.empty() ? "" : " " + exports) + " && exec " + gpuxray::testing::gpuxrayBinary() + " run " + args;
  }
  CommandResult run(const std::string& args, const std::string& exports = "") const {
    return runCommand(script(args, exports));
  }
  std::string summaryOf(const std::string& output_dir) const {
    return "gpuxray: no trace files in " + output_dir + " (did the command use CUDA?)\n";
  }
};

// The "NAME=value" lines of `env` output.
std::map<std::string, std::string> parseEnv(const std::string& text) {
  std::map<std::string, std::string> variables;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    size_t equals = line.find('=');
    if (equals != std::string::npos) variables.emplace(line.substr(0, equals), line.substr(equals + 1));
    start = end + 1;
  }
  return variables;
}

std::string realPath(const fs::path& path) {
  return fs::weakly_canonical(path).string();
}

bool allDigits(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

// "<host>-<YYYYmmdd>-<HHMMSS>-<pid>"
bool isGeneratedRunId(const std::string& id) {
  size_t pid_dash = id.rfind('-');
  size_t time_dash = pid_dash == std::string::npos || pid_dash == 0 ? std::string::npos : id.rfind('-', pid_dash - 1);
  size_t date_dash =
      time_dash == std::string::npos || time_dash == 0 ? std::string::npos : id.rfind('-', time_dash - 1);
  if (date_dash == std::string::npos || date_dash == 0) return false;
  std::string date = id.substr(date_dash + 1, time_dash - date_dash - 1);
  std::string time = id.substr(time_dash + 1, pid_dash - time_dash - 1);
  return date.size() == 8 && allDigits(date) && time.size() == 6 && allDigits(time) &&
         allDigits(id.substr(pid_dash + 1));
}

bool waitForFile(const std::string& path) {
  for (int i = 0; i < 500; ++i) {
    if (fs::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// --- The environment as a function -----------------------------------------------------------------

RunSetup setupFor(CaptureSettings capture = {}) {
  return {"/opt/gpuxray/lib/libgpuxray_inject.so", "/scratch/out", "node1-20250102-030405-42", capture};
}

}  // namespace

TEST_CASE("setVariable replaces the first entry of a name and drops its duplicates", "[run]") {
  Environment environment = {"PATH=/bin", "GPUXRAY_RUN_ID=a", "GPUXRAY_RUN_IDX=keep", "GPUXRAY_RUN_ID=b"};
  CHECK(lookupVariable(environment, "GPUXRAY_RUN_ID") == "a");
  CHECK_FALSE(lookupVariable(environment, "GPUXRAY").has_value());
  setVariable(environment, "GPUXRAY_RUN_ID", "c");
  CHECK(environment == Environment{"PATH=/bin", "GPUXRAY_RUN_ID=c", "GPUXRAY_RUN_IDX=keep"});
  setVariable(environment, "EMPTY", "");
  CHECK(environment.back() == "EMPTY=");
  CHECK(lookupVariable(environment, "EMPTY") == "");
}

TEST_CASE("the child's environment adds the library, output, run id and only the options given", "[run]") {
  Environment current = {"PATH=/usr/bin", "GPUXRAY_CAPTURE=kernel", "HOME=/home/me"};
  ChildEnvironment child = buildChildEnvironment(setupFor(), current);
  CHECK(child.warnings.empty());
  CHECK(child.variables == Environment{"PATH=/usr/bin", "GPUXRAY_CAPTURE=kernel", "HOME=/home/me",
                                       "CUDA_INJECTION64_PATH=/opt/gpuxray/lib/libgpuxray_inject.so",
                                       "NVTX_INJECTION64_PATH=/opt/gpuxray/lib/libgpuxray_inject.so",
                                       "NCCL_PROFILER_PLUGIN=/opt/gpuxray/lib/libgpuxray_inject.so",
                                       "GPUXRAY_OUTPUT_DIR=/scratch/out", "GPUXRAY_RUN_ID=node1-20250102-030405-42"});

  CaptureSettings capture;
  capture.capture = "all,-memory";
  capture.buffer_limit_mb = 32;
  capture.flush_interval_ms = 250;
  capture.metrics = true;
  capture.metric_interval_us = 500;
  capture.log_level = "debug";
  child = buildChildEnvironment(setupFor(capture), current);
  CHECK(child.warnings.empty());
  CHECK(lookupVariable(child.variables, "GPUXRAY_CAPTURE") == "all,-memory");
  CHECK(lookupVariable(child.variables, "GPUXRAY_BUFFER_LIMIT_MB") == "32");
  CHECK(lookupVariable(child.variables, "GPUXRAY_FLUSH_INTERVAL_MS") == "250");
  CHECK(lookupVariable(child.variables, "GPUXRAY_METRICS") == "1");
  CHECK(lookupVariable(child.variables, "GPUXRAY_METRIC_INTERVAL_US") == "500");
  CHECK(lookupVariable(child.variables, "GPUXRAY_LOG_LEVEL") == "debug");
  // The 3 variables there were (GPUXRAY_CAPTURE replaced in place), the 5 always set, 5 more options.
  CHECK(child.variables.size() == 3 + 5 + 5);
}

TEST_CASE("window and size options reach the command as GPUXRAY_* variables", "[run][window]") {
  RunOptions options;
  options.delay = "5m";
  options.duration = "30s";
  options.capture_range = "nvtx:train@MyLib";
  options.capture_range_count = "all";
  options.max_size_mb = "256";
  options.ring = true;
  ChildEnvironment child = buildChildEnvironment(setupFor(checkCaptureOptions(options)), {});
  CHECK(lookupVariable(child.variables, "GPUXRAY_DELAY") == "5m");
  CHECK(lookupVariable(child.variables, "GPUXRAY_DURATION") == "30s");
  CHECK(lookupVariable(child.variables, "GPUXRAY_CAPTURE_RANGE") == "nvtx:train@MyLib");
  CHECK(lookupVariable(child.variables, "GPUXRAY_CAPTURE_RANGE_COUNT") == "all");
  CHECK(lookupVariable(child.variables, "GPUXRAY_MAX_SIZE_MB") == "256");
  CHECK(lookupVariable(child.variables, "GPUXRAY_RING") == "1");
  CHECK_FALSE(lookupVariable(child.variables, "GPUXRAY_STEPS"));
  RunOptions steps;
  steps.steps = "100-110";
  steps.step_marker = "^step (\\d+)$";
  child = buildChildEnvironment(setupFor(checkCaptureOptions(steps)), {});
  CHECK(lookupVariable(child.variables, "GPUXRAY_STEPS") == "100-110");
  CHECK(lookupVariable(child.variables, "GPUXRAY_STEP_MARKER") == "^step (\\d+)$");
}

TEST_CASE("a profiler plugin the user chose for NCCL is kept, with a warning that NCCL capture falls back to NVTX", "[run]") {
  Environment current = {"NCCL_PROFILER_PLUGIN=/opt/other/libnccl-profiler.so"};
  ChildEnvironment child = buildChildEnvironment(setupFor(), current);
  CHECK(lookupVariable(child.variables, "NCCL_PROFILER_PLUGIN") == "/opt/other/libnccl-profiler.so");
  REQUIRE(child.warnings.size() == 1);
  CHECK(child.warnings[0] ==
        "NCCL_PROFILER_PLUGIN is /opt/other/libnccl-profiler.so, so NCCL loads that plugin and gpuxray takes NCCL's "
        "operations from its NVTX ranges (no algorithm, protocol or channels; none if NVTX is not captured); unset it "
        "for full NCCL capture");
}

TEST_CASE("injection paths that pointed elsewhere are replaced, with one warning each", "[run]") {
  std::string ours = setupFor().injection_library;
  ChildEnvironment child = buildChildEnvironment(
      setupFor(), {"CUDA_INJECTION64_PATH=/opt/nsight/libinject.so", "NVTX_INJECTION64_PATH=" + ours});
  REQUIRE(child.warnings.size() == 1);
  CHECK(child.warnings[0] == "CUDA_INJECTION64_PATH was /opt/nsight/libinject.so; gpuxray replaces it with " + ours +
                                 " for this run (capture needs it)");
  CHECK(lookupVariable(child.variables, "CUDA_INJECTION64_PATH") == ours);
  CHECK(lookupVariable(child.variables, "NVTX_INJECTION64_PATH") == ours);
}

TEST_CASE("run: --metric-interval-us without metrics switched on is a warning", "[run]") {
  CaptureSettings capture;
  capture.metric_interval_us = 100;
  auto child = buildChildEnvironment(setupFor(capture), {});
  CHECK(child.warnings == std::vector<std::string>{"--metric-interval-us has no effect without --metrics"});
  CHECK(buildChildEnvironment(setupFor(capture), {"GPUXRAY_METRICS=1"}).warnings.empty());
  capture.metrics = true;
  CHECK(buildChildEnvironment(setupFor(capture), {}).warnings.empty());
}

TEST_CASE("option values are checked and normalized", "[run]") {
  RunOptions options;
  options.capture = " kernel, nvtx ,-sync";
  options.buffer_limit_mb = "0064";
  options.log_level = "quiet";
  CaptureSettings settings = checkCaptureOptions(options);
  CHECK(settings.capture == "kernel,nvtx,-sync");
  CHECK(settings.buffer_limit_mb == 64u);
  CHECK_FALSE(settings.flush_interval_ms.has_value());
  CHECK_FALSE(settings.metric_interval_us.has_value());
  CHECK(settings.log_level == "quiet");
  CHECK_FALSE(settings.metrics);

  auto message = [](RunOptions bad) -> std::string {
    try {
      checkCaptureOptions(bad);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  RunOptions bad;
  bad.flush_interval_ms = "1e3";
  CHECK(message(bad) == "--flush-interval-ms must be a whole number greater than 0, not '1e3'");
  bad = {};
  bad.metric_interval_us = "0";
  CHECK(message(bad) == "--metric-interval-us must be greater than 0, not '0'");
  bad = {};
  bad.buffer_limit_mb = "2147483648";
  CHECK(message(bad) == "--buffer-limit-mb must be at most 2147483647, not '2147483648'");
  bad.buffer_limit_mb = "99999999999999999999999";
  CHECK(message(bad) == "--buffer-limit-mb must be at most 2147483647, not '99999999999999999999999'");
  bad.buffer_limit_mb = "-1";
  CHECK(message(bad) == "--buffer-limit-mb must be a whole number greater than 0, not '-1'");
  bad = {};
  bad.log_level = "verbose";
  CHECK(message(bad) == "--log-level must be quiet, warn, info or debug, not 'verbose'");
  bad = {};
  bad.capture = "kernel,,api";
  CHECK(message(bad) == "--capture has an empty item in 'kernel,,api'");
  bad.capture = "-all";
  CHECK(message(bad).rfind("--capture: unknown category '-all' (known: all, kernel,", 0) == 0);
  bad.capture = "all,-gpu";
  CHECK(message(bad).rfind("--capture: unknown category '-gpu'", 0) == 0);
  bad = {};
  bad.output_dir = "--";
  CHECK(message(bad) == "-o/--output needs a value");
  bad = {};
  bad.capture = "";
  CHECK(message(bad) == "--capture needs a value");
}

TEST_CASE("run: --kernel-metrics reaches the command as GPUXRAY_KERNEL_METRICS, and its bad values are one line",
          "[run][kernel-metrics]") {
  RunOptions options;
  options.kernel_metrics = "gemm|elementwise";
  options.kernel_metrics_count = "10";
  ChildEnvironment child = buildChildEnvironment(setupFor(checkCaptureOptions(options)), {});
  CHECK(lookupVariable(child.variables, "GPUXRAY_KERNEL_METRICS") == "gemm|elementwise");
  CHECK(lookupVariable(child.variables, "GPUXRAY_KERNEL_METRICS_COUNT") == "10");
  child = buildChildEnvironment(setupFor(checkCaptureOptions({})), {});
  CHECK_FALSE(lookupVariable(child.variables, "GPUXRAY_KERNEL_METRICS"));

  auto message = [](RunOptions bad) -> std::string {
    try {
      checkCaptureOptions(bad);
    } catch (const std::exception& e) {
      return e.what();
    }
    return "accepted";
  };
  RunOptions chosen;
  chosen.kernel_metrics = "";
  child = buildChildEnvironment(setupFor(checkCaptureOptions(chosen)), {});
  CHECK(lookupVariable(child.variables, "GPUXRAY_KERNEL_METRICS_AUTO") == "1");
  CHECK_FALSE(lookupVariable(child.variables, "GPUXRAY_KERNEL_METRICS"));

  RunOptions bad;
  bad.kernel_metrics = "gemm(";
  CHECK(message(bad).rfind("--kernel-metrics 'gemm(': not a regular expression: ", 0) == 0);
  bad.kernel_metrics = "gemm";
  bad.kernel_metrics_count = "0";
  CHECK(message(bad) == "--kernel-metrics-count must be greater than 0, not '0'");
  bad.kernel_metrics_count = "1001";
  CHECK(message(bad) == "--kernel-metrics-count must be at most 1000, not 1001");
  bad.kernel_metrics_count = "many";
  CHECK(message(bad) == "--kernel-metrics-count must be a whole number greater than 0, not 'many'");
  bad = {};
  bad.kernel_metrics_count = "3";
  CHECK(message(bad) == "--kernel-metrics-count needs --kernel-metrics or --kernel-metrics-from");
  bad = {};
  bad.kernel_metrics = "gemm";
  bad.kernel_metrics_from = "first.json";
  CHECK(message(bad) == "--kernel-metrics REGEX and --kernel-metrics-from REPORT choose the kernels both: give one");
  bad = {};
  TempDir dir;
  std::string not_a_report = (dir.path() / "trace.json").string();
  std::ofstream(not_a_report) << "{\"traceEvents\": []}";
  bad.kernel_metrics_from = not_a_report;
  std::string error = message(bad);
  CHECK(error.rfind(not_a_report + ": ", 0) == 0);
  CHECK(error.find('\n') == std::string::npos);
}

TEST_CASE("run: --kernel-metrics-from takes the top kernels of a report, as exact names", "[run][kernel-metrics]") {
  CHECK(gpuxray::cli::exactNamesPattern({"void k<4>(float*)", "gemm"}) == "^(?:void k<4>\\(float\\*\\)|gemm)$");
  std::regex pattern(gpuxray::cli::exactNamesPattern({"void k<4>(float*)", "a.b"}));
  CHECK(std::regex_search("void k<4>(float*)", pattern));
  CHECK(std::regex_search("a.b", pattern));
  CHECK_FALSE(std::regex_search("axb", pattern));
  CHECK_FALSE(std::regex_search("void k<4>(float*) ", pattern));

  TempDir dir;
  gpuxray::testing::RunBuilder run("top", 1);
  auto& r0 = run.rank(0, "node-0");
  for (int i = 0; i < 7; ++i) r0.kernel("kernel_" + std::to_string(i), 1000.0 * i, 1000.0 * i + 100.0 * (i + 1));
  run.write(dir.path() / "traces");
  gpuxray::analysis::SessionOptions options;
  options.paths = {(dir.path() / "traces").string()};
  options.align = false;
  gpuxray::analysis::Session session(options);
  std::string path = (dir.path() / "first.json").string();
  std::ofstream(path) << gpuxray::report::renderJson(session.analyze());
  CHECK(gpuxray::cli::kernelPatternFromReport(path) == "^(?:kernel_6|kernel_5|kernel_4|kernel_3|kernel_2)$");
}

TEST_CASE("the injection library is looked for in $GPUXRAY_INJECT_LIBRARY, else beside gpuxray", "[run]") {
  using Paths = std::vector<fs::path>;
  CHECK(injectionLibraryCandidates("/x/lib.so", "/opt/bin", "/work") == Paths{"/x/lib.so"});
  CHECK(injectionLibraryCandidates("build/lib.so", "/opt/bin", "/work") == Paths{"/work/build/lib.so"});
  Paths beside = {"/opt/gpuxray/bin/libgpuxray_inject.so", "/opt/gpuxray/lib/libgpuxray_inject.so",
                  "/opt/gpuxray/lib/gpuxray/libgpuxray_inject.so"};
  CHECK(injectionLibraryCandidates(std::nullopt, "/opt/gpuxray/bin", "/work") == beside);
  CHECK(injectionLibraryCandidates("", "/opt/gpuxray/bin", "/work") == beside);
}

TEST_CASE("run ids: an exported GPUXRAY_RUN_ID wins, else host, local time and pid", "[run]") {
  CHECK(chooseRunId({"GPUXRAY_RUN_ID=job-42"}, "generated") == "job-42");
  CHECK(chooseRunId({"GPUXRAY_RUN_ID="}, "generated") == "generated");
  CHECK(chooseRunId({"PATH=/bin"}, "generated") == "generated");

  std::tm now{};
  now.tm_year = 2025 - 1900;
  now.tm_mon = 0;
  now.tm_mday = 2;
  now.tm_hour = 3;
  now.tm_min = 4;
  now.tm_sec = 5;
  CHECK(generateRunId("node7.cluster.example", now, 4242) == "node7-20250102-030405-4242");
  CHECK(generateRunId("odd host", now, 1) == "odd_host-20250102-030405-1");
  CHECK(generateRunId("", now, 1) == "host-20250102-030405-1");
  CHECK(isGeneratedRunId(generateRunId("node-7", now, 99)));
  CHECK_FALSE(isGeneratedRunId("job-42"));
  CHECK(defaultOutputDirName("slurm-17.0") == "gpuxray-slurm-17.0");
  CHECK(defaultOutputDirName("a/b c") == "gpuxray-a_b_c");
}

// --- The real binary -----------------------------------------------------------------------------

TEST_CASE("run passes the command's exit code on and reports the output directory", "[run]") {
  RunFixture fixture;
  auto seven = fixture.run("-o out -- sh -c 'exit 7'");
  CHECK(seven.exit_code == 7);
  CHECK(seven.err == fixture.summaryOf(realPath(fixture.dir.path() / "out")));

  auto zero = fixture.run("-o out -- true");
  CHECK(zero.exit_code == 0);
  CHECK(zero.term_signal == 0);
}

TEST_CASE("a command killed by a signal kills gpuxray with the same signal", "[run]") {
  RunFixture fixture;
  auto terminated = fixture.run("-o out -- sh -c 'kill -TERM $$'");
  CHECK(terminated.term_signal == SIGTERM);
  CHECK(terminated.exit_code == -1);
  CHECK(terminated.err == fixture.summaryOf(realPath(fixture.dir.path() / "out")));

  auto killed = fixture.run("-o out -- sh -c 'kill -KILL $$'");
  CHECK(killed.term_signal == SIGKILL);
}

TEST_CASE("signals sent to gpuxray reach the command", "[run]") {
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) {
    CAPTURE(signal_number);
    RunFixture fixture;
    std::string ready = fixture.dir / "ready";
    std::string marker = fixture.dir / "marker";
    std::string child = "trap 'kill $p; echo $0 > " + marker + "; exit 3' TERM INT HUP USR1; sleep 3 & p=$!; : > " +
                        ready + "; wait $p";
    std::string script =
        fixture.script("-o out -- sh -c " + quote(child) + " got") + " >/dev/null 2>" + quote(fixture.dir / "stderr");
    std::vector<char*> argv = {const_cast<char*>("sh"), const_cast<char*>("-c"), script.data(), nullptr};
    // gpuxray leaves signals that were ignored when it started alone (as for `gpuxray run ... &`
    // in a script); make sure these are not.
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, signal_number);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    int spawned = posix_spawn(&pid, "/bin/sh", nullptr, &attributes, argv.data(), environ);
    posix_spawnattr_destroy(&attributes);
    REQUIRE(spawned == 0);
    bool started = waitForFile(ready);
    CHECK(started);
    kill(pid, signal_number);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    INFO(readWholeFile(fixture.dir / "stderr"));
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == 3);
    REQUIRE(readWholeFile(marker) == "got\n");
  }
}

TEST_CASE("the command sees the library, output directory, run id and options in its environment", "[run]") {
  RunFixture fixture;
  auto result = fixture.run(
      "-o out/nested --capture all,-memory --buffer-limit-mb 32 --flush-interval-ms 250 --metrics "
      "--metric-interval-us 1000 --log-level debug -- env");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  auto env = parseEnv(result.out);
  std::string output_dir = realPath(fixture.dir.path() / "out" / "nested");
  CHECK(fs::is_directory(output_dir));
  CHECK(env["CUDA_INJECTION64_PATH"] == fixture.library);
  CHECK(env["NVTX_INJECTION64_PATH"] == fixture.library);
  CHECK(env["GPUXRAY_OUTPUT_DIR"] == output_dir);
  CHECK(isGeneratedRunId(env["GPUXRAY_RUN_ID"]));
  CHECK(env["GPUXRAY_CAPTURE"] == "all,-memory");
  CHECK(env["GPUXRAY_BUFFER_LIMIT_MB"] == "32");
  CHECK(env["GPUXRAY_FLUSH_INTERVAL_MS"] == "250");
  CHECK(env["GPUXRAY_METRICS"] == "1");
  CHECK(env["GPUXRAY_METRIC_INTERVAL_US"] == "1000");
  CHECK(env["GPUXRAY_LOG_LEVEL"] == "debug");
  CHECK(result.err == fixture.summaryOf(output_dir));
}

TEST_CASE("without options the command gets a fresh run id, ./gpuxray-<run id> and no capture settings", "[run]") {
  RunFixture fixture;
  auto result = fixture.run("-- env", "GPUXRAY_INJECT_LIBRARY=libgpuxray_inject.so");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  auto env = parseEnv(result.out);
  std::string run_id = env["GPUXRAY_RUN_ID"];
  REQUIRE_FALSE(run_id.empty());
  CHECK(env["GPUXRAY_OUTPUT_DIR"] == realPath(fixture.dir.path() / ("gpuxray-" + run_id)));
  CHECK(fs::is_directory(env["GPUXRAY_OUTPUT_DIR"]));
  CHECK(env["CUDA_INJECTION64_PATH"] == realPath(fixture.library));
  for (const char* name : {"GPUXRAY_CAPTURE", "GPUXRAY_BUFFER_LIMIT_MB", "GPUXRAY_FLUSH_INTERVAL_MS", "GPUXRAY_METRICS",
                           "GPUXRAY_METRIC_INTERVAL_US", "GPUXRAY_LOG_LEVEL"}) {
    CHECK(env.count(name) == 0);
  }
}

TEST_CASE("an exported GPUXRAY_RUN_ID is kept and names the default output directory", "[run]") {
  RunFixture fixture;
  auto result = fixture.run("-- env", "GPUXRAY_RUN_ID=job-42");
  REQUIRE(result.exit_code == 0);
  auto env = parseEnv(result.out);
  CHECK(env["GPUXRAY_RUN_ID"] == "job-42");
  CHECK(env["GPUXRAY_OUTPUT_DIR"] == realPath(fixture.dir.path() / "gpuxray-job-42"));
  CHECK(fs::is_directory(fixture.dir / "gpuxray-job-42"));
}

TEST_CASE("an injection path set elsewhere is replaced with a warning", "[run]") {
  RunFixture fixture;
  auto result = fixture.run("-o out -- env", "CUDA_INJECTION64_PATH=/opt/other/libinject.so");
  REQUIRE(result.exit_code == 0);
  CHECK(parseEnv(result.out)["CUDA_INJECTION64_PATH"] == fixture.library);
  CHECK(result.err == "gpuxray: warning: CUDA_INJECTION64_PATH was /opt/other/libinject.so; gpuxray replaces it with " +
                          fixture.library + " for this run (capture needs it)\n" +
                          fixture.summaryOf(realPath(fixture.dir.path() / "out")));
}

TEST_CASE("arguments after the command are the command's, not gpuxray's", "[run]") {
  RunFixture fixture;
  auto result = fixture.run("-o out -- printf '%s\\n' -o --metrics --help");
  CHECK(result.exit_code == 0);
  CHECK(result.out == "-o\n--metrics\n--help\n");
}

TEST_CASE("the trace files the command left are counted", "[run]") {
  RunFixture fixture;
  auto two = fixture.run(
      "-o out -- sh -c 'touch \"$GPUXRAY_OUTPUT_DIR\"/rank-00000.gpuxray "
      "\"$GPUXRAY_OUTPUT_DIR\"/rank-00001.gpuxray \"$GPUXRAY_OUTPUT_DIR\"/notes.txt'");
  CHECK(two.exit_code == 0);
  CHECK(two.err == "gpuxray: 2 trace files in " + realPath(fixture.dir.path() / "out") + "\n");

  auto one = fixture.run("-o one -- sh -c 'touch \"$GPUXRAY_OUTPUT_DIR\"/rank-00000.gpuxray'");
  CHECK(one.err == "gpuxray: 1 trace file in " + realPath(fixture.dir.path() / "one") + "\n");
}

TEST_CASE("a command that cannot be run exits 127 when missing, 126 when not executable", "[run]") {
  RunFixture fixture;
  auto missing = fixture.run("-- no-such-command-gpuxray-test");
  CHECK(missing.exit_code == 127);
  CHECK(missing.err == "gpuxray: error: cannot run 'no-such-command-gpuxray-test': No such file or directory\n");
  // The default output directory it made for nothing is gone again.
  for (const auto& entry : fs::directory_iterator(fixture.dir.path()))
    CHECK(entry.path().filename().string().rfind("gpuxray-", 0) != 0);

  auto not_executable = fixture.run("-o out -- " + fixture.library);
  CHECK(not_executable.exit_code == 126);
  CHECK(not_executable.err == "gpuxray: error: cannot run '" + fixture.library + "': Permission denied\n");
}

TEST_CASE("a missing injection library exits 2 before running anything", "[run]") {
  RunFixture fixture;
  std::string missing = fixture.dir / "missing.so";
  auto result = fixture.run("-o out -- touch ran", "GPUXRAY_INJECT_LIBRARY=" + quote(missing));
  CHECK(result.exit_code == 2);
  CHECK(result.err == "gpuxray: error: cannot find libgpuxray_inject.so (looked in: " + missing +
                          "); build it or set GPUXRAY_INJECT_LIBRARY\n");
  CHECK_FALSE(fs::exists(fixture.dir / "ran"));
  CHECK_FALSE(fs::exists(fixture.dir / "out"));
}

TEST_CASE("bad option values and a missing command are usage errors", "[run]") {
  RunFixture fixture;
  struct Case {
    std::string args;
    std::string err;
  };
  for (const Case& c : std::vector<Case>{
           {"--buffer-limit-mb 0 -- touch ran", "gpuxray: --buffer-limit-mb must be greater than 0, not '0'\n"},
           {"--flush-interval-ms soon -- touch ran",
            "gpuxray: --flush-interval-ms must be a whole number greater than 0, not 'soon'\n"},
           {"--log-level loud -- touch ran", "gpuxray: --log-level must be quiet, warn, info or debug, not 'loud'\n"},
           {"--capture kernel,gpu -- touch ran",
            "gpuxray: --capture: unknown category 'gpu' (known: all, kernel, memcpy, memset, memory, api, nvtx, sync, "
            "overhead; '-NAME' leaves one out, as in 'all,-memory')\n"},
           {"-o -- touch ran", "gpuxray: -o/--output needs a value\n"},
           {"--steps 10-5 -- touch ran", "gpuxray: --steps '10-5': expected a step range A-B with A <= B\n"},
           {"--delay=-1s -- touch ran", "gpuxray: --delay '-1s': expected a duration such as 30s, 500ms or 2m\n"},
           {"--capture-range gpu -- touch ran",
            "gpuxray: --capture-range 'gpu': expected cudaProfilerApi, nvtx:NAME[@DOMAIN] or trigger\n"},
           {"--capture-range cudaProfilerApi --steps 1-2 -- touch ran",
            "gpuxray: --steps and --capture-range cannot be combined: choose one\n"},
           {"--step-marker 'step (' --steps 1-2 -- touch ran",
            "gpuxray: --step-marker 'step (': not a regular expression: "},
           {"--ring -- touch ran", "gpuxray: --ring needs --max-size-mb N (the ring's size)\n"},
           {"--max-size-mb 0 -- touch ran", "gpuxray: --max-size-mb must be greater than 0, not '0'\n"},
           {"--kernel-metrics-count 2 -- touch ran",
            "gpuxray: --kernel-metrics-count needs --kernel-metrics or --kernel-metrics-from\n"},
           {"--kernel-metrics=gemm --kernel-metrics-count 0 -- touch ran",
            "gpuxray: --kernel-metrics-count must be greater than 0, not '0'\n"},
           {"--kernel-metrics='gemm(' -- touch ran", "gpuxray: --kernel-metrics 'gemm(': not a regular expression: "},
           {"-o out", "gpuxray: run needs a command to run after --, as in: gpuxray run -o DIR -- python train.py\n"},
       }) {
    auto result = fixture.run(c.args);
    CHECK(result.exit_code == 1);
    // A regular-expression error ends with the standard library's own words.
    if (c.err.back() == '\n') {
      CHECK(result.err == c.err);
    } else {
      CHECK(result.err.rfind(c.err, 0) == 0);
      CHECK(result.err.find('\n') == result.err.size() - 1);
    }
    CHECK_FALSE(fs::exists(fixture.dir / "ran"));
  }
  auto unknown = fixture.run("--no-such-option -- touch ran");
  CHECK(unknown.exit_code == 1);
  CHECK_FALSE(fs::exists(fixture.dir / "ran"));
}
