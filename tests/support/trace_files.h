// Writing trace files into memory, reading them back whole, and taking them apart into chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "proto/file_layout.h"
#include "proto/records.h"
#include "proto/trace_reader.h"
#include "proto/trace_writer.h"

namespace gpuxray::testing {

// A TraceWriter whose sink is memory the test can look at.
class MemoryTrace {
 public:
  explicit MemoryTrace(format::WriterOptions options = {}) : MemoryTrace(new format::MemorySink, options) {}
  format::TraceWriter& writer() { return writer_; }
  const std::vector<uint8_t>& bytes() const { return sink_->bytes(); }

 private:
  MemoryTrace(format::MemorySink* sink, format::WriterOptions options)
      : sink_(sink), writer_(std::unique_ptr<format::ByteSink>(sink), options) {}

  const format::MemorySink* sink_;  // owned by writer_
  format::TraceWriter writer_;
};

// Everything a reader returns for a file, read to the end.
struct ReadResult {
  format::FileHeader header;
  std::vector<format::EventBatch> batches;
  std::optional<format::Trailer> trailer;
  std::vector<std::string> warnings;
  format::ReadStats stats;
};
ReadResult readAll(format::TraceReader& reader);
// Throws FormatError like the reader.
ReadResult readAll(std::span<const uint8_t> bytes, const std::string& name = "test.gxt");

// Records per category over all batches.
format::CategoryCounts countAll(const std::vector<format::EventBatch>& batches);

// One chunk of a well-formed file: where it is, its header, and its payload (decompressed).
struct ChunkView {
  uint64_t offset = 0;
  uint64_t end = 0;  // offset of the byte after it
  format::ChunkHeader header;
  std::vector<uint8_t> payload;
};
// The chunks of a file this test wrote; fails the test (REQUIRE) on anything malformed.
std::vector<ChunkView> splitChunks(std::span<const uint8_t> file);

void writeFile(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace gpuxray::testing
