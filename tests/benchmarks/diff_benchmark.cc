// `gpuxray diff BEFORE AFTER` against one `gpuxray analyze BEFORE`, the real binary timed as a child
// process (wall time and peak memory from wait4()). The target: a diff of two runs takes at most twice
// one analyze (it analyzes both sides, at the same time, then compares their results).
//
//   diff_benchmark BEFORE AFTER [--jobs N] [--repeat N]
//
// The runs are any two run directories; analyze_benchmark writes 64-rank runs of 1 million records
// per rank and keeps them with `analyze_benchmark --dir DIR --keep`.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tests/benchmarks/measured_child.h"

int main(int argc, char** argv) {
  std::vector<std::string> paths;
  std::string jobs = "0";
  int repeat = 3;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--jobs" && i + 1 < argc)
      jobs = argv[++i];
    else if (arg == "--repeat" && i + 1 < argc)
      repeat = std::max(1, std::stoi(argv[++i]));
    else
      paths.push_back(arg);
  }
  if (paths.size() != 2) {
    fmt::print(stderr, "usage: diff_benchmark BEFORE AFTER [--jobs N] [--repeat N]\n");
    return 1;
  }
  using gpuxray::benchmarks::ChildStderr;
  using gpuxray::benchmarks::runMeasured;
  // The best of `repeat` runs of each, alternating, so that both see the same machine load.
  double analyze_s = 1e30, diff_s = 1e30;
  uint64_t analyze_peak = 0, diff_peak = 0;
  for (int i = 0; i < repeat; ++i) {
    auto analyze =
        runMeasured({GPUXRAY_BINARY, "analyze", "-j", jobs, "--format", "json", paths[0]}, ChildStderr::kDiscarded);
    auto diff = runMeasured({GPUXRAY_BINARY, "diff", "-j", jobs, "--format", "json", paths[0], paths[1]},
                            ChildStderr::kDiscarded);
    if (analyze.exit_code != 0 || diff.exit_code != 0) {
      fmt::print(stderr, "diff_benchmark: analyze exited {}, diff {}\n", analyze.exit_code, diff.exit_code);
      return 1;
    }
    analyze_s = std::min(analyze_s, analyze.seconds), diff_s = std::min(diff_s, diff.seconds);
    analyze_peak = std::max(analyze_peak, analyze.peak_bytes), diff_peak = std::max(diff_peak, diff.peak_bytes);
  }
  fmt::print("analyze BEFORE:      {:.2f} s, peak {:.0f} MiB\n", analyze_s,
             static_cast<double>(analyze_peak) / (1 << 20));
  fmt::print("diff BEFORE AFTER:   {:.2f} s, peak {:.0f} MiB\n", diff_s, static_cast<double>(diff_peak) / (1 << 20));
  fmt::print("ratio diff/analyze:  {:.2f} (target <= 2)\n", diff_s / analyze_s);
  return 0;
}
