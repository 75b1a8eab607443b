// What the capture's per-launch benchmarks (window_benchmark, kernel_metrics_benchmark) share: their
// options (--launches N, --reps N), the process's CPU clock, the activity records CUPTI delivers for
// one kernel launch, and the median cost of each mode over the repetitions, the modes alternated so
// that drift in the machine's load spreads over all of them.
#pragma once

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "tests/support/fake_cupti.h"

namespace gpuxray::benchmarks {

struct LaunchLoopOptions {
  uint32_t launches = 200'000;
  int reps = 5;
};

// The options, or nothing after printing the usage line (a bad option or value).
inline std::optional<LaunchLoopOptions> parseLaunchLoopOptions(int argc, char** argv, std::string_view program) {
  LaunchLoopOptions options;
  for (int i = 1; i < argc; i += 2) {
    std::string_view option = argv[i];
    if (i + 1 < argc && option == "--launches") {
      options.launches = static_cast<uint32_t>(std::strtoul(argv[i + 1], nullptr, 10));
    } else if (i + 1 < argc && option == "--reps") {
      options.reps = std::atoi(argv[i + 1]);
    } else {
      options.launches = 0;
    }
  }
  if (options.launches == 0 || options.reps <= 0) {
    fmt::print(stderr, "usage: {} [--launches N] [--reps N]\n", program);
    return std::nullopt;
  }
  return options;
}

inline uint64_t processCpuNs() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

// CUPTI's activity records of one cudaLaunchKernel (the API call, then its kernel 5 us later), queued
// on the fake for the capture's next buffer.
inline void queueLaunchRecords(testing::FakeCupti& fake, uint32_t correlation, const char* kernel_name) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t t = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
  fake.queue(testing::launchActivity(correlation, t, 2000));
  fake.queue(
      testing::kernelActivity({.name = kernel_name, .correlation = correlation, .start = t + 5000, .duration = 4000}));
}

// measure(mode) gives one repetition's cost; the result is each mode's median over `reps`.
template <typename Mode, typename Measure>
std::map<Mode, double> medianPerMode(std::span<const std::pair<Mode, const char*>> modes, int reps, Measure&& measure) {
  std::map<Mode, std::vector<double>> samples;
  for (int rep = 0; rep < reps; ++rep) {
    for (const auto& [mode, name] : modes) samples[mode].push_back(measure(mode));
  }
  std::map<Mode, double> median;
  for (auto& [mode, values] : samples) {
    std::sort(values.begin(), values.end());
    median[mode] = values[values.size() / 2];
  }
  return median;
}

}  // namespace gpuxray::benchmarks
