// A rank's strings by id (id 0 is ""), kept end to end in one buffer: a string costs its characters
// and where it starts, not a std::string's 32 bytes and a heap block of its own (a skeleton keeps
// every step range's name, ~60 bytes each that way); pack() packs where each starts, about 2 bytes
// a string. The views it hands out stay valid while no string is added, and when the table is moved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/model/packed_column.h"

namespace gpuxray::model {

class RankStrings {
 public:
  RankStrings() = default;
  // `strings` by id; the first (id 0) must be "".
  explicit RankStrings(const std::vector<std::string>& strings);

  size_t size() const { return (packed_ ? packed_starts_.size() : starts_.size()) - 1; }
  std::string_view operator[](size_t id) const {
    size_t start = startOf(id);
    return {text_.data() + start, startOf(id + 1) - start};
  }
  // Adds the string of id size().
  void push_back(std::string_view text);
  void emplace_back(std::string_view text) { push_back(text); }
  // Frees spare room and packs the starts (a skeleton's, which gains no string).
  void pack();
  std::vector<std::string> values() const;
  size_t bytes() const { return text_.capacity() + starts_.capacity() * sizeof(uint64_t) + packed_starts_.bytes(); }

 private:
  size_t startOf(size_t id) const {
    return packed_ ? static_cast<size_t>(packed_starts_[id]) : static_cast<size_t>(starts_[id]);
  }
  std::vector<char> text_;
  // String id's characters are text_[start of id, start of id + 1): starts_, or once packed packed_starts_.
  std::vector<uint64_t> starts_{0, 0};
  PackedColumn packed_starts_;
  bool packed_ = false;
};

}  // namespace gpuxray::model
