#include "analyzer/model/run_trace.h"

#include <algorithm>
#include <limits>

#include "analyzer/model/communication_kernels.h"

namespace gpuxray::model {

static_assert(sizeof(HostCall) == 24, "a run holds one HostCall per API call: keep it small");

std::string_view activityKindName(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::kCompute: return "compute";
    case ActivityKind::kCommunication: return "communication";
    case ActivityKind::kMemcpy: return "memcpy";
    case ActivityKind::kMemset: return "memset";
    case ActivityKind::kSync: return "sync";
    case ActivityKind::kHostOp: return "host op";
  }
  return "unknown";
}

bool isCommunicationKernel(std::string_view name) {
  return communicationFamilyOf(name) != nullptr;
}

uint16_t RankTrace::streamIndex(uint32_t device, uint32_t stream, uint16_t& hint) {
  StreamKey key{device, stream};
  if (hint < streams.size() && streams[hint] == key) return hint;
  auto it = std::find(streams.begin(), streams.end(), key);
  if (it == streams.end()) {
    if (streams.size() >= std::numeric_limits<uint16_t>::max()) return 0;
    streams.push_back(key);
    it = streams.end() - 1;
  }
  hint = static_cast<uint16_t>(it - streams.begin());
  return hint;
}

size_t RankTrace::heldBytes() const {
  auto held = [](const auto& list) { return list.capacity() * sizeof(list[0]); };
  return strings.bytes() + held(launch_configs) + held(streams) + held(activities) + held(host_calls) + held(threads) +
         held(api_functions) + nvtx.bytes() + held(host_ops) + held(memory) + held(communicators) + nccl_ops.bytes() +
         held(transfers) + held(links) + held(metric_samples) + held(profiled_kernels) + held(launch_index_);
}

void RankTrace::indexLaunches() {
  clearLaunchIndex();
  if (host_calls.empty()) return;
  uint32_t first = host_calls.front().correlation_id;
  uint64_t span = uint64_t{host_calls.back().correlation_id} - first + 1;
  if (span > 4 * uint64_t{host_calls.size()} + 1024 || host_calls.size() >= std::numeric_limits<uint32_t>::max())
    return;
  launch_index_.assign(static_cast<size_t>(span), 0);
  // The first call of an id, as the search finds.
  for (size_t i = host_calls.size(); i-- > 0;)
    launch_index_[host_calls[i].correlation_id - first] = static_cast<uint32_t>(i + 1);
  launch_index_first_ = first;
  launch_index_calls_ = host_calls.size();
}

void RankTrace::clearLaunchIndex() {
  std::vector<uint32_t>().swap(launch_index_);
  launch_index_calls_ = 0;
}

const HostCall* RankTrace::searchLaunch(uint32_t correlation_id) const {
  if (host_calls.empty()) return nullptr;
  auto id_less = [](const HostCall& call, uint32_t id) { return call.correlation_id < id; };
  // Correlation ids are handed out densely, so the id says about where its call is (later ids
  // may be missing: copies without a call, calls not recorded). Search outwards from there.
  // Interpolating between the first and the last id spreads the missing ones evenly.
  uint32_t first = host_calls.front().correlation_id;
  uint32_t last = host_calls.back().correlation_id;
  size_t n = host_calls.size();
  size_t guess = 0;
  if (correlation_id >= last) {
    guess = n - 1;
  } else if (correlation_id > first) {
    guess = static_cast<size_t>(static_cast<double>(correlation_id - first) / static_cast<double>(last - first) *
                                static_cast<double>(n - 1));
  }
  // Gallop from the guess to a range that holds the id, then search it.
  size_t low = guess, high = guess + 1;
  for (size_t step = 1; low > 0 && host_calls[low].correlation_id > correlation_id; step *= 2)
    low -= std::min(step, low);
  for (size_t step = 1; high < n && host_calls[high - 1].correlation_id < correlation_id; step *= 2)
    high = std::min(n, high + step);
  auto it = std::lower_bound(host_calls.begin() + static_cast<std::ptrdiff_t>(low),
                             host_calls.begin() + static_cast<std::ptrdiff_t>(high), correlation_id, id_less);
  return it != host_calls.end() && it->correlation_id == correlation_id ? &*it : nullptr;
}

uint64_t RunTrace::records() const {
  uint64_t total = 0;
  for (const auto& rank : ranks) total += rank.records_read;
  return total;
}

int64_t RunTrace::firstActivityNs() const {
  int64_t first = 0;
  bool any = false;
  for (const auto& rank : ranks) {
    if (rank.activities.empty()) continue;
    first = any ? std::min(first, rank.activities.front().start_ns) : rank.activities.front().start_ns;
    any = true;
  }
  return first;
}

uint64_t RunTrace::keepWindow(int64_t start_ns, int64_t end_ns) {
  uint64_t dropped = 0;
  auto outside = [&](int64_t start, int64_t end) { return end < start_ns || start >= end_ns; };
  auto drop = [&](auto& records, auto start_of, auto end_of) {
    size_t before = records.size();
    std::erase_if(records, [&](const auto& r) { return outside(start_of(r), end_of(r)); });
    records.shrink_to_fit();
    dropped += before - records.size();
  };
  for (auto& rank : ranks) {
    drop(rank.activities, [](const auto& a) { return a.start_ns; }, [](const auto& a) { return a.end_ns; });
    drop(rank.host_calls, [](const auto& c) { return c.start_ns; }, [](const auto& c) { return c.end_ns; });
    rank.indexLaunches();
    rank.nvtx.change([&](std::vector<NvtxRange>& nvtx) {
      drop(
          nvtx, [](const auto& n) { return n.start_ns; }, [](const auto& n) { return n.end_ns; });
    });
    drop(rank.host_ops, [](const auto& o) { return o.start_ns; }, [](const auto& o) { return o.end_ns; });
    rank.nccl_ops.change([&](std::vector<NcclOp>& ops) {
      drop(
          ops, [](const auto& o) { return o.enqueue_ns; },
          [](const auto& o) { return std::max(o.enqueue_ns, o.gpu_end_ns); });
    });
    drop(rank.transfers, [](const auto& t) { return t.start_ns; }, [](const auto& t) { return t.end_ns; });
    drop(rank.metric_samples, [](const auto& m) { return m.time_ns; }, [](const auto& m) { return m.time_ns; });
    // Memory changes before the window still set the level inside it: only later ones go.
    size_t before = rank.memory.size();
    std::erase_if(rank.memory, [&](const auto& m) { return m.time_ns >= end_ns; });
    dropped += before - rank.memory.size();
  }
  return dropped;
}

}  // namespace gpuxray::model
