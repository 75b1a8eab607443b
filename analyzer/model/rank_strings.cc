#include "analyzer/model/rank_strings.h"

namespace gpuxray::model {

RankStrings::RankStrings(const std::vector<std::string>& strings) {
  for (size_t id = 1; id < strings.size(); ++id) push_back(strings[id]);
}

void RankStrings::push_back(std::string_view text) {
  if (packed_) {
    starts_.clear();
    for (size_t id = 0; id < packed_starts_.size(); ++id) starts_.push_back(static_cast<uint64_t>(packed_starts_[id]));
    packed_starts_ = PackedColumn();
    packed_ = false;
  }
  text_.insert(text_.end(), text.begin(), text.end());
  starts_.push_back(text_.size());
}

void RankStrings::pack() {
  if (packed_) return;
  text_.shrink_to_fit();
  packed_starts_ = PackedColumn(std::vector<int64_t>(starts_.begin(), starts_.end()));
  std::vector<uint64_t>().swap(starts_);
  packed_ = true;
}

std::vector<std::string> RankStrings::values() const {
  std::vector<std::string> all;
  all.reserve(size());
  for (size_t id = 0; id < size(); ++id) all.emplace_back((*this)[id]);
  return all;
}

}  // namespace gpuxray::model
