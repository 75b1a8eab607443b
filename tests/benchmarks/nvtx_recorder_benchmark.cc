// What one NVTX range (nvtxRangePushA + nvtxRangePop) costs the calling thread through gpuxray's
// own recorder, with a name as PyTorch's emit_nvtx writes it, and with the capture thread
// collecting every 20 ms as the capture's flushes do. The peer is CUPTI's NVTX handling, which
// needs a GPU: scripts/gpu-check.sh measures both there, as the step time of
// examples/pytorch/train_transformer.py (about 2,100 such ranges a step) with and without capture.
//
//   nvtx_recorder_benchmark [--ranges N] [--reps N]
//
// Prints ns per range (median of the repetitions, CPU time of the calling thread) and the same
// loop against an inactive recorder (the handlers' floor: a thread-local count).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "inject/nvtx_recorder.h"

namespace {

uint64_t realtimeNs() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

uint64_t threadCpuNs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec);
}

// CPU time of the calling thread per range: on a shared machine its wall time counts other
// processes' turns too.
double nsPerRange(long ranges, const std::vector<std::string>& names) {
  uint64_t start = threadCpuNs();
  for (long i = 0; i < ranges; ++i) {
    gpuxray::inject::NvtxRecorder::rangePushA(names[static_cast<size_t>(i) % names.size()].c_str());
    gpuxray::inject::NvtxRecorder::rangePop();
  }
  return static_cast<double>(threadCpuNs() - start) / static_cast<double>(ranges);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  long ranges = 1'000'000;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--ranges") ranges = std::atol(argv[i + 1]);
    if (flag == "--reps") reps = std::atoi(argv[i + 1]);
  }
  // Distinct names, as emit_nvtx's (each carries its op_id).
  std::vector<std::string> names;
  for (int i = 0; i < 4096; ++i)
    names.push_back(fmt::format("aten::mm, seq = {}, op_id = {}, sizes = [[16, 256, 512], [512, 512]]", i, 7 * i));

  gpuxray::inject::NvtxRecorderHooks hooks;
  hooks.clock = realtimeNs;
  gpuxray::inject::NvtxRecorder recorder(hooks);
  std::vector<double> inactive, recorded;
  for (int r = 0; r < reps; ++r) inactive.push_back(nsPerRange(ranges, names));

  recorder.activate();
  std::atomic<bool> stop{false};
  std::thread collector([&] {
    while (!stop.load()) {
      recorder.collect(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  for (int r = 0; r < reps; ++r) recorded.push_back(nsPerRange(ranges, names));
  stop = true;
  collector.join();
  recorder.deactivate();
  recorder.collect(true);

  fmt::print("ranges={} reps={}\n", ranges, reps);
  fmt::print("recorded_ns_per_range={:.1f}\n", median(recorded));
  fmt::print("inactive_ns_per_range={:.1f}\n", median(inactive));
  fmt::print("dropped={}\n", recorder.dropped());
  return 0;
}
