#include "analyzer/model/run_trace.h"

#include <algorithm>

namespace gpuxray::model {

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
  // Correlation ids are handed out in order, one per call, so they are usually dense: try the
  // position the id would have, then search.
  if (!host_calls.empty() && correlation_id >= host_calls.front().correlation_id) {
    size_t guess = correlation_id - host_calls.front().correlation_id;
    if (guess < host_calls.size() && host_calls[guess].correlation_id == correlation_id) return &host_calls[guess];
  }
  auto it = std::lower_bound(host_calls.begin(), host_calls.end(), correlation_id,
                             [](const HostCall& call, uint32_t id) { return call.correlation_id < id; });
  return it != host_calls.end() && it->correlation_id == correlation_id ? &*it : nullptr;
}

uint64_t RunTrace::records() const {
  uint64_t total = 0;
  for (const auto& rank : ranks) total += rank.records_read;
  return total;
}

}  // namespace gpuxray::model
