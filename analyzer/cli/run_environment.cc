#include "analyzer/cli/run_environment.h"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <regex>
#include <tuple>

#include "analyzer/cli/kernel_metrics_selection.h"
#include "analyzer/errors.h"
#include "proto/capture_windows.h"

namespace gpuxray::cli {
namespace {

constexpr std::array<std::string_view, 8> kCategories = {"kernel", "memcpy", "memset", "memory",
                                                         "api",    "nvtx",   "sync",   "overhead"};
constexpr std::array<std::string_view, 4> kLogLevels = {"quiet", "warn", "info", "debug"};
// Large enough for any sensible value, small enough that the library can hold it in an int.
constexpr uint64_t kMaxNumber = 2147483647;

bool isNamed(std::string_view entry, std::string_view name) {
  return entry.size() > name.size() && entry.substr(0, name.size()) == name && entry[name.size()] == '=';
}

std::string_view trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

uint64_t checkPositive(std::string_view option, const std::string& text) {
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  if (text.empty() || !std::all_of(text.begin(), text.end(), is_digit))
    throw UsageError(fmt::format("{} must be a whole number greater than 0, not '{}'", option, text));
  uint64_t value = 0;
  auto [stop, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range || value > kMaxNumber)
    throw UsageError(fmt::format("{} must be at most {}, not '{}'", option, kMaxNumber, text));
  if (value == 0) throw UsageError(fmt::format("{} must be greater than 0, not '{}'", option, text));
  return value;
}

std::string checkCategories(const std::string& list) {
  std::string normalized;
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string_view item =
        trim(std::string_view(list).substr(start, comma == std::string::npos ? comma : comma - start));
    if (item.empty()) throw UsageError(fmt::format("--capture has an empty item in '{}'", list));
    std::string_view name = item.front() == '-' ? item.substr(1) : item;
    bool known = (name == "all" && item.front() != '-') ||
                 std::find(kCategories.begin(), kCategories.end(), name) != kCategories.end();
    if (!known) {
      throw UsageError(fmt::format(
          "--capture: unknown category '{}' (known: all, kernel, memcpy, memset, memory, api, nvtx, sync, overhead; "
          "'-NAME' leaves one out, as in 'all,-memory')",
          item));
    }
    normalized += (normalized.empty() ? "" : ",") + std::string(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return normalized;
}

bool isFileNameCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}

}  // namespace

std::optional<std::string> lookupVariable(const Environment& environment, std::string_view name) {
  for (const auto& entry : environment) {
    if (isNamed(entry, name)) return entry.substr(name.size() + 1);
  }
  return std::nullopt;
}

void setVariable(Environment& environment, std::string_view name, std::string_view value) {
  std::string entry = fmt::format("{}={}", name, value);
  auto first = std::find_if(environment.begin(), environment.end(), [&](const auto& e) { return isNamed(e, name); });
  if (first == environment.end()) {
    environment.push_back(std::move(entry));
    return;
  }
  *first = std::move(entry);
  environment.erase(std::remove_if(first + 1, environment.end(), [&](const auto& e) { return isNamed(e, name); }),
                    environment.end());
}

// The grammar is proto/capture_windows.h's, which the injection library reads the variables with.
void checkWindowOptions(const RunOptions& options, CaptureSettings& settings) {
  for (auto [option, value] : {std::pair{"--delay", &options.delay}, {"--duration", &options.duration},
                               {"--capture-range", &options.capture_range},
                               {"--capture-range-count", &options.capture_range_count}, {"--steps", &options.steps},
                               {"--step-marker", &options.step_marker}}) {
    if (*value && ((*value)->empty() || **value == "--")) throw UsageError(fmt::format("{} needs a value", option));
  }
  for (auto [option, value, target] : {std::tuple{"--delay", &options.delay, &settings.delay},
                                       {"--duration", &options.duration, &settings.duration}}) {
    if (!*value) continue;
    auto ns = format::parseDurationNs(**value);
    if (!ns || (*ns == 0 && target == &settings.duration))
      throw UsageError(fmt::format("{} '{}': expected a duration such as 30s, 500ms or 2m", option, **value));
    *target = **value;
  }
  format::CaptureRange range;
  if (options.capture_range) {
    if (auto expected = format::parseCaptureRange(*options.capture_range, range))
      throw UsageError(fmt::format("--capture-range '{}': expected {}", *options.capture_range, *expected));
    settings.capture_range = options.capture_range;
  }
  if (options.capture_range_count) {
    if (!options.capture_range) throw UsageError("--capture-range-count needs --capture-range");
    if (*options.capture_range_count != "all") checkPositive("--capture-range-count", *options.capture_range_count);
    settings.capture_range_count = options.capture_range_count;
  }
  if (options.steps) {
    if (options.capture_range) throw UsageError("--steps and --capture-range cannot be combined: choose one");
    int64_t first = 0;
    int64_t last = 0;
    if (auto wrong = format::parseStepRange(*options.steps, first, last))
      throw UsageError(fmt::format("--steps '{}': expected {}", *options.steps, *wrong));
    settings.steps = options.steps;
  }
  if (options.step_marker) {
    if (!options.steps) throw UsageError("--step-marker needs --steps");
    try {
      std::regex check(*options.step_marker);
    } catch (const std::regex_error& e) {
      throw UsageError(fmt::format("--step-marker '{}': not a regular expression: {}", *options.step_marker, e.what()));
    }
    settings.step_marker = options.step_marker;
  }
}

namespace {

void checkKernelMetricOptions(const RunOptions& options, CaptureSettings& settings) {
  if (options.kernel_metrics_from) {
    if (options.kernel_metrics_from->empty() || *options.kernel_metrics_from == "--")
      throw UsageError("--kernel-metrics-from needs a value");
    if (options.kernel_metrics && !options.kernel_metrics->empty())
      throw UsageError("--kernel-metrics REGEX and --kernel-metrics-from REPORT choose the kernels both: give one");
    settings.kernel_metrics = kernelPatternFromReport(*options.kernel_metrics_from);
  } else if (options.kernel_metrics && (options.kernel_metrics->empty() || *options.kernel_metrics == "--")) {
    settings.kernel_metrics_auto = true;
  } else if (options.kernel_metrics) {
    try {
      std::regex check(*options.kernel_metrics);
    } catch (const std::regex_error& e) {
      throw UsageError(
          fmt::format("--kernel-metrics '{}': not a regular expression: {}", *options.kernel_metrics, e.what()));
    }
    settings.kernel_metrics = options.kernel_metrics;
  }
  if (options.kernel_metrics_count) {
    if (!settings.kernel_metrics && !settings.kernel_metrics_auto)
      throw UsageError("--kernel-metrics-count needs --kernel-metrics or --kernel-metrics-from");
    if (options.kernel_metrics_count->empty() || *options.kernel_metrics_count == "--")
      throw UsageError("--kernel-metrics-count needs a value");
    settings.kernel_metrics_count = checkPositive("--kernel-metrics-count", *options.kernel_metrics_count);
    if (*settings.kernel_metrics_count > 1000)
      throw UsageError(
          fmt::format("--kernel-metrics-count must be at most 1000, not {}", *options.kernel_metrics_count));
  }
}

}  // namespace

CaptureSettings checkCaptureOptions(const RunOptions& options) {
  // CLI11 takes the "--" after an option that lacks its value as the value.
  auto require_value = [](std::string_view option, const std::optional<std::string>& value) {
    if (value && (value->empty() || *value == "--")) throw UsageError(fmt::format("{} needs a value", option));
  };
  require_value("-o/--output", options.output_dir);
  require_value("--capture", options.capture);
  require_value("--buffer-limit-mb", options.buffer_limit_mb);
  require_value("--flush-interval-ms", options.flush_interval_ms);
  require_value("--metric-interval-us", options.metric_interval_us);
  require_value("--log-level", options.log_level);

  CaptureSettings settings;
  if (options.capture) settings.capture = checkCategories(*options.capture);
  if (options.buffer_limit_mb) settings.buffer_limit_mb = checkPositive("--buffer-limit-mb", *options.buffer_limit_mb);
  if (options.flush_interval_ms)
    settings.flush_interval_ms = checkPositive("--flush-interval-ms", *options.flush_interval_ms);
  settings.metrics = options.metrics;
  if (options.metric_interval_us)
    settings.metric_interval_us = checkPositive("--metric-interval-us", *options.metric_interval_us);
  if (options.log_level) {
    if (std::find(kLogLevels.begin(), kLogLevels.end(), *options.log_level) == kLogLevels.end())
      throw UsageError(fmt::format("--log-level must be quiet, warn, info or debug, not '{}'", *options.log_level));
    settings.log_level = options.log_level;
  }
  checkWindowOptions(options, settings);
  checkKernelMetricOptions(options, settings);
  if (options.max_size_mb) {
    require_value("--max-size-mb", options.max_size_mb);
    settings.max_size_mb = checkPositive("--max-size-mb", *options.max_size_mb);
    if (*settings.max_size_mb > (1u << 20))
      throw UsageError(fmt::format("--max-size-mb must be at most 1048576, not {}", *options.max_size_mb));
  }
  if (options.ring && !options.max_size_mb) throw UsageError("--ring needs --max-size-mb N (the ring's size)");
  settings.ring = options.ring;
  return settings;
}

std::vector<std::filesystem::path> injectionLibraryCandidates(const std::optional<std::string>& from_environment,
                                                              const std::filesystem::path& executable_dir,
                                                              const std::filesystem::path& working_dir) {
  if (from_environment && !from_environment->empty()) {
    std::filesystem::path path(*from_environment);
    return {path.is_absolute() ? path : working_dir / path};
  }
  const std::filesystem::path name = "libgpuxray_inject.so";
  return {executable_dir / name, (executable_dir / ".." / "lib" / name).lexically_normal(),
          (executable_dir / ".." / "lib" / "gpuxray" / name).lexically_normal()};
}

std::string chooseRunId(const Environment& environment, const std::string& generated) {
  auto given = lookupVariable(environment, "GPUXRAY_RUN_ID");
  return given && !given->empty() ? *given : generated;
}

std::string generateRunId(std::string_view hostname, const std::tm& now, long pid) {
  std::string host(hostname.substr(0, hostname.find('.')));
  std::replace_if(
      host.begin(), host.end(), [](char c) { return !isFileNameCharacter(c); }, '_');
  if (host.empty()) host = "host";
  return fmt::format("{}-{:04}{:02}{:02}-{:02}{:02}{:02}-{}", host, now.tm_year + 1900, now.tm_mon + 1, now.tm_mday,
                     now.tm_hour, now.tm_min, now.tm_sec, pid);
}

std::string defaultOutputDirName(std::string_view run_id) {
  std::string name = fmt::format("gpuxray-{}", run_id);
  std::replace_if(
      name.begin(), name.end(), [](char c) { return !isFileNameCharacter(c); }, '_');
  return name;
}

ChildEnvironment buildChildEnvironment(const RunSetup& setup, const Environment& current) {
  ChildEnvironment child{current, {}};
  for (std::string_view name : {"CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"}) {
    auto previous = lookupVariable(current, name);
    if (previous && !previous->empty() && *previous != setup.injection_library) {
      child.warnings.push_back(fmt::format("{} was {}; gpuxray replaces it with {} for this run (capture needs it)",
                                           name, *previous, setup.injection_library));
    }
    setVariable(child.variables, name, setup.injection_library);
  }
  // NCCL loads one profiler plugin: a user's own choice is kept, and the capture then falls back to
  // NCCL's NVTX ranges.
  auto nccl_plugin = lookupVariable(current, "NCCL_PROFILER_PLUGIN");
  if (!nccl_plugin || nccl_plugin->empty()) {
    setVariable(child.variables, "NCCL_PROFILER_PLUGIN", setup.injection_library);
  } else if (*nccl_plugin != setup.injection_library) {
    child.warnings.push_back(fmt::format(
        "NCCL_PROFILER_PLUGIN is {}, so NCCL loads that plugin and gpuxray takes NCCL's operations from its NVTX "
        "ranges (no algorithm, protocol or channels; none if NVTX is not captured); unset it for full NCCL capture",
        *nccl_plugin));
  }
  setVariable(child.variables, "GPUXRAY_OUTPUT_DIR", setup.output_dir);
  setVariable(child.variables, "GPUXRAY_RUN_ID", setup.run_id);

  const CaptureSettings& capture = setup.capture;
  if (capture.capture) setVariable(child.variables, "GPUXRAY_CAPTURE", *capture.capture);
  if (capture.buffer_limit_mb)
    setVariable(child.variables, "GPUXRAY_BUFFER_LIMIT_MB", std::to_string(*capture.buffer_limit_mb));
  if (capture.flush_interval_ms)
    setVariable(child.variables, "GPUXRAY_FLUSH_INTERVAL_MS", std::to_string(*capture.flush_interval_ms));
  if (capture.metrics) setVariable(child.variables, "GPUXRAY_METRICS", "1");
  if (capture.metric_interval_us) {
    setVariable(child.variables, "GPUXRAY_METRIC_INTERVAL_US", std::to_string(*capture.metric_interval_us));
    auto metrics = lookupVariable(child.variables, "GPUXRAY_METRICS");
    if (!metrics || metrics->empty() || *metrics == "0")
      child.warnings.push_back("--metric-interval-us has no effect without --metrics");
  }
  if (capture.kernel_metrics) setVariable(child.variables, "GPUXRAY_KERNEL_METRICS", *capture.kernel_metrics);
  if (capture.kernel_metrics_auto) setVariable(child.variables, "GPUXRAY_KERNEL_METRICS_AUTO", "1");
  if (capture.kernel_metrics_count)
    setVariable(child.variables, "GPUXRAY_KERNEL_METRICS_COUNT", std::to_string(*capture.kernel_metrics_count));
  if (capture.log_level) setVariable(child.variables, "GPUXRAY_LOG_LEVEL", *capture.log_level);
  for (auto [name, value] : {std::pair{"GPUXRAY_DELAY", &capture.delay}, {"GPUXRAY_DURATION", &capture.duration},
                             {"GPUXRAY_CAPTURE_RANGE", &capture.capture_range},
                             {"GPUXRAY_CAPTURE_RANGE_COUNT", &capture.capture_range_count},
                             {"GPUXRAY_STEPS", &capture.steps}, {"GPUXRAY_STEP_MARKER", &capture.step_marker}}) {
    if (*value) setVariable(child.variables, name, **value);
  }
  if (capture.max_size_mb) setVariable(child.variables, "GPUXRAY_MAX_SIZE_MB", std::to_string(*capture.max_size_mb));
  if (capture.ring) setVariable(child.variables, "GPUXRAY_RING", "1");
  return child;
}

}  // namespace gpuxray::cli
