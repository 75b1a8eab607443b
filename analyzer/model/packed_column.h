// A column of 64-bit values held as offsets from one 64-bit base per block of kBlock values, each
// offset as few bytes as the column's widest needs (0 to 4): 4.25 bytes a value instead of 8 for
// times on one clock and sums of time (3.25 where a block spans under 16.7 ms), 1.25 for sequence
// numbers and ids, 0.25 for a constant.
// Exact for every value: INT64_MIN and INT64_MAX (the open ends and "none" of the columns that use
// them) are kept as themselves, and a column with a block whose values spread over more than
// 4.29 * 10^9 keeps every value whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

namespace gpuxray::model {

class PackedColumn {
 public:
  static constexpr size_t kBlock = 32;
  PackedColumn() = default;
  explicit PackedColumn(const std::vector<int64_t>& values);
  size_t size() const { return size_; }
  int64_t operator[](size_t i) const;
  std::vector<int64_t> values() const;
  // The index of the first value not less than t, in a column sorted ascending (size() if none).
  size_t lowerBound(int64_t t) const;
  // Adds `offset` to every value but INT64_MIN and INT64_MAX.
  void shift(int64_t offset);
  size_t bytes() const;

 private:
  // An offset of `width` bytes; its two largest codes stand for INT64_MIN and INT64_MAX.
  static uint64_t largestCode(size_t width) { return width == 0 ? 0 : (uint64_t{1} << (8 * width)) - 1; }
  size_t size_ = 0;
  size_t width_ = 0;              // bytes an offset takes
  std::vector<int64_t> bases_;    // per block: its least value but INT64_MIN and INT64_MAX
  std::vector<uint8_t> offsets_;  // per value: from its block's base, width_ bytes, little end first
  std::vector<int64_t> wide_;     // every value, when one did not fit
};

// One field of every row, packed: `field` is a member pointer or a function of a row giving an int64_t.
template <typename Row, typename Field>
PackedColumn packedField(const std::vector<Row>& rows, Field field) {
  std::vector<int64_t> column(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) column[i] = std::invoke(field, rows[i]);
  return PackedColumn(column);
}

// INT64_MIN and INT64_MAX: the open ends and "none" of the columns that use them, which a column keeps
// as themselves and a shift leaves where they are.
inline bool isOpenEnd(int64_t v) {
  return v == INT64_MIN || v == INT64_MAX;
}

// A value held as its difference from another of its row (a range's end from its start: short where
// the times themselves are far apart), and back; wrapping, so exact for any two values.
inline int64_t differenceOf(int64_t value, int64_t from) {
  return static_cast<int64_t>(static_cast<uint64_t>(value) - static_cast<uint64_t>(from));
}
inline int64_t plusDifference(int64_t from, int64_t difference) {
  return static_cast<int64_t>(static_cast<uint64_t>(from) + static_cast<uint64_t>(difference));
}

// What `key` gives for every row, each distinct value once in `distinct` (in the order first seen),
// and per row its index into `distinct`, packed.
template <typename Row, typename Key, typename KeyOf>
PackedColumn internedField(const std::vector<Row>& rows, KeyOf key, std::vector<Key>& distinct) {
  std::map<Key, int64_t> index_of;
  std::vector<int64_t> column;
  column.reserve(rows.size());
  for (const Row& row : rows) {
    Key k = key(row);
    auto [it, added] = index_of.emplace(k, static_cast<int64_t>(distinct.size()));
    if (added) distinct.push_back(k);
    column.push_back(it->second);
  }
  distinct.shrink_to_fit();
  return PackedColumn(column);
}

}  // namespace gpuxray::model
