// NCCL's GPU times (%globaltimer) put on the capture clock, from host bounds and CUPTI's records of
// the NCCL kernels. Each case builds operations whose true capture-clock times it knows, gives the
// mapper only what the capture would see, and checks that the truth lies within the error written.

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <vector>

#include "inject/nccl_clock_mapping.h"

namespace {

using gpuxray::format::NcclOperationRecord;
using gpuxray::inject::NcclClockMapper;

// The GPU clock runs this far behind the capture clock in these cases.
constexpr uint64_t kGpuBehind = 4'000'000'123;

struct Truth {
  uint64_t start = 0;  // capture clock
  uint64_t end = 0;
};

struct Case {
  std::vector<NcclOperationRecord> records;
  std::vector<Truth> truth;
  std::vector<uint64_t> stop_seen;

  // An operation whose channels ran from `start` to `end` (capture clock), enqueued `enqueue_lead`
  // before and seen stopped `seen_lag` after.
  void add(uint64_t start, uint64_t end, uint64_t enqueue_lead, uint64_t seen_lag, uint32_t device = 0,
           uint64_t gpu_behind = kGpuBehind) {
    NcclOperationRecord r;
    r.device = device;
    r.enqueue_ns = start - enqueue_lead;
    r.gpu_start_ns = start - gpu_behind;
    r.gpu_end_ns = end - gpu_behind;
    records.push_back(r);
    truth.push_back({start, end});
    stop_seen.push_back(seen_lag == 0 ? 0 : end + seen_lag);
  }

  // The enqueue time stands for a host time before the kernel; the stop seen bounds the offset.
  NcclClockMapper::Operation operation(size_t i) {
    return {&records[i], records[i].enqueue_ns,
            stop_seen[i] == 0 ? std::numeric_limits<int64_t>::max()
                              : static_cast<int64_t>(stop_seen[i] - records[i].gpu_end_ns)};
  }

  void mapWith(NcclClockMapper& mapper) {
    std::vector<NcclClockMapper::Operation> ops;
    for (size_t i = 0; i < records.size(); ++i) ops.push_back(operation(i));
    mapper.map(ops);
  }

  // Every mapped time is within the error written of the truth.
  void checkWithinError() const {
    for (size_t i = 0; i < records.size(); ++i) {
      const auto& r = records[i];
      INFO("operation " << i << " error " << r.gpu_clock_error_ns);
      CHECK(static_cast<uint64_t>(std::llabs(static_cast<int64_t>(r.gpu_start_ns - truth[i].start))) <= r.gpu_clock_error_ns);
      CHECK(static_cast<uint64_t>(std::llabs(static_cast<int64_t>(r.gpu_end_ns - truth[i].end))) <= r.gpu_clock_error_ns);
    }
  }
};

constexpr uint64_t kBase = 1'700'000'000'000'000'000;

}  // namespace

TEST_CASE("nccl clock: NCCL kernel records pin the GPU times to within a microsecond, and name the kernel") {
  NcclClockMapper mapper;
  Case c;
  // Ten all-reduce kernels 1 ms apart, 200 µs long; the channels start 0.3-1.2 µs into the kernel
  // and stop 0.2-0.9 µs before its end. The host bounds are loose (50 µs, 2 ms).
  for (uint32_t i = 0; i < 10; ++i) {
    uint64_t kernel_start = kBase + i * 1'000'000;
    uint64_t kernel_end = kernel_start + 200'000;
    mapper.addKernel(0, kernel_start, kernel_end, 100 + i);
    c.add(kernel_start + 300 + 100 * i, kernel_end - 200 - 70 * i, 50'000, 2'000'000);
  }
  c.mapWith(mapper);
  c.checkWithinError();
  for (size_t i = 0; i < c.records.size(); ++i) {
    CHECK(c.records[i].kernel_correlation_id == 100 + i);
    // The tightest operations (i = 0 at the start, i = 0 at the end) leave 300 ns + 200 ns of play.
    CHECK(c.records[i].gpu_clock_error_ns <= 250);
  }
  CHECK(mapper.stats().by_kernels == 10);
  CHECK(mapper.stats().by_host_bounds == 0);
}

TEST_CASE("nccl clock: without kernel records, the host's enqueue and stop times bound the offset") {
  NcclClockMapper mapper;
  Case c;
  for (uint32_t i = 0; i < 5; ++i) {
    uint64_t start = kBase + i * 500'000;
    c.add(start, start + 80'000, 20'000 + i * 1000, 30'000 + i * 500);
  }
  c.mapWith(mapper);
  c.checkWithinError();
  // The tightest lead (20 µs) and lag (30 µs) leave 50 µs of play: 25 µs of error.
  CHECK(c.records[0].gpu_clock_error_ns == 25'000);
  CHECK(mapper.stats().by_host_bounds == 5);
}

TEST_CASE("nccl clock: among identical periodic kernels, the host bounds pick the right one") {
  NcclClockMapper mapper;
  Case c;
  for (uint32_t i = 0; i < 20; ++i) {
    uint64_t kernel_start = kBase + i * 100'000;
    mapper.addKernel(0, kernel_start, kernel_start + 50'000, 500 + i);
  }
  // Operations in kernels 7 and 8 only: the kernel bounds alone fit any shift by a multiple of
  // 100 µs; enqueue 30 µs ahead and a 40 µs lag rule out all but the right one.
  for (uint32_t i : {7u, 8u}) {
    uint64_t kernel_start = kBase + i * 100'000;
    c.add(kernel_start + 1000, kernel_start + 49'000, 30'000, 40'000);
  }
  c.mapWith(mapper);
  c.checkWithinError();
  CHECK(c.records[0].kernel_correlation_id == 507);
  CHECK(c.records[1].kernel_correlation_id == 508);
}

TEST_CASE("nccl clock: each batch gets its own offset, which follows a drift between the clocks") {
  NcclClockMapper mapper;
  for (int batch = 0; batch < 3; ++batch) {
    Case c;
    const uint64_t drift = static_cast<uint64_t>(batch) * 7'000;  // the GPU clock loses 7 µs per batch
    for (uint32_t i = 0; i < 4; ++i) {
      uint64_t kernel_start = kBase + static_cast<uint64_t>(batch) * 1'000'000'000 + i * 1'000'000;
      mapper.addKernel(0, kernel_start, kernel_start + 100'000, i);
      c.add(kernel_start + 500, kernel_start + 99'500, 10'000, 100'000);
    }
    for (auto& r : c.records) r.gpu_start_ns -= drift, r.gpu_end_ns -= drift;
    c.mapWith(mapper);
    c.checkWithinError();
    CHECK(c.records[0].gpu_clock_error_ns <= 500);
  }
}

TEST_CASE("nccl clock: operations without bounds keep the last offset, or stay as stamped and flagged") {
  NcclClockMapper mapper;
  SECTION("nothing to go by: kept as stamped, flagged unmapped, and counted") {
    Case c;
    c.add(kBase, kBase + 1000, 0, 0);
    c.records[0].enqueue_ns = 0;
    c.mapWith(mapper);
    CHECK(c.records[0].gpu_start_ns == kBase - kGpuBehind);
    CHECK(c.records[0].gpu_clock_unmapped);
    CHECK(mapper.stats().unmapped == 1);
  }
  SECTION("a bound on one side only is not enough: flagged, not passed off as mapped") {
    Case c;
    c.add(kBase, kBase + 1000, 0, 500);
    c.records[0].enqueue_ns = 0;
    c.mapWith(mapper);
    CHECK(c.records[0].gpu_clock_unmapped);
    CHECK(c.records[0].gpu_clock_error_ns == 0);
  }
  SECTION("after a batch that had bounds, the next one without uses its offset") {
    Case first;
    first.add(kBase, kBase + 1000, 100, 100);
    first.mapWith(mapper);
    Case second;
    second.add(kBase + 5'000'000, kBase + 5'001'000, 0, 0);
    second.records[0].enqueue_ns = 0;
    second.mapWith(mapper);
    second.checkWithinError();
    CHECK(second.records[0].gpu_clock_error_ns == 100);
    CHECK(mapper.stats().unmapped == 0);
  }
}

TEST_CASE("nccl clock: devices are mapped apart, and operations without GPU times are left alone") {
  NcclClockMapper mapper;
  Case c;
  c.add(kBase, kBase + 10'000, 1000, 1000, 0);
  // Device 1's clock is 3 ms ahead of device 0's: its own bounds must be used, not device 0's.
  c.add(kBase + 20'000, kBase + 30'000, 1000, 1000, 1, kGpuBehind - 3'000'000);
  NcclOperationRecord no_kernel_times;
  no_kernel_times.enqueue_ns = kBase;
  std::vector<NcclClockMapper::Operation> ops{c.operation(0), c.operation(1), {&no_kernel_times, kBase}};
  mapper.map(ops);
  c.checkWithinError();
  CHECK(no_kernel_times.gpu_start_ns == 0);
  CHECK(no_kernel_times.gpu_clock_error_ns == 0);
}

TEST_CASE("nccl clock: NCCL's kernels are told by their names") {
  using gpuxray::inject::isNcclKernelName;
  CHECK(isNcclKernelName("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"));
  CHECK(isNcclKernelName("ncclKernel_AllReduce_RING_LL_Sum_float"));
  // As CUPTI 13.0 names them on an H200 (NCCL 2.28.3): the symbol, not the demangled name.
  CHECK(isNcclKernelName("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"));
  CHECK(isNcclKernelName("_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE"));
  CHECK_FALSE(isNcclKernelName("_ZN2at6native29vectorized_elementwise_kernelILi8EEEviT0_T1_"));
  CHECK_FALSE(isNcclKernelName("_Z"));
  CHECK_FALSE(isNcclKernelName("void at::native::vectorized_elementwise_kernel<4>"));
}

// NCCL launches an operation's kernel before it starts the operation's events (enqueue.cc:
// ncclLaunchKernel, then hostStreamPlanTask), so the GPU often starts before the Coll start. The
// bound from below is the previous group's start; one operation whose own bounds are wrong (here:
// a bound from below 204 µs too late, as if taken after a preempted thread resumed) is an outlier.
TEST_CASE("nccl clock: kernels that start before their Coll start, and one outlier, still map within the error") {
  NcclClockMapper mapper;
  Case c;
  for (uint32_t i = 0; i < 40; ++i) {
    uint64_t start = kBase + i * 100'000;
    // The previous group started 12-19 µs before this kernel; the proxy saw the stop 2-5 µs late.
    c.add(start, start + 30'000, 12'000 + (i % 8) * 1000, 2'000 + (i % 4) * 1000);
  }
  c.records[17].enqueue_ns = c.truth[17].start + 204'000;
  c.mapWith(mapper);
  for (const auto& r : c.records) CHECK_FALSE(r.gpu_clock_unmapped);
  c.checkWithinError();
  // The tightest bounds: 12 µs before, 2 µs after: 7 µs of error at most.
  CHECK(c.records[0].gpu_clock_error_ns <= 7'000);
  CHECK(mapper.stats().outliers == 1);
  CHECK(mapper.stats().by_host_bounds == 40);
}
