// A rank's strings by id (id 0 is ""), kept end to end in one buffer: a string costs its characters
// and an 8-byte offset, not a std::string's 32 bytes and a heap block of its own (a skeleton keeps
// every step range's name, ~60 bytes each that way). The views it hands out stay valid while no
// string is added, and when the table is moved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpuxray::model {

class RankStrings {
 public:
  RankStrings() = default;
  // `strings` by id; the first (id 0) must be "".
  explicit RankStrings(const std::vector<std::string>& strings);

  size_t size() const { return starts_.size() - 1; }
  std::string_view operator[](size_t id) const {
    return {text_.data() + starts_[id], static_cast<size_t>(starts_[id + 1] - starts_[id])};
  }
  // Adds the string of id size().
  void push_back(std::string_view text);
  void emplace_back(std::string_view text) { push_back(text); }
  void shrink_to_fit();
  std::vector<std::string> values() const;
  size_t bytes() const { return text_.capacity() + starts_.capacity() * sizeof(uint64_t); }

 private:
  std::vector<char> text_;
  std::vector<uint64_t> starts_{0, 0};  // string id's characters are text_[starts_[id], starts_[id + 1])
};

}  // namespace gpuxray::model
