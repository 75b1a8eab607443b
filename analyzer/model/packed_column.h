// A column of 64-bit values held in blocks of kBlock values, each block bit-packed by whichever of
// three ways takes it fewest bits: offsets from its least value; differences from the previous
// value (times and sums of time that grow); differences from the value two before (a column of
// starts and ends in turn, whose every other value repeats its step). A block's differences are
// held as offsets from their least, each offset in as many bits as the block's widest needs, so a
// column of times that repeat their step to 5 us takes about 2 bytes a value, one that repeats it
// exactly under half a byte (a block's header, ~18 bytes). A value of a block of differences is
// read from its block decoded whole, which each thread keeps in a table of 1024 blocks (the
// cross-rank analyses read every rank at one collective, then the next).
// Exact for every value: INT64_MIN and INT64_MAX (the open ends and "none" of the columns that use
// them) are kept as themselves, in blocks of offsets that set two codes aside for them.
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
  // Decodes block `b` into `out` (kBlock values at most); returns how many it holds.
  size_t decodeBlock(size_t b, int64_t* out) const;
  // Block `b` decoded, from this thread's decoded blocks (decoded now if not there).
  const int64_t* decodedBlock(size_t b) const;
  int64_t firstOfBlock(size_t b) const;
  size_t size_ = 0;
  int64_t origin_ = 0;  // the first value but the open ends: each block's base is held as its difference from it
  uint64_t id_ = 0;  // tells this column's decoded blocks from others' (a new one for each encoding)
  std::vector<uint32_t> block_at_;  // per block: the bit of bits_ its encoding starts at
  std::vector<uint64_t> bits_;
  std::vector<int64_t> wide_;  // every value, for a column past 2^32 bits
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
