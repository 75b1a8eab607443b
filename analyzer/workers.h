// A pool of threads for work split into independent items: the files a run is loaded from, the ranks
// read a second time, the cross-rank analyses, the critical path's steps, the rank files `simulate`
// writes.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace gpuxray {

// How many threads `jobs` means (0: one per core).
inline unsigned workerCount(unsigned jobs) {
  return jobs != 0 ? jobs : std::max(1u, std::thread::hardware_concurrency());
}

// Runs work(i) for i in [0, n) on up to `jobs` threads (0: one per core), the calling thread one of
// them, items taken in order as threads come free; rethrows the first error.
template <typename Work>
void onWorkers(size_t n, unsigned jobs, Work work) {
  auto count = static_cast<unsigned>(std::min<size_t>(workerCount(jobs), n));
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto loop = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        work(i);
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < count; ++t) threads.emplace_back(loop);
  loop();
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace gpuxray
