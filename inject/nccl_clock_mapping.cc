#include "inject/nccl_clock_mapping.h"

#include <algorithm>

namespace gpuxray::inject {
namespace {

constexpr int64_t kNoLowerBound = std::numeric_limits<int64_t>::min();
constexpr int64_t kNoUpperBound = std::numeric_limits<int64_t>::max();
// Without host bounds every kernel is a candidate for every operation; this many suffice.
constexpr size_t kMaxUnboundedOperations = 256;

int64_t difference(uint64_t a, uint64_t b) {
  return static_cast<int64_t>(a - b);
}

// a + b, held inside int64's range.
int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a, b, &sum)) return b > 0 ? kNoUpperBound : kNoLowerBound;
  return sum;
}

uint64_t shifted(uint64_t ns, int64_t offset) {
  return static_cast<uint64_t>(static_cast<int64_t>(ns) + offset);
}

}  // namespace

bool isNcclKernelName(std::string_view name) {
  // CUPTI names kernels by their symbols, and NCCL's are C++ functions: _Z39ncclDevKernel_AllReduce_...
  if (name.starts_with("_Z")) {
    name.remove_prefix(2);
    size_t digits = 0;
    while (digits < name.size() && name[digits] >= '0' && name[digits] <= '9') ++digits;
    if (digits == 0) return false;
    name.remove_prefix(digits);
  }
  return name.starts_with("ncclDevKernel") || name.starts_with("ncclKernel");
}

void NcclClockMapper::addKernel(uint32_t device, uint64_t start_ns, uint64_t end_ns, uint32_t correlation_id) {
  if (end_ns < start_ns) return;
  DeviceKernels& device_kernels = devices_[device];
  auto& kernels = device_kernels.kernels;
  if (kernels.size() >= kMaxKernelsPerDevice) {
    if (!device_kernels.sorted)
      std::sort(kernels.begin(), kernels.end(), [](auto& a, auto& b) { return a.start < b.start; });
    device_kernels.sorted = true;
    kernels.erase(kernels.begin(), kernels.begin() + static_cast<std::ptrdiff_t>(kernels.size() / 2));
  }
  if (!kernels.empty() && start_ns < kernels.back().start) device_kernels.sorted = false;
  kernels.push_back({start_ns, end_ns, correlation_id});
  device_kernels.longest = std::max(device_kernels.longest, end_ns - start_ns);
}

void NcclClockMapper::forgetKernelsBefore(uint64_t ns) {
  for (auto& [device, device_kernels] : devices_) {
    auto& kernels = device_kernels.kernels;
    std::erase_if(kernels, [ns](const Kernel& k) { return k.end < ns; });
  }
}

void NcclClockMapper::map(const std::vector<Operation>& operations) {
  std::map<uint32_t, std::vector<Operation>> by_device;
  for (const Operation& op : operations) {
    if (op.record != nullptr && op.record->gpu_start_ns != 0 && op.record->gpu_end_ns >= op.record->gpu_start_ns)
      by_device[op.record->device].push_back(op);
  }
  for (auto& [device, device_operations] : by_device) {
    auto kernels = devices_.find(device);
    mapDevice(kernels == devices_.end() ? nullptr : &kernels->second, device_operations);
  }
}

namespace {

struct Range {
  int64_t low = kNoLowerBound;
  int64_t high = kNoUpperBound;
  bool bounded() const { return low != kNoLowerBound && high != kNoUpperBound; }
  bool holds(int64_t offset) const { return low <= offset && offset <= high; }
};

// The offset range that the most of `ranges` hold: the intersection of those that agree.
Range consensus(const std::vector<Range>& ranges) {
  // +1 opens a range, -1 closes one; opens sort first at a tie, so ranges that touch overlap.
  std::vector<std::pair<int64_t, int>> endpoints;
  endpoints.reserve(2 * ranges.size());
  for (const Range& r : ranges) {
    if (r.low > r.high) continue;
    endpoints.emplace_back(r.low, +1);
    endpoints.emplace_back(r.high, -1);
  }
  if (endpoints.empty()) return {};
  std::sort(endpoints.begin(), endpoints.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
  int depth = 0, best_depth = 0;
  Range best;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    depth += endpoints[i].second;
    if (endpoints[i].second > 0 && depth > best_depth) {
      best_depth = depth;
      best = {endpoints[i].first, i + 1 < endpoints.size() ? endpoints[i + 1].first : endpoints[i].first};
    }
  }
  return best;
}

}  // namespace

void NcclClockMapper::mapDevice(DeviceKernels* kernels, const std::vector<Operation>& operations) {
  const uint32_t device = operations.front().record->device;
  std::vector<Range> bounds;
  bounds.reserve(operations.size());
  for (const Operation& op : operations) {
    const auto& r = *op.record;
    Range range;
    if (op.gpu_not_before_ns != 0) range.low = difference(op.gpu_not_before_ns, r.gpu_start_ns);
    range.high = op.max_clock_offset;
    bounds.push_back(range);
  }
  const Range agreed = consensus(bounds);

  std::optional<Estimate> estimate;
  bool by_kernels = false, by_earlier = false;
  if (kernels != nullptr && !kernels->kernels.empty()) {
    estimate = estimateFromKernels(*kernels, operations, agreed.low, agreed.high);
    by_kernels = estimate.has_value();
  }
  if (!estimate && agreed.bounded()) {
    estimate =
        Estimate{agreed.low + (agreed.high - agreed.low) / 2, static_cast<uint64_t>(agreed.high - agreed.low) / 2};
  }
  if (!estimate) {
    if (auto last = last_estimate_.find(device); last != last_estimate_.end() && agreed.holds(last->second.offset)) {
      estimate = last->second;
      by_earlier = true;
    }
  } else {
    last_estimate_[device] = *estimate;
  }

  uint64_t count = operations.size();
  if (!estimate) {
    for (const Operation& op : operations) op.record->gpu_clock_unmapped = true;
    stats_.unmapped += count;
    return;
  }
  for (size_t i = 0; i < operations.size(); ++i) {
    auto& r = *operations[i].record;
    if (by_kernels) {
      if (const Kernel* kernel = containingKernel(*kernels, r, estimate->offset))
        r.kernel_correlation_id = kernel->correlation_id;
    }
    if (!bounds[i].holds(estimate->offset)) ++stats_.outliers;
    r.gpu_start_ns = shifted(r.gpu_start_ns, estimate->offset);
    r.gpu_end_ns = shifted(r.gpu_end_ns, estimate->offset);
    r.gpu_clock_error_ns = estimate->error;
  }
  (by_kernels ? stats_.by_kernels : by_earlier ? stats_.by_earlier_batch : stats_.by_host_bounds) += count;
  stats_.largest_error_ns = std::max(stats_.largest_error_ns, estimate->error);
}

// The offset range that the kernel bounds of the most operations share, within [low, high].
std::optional<NcclClockMapper::Estimate> NcclClockMapper::estimateFromKernels(DeviceKernels& device_kernels,
                                                                              const std::vector<Operation>& operations,
                                                                              int64_t low, int64_t high) const {
  auto& kernels = device_kernels.kernels;
  if (!device_kernels.sorted) {
    std::sort(kernels.begin(), kernels.end(), [](const Kernel& a, const Kernel& b) { return a.start < b.start; });
    device_kernels.sorted = true;
  }
  const bool bounded = low != kNoLowerBound || high != kNoUpperBound;
  const size_t considered = bounded ? operations.size() : std::min(operations.size(), kMaxUnboundedOperations);

  // Interval endpoints: +1 opens a candidate offset range, -1 closes one (opens sort first, so
  // ranges that touch count as overlapping).
  std::vector<std::pair<int64_t, int>> endpoints;
  for (size_t i = 0; i < considered; ++i) {
    const auto& r = *operations[i].record;
    // A containing kernel starts at or before gpu_start + high and ends at or after gpu_end + low,
    // so it starts no earlier than gpu_end + low - longest.
    int64_t first_start = saturatingAdd(saturatingAdd(static_cast<int64_t>(r.gpu_end_ns), low),
                                        -static_cast<int64_t>(device_kernels.longest));
    int64_t last_start = saturatingAdd(static_cast<int64_t>(r.gpu_start_ns), high);
    auto it = std::lower_bound(kernels.begin(), kernels.end(), first_start,
                               [](const Kernel& k, int64_t value) { return static_cast<int64_t>(k.start) < value; });
    for (; it != kernels.end() && static_cast<int64_t>(it->start) <= last_start; ++it) {
      int64_t from = std::max(difference(it->start, r.gpu_start_ns), low);
      int64_t to = std::min(difference(it->end, r.gpu_end_ns), high);
      if (from > to) continue;
      endpoints.emplace_back(from, +1);
      endpoints.emplace_back(to, -1);
    }
  }
  if (endpoints.empty()) return std::nullopt;
  std::sort(endpoints.begin(), endpoints.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : a.second > b.second; });
  int depth = 0;
  int best_depth = 0;
  int64_t best_from = 0;
  int64_t best_to = 0;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    depth += endpoints[i].second;
    if (endpoints[i].second > 0 && depth > best_depth) {
      best_depth = depth;
      best_from = endpoints[i].first;
      // Until the next endpoint: a closing one ends the range, an opening one starts a deeper one.
      best_to = i + 1 < endpoints.size() ? endpoints[i + 1].first : best_from;
    }
  }
  return Estimate{best_from + (best_to - best_from) / 2, static_cast<uint64_t>(best_to - best_from) / 2};
}

// The shortest NCCL kernel that holds the operation's channels at this offset.
const NcclClockMapper::Kernel* NcclClockMapper::containingKernel(const DeviceKernels& device_kernels,
                                                                 const format::NcclOperationRecord& record,
                                                                 int64_t offset) {
  uint64_t start = shifted(record.gpu_start_ns, offset);
  uint64_t end = shifted(record.gpu_end_ns, offset);
  const auto& kernels = device_kernels.kernels;
  auto it = std::lower_bound(kernels.begin(), kernels.end(),
                             start > device_kernels.longest ? start - device_kernels.longest : 0,
                             [](const Kernel& k, uint64_t value) { return k.start < value; });
  const Kernel* best = nullptr;
  for (; it != kernels.end() && it->start <= start; ++it) {
    if (it->end >= end && (best == nullptr || it->end - it->start < best->end - best->start)) best = &*it;
  }
  return best;
}

}  // namespace gpuxray::inject
