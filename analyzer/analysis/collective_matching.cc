#include "analyzer/analysis/collective_matching.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

namespace gpuxray::analysis {
namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct CollectiveKey {
  uint64_t comm_hash;
  uint64_t seq;
  uint32_t func;
  bool operator==(const CollectiveKey&) const = default;
  uint64_t hash() const { return mix(comm_hash ^ mix(seq ^ (uint64_t{func} << 40))); }
};

struct P2pKey {
  uint64_t comm_hash;
  int32_t sender;  // communicator ranks
  int32_t receiver;
  uint64_t ordinal;
  bool operator==(const P2pKey&) const = default;
  uint64_t hash() const {
    return mix(comm_hash ^
               mix(ordinal ^ (uint64_t{static_cast<uint32_t>(sender)} << 32 | static_cast<uint32_t>(receiver))));
  }
};

// Dense ids for keys: an open-addressing table over a vector of the keys, so that matching costs no
// allocation per operation.
template <typename Key>
class KeyIds {
 public:
  uint32_t idOf(const Key& key) {
    if ((keys_.size() + 1) * 2 > slots_.size()) grow();
    size_t mask = slots_.size() - 1;
    for (size_t i = key.hash() & mask;; i = (i + 1) & mask) {
      uint32_t slot = slots_[i];
      if (slot == 0) {
        keys_.push_back(key);
        slots_[i] = static_cast<uint32_t>(keys_.size());
        return static_cast<uint32_t>(keys_.size() - 1);
      }
      if (keys_[slot - 1] == key) return slot - 1;
    }
  }
  size_t size() const { return keys_.size(); }
  const Key& key(uint32_t id) const { return keys_[id]; }

 private:
  void grow() {
    slots_.assign(std::max<size_t>(64, slots_.size() * 2), 0);
    size_t mask = slots_.size() - 1;
    for (size_t id = 0; id < keys_.size(); ++id) {
      size_t i = keys_[id].hash() & mask;
      while (slots_[i] != 0) i = (i + 1) & mask;
      slots_[i] = static_cast<uint32_t>(id + 1);
    }
  }
  std::vector<uint32_t> slots_;
  std::vector<Key> keys_;
};

// Function names as run-wide ids (each rank has its own string ids).
class FuncIds {
 public:
  explicit FuncIds(std::vector<std::string>& names) : names_(names) {}
  void startRank(const model::RankTrace& rank) {
    rank_ = &rank;
    local_.assign(rank.strings.size(), kNone);
  }
  uint32_t idOf(uint32_t local) {
    if (local >= local_.size()) return global(std::string());
    uint32_t& id = local_[local];
    if (id == kNone) id = global(std::string(rank_->strings[local]));
    return id;
  }

 private:
  uint32_t global(const std::string& name) {
    auto [it, inserted] = ids_.try_emplace(name, static_cast<uint32_t>(names_.size()));
    if (inserted) names_.push_back(name);
    return it->second;
  }
  std::vector<std::string>& names_;
  std::unordered_map<std::string, uint32_t> ids_;
  const model::RankTrace* rank_ = nullptr;
  std::vector<uint32_t> local_;
};

void matchCollectives(const model::RunTrace& run, CollectiveIndex& index) {
  KeyIds<CollectiveKey> keys;
  FuncIds funcs(index.funcs);
  std::vector<std::vector<uint32_t>> group_of(run.ranks.size());
  std::vector<uint32_t> counts;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& ops = run.ranks[r].nccl_ops;
    funcs.startRank(run.ranks[r]);
    group_of[r].assign(ops.size(), kNone);
    for (size_t i = 0; i < ops.size(); ++i) {
      const auto& op = ops[i];
      if (op.kind != format::NcclOperationKind::kCollective || !op.hasGpuTimes()) continue;
      uint32_t group = keys.idOf({op.comm_hash, op.seq, funcs.idOf(op.func_id)});
      if (group >= counts.size()) counts.resize(group + 1, 0);
      ++counts[group];
      group_of[r][i] = group;
    }
  }
  std::vector<uint32_t> offsets(counts.size() + 1, 0);
  for (size_t g = 0; g < counts.size(); ++g) offsets[g + 1] = offsets[g] + counts[g];
  index.members.resize(offsets.back());
  std::vector<uint32_t> cursor(offsets.begin(), offsets.end() - 1);
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    for (size_t i = 0; i < group_of[r].size(); ++i) {
      uint32_t group = group_of[r][i];
      if (group != kNone) index.members[cursor[group]++] = {static_cast<uint32_t>(r), static_cast<uint32_t>(i)};
    }
  }
  for (uint32_t g = 0; g < counts.size(); ++g) {
    if (counts[g] < 2) {
      index.unmatched += counts[g];
      continue;
    }
    // Members are in rank order, so a rank present twice (or, in mixed runs, a rank number twice)
    // shows as two neighbours.
    bool twice = false;
    for (uint32_t k = offsets[g] + 1; k < offsets[g + 1]; ++k) {
      twice = twice || run.ranks[index.members[k].rank_index].rank == run.ranks[index.members[k - 1].rank_index].rank;
    }
    if (twice) {
      ++index.ambiguous;
      continue;
    }
    const CollectiveKey& key = keys.key(g);
    index.collectives.push_back({key.comm_hash, key.seq, key.func, offsets[g], counts[g]});
  }
  auto firstEnd = [&](const MatchedCollective& c) { return opOf(run, index.members[c.first_member]).gpu_end_ns; };
  std::sort(index.collectives.begin(), index.collectives.end(),
            [&](const MatchedCollective& a, const MatchedCollective& b) {
              return std::tuple(a.comm_hash, firstEnd(a), a.seq) < std::tuple(b.comm_hash, firstEnd(b), b.seq);
            });
}

void matchPointToPoint(const model::RunTrace& run, CollectiveIndex& index) {
  KeyIds<P2pKey> keys;
  constexpr MemberOp kMissing{kNone, kNone};
  std::vector<P2pPair> pairs;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    std::map<std::tuple<uint64_t, int32_t, int32_t>, uint64_t> ordinals;  // per (comm, sender, receiver)
    for (size_t i = 0; i < rank.nccl_ops.size(); ++i) {
      const auto& op = rank.nccl_ops[i];
      bool send = op.kind == format::NcclOperationKind::kSend;
      if (!send && op.kind != format::NcclOperationKind::kRecv) continue;
      auto comm = std::find_if(rank.communicators.begin(), rank.communicators.end(),
                               [&](const model::Communicator& c) { return c.comm_hash == op.comm_hash; });
      if (comm == rank.communicators.end()) continue;
      int32_t sender = send ? comm->comm_rank : op.peer;
      int32_t receiver = send ? op.peer : comm->comm_rank;
      uint64_t ordinal = ordinals[{op.comm_hash, sender, receiver}]++;
      if (!op.hasGpuTimes()) continue;
      uint32_t id = keys.idOf({op.comm_hash, sender, receiver, ordinal});
      if (id >= pairs.size()) pairs.resize(id + 1, P2pPair{kMissing, kMissing});
      (send ? pairs[id].send : pairs[id].recv) = {static_cast<uint32_t>(r), static_cast<uint32_t>(i)};
    }
  }
  for (const auto& pair : pairs) {
    if (pair.send.rank_index != kNone && pair.recv.rank_index != kNone) index.p2p.push_back(pair);
  }
}

}  // namespace

CollectiveIndex matchOperations(const model::RunTrace& run) {
  CollectiveIndex index;
  matchCollectives(run, index);
  matchPointToPoint(run, index);
  return index;
}

}  // namespace gpuxray::analysis
