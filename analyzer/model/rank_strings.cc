#include "analyzer/model/rank_strings.h"

#include <functional>
#include <mutex>
#include <unordered_map>

namespace gpuxray::model {

namespace {

// The blocks some table holds, by content, so that a table packing a block another already holds
// shares it. A block leaves when its last holder lets it go. Never destroyed: blocks held by
// static tables may outlive any other static.
class SharedBlocks {
 public:
  static SharedBlocks& instance() {
    static auto* blocks = new SharedBlocks;
    return *blocks;
  }

  std::shared_ptr<const RankStrings::Block> intern(RankStrings::Block block) {
    const uint64_t hash = block.hash();
    // Released after the lock: a block whose other holders let it go meanwhile is freed by the
    // last of these, and its deleter takes the lock.
    std::vector<std::shared_ptr<const RankStrings::Block>> seen;
    std::lock_guard lock(mutex_);
    auto [first, last] = held_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      seen.push_back(it->second.weak.lock());
      if (seen.back() && *seen.back() == block) return seen.back();
    }
    auto* made = new RankStrings::Block(std::move(block));
    std::shared_ptr<const RankStrings::Block> shared(made, [hash](const RankStrings::Block* b) {
      instance().forget(hash, b);
      delete b;
    });
    held_.emplace(hash, Held{made, shared});
    return shared;
  }

 private:
  struct Held {
    const RankStrings::Block* block;
    std::weak_ptr<const RankStrings::Block> weak;
  };
  void forget(uint64_t hash, const RankStrings::Block* block) {
    std::lock_guard lock(mutex_);
    auto [first, last] = held_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      if (it->second.block == block) {
        held_.erase(it);
        return;
      }
    }
  }
  std::mutex mutex_;
  std::unordered_multimap<uint64_t, Held> held_;
};

}  // namespace

uint64_t RankStrings::Block::hash() const {
  uint64_t h = std::hash<std::string_view>{}(std::string_view(text_.data(), text_.size()));
  for (size_t i = 0; i < starts_.size(); ++i) h = h * 1'000'003 ^ static_cast<uint64_t>(starts_[i]);
  return h;
}

RankStrings::RankStrings(const std::vector<std::string>& strings) {
  for (size_t id = 1; id < strings.size(); ++id) push_back(strings[id]);
}

void RankStrings::push_back(std::string_view text) {
  if (packed_) unpack();
  text_.insert(text_.end(), text.begin(), text.end());
  starts_.push_back(text_.size());
}

void RankStrings::pack() {
  if (packed_) return;
  packed_size_ = size();
  blocks_.reserve((packed_size_ + kBlock - 1) / kBlock);
  for (size_t first = 0; first < packed_size_; first += kBlock) {
    size_t last = std::min(packed_size_, first + kBlock);
    std::vector<char> text(text_.begin() + static_cast<ptrdiff_t>(starts_[first]),
                           text_.begin() + static_cast<ptrdiff_t>(starts_[last]));
    std::vector<int64_t> starts;
    starts.reserve(last - first + 1);
    for (size_t id = first; id <= last; ++id) starts.push_back(static_cast<int64_t>(starts_[id] - starts_[first]));
    blocks_.push_back(SharedBlocks::instance().intern(Block(std::move(text), starts)));
  }
  std::vector<char>().swap(text_);
  std::vector<uint64_t>().swap(starts_);
  packed_ = true;
}

void RankStrings::unpack() {
  std::vector<std::string> all = values();
  blocks_.clear();
  packed_ = false;
  packed_size_ = 0;
  starts_ = {0};
  for (const std::string& s : all) {
    text_.insert(text_.end(), s.begin(), s.end());
    starts_.push_back(text_.size());
  }
}

std::vector<std::string> RankStrings::values() const {
  std::vector<std::string> all;
  all.reserve(size());
  for (size_t id = 0; id < size(); ++id) all.emplace_back((*this)[id]);
  return all;
}

size_t RankStrings::bytes() const {
  size_t held = text_.capacity() + starts_.capacity() * sizeof(uint64_t) +
                blocks_.capacity() * sizeof(std::shared_ptr<const Block>);
  for (const auto& block : blocks_) held += block->bytes();
  return held;
}

}  // namespace gpuxray::model
