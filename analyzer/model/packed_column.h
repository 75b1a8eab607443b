// A column of 64-bit values held as 32-bit offsets from one 64-bit base per block of kBlock values:
// 4.25 bytes a value instead of 8, for columns whose neighbouring values lie close (times on one
// clock, sums of time, sequence numbers). Exact for every value: INT64_MIN and INT64_MAX (the open
// ends and "none" of the columns that use them) are kept as themselves, and a column with a block
// whose values spread over more than 4.29 * 10^9 keeps every value whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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
  static constexpr uint32_t kMinimum = UINT32_MAX, kMaximum = UINT32_MAX - 1, kLargestOffset = UINT32_MAX - 2;
  size_t size_ = 0;
  std::vector<int64_t> bases_;     // per block: its least value but INT64_MIN and INT64_MAX
  std::vector<uint32_t> offsets_;  // per value: from its block's base, or kMinimum, kMaximum
  std::vector<int64_t> wide_;      // every value, when one did not fit
};

// One field of every row, packed: `field` is a member pointer or a function of a row giving an int64_t.
template <typename Row, typename Field>
PackedColumn packedField(const std::vector<Row>& rows, Field field) {
  std::vector<int64_t> column(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) column[i] = std::invoke(field, rows[i]);
  return PackedColumn(column);
}

}  // namespace gpuxray::model
