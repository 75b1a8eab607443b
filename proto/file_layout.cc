#include "proto/file_layout.h"

#include <algorithm>
#include <cstring>

namespace gpuxray::format {
namespace {

void putU16(uint8_t* out, uint16_t v) {
  out[0] = static_cast<uint8_t>(v);
  out[1] = static_cast<uint8_t>(v >> 8);
}

void putU32(uint8_t* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

uint16_t getU16(const uint8_t* in) { return static_cast<uint16_t>(in[0] | (in[1] << 8)); }

uint32_t getU32(const uint8_t* in) {
  return static_cast<uint32_t>(in[0]) | (static_cast<uint32_t>(in[1]) << 8) |
         (static_cast<uint32_t>(in[2]) << 16) | (static_cast<uint32_t>(in[3]) << 24);
}

// Slicing-by-8 tables for the Castagnoli polynomial (reflected 0x82F63B78).
struct Crc32cTables {
  uint32_t table[8][256];
  constexpr Crc32cTables() : table() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
      table[0][i] = crc;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int t = 1; t < 8; ++t) table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
  }
};
constexpr Crc32cTables kCrcTables;

}  // namespace

uint32_t crc32c(uint32_t crc, std::span<const uint8_t> bytes) {
  const auto& t = kCrcTables.table;
  crc = ~crc;
  const uint8_t* p = bytes.data();
  size_t n = bytes.size();
  while (n >= 8) {
    uint32_t lo = getU32(p) ^ crc;
    uint32_t hi = getU32(p + 4);
    crc = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
          t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

std::array<uint8_t, kPreambleSize> encodePreamble(Preamble preamble) {
  std::array<uint8_t, kPreambleSize> out{};
  std::copy(kFileMagic.begin(), kFileMagic.end(), out.begin());
  putU16(&out[8], preamble.major);
  putU16(&out[10], preamble.minor);
  return out;
}

std::optional<Preamble> decodePreamble(std::span<const uint8_t> bytes) {
  if (bytes.size() < kPreambleSize || !std::equal(kFileMagic.begin(), kFileMagic.end(), bytes.begin()))
    return std::nullopt;
  return Preamble{getU16(&bytes[8]), getU16(&bytes[10])};
}

std::array<uint8_t, kChunkHeaderSize> encodeChunkHeader(Codec codec, uint32_t raw_size,
                                                         std::span<const uint8_t> stored_payload) {
  std::array<uint8_t, kChunkHeaderSize> out{};
  putU32(&out[0], kChunkSync);
  putU32(&out[4], static_cast<uint32_t>(stored_payload.size()));
  putU32(&out[8], raw_size);
  out[12] = static_cast<uint8_t>(codec);
  uint32_t crc = crc32c(0, std::span<const uint8_t>(out.data(), 16));
  crc = crc32c(crc, stored_payload);
  putU32(&out[16], crc);
  return out;
}

ChunkHeaderProblem decodeChunkHeader(std::span<const uint8_t> bytes, ChunkHeader* out) {
  if (bytes.size() < kChunkHeaderSize || getU32(&bytes[0]) != kChunkSync) return ChunkHeaderProblem::kNoSync;
  out->stored_size = getU32(&bytes[4]);
  out->raw_size = getU32(&bytes[8]);
  out->crc = getU32(&bytes[16]);
  uint8_t codec = bytes[12];
  if (codec > static_cast<uint8_t>(Codec::kZstd) || bytes[13] != 0 || bytes[14] != 0 || bytes[15] != 0)
    return ChunkHeaderProblem::kBadCodec;
  out->codec = static_cast<Codec>(codec);
  if (out->stored_size > kMaxStoredChunkSize || out->raw_size > kMaxRawChunkSize)
    return ChunkHeaderProblem::kTooLarge;
  return ChunkHeaderProblem::kNone;
}

bool chunkChecksumMatches(std::span<const uint8_t> header_bytes, std::span<const uint8_t> stored_payload) {
  uint32_t crc = crc32c(0, header_bytes.first(16));
  crc = crc32c(crc, stored_payload);
  return crc == getU32(&header_bytes[16]);
}

std::string traceFileName(int32_t rank, std::string_view hostname, uint32_t pid) {
  std::string name;
  if (rank >= 0) {
    std::string digits = std::to_string(rank);
    name = "rank-" + std::string(digits.size() < 5 ? 5 - digits.size() : 0, '0') + digits;
  } else {
    name = std::string(hostname.empty() ? "unknown-host" : hostname) + "-" + std::to_string(pid);
  }
  return name + std::string(kTraceFileExtension);
}

}  // namespace gpuxray::format
