#include "analyzer/model/packed_column.h"

#include <algorithm>

namespace gpuxray::model {

PackedColumn::PackedColumn(const std::vector<int64_t>& values) : size_(values.size()) {
  bases_.reserve((values.size() + kBlock - 1) / kBlock);
  uint64_t widest = 0;
  bool sentinels = false;
  for (size_t first = 0; first < values.size(); first += kBlock) {
    size_t last = std::min(values.size(), first + kBlock);
    int64_t base = 0;
    bool any = false;
    for (size_t i = first; i < last; ++i) {
      if (isOpenEnd(values[i])) continue;
      base = any ? std::min(base, values[i]) : values[i];
      any = true;
    }
    bases_.push_back(base);
    for (size_t i = first; i < last; ++i) {
      if (isOpenEnd(values[i])) {
        sentinels = true;
      } else {
        widest = std::max(widest, static_cast<uint64_t>(values[i]) - static_cast<uint64_t>(base));  // exact
      }
    }
  }
  auto fits = [&](size_t width) { return width == 0 ? widest == 0 && !sentinels : widest <= largestCode(width) - 2; };
  width_ = 0;
  while (width_ <= 4 && !fits(width_)) ++width_;
  if (width_ > 4) {
    std::vector<int64_t>().swap(bases_);
    wide_ = values;
    return;
  }
  offsets_.reserve(values.size() * width_);
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t v = values[i];
    uint64_t code = v == INT64_MIN   ? largestCode(width_)
                    : v == INT64_MAX ? largestCode(width_) - 1
                                     : static_cast<uint64_t>(v) - static_cast<uint64_t>(bases_[i / kBlock]);
    for (size_t b = 0; b < width_; ++b) offsets_.push_back(static_cast<uint8_t>(code >> (8 * b)));
  }
}

int64_t PackedColumn::operator[](size_t i) const {
  if (!wide_.empty()) return wide_[i];
  uint64_t code = 0;
  for (size_t b = 0; b < width_; ++b) code |= uint64_t{offsets_[i * width_ + b]} << (8 * b);
  if (width_ > 0 && code == largestCode(width_)) return INT64_MIN;
  if (width_ > 0 && code == largestCode(width_) - 1) return INT64_MAX;
  return static_cast<int64_t>(static_cast<uint64_t>(bases_[i / kBlock]) + code);
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
    if (!isOpenEnd(v)) v += offset;
  for (auto& base : bases_) base += offset;
}

size_t PackedColumn::bytes() const {
  return bases_.capacity() * sizeof(int64_t) + offsets_.capacity() + wide_.capacity() * sizeof(int64_t);
}

}  // namespace gpuxray::model
