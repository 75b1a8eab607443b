#include "inject/clock_anchor.h"

#include <time.h>

namespace gpuxray::inject {
namespace {

uint64_t readClock(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

}  // namespace

uint64_t realtimeNs() { return readClock(CLOCK_REALTIME); }
uint64_t monotonicNs() { return readClock(CLOCK_MONOTONIC); }

format::ClockAnchor takeClockAnchor(const CaptureClock& capture_clock) {
  constexpr int kAttempts = 5;
  format::ClockAnchor best;
  uint64_t best_span = UINT64_MAX;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    uint64_t before = monotonicNs();
    uint64_t realtime = realtimeNs();
    uint64_t capture = capture_clock();
    uint64_t after = monotonicNs();
    uint64_t span = after - before;
    if (span < best_span) {
      best_span = span;
      best = {capture, realtime, before + span / 2, span / 2};
    }
  }
  return best;
}

}  // namespace gpuxray::inject
