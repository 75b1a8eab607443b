#include "analyzer/model/nvtx_ranges.h"

namespace gpuxray::model {

PackedNvtxRanges::PackedNvtxRanges(const std::vector<NvtxRange>& ranges)
    : start_ns_(packedField(ranges, &NvtxRange::start_ns)),
      duration_ns_(packedField(ranges, [](const NvtxRange& r) { return differenceOf(r.end_ns, r.start_ns); })),
      name_id_(packedField(ranges, [](const NvtxRange& r) { return int64_t{r.name_id}; })),
      place_of_(internedField(ranges, &PackedNvtxRanges::placeOf, places_)) {}

NvtxRange PackedNvtxRanges::operator[](size_t i) const {
  const Place& place = places_[static_cast<size_t>(place_of_[i])];
  int64_t start = start_ns_[i];
  int64_t end = plusDifference(start, duration_ns_[i]);
  return {start, end, static_cast<uint32_t>(name_id_[i]), place.domain_id, place.thread_id, place.depth};
}

size_t PackedNvtxRanges::bytes() const {
  return start_ns_.bytes() + duration_ns_.bytes() + name_id_.bytes() + places_.capacity() * sizeof(Place) +
         place_of_.bytes();
}

}  // namespace gpuxray::model
