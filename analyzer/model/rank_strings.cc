#include "analyzer/model/rank_strings.h"

namespace gpuxray::model {

RankStrings::RankStrings(const std::vector<std::string>& strings) {
  for (size_t id = 1; id < strings.size(); ++id) push_back(strings[id]);
}

void RankStrings::push_back(std::string_view text) {
  text_.insert(text_.end(), text.begin(), text.end());
  starts_.push_back(text_.size());
}

void RankStrings::shrink_to_fit() {
  text_.shrink_to_fit();
  starts_.shrink_to_fit();
}

std::vector<std::string> RankStrings::values() const {
  std::vector<std::string> all;
  all.reserve(size());
  for (size_t id = 0; id < size(); ++id) all.emplace_back((*this)[id]);
  return all;
}

}  // namespace gpuxray::model
