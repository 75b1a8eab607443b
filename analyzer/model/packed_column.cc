#include "analyzer/model/packed_column.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>

namespace gpuxray::model {
namespace {

// A block's encoding: its way (2 bits) and the width of its offsets (7 bits), then its numbers (the
// base; the least difference; the second value's difference from the first), each as its width (7
// bits) and itself, zigzagged, then the offsets.
enum Way : uint64_t { kFromLeast = 0, kFromLeastWithOpenEnds = 1, kFromPrevious = 2, kFromTwoBefore = 3 };
constexpr size_t kWayBits = 2, kWidthBits = 7;
// With open ends the codes 0 and 1 stand for INT64_MIN and INT64_MAX, and a value for its offset + 2.
constexpr uint64_t kOpenEndCodes = 2;

uint64_t zigzag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t unzigzag(uint64_t z) {
  return static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1);
}
size_t widthOf(uint64_t v) {
  return static_cast<size_t>(std::bit_width(v));
}
size_t numberBits(int64_t v) {
  return kWidthBits + widthOf(zigzag(v));
}
uint64_t wrapping(int64_t v) {
  return static_cast<uint64_t>(v);
}

class BitWriter {
 public:
  void put(uint64_t v, size_t width) {
    if (width == 0) return;
    size_t offset = at_ % 64;
    if (offset == 0) words_.push_back(0);
    words_.back() |= v << offset;
    if (offset + width > 64) words_.push_back(v >> (64 - offset));
    at_ += width;
  }
  void putNumber(int64_t v) {
    uint64_t z = zigzag(v);
    put(widthOf(z), kWidthBits);
    put(z, widthOf(z));
  }
  size_t at() const { return at_; }
  // With a word of padding (see BitReader), and no spare capacity.
  std::vector<uint64_t> words() const {
    std::vector<uint64_t> padded(words_.size() + 1, 0);
    std::copy(words_.begin(), words_.end(), padded.begin());
    return padded;
  }

 private:
  std::vector<uint64_t> words_;
  size_t at_ = 0;
};

// Reads a field with one unaligned load where it fits in one (57 bits or fewer): the words are
// little-endian, and the column keeps a word of padding after its last so the load never passes it.
static_assert(std::endian::native == std::endian::little);
class BitReader {
 public:
  BitReader(const uint64_t* words, size_t at) : bytes_(reinterpret_cast<const unsigned char*>(words)), at_(at) {}
  uint64_t get(size_t width) {
    uint64_t chunk;
    std::memcpy(&chunk, bytes_ + at_ / 8, sizeof chunk);
    uint64_t v = chunk >> (at_ % 8);
    if (width > 57) {
      std::memcpy(&chunk, bytes_ + at_ / 8 + 8, sizeof chunk);
      if (at_ % 8 != 0) v |= chunk << (64 - at_ % 8);
    }
    at_ += width;
    return width == 64 ? v : v & ((uint64_t{1} << width) - 1);
  }
  int64_t getNumber() { return unzigzag(get(get(kWidthBits))); }
  void skip(size_t bits) { at_ += bits; }

 private:
  const unsigned char* bytes_;
  size_t at_;
};

// The least of `differences` and the width of the widest's offset from it.
std::pair<int64_t, size_t> leastAndWidth(const int64_t* differences, size_t n) {
  int64_t least = *std::min_element(differences, differences + n);
  uint64_t widest = 0;
  for (size_t j = 0; j < n; ++j) widest = std::max(widest, wrapping(differences[j]) - wrapping(least));
  return {least, widthOf(widest)};
}

void encodeBlock(const int64_t* v, size_t n, int64_t origin, BitWriter& out) {
  bool open_ends = std::any_of(v, v + n, isOpenEnd);
  int64_t least = 0;
  bool any = false;
  for (size_t j = 0; j < n; ++j) {
    if (isOpenEnd(v[j])) continue;
    least = any ? std::min(least, v[j]) : v[j];
    any = true;
  }
  auto code = [&](int64_t value) {
    if (!open_ends) return wrapping(value) - wrapping(least);
    return value == INT64_MIN ? 0 : value == INT64_MAX ? 1 : wrapping(value) - wrapping(least) + kOpenEndCodes;
  };
  uint64_t widest = 0;
  for (size_t j = 0; j < n; ++j) widest = std::max(widest, code(v[j]));
  const size_t offsets_width = widthOf(widest);
  if (open_ends) {
    out.put(kFromLeastWithOpenEnds, kWayBits);
    out.put(offsets_width, kWidthBits);
    out.putNumber(differenceOf(least, origin));
    for (size_t j = 0; j < n; ++j) out.put(code(v[j]), offsets_width);
    return;
  }
  std::array<int64_t, PackedColumn::kBlock> after_previous{}, after_two_before{};
  for (size_t j = 1; j < n; ++j) after_previous[j - 1] = differenceOf(v[j], v[j - 1]);
  for (size_t j = 2; j < n; ++j) after_two_before[j - 2] = differenceOf(v[j], v[j - 2]);
  Way way = kFromLeast;
  size_t best = numberBits(differenceOf(least, origin)) + n * offsets_width;
  int64_t least_difference = 0;
  size_t width = offsets_width;
  if (n >= 2) {
    auto [least_after, width_after] = leastAndWidth(after_previous.data(), n - 1);
    size_t bits = numberBits(differenceOf(v[0], origin)) + numberBits(least_after) + (n - 1) * width_after;
    if (bits < best) best = bits, way = kFromPrevious, least_difference = least_after, width = width_after;
  }
  if (n >= 3) {
    auto [least_after, width_after] = leastAndWidth(after_two_before.data(), n - 2);
    size_t bits = numberBits(differenceOf(v[0], origin)) + numberBits(least_after) + numberBits(differenceOf(v[1], v[0])) +
                  (n - 2) * width_after;
    if (bits < best) best = bits, way = kFromTwoBefore, least_difference = least_after, width = width_after;
  }
  out.put(way, kWayBits);
  out.put(width, kWidthBits);
  if (way == kFromLeast) {
    out.putNumber(differenceOf(least, origin));
    for (size_t j = 0; j < n; ++j) out.put(code(v[j]), width);
    return;
  }
  out.putNumber(differenceOf(v[0], origin));
  out.putNumber(least_difference);
  if (way == kFromPrevious) {
    for (size_t j = 0; j + 1 < n; ++j) out.put(wrapping(after_previous[j]) - wrapping(least_difference), width);
  } else {
    out.putNumber(differenceOf(v[1], v[0]));
    for (size_t j = 0; j + 2 < n; ++j) out.put(wrapping(after_two_before[j]) - wrapping(least_difference), width);
  }
}

struct DecodedBlock {
  uint64_t column = 0;  // PackedColumn::id_; 0: none
  size_t block = 0;
  std::array<int64_t, PackedColumn::kBlock> values{};
};
// Enough for the blocks a cross-rank analysis reads of each rank at one collective, on 64 ranks.
constexpr size_t kDecodedBlocks = 1024;
thread_local std::unique_ptr<std::array<DecodedBlock, kDecodedBlocks>> decoded_blocks;
std::atomic<uint64_t> next_column_id{1};

int64_t fromCode(uint64_t code, int64_t least, bool open_ends) {
  if (!open_ends) return static_cast<int64_t>(wrapping(least) + code);
  return code == 0 ? INT64_MIN : code == 1 ? INT64_MAX : static_cast<int64_t>(wrapping(least) + code - kOpenEndCodes);
}

}  // namespace

PackedColumn::PackedColumn(const std::vector<int64_t>& values) : size_(values.size()) {
  if (values.empty()) return;
  id_ = next_column_id.fetch_add(1, std::memory_order_relaxed);
  auto kept = std::find_if_not(values.begin(), values.end(), isOpenEnd);
  origin_ = kept != values.end() ? *kept : 0;
  BitWriter out;
  std::vector<size_t> starts;
  starts.reserve((values.size() + kBlock - 1) / kBlock);
  for (size_t first = 0; first < values.size(); first += kBlock) {
    starts.push_back(out.at());
    encodeBlock(values.data() + first, std::min(kBlock, values.size() - first), origin_, out);
  }
  if (out.at() > std::numeric_limits<uint32_t>::max()) {
    wide_ = values;
    return;
  }
  block_at_.assign(starts.begin(), starts.end());
  bits_ = out.words();
}

size_t PackedColumn::decodeBlock(size_t b, int64_t* out) const {
  const size_t n = std::min(kBlock, size_ - b * kBlock);
  BitReader in(bits_.data(), block_at_[b]);
  const auto way = static_cast<Way>(in.get(kWayBits));
  const size_t width = in.get(kWidthBits);
  const int64_t base = plusDifference(origin_, in.getNumber());
  if (way == kFromLeast || way == kFromLeastWithOpenEnds) {
    for (size_t j = 0; j < n; ++j) out[j] = fromCode(in.get(width), base, way == kFromLeastWithOpenEnds);
    return n;
  }
  const uint64_t least_difference = wrapping(in.getNumber());
  out[0] = base;
  size_t j = 1;
  if (way == kFromTwoBefore) {
    if (n > 1) out[1] = plusDifference(base, in.getNumber());
    j = 2;
  }
  const size_t back = way == kFromTwoBefore ? 2 : 1;
  for (; j < n; ++j) out[j] = static_cast<int64_t>(wrapping(out[j - back]) + least_difference + in.get(width));
  return n;
}

const int64_t* PackedColumn::decodedBlock(size_t b) const {
  if (!decoded_blocks) decoded_blocks = std::make_unique<std::array<DecodedBlock, kDecodedBlocks>>();
  DecodedBlock& slot = (*decoded_blocks)[(id_ * 31 + b) % kDecodedBlocks];
  if (slot.column != id_ || slot.block != b) {
    decodeBlock(b, slot.values.data());
    slot.column = id_, slot.block = b;
  }
  return slot.values.data();
}

int64_t PackedColumn::operator[](size_t i) const {
  if (!wide_.empty()) return wide_[i];
  BitReader in(bits_.data(), block_at_[i / kBlock]);
  const auto way = static_cast<Way>(in.get(kWayBits));
  if (way != kFromLeast && way != kFromLeastWithOpenEnds) return decodedBlock(i / kBlock)[i % kBlock];
  const size_t width = in.get(kWidthBits);
  const int64_t least = plusDifference(origin_, in.getNumber());
  in.skip(i % kBlock * width);
  return fromCode(in.get(width), least, way == kFromLeastWithOpenEnds);
}

int64_t PackedColumn::firstOfBlock(size_t b) const {
  BitReader in(bits_.data(), block_at_[b]);
  const auto way = static_cast<Way>(in.get(kWayBits));
  const size_t width = in.get(kWidthBits);
  const int64_t base = plusDifference(origin_, in.getNumber());
  if (way != kFromLeast && way != kFromLeastWithOpenEnds) return base;
  return fromCode(in.get(width), base, way == kFromLeastWithOpenEnds);
}

std::vector<int64_t> PackedColumn::values() const {
  if (!wide_.empty()) return wide_;
  std::vector<int64_t> all(size_);
  for (size_t b = 0; b < block_at_.size(); ++b) decodeBlock(b, all.data() + b * kBlock);
  return all;
}

size_t PackedColumn::lowerBound(int64_t t) const {
  if (!wide_.empty()) return static_cast<size_t>(std::lower_bound(wide_.begin(), wide_.end(), t) - wide_.begin());
  // The first block whose first value is not less than t; the answer lies in the block before it or at its start.
  size_t low = 0, high = block_at_.size();
  while (low < high) {
    size_t middle = low + (high - low) / 2;
    if (firstOfBlock(middle) < t) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  if (low == 0) return 0;
  const int64_t* block = decodedBlock(low - 1);
  const size_t n = std::min(kBlock, size_ - (low - 1) * kBlock);
  const size_t within = static_cast<size_t>(std::lower_bound(block, block + n, t) - block);
  return within < n ? (low - 1) * kBlock + within : std::min(size_, low * kBlock);
}

void PackedColumn::shift(int64_t offset) {
  std::vector<int64_t> all = values();
  for (auto& v : all)
    if (!isOpenEnd(v)) v += offset;
  *this = PackedColumn(all);
}

size_t PackedColumn::bytes() const {
  return block_at_.capacity() * sizeof(uint32_t) + bits_.capacity() * sizeof(uint64_t) +
         wide_.capacity() * sizeof(int64_t);
}

}  // namespace gpuxray::model
