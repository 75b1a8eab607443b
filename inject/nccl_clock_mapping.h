// Puts NCCL's GPU times on the capture clock. NCCL stamps each channel's kernel work with the
// GPU's %globaltimer, a clock of its own; every other record uses the capture clock (CUPTI's).
//
// The offset between the two (capture - GPU) is bounded for each operation by what NCCL's order of
// calls guarantees (see CompletedNcclOperation):
// - from below, by a host time before the kernel could start: the operation's API call or kernel
//   launch (v5+), or the start of the previous group on its communicator. Not the operation's own
//   start event: NCCL launches the kernel first, so the GPU often starts before it;
// - from above, by when the proxy thread saw each channel start and stop, which it reports only
//   after the GPU stamped them;
// - by CUPTI, when it recorded the NCCL kernel that ran the operation: the channels run inside the
//   kernel, so offset ∈ [kernel_start - gpu_start, kernel_end - gpu_end].
// A batch of operations of one device is mapped with one offset: inside the range that the host
// bounds of the most of them share (an operation whose bounds disagree with the rest is an
// outlier, counted, and does not move the estimate) and that the kernel bounds of the most of them
// agree on. Half that range's width is the mapping's error, written with each operation. Each
// batch gets its own estimate, which follows a slow drift between the clocks. Without a range
// bounded on both sides, an earlier batch's estimate is used if the bounds allow it; otherwise the
// operations keep their GPU stamps, flagged gpu_clock_unmapped, never passed off as mapped.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "proto/records.h"

namespace gpuxray::inject {

// True for the kernels NCCL launches (ncclDevKernel_*, and ncclKernel_* before NCCL 2.19).
bool isNcclKernelName(std::string_view name);

struct NcclClockMappingStats {
  uint64_t by_kernels = 0;        // matched to CUPTI's records of NCCL kernels
  uint64_t by_host_bounds = 0;    // bounded by host times only (no NCCL kernel records)
  uint64_t by_earlier_batch = 0;  // an earlier batch's estimate, within this batch's bounds
  uint64_t unmapped = 0;          // no bounds on both sides: flagged gpu_clock_unmapped
  uint64_t outliers = 0;          // mapped, though their own host bounds disagreed with the rest
  uint64_t largest_error_ns = 0;
};

class NcclClockMapper {
 public:
  // An operation's GPU window (raw %globaltimer) and what bounds it (see CompletedNcclOperation).
  struct Operation {
    format::NcclOperationRecord* record = nullptr;
    uint64_t gpu_not_before_ns = 0;                                  // capture clock; 0: none
    int64_t max_clock_offset = std::numeric_limits<int64_t>::max();  // max: none
  };

  // A CUPTI record of an NCCL kernel (capture clock).
  void addKernel(uint32_t device, uint64_t start_ns, uint64_t end_ns, uint32_t correlation_id);

  // Rewrites the GPU times of each operation (those with any) onto the capture clock, and sets
  // gpu_clock_error_ns and, when found, kernel_correlation_id; or flags them gpu_clock_unmapped.
  void map(const std::vector<Operation>& operations);

  // Forgets kernels that ended before `ns`: no operation still to map can lie in them.
  void forgetKernelsBefore(uint64_t ns);

  const NcclClockMappingStats& stats() const { return stats_; }

 private:
  struct Kernel {
    uint64_t start = 0;
    uint64_t end = 0;
    uint32_t correlation_id = 0;
  };
  struct DeviceKernels {
    std::vector<Kernel> kernels;  // sorted by start before each use
    bool sorted = true;
    uint64_t longest = 0;
  };
  struct Estimate {
    int64_t offset = 0;
    uint64_t error = 0;
  };

  void mapDevice(DeviceKernels* kernels, const std::vector<Operation>& operations);
  std::optional<Estimate> estimateFromKernels(DeviceKernels& kernels, const std::vector<Operation>& operations,
                                              int64_t low, int64_t high) const;
  static const Kernel* containingKernel(const DeviceKernels& kernels, const format::NcclOperationRecord& record,
                                        int64_t offset);

  // Bounded so that a capture without operations to map cannot grow without limit.
  static constexpr size_t kMaxKernelsPerDevice = 1u << 16;

  std::map<uint32_t, DeviceKernels> devices_;
  std::map<uint32_t, Estimate> last_estimate_;
  NcclClockMappingStats stats_;
};

}  // namespace gpuxray::inject
