// Capture settings from the environment (set directly, or by `gpuxray run`). A bad value gets one
// warning and the default; it never stops the job.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inject/capture_window.h"
#include "inject/process_identity.h"

namespace gpuxray::inject {

enum class LogLevel { kQuiet = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

struct CaptureCategories {
  bool kernel = true;
  bool memcpy = true;
  bool memset = true;
  bool memory = true;
  bool api = true;
  bool nvtx = true;
  bool sync = true;
  bool overhead = true;
};

struct CaptureConfig {
  // GPUXRAY_OUTPUT_DIR
  std::string output_dir = "gpuxray-traces";
  // GPUXRAY_CAPTURE: "all" or a comma list of categories, "-name" removes one ("all,-memory").
  CaptureCategories categories;
  // GPUXRAY_BUFFER_LIMIT_MB: CUPTI buffers in memory at once; past it, records are dropped.
  uint64_t buffer_limit_bytes = 64ull << 20;
  // GPUXRAY_FLUSH_INTERVAL_MS: how often buffers are collected and written to the file.
  uint32_t flush_interval_ms = 1000;
  // GPUXRAY_LOG_LEVEL: quiet, warn, info, debug.
  LogLevel log_level = LogLevel::kWarn;
  // GPUXRAY_METRICS=1 and GPUXRAY_METRIC_INTERVAL_US: CUPTI PM sampling.
  bool metrics = false;
  uint32_t metric_interval_us = 1000;
  // GPUXRAY_KERNEL_METRICS (an ECMAScript regular expression over kernel names, mangled or not) and
  // GPUXRAY_KERNEL_METRICS_COUNT: the first N launches of each matching kernel are measured with
  // CUPTI's range profiler (kernel_metric_collector.h). Empty: off, unless
  // GPUXRAY_KERNEL_METRICS_AUTO=1: the kernels with the most time in the first seconds.
  std::string kernel_metrics;
  bool kernel_metrics_auto = false;
  uint32_t kernel_metrics_count = 3;
  // GPUXRAY_CUPTI_PATH: a libcupti to use instead of searching.
  std::string cupti_path;
  // GPUXRAY_DELAY, GPUXRAY_DURATION, GPUXRAY_CAPTURE_RANGE, GPUXRAY_CAPTURE_RANGE_COUNT,
  // GPUXRAY_STEPS, GPUXRAY_STEP_MARKER: when to record (default: the whole run).
  WindowPlan window;
  // GPUXRAY_MAX_SIZE_MB: the most one trace file holds (0: no bound); past it the capture stops,
  // or with GPUXRAY_RING=1 the oldest chunks are written over (a flight recorder).
  uint64_t max_file_bytes = 0;
  bool ring = false;
  // GPUXRAY_NVTX_RECORDER=0: CUPTI records the default NVTX domain's pushes and pops as it does
  // every other NVTX call, instead of gpuxray's own recorder (nvtx_recorder.h), at several times
  // the cost.
  bool nvtx_recorder = true;

  // One line per value that was not understood (the default was used).
  std::vector<std::string> warnings;

  // Each enabled category, for the file header.
  std::vector<std::string> activityNames() const;
  // "key=value" for each setting, for the file header.
  std::vector<std::string> optionLines() const;
};

CaptureConfig readCaptureConfig(const EnvironmentLookup& environment);

// The size of one CUPTI activity buffer.
inline constexpr size_t kActivityBufferBytes = 4u << 20;
// Buffers zeroed and ready before the first request (ActivityBuffers).
inline constexpr size_t kReadyActivityBuffers = 2;

}  // namespace gpuxray::inject
