// How bytes sit in a gpuxray trace file, below the protobuf messages.
//
//   preamble (16 bytes): "GPUXRAY\n", u16 format major, u16 format minor, u32 reserved (0)
//   chunk*             : chunk header (20 bytes) + stored payload
//
//   chunk header: u32 sync "GXCK" | u32 stored size | u32 raw size | u8 codec | u8[3] zero |
//                 u32 CRC-32C of the first 16 header bytes followed by the stored payload
//
// All integers are little-endian. The payload, once decompressed, is one serialized gpuxray Chunk
// message. Every chunk is written with a single write(2) and stands alone, so a process killed at
// any point leaves a file whose complete chunks are all readable; the sync word and the checksum let
// a reader find where a damaged chunk ends and the next intact one starts.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace gpuxray::format {

inline constexpr std::array<uint8_t, 8> kFileMagic = {'G', 'P', 'U', 'X', 'R', 'A', 'Y', '\n'};
inline constexpr size_t kPreambleSize = 16;
inline constexpr size_t kChunkHeaderSize = 20;
inline constexpr uint32_t kChunkSync = 0x4b435847;  // "GXCK" little-endian
// Larger chunks are rejected as corrupt: the writer never produces them.
inline constexpr uint32_t kMaxStoredChunkSize = 64u << 20;
inline constexpr uint32_t kMaxRawChunkSize = 256u << 20;

enum class Codec : uint8_t { kNone = 0, kZstd = 1 };

struct Preamble {
  uint16_t major = 0;
  uint16_t minor = 0;
};

struct ChunkHeader {
  uint32_t stored_size = 0;
  uint32_t raw_size = 0;
  Codec codec = Codec::kNone;
  uint32_t crc = 0;
};

std::array<uint8_t, kPreambleSize> encodePreamble(Preamble preamble);
// Empty when the magic is not there.
std::optional<Preamble> decodePreamble(std::span<const uint8_t> bytes);

// Header bytes for a payload; the checksum covers the header and the payload.
std::array<uint8_t, kChunkHeaderSize> encodeChunkHeader(Codec codec, uint32_t raw_size,
                                                         std::span<const uint8_t> stored_payload);

enum class ChunkHeaderProblem { kNone, kNoSync, kBadCodec, kTooLarge };
// Parses the 20 header bytes (without checking the CRC, which needs the payload).
ChunkHeaderProblem decodeChunkHeader(std::span<const uint8_t> bytes, ChunkHeader* out);
bool chunkChecksumMatches(std::span<const uint8_t> header_bytes, std::span<const uint8_t> stored_payload);

uint32_t crc32c(uint32_t crc, std::span<const uint8_t> bytes);

// Trace files end in ".gpuxray": "rank-00012.gpuxray" when the rank is known, else
// "<host>-<pid>.gpuxray".
inline constexpr std::string_view kTraceFileExtension = ".gpuxray";
std::string traceFileName(int32_t rank, std::string_view hostname, uint32_t pid);

}  // namespace gpuxray::format
