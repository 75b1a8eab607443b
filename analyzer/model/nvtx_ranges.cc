#include "analyzer/model/nvtx_ranges.h"

#include <map>

namespace gpuxray::model {

PackedNvtxRanges::PackedNvtxRanges(const std::vector<NvtxRange>& ranges)
    : start_ns_(packedField(ranges, &NvtxRange::start_ns)), end_ns_(packedField(ranges, &NvtxRange::end_ns)) {
  std::map<Place, uint32_t> known;
  name_id_.reserve(ranges.size());
  place_of_.reserve(ranges.size());
  for (const NvtxRange& range : ranges) {
    name_id_.push_back(range.name_id);
    Place place{range.domain_id, range.thread_id, range.depth};
    auto [it, added] = known.emplace(place, static_cast<uint32_t>(places_.size()));
    if (added) places_.push_back(place);
    place_of_.push_back(it->second);
  }
  places_.shrink_to_fit();
}

NvtxRange PackedNvtxRanges::operator[](size_t i) const {
  const Place& place = places_[place_of_[i]];
  return {start_ns_[i], end_ns_[i], name_id_[i], place.domain_id, place.thread_id, place.depth};
}

size_t PackedNvtxRanges::bytes() const {
  return start_ns_.bytes() + end_ns_.bytes() + name_id_.capacity() * sizeof(uint32_t) +
         places_.capacity() * sizeof(Place) + place_of_.capacity() * sizeof(uint32_t);
}

}  // namespace gpuxray::model
