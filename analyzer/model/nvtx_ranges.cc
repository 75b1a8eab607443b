#include "analyzer/model/nvtx_ranges.h"

#include <map>

namespace gpuxray::model {

PackedNvtxRanges::PackedNvtxRanges(const std::vector<NvtxRange>& ranges)
    : start_ns_(packedField(ranges, &NvtxRange::start_ns)),
      end_ns_(packedField(ranges, &NvtxRange::end_ns)),
      name_id_(packedField(ranges, [](const NvtxRange& r) { return int64_t{r.name_id}; })) {
  std::map<Place, uint32_t> known;
  std::vector<int64_t> place_of;
  place_of.reserve(ranges.size());
  for (const NvtxRange& range : ranges) {
    Place place{range.domain_id, range.thread_id, range.depth};
    auto [it, added] = known.emplace(place, static_cast<uint32_t>(places_.size()));
    if (added) places_.push_back(place);
    place_of.push_back(it->second);
  }
  places_.shrink_to_fit();
  place_of_ = PackedColumn(place_of);
}

NvtxRange PackedNvtxRanges::operator[](size_t i) const {
  const Place& place = places_[static_cast<size_t>(place_of_[i])];
  return {start_ns_[i], end_ns_[i], static_cast<uint32_t>(name_id_[i]), place.domain_id, place.thread_id, place.depth};
}

size_t PackedNvtxRanges::bytes() const {
  return start_ns_.bytes() + end_ns_.bytes() + name_id_.bytes() + places_.capacity() * sizeof(Place) +
         place_of_.bytes();
}

}  // namespace gpuxray::model
