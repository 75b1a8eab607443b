#include "inject/capture_config.h"

#include <charconv>
#include <regex>
#include <string_view>

#include "proto/capture_windows.h"

namespace gpuxray::inject {
namespace {

struct CategoryName {
  const char* name;
  bool CaptureCategories::*flag;
};

constexpr CategoryName kCategories[] = {
    {"kernel", &CaptureCategories::kernel}, {"memcpy", &CaptureCategories::memcpy},
    {"memset", &CaptureCategories::memset}, {"memory", &CaptureCategories::memory},
    {"api", &CaptureCategories::api},       {"nvtx", &CaptureCategories::nvtx},
    {"sync", &CaptureCategories::sync},     {"overhead", &CaptureCategories::overhead},
};

bool parseCategories(std::string_view text, CaptureCategories& out) {
  CaptureCategories none;
  for (const auto& c : kCategories) none.*c.flag = false;
  CaptureCategories result = none;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(begin, end - begin);
    begin = end + 1;
    if (item.empty()) continue;
    bool remove = item.front() == '-';
    if (remove) item.remove_prefix(1);
    if (item == "all") {
      result = remove ? none : CaptureCategories{};
      continue;
    }
    bool known = false;
    for (const auto& c : kCategories) {
      if (item == c.name) {
        result.*c.flag = !remove;
        known = true;
      }
    }
    if (!known) return false;
  }
  out = result;
  return true;
}

template <typename Number>
bool parsePositive(std::string_view text, Number& out) {
  Number value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value <= 0) return false;
  out = value;
  return true;
}

template <typename Bad>
void readWindowPlan(const EnvironmentLookup& environment, WindowPlan& plan, Bad&& bad) {
  for (auto [name, field] : {std::pair{"GPUXRAY_DELAY", &WindowPlan::delay_ns}, {"GPUXRAY_DURATION", &WindowPlan::duration_ns}}) {
    const char* v = environment(name);
    if (v == nullptr || *v == '\0') continue;
    auto ns = format::parseDurationNs(v);
    if (ns && (*ns > 0 || field == &WindowPlan::delay_ns)) {
      plan.*field = *ns;
    } else {
      bad(name, v, "a duration such as 30s, 500ms or 2m", field == &WindowPlan::delay_ns ? "no delay" : "no limit");
    }
  }
  if (const char* v = environment("GPUXRAY_CAPTURE_RANGE"); v != nullptr && *v != '\0') {
    if (auto expected = format::parseCaptureRange(v, plan.range)) bad("GPUXRAY_CAPTURE_RANGE", v, *expected, "the whole run");
  }
  if (plan.range.kind == format::CaptureRange::Kind::kNvtx) plan.range_count = 1;
  if (const char* v = environment("GPUXRAY_CAPTURE_RANGE_COUNT"); v != nullptr && *v != '\0') {
    uint32_t count = 0;
    if (std::string_view(v) == "all") {
      plan.range_count = 0;
    } else if (parsePositive(v, count)) {
      plan.range_count = count;
    } else {
      bad("GPUXRAY_CAPTURE_RANGE_COUNT", v, "a number of ranges from 1 (or all)",
          plan.range.kind == format::CaptureRange::Kind::kNvtx ? "1" : "all");
    }
  }
  if (const char* v = environment("GPUXRAY_STEP_MARKER"); v != nullptr && *v != '\0') {
    try {
      std::regex check(v);
      plan.step_marker = v;
    } catch (const std::regex_error&) {
      bad("GPUXRAY_STEP_MARKER", v, "a regular expression", "ProfilerStep#N");
    }
  }
  if (const char* v = environment("GPUXRAY_STEPS"); v != nullptr && *v != '\0') {
    int64_t first = 0;
    int64_t last = 0;
    if (auto wrong = format::parseStepRange(v, first, last)) {
      bad("GPUXRAY_STEPS", v, *wrong, "the whole run");
    } else if (plan.range.kind != format::CaptureRange::Kind::kNone) {
      bad("GPUXRAY_STEPS", v, "usable with GPUXRAY_CAPTURE_RANGE", "the capture range alone");
    } else {
      plan.steps = std::pair{first, last};
    }
  }
}

}  // namespace

CaptureConfig readCaptureConfig(const EnvironmentLookup& environment) {
  CaptureConfig config;
  auto bad = [&](const char* name, const char* value, const std::string& expected, const std::string& fallback) {
    config.warnings.push_back(std::string(name) + "='" + value + "' is not " + expected + "; using " + fallback);
  };
  if (const char* v = environment("GPUXRAY_OUTPUT_DIR"); v != nullptr && *v != '\0') config.output_dir = v;
  if (const char* v = environment("GPUXRAY_CAPTURE"); v != nullptr && *v != '\0') {
    if (!parseCategories(v, config.categories))
      bad("GPUXRAY_CAPTURE", v, "a list of kernel,memcpy,memset,memory,api,nvtx,sync,overhead (or all, -name)", "all");
  }
  if (const char* v = environment("GPUXRAY_BUFFER_LIMIT_MB"); v != nullptr) {
    uint64_t megabytes = 0;
    if (parsePositive(v, megabytes) && megabytes >= 8 && megabytes <= 65536) {
      config.buffer_limit_bytes = megabytes << 20;
    } else {
      bad("GPUXRAY_BUFFER_LIMIT_MB", v, "a number of MiB from 8 to 65536", "64");
    }
  }
  if (const char* v = environment("GPUXRAY_FLUSH_INTERVAL_MS"); v != nullptr) {
    if (!parsePositive(v, config.flush_interval_ms) || config.flush_interval_ms < 10) {
      config.flush_interval_ms = 1000;
      bad("GPUXRAY_FLUSH_INTERVAL_MS", v, "a number of milliseconds of at least 10", "1000");
    }
  }
  if (const char* v = environment("GPUXRAY_LOG_LEVEL"); v != nullptr) {
    std::string_view level(v);
    if (level == "quiet") {
      config.log_level = LogLevel::kQuiet;
    } else if (level == "warn") {
      config.log_level = LogLevel::kWarn;
    } else if (level == "info") {
      config.log_level = LogLevel::kInfo;
    } else if (level == "debug") {
      config.log_level = LogLevel::kDebug;
    } else {
      bad("GPUXRAY_LOG_LEVEL", v, "quiet, warn, info or debug", "warn");
    }
  }
  // A switch: 1/on/true or 0/off/false; empty or unset keeps the default.
  auto readSwitch = [&](const char* name, bool& value) {
    const char* v = environment(name);
    if (v == nullptr || *v == '\0') return;
    std::string_view flag(v);
    if (flag == "1" || flag == "on" || flag == "true") {
      value = true;
    } else if (flag == "0" || flag == "off" || flag == "false") {
      value = false;
    } else {
      bad(name, v, "1 or 0", value ? "1" : "0");
    }
  };
  readSwitch("GPUXRAY_METRICS", config.metrics);
  readSwitch("GPUXRAY_NVTX_RECORDER", config.nvtx_recorder);
  if (const char* v = environment("GPUXRAY_METRIC_INTERVAL_US"); v != nullptr) {
    if (!parsePositive(v, config.metric_interval_us) || config.metric_interval_us < 100) {
      config.metric_interval_us = 1000;
      bad("GPUXRAY_METRIC_INTERVAL_US", v, "a number of microseconds of at least 100", "1000");
    }
  }
  if (const char* v = environment("GPUXRAY_KERNEL_METRICS"); v != nullptr && *v != '\0') {
    try {
      std::regex check(v);
      config.kernel_metrics = v;
    } catch (const std::regex_error& e) {
      bad("GPUXRAY_KERNEL_METRICS", v, std::string("a regular expression (") + e.what() + ")", "no kernel metrics");
    }
  }
  if (const char* v = environment("GPUXRAY_KERNEL_METRICS_AUTO"); v != nullptr && config.kernel_metrics.empty()) {
    std::string_view flag(v);
    if (flag == "1" || flag == "on" || flag == "true") {
      config.kernel_metrics_auto = true;
    } else if (!(flag == "0" || flag == "off" || flag == "false" || flag.empty())) {
      bad("GPUXRAY_KERNEL_METRICS_AUTO", v, "1 or 0", "0");
    }
  }
  if (const char* v = environment("GPUXRAY_KERNEL_METRICS_COUNT"); v != nullptr) {
    if (!parsePositive(v, config.kernel_metrics_count) || config.kernel_metrics_count > 1000) {
      config.kernel_metrics_count = 3;
      bad("GPUXRAY_KERNEL_METRICS_COUNT", v, "a number of launches from 1 to 1000", "3");
    }
  }
  if (const char* v = environment("GPUXRAY_CUPTI_PATH"); v != nullptr && *v != '\0') config.cupti_path = v;
  readWindowPlan(environment, config.window, bad);
  if (const char* v = environment("GPUXRAY_MAX_SIZE_MB"); v != nullptr && *v != '\0') {
    uint64_t megabytes = 0;
    if (parsePositive(v, megabytes) && megabytes <= (1u << 20)) {
      config.max_file_bytes = megabytes << 20;
    } else {
      bad("GPUXRAY_MAX_SIZE_MB", v, "a number of MiB from 1 to 1048576", "no bound");
    }
  }
  if (const char* v = environment("GPUXRAY_RING"); v != nullptr && *v != '\0') {
    std::string_view flag(v);
    if (flag == "1" || flag == "on" || flag == "true") {
      if (config.max_file_bytes > 0) {
        config.ring = true;
      } else {
        bad("GPUXRAY_RING", v, "usable without GPUXRAY_MAX_SIZE_MB", "no ring");
      }
    } else if (!(flag == "0" || flag == "off" || flag == "false")) {
      bad("GPUXRAY_RING", v, "1 or 0", "0");
    }
  }
  return config;
}

std::vector<std::string> CaptureConfig::activityNames() const {
  std::vector<std::string> names;
  for (const auto& c : kCategories) {
    if (categories.*c.flag) names.emplace_back(c.name);
  }
  return names;
}

std::vector<std::string> CaptureConfig::optionLines() const {
  static constexpr const char* kLevels[] = {"quiet", "warn", "info", "debug"};
  return {
      "output_dir=" + output_dir,
      "buffer_limit_mb=" + std::to_string(buffer_limit_bytes >> 20),
      "flush_interval_ms=" + std::to_string(flush_interval_ms),
      std::string("log_level=") + kLevels[static_cast<int>(log_level)],
      "metrics=" + std::string(metrics ? "1" : "0"),
      "metric_interval_us=" + std::to_string(metric_interval_us),
      "kernel_metrics=" +
          (!kernel_metrics.empty() ? kernel_metrics
                                   : std::string(kernel_metrics_auto ? "the top kernels of the first 2 s" : "off")) +
          (kernel_metrics.empty() && !kernel_metrics_auto
               ? ""
               : " (first " + std::to_string(kernel_metrics_count) + " launches each)"),
      "capture_windows=" + (window.wholeRun() ? std::string("whole run") : window.describe()),
      "max_size_mb=" + std::to_string(max_file_bytes >> 20) + (ring ? " (ring)" : ""),
      std::string("nvtx_recorder=") + (nvtx_recorder ? "gpuxray" : "cupti")};
}

}  // namespace gpuxray::inject
