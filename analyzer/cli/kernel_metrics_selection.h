// Which kernels `gpuxray run --kernel-metrics` measures: the pattern given, or the kernels that took
// the most time in an earlier run's report (--kernel-metrics-from), as one regular expression the
// injection library matches kernel names against (GPUXRAY_KERNEL_METRICS).
#pragma once

#include <string>
#include <vector>

namespace gpuxray::cli {

// How many of a report's kernels --kernel-metrics-from takes, most time first.
inline constexpr size_t kKernelsFromReport = 5;

// `names` as one ECMAScript expression that matches exactly those names.
std::string exactNamesPattern(const std::vector<std::string>& names);

// The top kernels of a `gpuxray analyze --format json` report, as exactNamesPattern. Throws
// InputError naming the file when it is no such report or lists no kernel.
std::string kernelPatternFromReport(const std::string& path, size_t top = kKernelsFromReport);

}  // namespace gpuxray::cli
