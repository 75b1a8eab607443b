#include "analyzer/model/run_trace.h"

#include <algorithm>

namespace gpuxray::model {

static_assert(sizeof(HostCall) == 24, "a run holds one HostCall per API call: keep it small");

std::string_view activityKindName(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::kCompute: return "compute";
    case ActivityKind::kCommunication: return "communication";
    case ActivityKind::kMemcpy: return "memcpy";
    case ActivityKind::kMemset: return "memset";
  }
  return "unknown";
}

const HostCall* RankTrace::launchOf(uint32_t correlation_id) const {
  if (host_calls.empty()) return nullptr;
  auto id_less = [](const HostCall& call, uint32_t id) { return call.correlation_id < id; };
  // Correlation ids are handed out densely, so the id says about where its call is (later ids
  // may be missing: copies without a call, calls not recorded). Search outwards from there.
  uint32_t first = host_calls.front().correlation_id;
  size_t guess = correlation_id <= first ? 0 : std::min<size_t>(correlation_id - first, host_calls.size() - 1);
  size_t low = 0, high = host_calls.size();
  if (host_calls[guess].correlation_id > correlation_id) {
    size_t step = 1;
    high = guess;
    while (high > 0 && host_calls[high - std::min(step, high)].correlation_id > correlation_id) {
      high -= std::min(step, high);
      step *= 2;
    }
    low = high - std::min(step, high);
  } else {
    low = guess;
  }
  auto it = std::lower_bound(host_calls.begin() + static_cast<std::ptrdiff_t>(low),
                             host_calls.begin() + static_cast<std::ptrdiff_t>(high), correlation_id, id_less);
  return it != host_calls.end() && it->correlation_id == correlation_id ? &*it : nullptr;
}

uint64_t RunTrace::records() const {
  uint64_t total = 0;
  for (const auto& rank : ranks) total += rank.records_read;
  return total;
}

}  // namespace gpuxray::model
