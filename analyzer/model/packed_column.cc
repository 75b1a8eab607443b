#include "analyzer/model/packed_column.h"

#include <algorithm>

namespace gpuxray::model {

PackedColumn::PackedColumn(const std::vector<int64_t>& values) : size_(values.size()) {
  bases_.reserve((values.size() + kBlock - 1) / kBlock);
  offsets_.reserve(values.size());
  for (size_t first = 0; first < values.size(); first += kBlock) {
    size_t last = std::min(values.size(), first + kBlock);
    int64_t base = 0;
    bool any = false;
    for (size_t i = first; i < last; ++i) {
      if (values[i] == INT64_MIN || values[i] == INT64_MAX) continue;
      base = any ? std::min(base, values[i]) : values[i];
      any = true;
    }
    bases_.push_back(base);
    for (size_t i = first; i < last; ++i) {
      int64_t v = values[i];
      uint64_t offset = static_cast<uint64_t>(v) - static_cast<uint64_t>(base);  // v >= base: exact
      if (v == INT64_MIN) {
        offsets_.push_back(kMinimum);
      } else if (v == INT64_MAX) {
        offsets_.push_back(kMaximum);
      } else if (offset <= kLargestOffset) {
        offsets_.push_back(static_cast<uint32_t>(offset));
      } else {
        std::vector<int64_t>().swap(bases_);
        std::vector<uint32_t>().swap(offsets_);
        wide_ = values;
        return;
      }
    }
  }
}

int64_t PackedColumn::operator[](size_t i) const {
  if (!wide_.empty()) return wide_[i];
  uint32_t offset = offsets_[i];
  if (offset == kMinimum) return INT64_MIN;
  if (offset == kMaximum) return INT64_MAX;
  return static_cast<int64_t>(static_cast<uint64_t>(bases_[i / kBlock]) + offset);
}

std::vector<int64_t> PackedColumn::values() const {
  std::vector<int64_t> all(size_);
  for (size_t i = 0; i < size_; ++i) all[i] = (*this)[i];
  return all;
}

size_t PackedColumn::lowerBound(int64_t t) const {
  size_t low = 0, high = size_;
  while (low < high) {
    size_t middle = low + (high - low) / 2;
    if ((*this)[middle] < t) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low;
}

void PackedColumn::shift(int64_t offset) {
  for (auto& v : wide_)
    if (v != INT64_MIN && v != INT64_MAX) v += offset;
  for (auto& base : bases_) base += offset;
}

size_t PackedColumn::bytes() const {
  return bases_.capacity() * sizeof(int64_t) + offsets_.capacity() * sizeof(uint32_t) +
         wide_.capacity() * sizeof(int64_t);
}

}  // namespace gpuxray::model
