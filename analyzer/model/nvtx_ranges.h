// A rank's NVTX ranges (model::NvtxRange), packed in a skeleton to a few bytes a range instead of
// 40: the range's start, length and name id as packed columns, and where it was recorded (domain, thread,
// depth) held once however many ranges share it.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyzer/model/packable_records.h"
#include "analyzer/model/packed_column.h"

namespace gpuxray::model {

struct NvtxRange {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint32_t name_id = 0;
  uint32_t domain_id = 0;
  uint64_t thread_id = 0;
  uint32_t depth = 0;
};

class PackedNvtxRanges {
 public:
  PackedNvtxRanges() = default;
  explicit PackedNvtxRanges(const std::vector<NvtxRange>& ranges);
  size_t size() const { return name_id_.size(); }
  NvtxRange operator[](size_t i) const;
  size_t bytes() const;

 private:
  struct Place {
    uint32_t domain_id = 0;
    uint64_t thread_id = 0;
    uint32_t depth = 0;
    auto operator<=>(const Place&) const = default;
  };
  static Place placeOf(const NvtxRange& r) { return {r.domain_id, r.thread_id, r.depth}; }
  PackedColumn start_ns_, duration_ns_, name_id_;  // the end as its difference from the start
  std::vector<Place> places_;
  PackedColumn place_of_;  // per range: its index into places_
};

using NvtxRanges = PackableRecords<NvtxRange, PackedNvtxRanges>;

}  // namespace gpuxray::model
