// Reads the capture clock together with CLOCK_REALTIME and CLOCK_MONOTONIC, so the analyzer can put
// ranks (and hosts) on one time base.
#pragma once

#include <cstdint>
#include <functional>

#include "proto/records.h"

namespace gpuxray::inject {

// The clock every event timestamp uses (CUPTI's cuptiGetTimestamp in a live capture).
using CaptureClock = std::function<uint64_t()>;

// Reads the clocks several times and keeps the tightest reading: its uncertainty is half the time
// the reads took.
format::ClockAnchor takeClockAnchor(const CaptureClock& capture_clock);

uint64_t realtimeNs();
uint64_t monotonicNs();

}  // namespace gpuxray::inject
