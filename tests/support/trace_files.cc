#include "tests/support/trace_files.h"

#include <zstd.h>

#include <catch2/catch.hpp>
#include <fstream>

namespace gpuxray::testing {

using namespace gpuxray::format;

ReadResult readAll(TraceReader& reader) {
  ReadResult result;
  result.header = reader.header();
  EventBatch batch;
  while (reader.next(batch)) result.batches.push_back(std::move(batch));
  result.trailer = reader.trailer();
  result.warnings = reader.warnings();
  result.stats = reader.stats();
  return result;
}

ReadResult readAll(std::span<const uint8_t> bytes, const std::string& name) {
  TraceReader reader(name, bytes);
  return readAll(reader);
}

CategoryCounts countAll(const std::vector<EventBatch>& batches) {
  CategoryCounts counts{};
  for (const EventBatch& b : batches) countRecords(b, counts);
  return counts;
}

std::vector<ChunkView> splitChunks(std::span<const uint8_t> file) {
  REQUIRE(file.size() >= kPreambleSize);
  REQUIRE(decodePreamble(file.first(kPreambleSize)).has_value());
  std::vector<ChunkView> chunks;
  uint64_t offset = kPreambleSize;
  while (offset < file.size()) {
    INFO("chunk at byte offset " << offset);
    REQUIRE(file.size() - offset >= kChunkHeaderSize);
    ChunkView chunk;
    chunk.offset = offset;
    auto header_bytes = file.subspan(offset, kChunkHeaderSize);
    REQUIRE(decodeChunkHeader(header_bytes, &chunk.header) == ChunkHeaderProblem::kNone);
    REQUIRE(file.size() - offset - kChunkHeaderSize >= chunk.header.stored_size);
    auto stored = file.subspan(offset + kChunkHeaderSize, chunk.header.stored_size);
    REQUIRE(chunkChecksumMatches(header_bytes, stored));
    if (chunk.header.codec == Codec::kNone) {
      REQUIRE(chunk.header.raw_size == chunk.header.stored_size);
      chunk.payload.assign(stored.begin(), stored.end());
    } else {
      chunk.payload.resize(chunk.header.raw_size);
      size_t n = ZSTD_decompress(chunk.payload.data(), chunk.payload.size(), stored.data(), stored.size());
      REQUIRE_FALSE(ZSTD_isError(n));
      REQUIRE(n == chunk.header.raw_size);
    }
    chunk.end = offset + kChunkHeaderSize + chunk.header.stored_size;
    offset = chunk.end;
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

void writeFile(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

}  // namespace gpuxray::testing
