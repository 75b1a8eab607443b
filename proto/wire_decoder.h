// Reading protobuf's wire format by hand, where the reader must look at a message's bytes before (or
// instead of) libprotobuf parsing them: counting a chunk's records, and decoding the kernel and API-call
// columns straight into records. The inverse of wire_encoder.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

namespace gpuxray::format {

// Reads a varint; false at the end of the bytes or after 10 bytes.
inline bool readVarint(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
  if (p < end && *p < 0x80) {
    value = *p++;
    return true;
  }
  value = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    uint8_t byte = *p++;
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

inline int64_t unzigzag(uint64_t value) {
  return static_cast<int64_t>(value >> 1) ^ -static_cast<int64_t>(value & 1);
}

// Calls visit(field number, wire type, value, field) for each field of a serialized message: a
// length-delimited field's value is its contents, a varint's its encoding; `field` is all of the field's
// bytes from its tag on. False when the bytes are not a message.
template <typename Visit>
bool forEachField(std::span<const uint8_t> message, Visit visit) {
  const uint8_t* p = message.data();
  const uint8_t* end = p + message.size();
  while (p < end) {
    const uint8_t* field = p;
    uint64_t key = 0, length = 0;
    if (!readVarint(p, end, key)) return false;
    const uint8_t* value = p;
    switch (key & 7) {
      case 0:
        if (!readVarint(p, end, length)) return false;
        break;
      case 1:
        if (end - p < 8) return false;
        p += 8;
        break;
      case 5:
        if (end - p < 4) return false;
        p += 4;
        break;
      case 2:
        if (!readVarint(p, end, length) || length > static_cast<uint64_t>(end - p)) return false;
        value = p;
        p += length;
        break;
      default:
        return false;
    }
    visit(key >> 3, key & 7, std::span<const uint8_t>(value, static_cast<size_t>(p - value)),
          std::span<const uint8_t>(field, static_cast<size_t>(p - field)));
  }
  return true;
}

// How many varints packed bytes hold: one per byte without the continuation bit, counted eight bytes at
// a time (the multiplication sums a word's eight 0-or-1 bytes into its top byte).
inline uint64_t varintsIn(std::span<const uint8_t> packed) {
  uint64_t count = 0;
  size_t i = 0;
  for (; i + 8 <= packed.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, packed.data() + i, sizeof word);
    count += (((~word & 0x8080808080808080u) >> 7) * 0x0101010101010101u) >> 56;
  }
  for (; i < packed.size(); ++i) count += packed[i] < 0x80 ? 1u : 0u;
  return count;
}

}  // namespace gpuxray::format
