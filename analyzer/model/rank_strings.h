// A rank's strings by id (id 0 is ""), kept end to end in one buffer: a string costs its characters
// and where it starts, not a std::string's 32 bytes and a heap block of its own. pack() (a
// skeleton's, which gains no string) then holds them in blocks of kBlock consecutive ids, each block
// held once in the process however many ranks have it: the ranks of a run name the same steps,
// kernels and ranges, mostly in the same order (a skeleton keeps every step range's name, 502 names
// a rank at 500 steps), so a rank's packed strings cost about 2 bytes a block of its own.
// The views it hands out stay valid while no string is added, and when the table is moved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/model/packed_column.h"

namespace gpuxray::model {

class RankStrings {
 public:
  static constexpr size_t kBlock = 64;
  RankStrings() = default;
  // `strings` by id; the first (id 0) must be "".
  explicit RankStrings(const std::vector<std::string>& strings);

  size_t size() const { return packed_ ? packed_size_ : starts_.size() - 1; }
  std::string_view operator[](size_t id) const {
    if (packed_) return blocks_[id / kBlock]->view(id % kBlock);
    return {text_.data() + starts_[id], starts_[id + 1] - starts_[id]};
  }
  // Adds the string of id size().
  void push_back(std::string_view text);
  void emplace_back(std::string_view text) { push_back(text); }
  // Holds the strings in shared blocks, freeing the buffer (a skeleton's, which gains no string).
  void pack();
  std::vector<std::string> values() const;
  // Bytes held, a shared block counted in full by every table that holds it.
  size_t bytes() const;

  // Up to kBlock consecutive strings, end to end, and where each starts (with the end of the last).
  class Block {
   public:
    Block(std::vector<char> text, const std::vector<int64_t>& starts) : text_(std::move(text)), starts_(starts) {}
    std::string_view view(size_t i) const {
      size_t start = static_cast<size_t>(starts_[i]);
      return {text_.data() + start, static_cast<size_t>(starts_[i + 1]) - start};
    }
    size_t bytes() const { return sizeof(Block) + text_.capacity() + starts_.bytes(); }
    bool operator==(const Block& other) const {
      return text_ == other.text_ && starts_.values() == other.starts_.values();
    }
    uint64_t hash() const;

   private:
    std::vector<char> text_;
    PackedColumn starts_;
  };

 private:
  void unpack();
  // Building: string id's characters are text_[starts_[id], starts_[id + 1]).
  std::vector<char> text_;
  std::vector<uint64_t> starts_{0, 0};
  // Packed: string id is blocks_[id / kBlock]'s (id % kBlock)-th.
  std::vector<std::shared_ptr<const Block>> blocks_;
  size_t packed_size_ = 0;
  bool packed_ = false;
};

}  // namespace gpuxray::model
