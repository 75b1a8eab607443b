// What `gpuxray run` decides before it starts the command: the checked capture options, where the
// injection library is, the run id, and the environment the command gets. Everything here is a
// function of its arguments (no process state), so tests call it directly; run_command.cc does the
// process work (fork, exec, signals, wait).
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuxray::cli {

// The environment as `environ` holds it: "NAME=value" entries.
using Environment = std::vector<std::string>;

// The value of NAME, or nullopt when it is not set (the first entry wins, as getenv does).
std::optional<std::string> lookupVariable(const Environment& environment, std::string_view name);
// Sets NAME to value: replaces the first entry of that name, drops any later duplicates.
void setVariable(Environment& environment, std::string_view name, std::string_view value);

// `gpuxray run`'s options as given on the command line; nullopt for those not given.
struct RunOptions {
  std::optional<std::string> output_dir;
  std::optional<std::string> capture;
  std::optional<std::string> buffer_limit_mb;
  std::optional<std::string> flush_interval_ms;
  bool metrics = false;
  std::optional<std::string> metric_interval_us;
  // --kernel-metrics [REGEX]: given without a value, empty.
  std::optional<std::string> kernel_metrics;
  std::optional<std::string> kernel_metrics_count;
  std::optional<std::string> kernel_metrics_from;
  std::optional<std::string> log_level;
  std::optional<std::string> delay;
  std::optional<std::string> duration;
  std::optional<std::string> capture_range;
  std::optional<std::string> capture_range_count;
  std::optional<std::string> steps;
  std::optional<std::string> step_marker;
  std::optional<std::string> max_size_mb;
  bool ring = false;
  std::vector<std::string> command;
};

// The capture options after checking, each still only set when the user gave it: the injection
// library has the defaults.
struct CaptureSettings {
  std::optional<std::string> capture;  // normalized category list, e.g. "all,-memory"
  std::optional<uint64_t> buffer_limit_mb;
  std::optional<uint64_t> flush_interval_ms;
  bool metrics = false;
  std::optional<uint64_t> metric_interval_us;
  // The kernels --kernel-metrics measures, as one regular expression (GPUXRAY_KERNEL_METRICS), and
  // how many launches of each.
  std::optional<std::string> kernel_metrics;
  // --kernel-metrics without a pattern: the library chooses the kernels with the most time in the
  // first seconds (GPUXRAY_KERNEL_METRICS_AUTO).
  bool kernel_metrics_auto = false;
  std::optional<uint64_t> kernel_metrics_count;
  std::optional<std::string> log_level;
  // The capture windows, as checked text for GPUXRAY_DELAY ... GPUXRAY_STEP_MARKER.
  std::optional<std::string> delay;
  std::optional<std::string> duration;
  std::optional<std::string> capture_range;
  std::optional<std::string> capture_range_count;
  std::optional<std::string> steps;
  std::optional<std::string> step_marker;
  std::optional<uint64_t> max_size_mb;
  bool ring = false;
};

// Checks the option values (and that each given one has a value); throws UsageError naming the
// option and the bad value (InputError for a --kernel-metrics-from report that cannot be used).
CaptureSettings checkCaptureOptions(const RunOptions& options);

// Where to look for libgpuxray_inject.so, in order: $GPUXRAY_INJECT_LIBRARY alone when it is set
// (made absolute against `working_dir`), else next to the gpuxray executable, in <exe dir>/../lib
// and in <exe dir>/../lib/gpuxray.
std::vector<std::filesystem::path> injectionLibraryCandidates(const std::optional<std::string>& from_environment,
                                                              const std::filesystem::path& executable_dir,
                                                              const std::filesystem::path& working_dir);

// The run id every process of this run shares: GPUXRAY_RUN_ID when the caller's environment sets it
// (how several `gpuxray run` on several nodes share one), else `generated`.
std::string chooseRunId(const Environment& environment, const std::string& generated);
// "<short host>-<YYYYmmdd-HHMMSS>-<pid>", from the local time `now`.
std::string generateRunId(std::string_view hostname, const std::tm& now, long pid);
// "gpuxray-<run id>", with characters that do not belong in a file name replaced by '_'.
std::string defaultOutputDirName(std::string_view run_id);

// Everything the child's environment is made from.
struct RunSetup {
  std::string injection_library;  // absolute
  std::string output_dir;         // absolute
  std::string run_id;
  CaptureSettings capture;
};

struct ChildEnvironment {
  Environment variables;
  // One line each, without the "gpuxray: warning: " prefix.
  std::vector<std::string> warnings;
};

// The command's environment: `current` plus CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH (the
// library), GPUXRAY_OUTPUT_DIR, GPUXRAY_RUN_ID and a GPUXRAY_* variable for each option given.
// Warns when an injection path that pointed elsewhere is replaced.
ChildEnvironment buildChildEnvironment(const RunSetup& setup, const Environment& current);

}  // namespace gpuxray::cli
