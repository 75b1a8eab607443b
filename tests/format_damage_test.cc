// A damaged file is read as far as it can be: a file cut off at any byte gives back every chunk that
// is complete before the cut, a chunk that fails its checksum is skipped with a warning naming its
// byte offset, and the reader finds the next intact chunk after damage. Only damage to the preamble
// or the header chunk is an error.

#include <catch2/catch.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "proto/file_layout.h"
#include "proto/trace_reader.h"
#include "proto/trace_writer.h"
#include "tests/support/record_printing.h"
#include "tests/support/sample_records.h"
#include "tests/support/trace_files.h"

namespace {

using namespace gpuxray::format;
using namespace gpuxray::testing;
using Catch::Matchers::StartsWith;

const std::string kName = "small.gxt";

// A header, five batches of four records each and a trailer: seven chunks in about 3 KB.
struct SmallFile {
  std::vector<uint8_t> bytes;
  // Of the seven chunks, in file order: where each starts and where the next byte after it is.
  std::vector<uint64_t> starts;
  std::vector<uint64_t> ends;
  std::vector<EventBatch> batches;
  Trailer trailer;

  uint64_t headerEnd() const { return ends.front(); }
  // Batches are chunks 1..5.
  uint64_t batchStart(size_t batch) const { return starts[1 + batch]; }
  uint64_t batchEnd(size_t batch) const { return ends[1 + batch]; }
  uint64_t trailerStart() const { return starts.back(); }
};

SmallFile smallFile(int zstd_level) {
  WriterOptions options;
  options.zstd_level = zstd_level;
  options.max_records_per_chunk = 4;
  MemoryTrace trace(options);
  TraceWriter& writer = trace.writer();
  SmallFile file;
  // Chunk boundaries as the writer reports them: bytesWritten() moves when a chunk is written.
  auto noteChunk = [&] {
    uint64_t previous = file.ends.empty() ? kPreambleSize : file.ends.back();
    if (writer.bytesWritten() == previous) return;
    file.starts.push_back(previous);
    file.ends.push_back(writer.bytesWritten());
  };
  REQUIRE(writer.writeHeader(sampleHeader()));
  noteChunk();
  for (uint32_t i = 0; i < 5; ++i) {
    // Each batch has its own kernel configuration and strings, so losing one loses nothing else.
    EventBatch batch;
    auto add = [&](auto record, auto& list) {
      list.push_back(record);
      writer.add(record);
      noteChunk();
    };
    add(sampleKernel(writer, i), batch.kernels);
    add(sampleMemcpy(i), batch.memcpys);
    add(sampleNcclOperation(writer, i), batch.nccl_operations);
    add(sampleStream(i), batch.streams);  // the fourth record writes the chunk
    file.batches.push_back(batch);
  }
  REQUIRE(writer.finish(sampleTrailer()));
  noteChunk();
  file.trailer = expectedTrailer(sampleTrailer(), countAll(file.batches));
  file.bytes = trace.bytes();

  REQUIRE(file.ends.size() == 7);
  REQUIRE(file.ends.back() == file.bytes.size());
  // The same boundaries as the chunk headers say.
  const std::vector<ChunkView> chunks = splitChunks(file.bytes);
  REQUIRE(chunks.size() == 7);
  for (size_t i = 0; i < chunks.size(); ++i) {
    REQUIRE(chunks[i].offset == file.starts[i]);
    REQUIRE(chunks[i].end == file.ends[i]);
  }
  return file;
}

// The batches of `file` but the one at `skipped` (none if out of range).
std::vector<EventBatch> batchesWithout(const SmallFile& file, size_t skipped) {
  std::vector<EventBatch> batches;
  for (size_t i = 0; i < file.batches.size(); ++i)
    if (i != skipped) batches.push_back(file.batches[i]);
  return batches;
}

// The message of the FormatError that opening `bytes` throws, or "" if it opens.
std::string openError(std::span<const uint8_t> bytes) {
  try {
    TraceReader reader(kName, bytes);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

std::string offset(uint64_t at) { return "byte offset " + std::to_string(at); }

TEST_CASE("a file cut inside its preamble or header chunk is an error naming the file", "[format][damage]") {
  const SmallFile file = smallFile(GENERATE(0, 3));
  for (uint64_t cut = 0; cut < file.headerEnd(); ++cut) {
    INFO("cut at byte " << cut);
    const std::string error = openError({file.bytes.data(), cut});
    if (cut == 0) {
      CHECK(error == kName + ": empty file (0 bytes), not a gpuxray trace");
    } else if (cut < kPreambleSize) {
      CHECK(error == kName + ": not a gpuxray trace (no GPUXRAY signature at the start)");
    } else {
      CHECK(error == kName + ": no readable header at byte offset 16 (the file ends before it)");
    }
  }
}

TEST_CASE("a file cut at any byte after its header reads up to its last complete chunk", "[format][damage]") {
  const int zstd_level = GENERATE(0, 3);
  CAPTURE(zstd_level);
  const SmallFile file = smallFile(zstd_level);
  for (uint64_t cut = file.headerEnd(); cut <= file.bytes.size(); ++cut) {
    INFO("cut at byte " << cut << " of " << file.bytes.size());
    ReadResult result = readAll({file.bytes.data(), cut}, kName);

    // The chunk the cut falls in, if it is not on a chunk boundary.
    std::optional<uint64_t> torn_chunk;
    size_t complete_batches = 0;
    for (size_t i = 0; i < file.starts.size(); ++i) {
      if (file.starts[i] < cut && cut < file.ends[i]) torn_chunk = file.starts[i];
      if (i >= 1 && i <= file.batches.size() && file.ends[i] <= cut) ++complete_batches;
    }
    const std::vector<EventBatch> expected(file.batches.begin(),
                                           file.batches.begin() + static_cast<ptrdiff_t>(complete_batches));
    CHECK(result.header == sampleHeader());
    CHECK(result.batches == expected);
    CHECK(result.trailer.has_value() == (cut == file.bytes.size()));
    CHECK(result.stats.torn_at == torn_chunk);
    if (torn_chunk) {
      REQUIRE(result.warnings.size() == 1);
      CHECK_THAT(result.warnings[0], StartsWith(kName + ": torn tail at " + offset(*torn_chunk) + ": "));
    } else {
      CHECK(result.warnings.empty());
    }
  }
}

TEST_CASE("a chunk with a flipped payload byte fails its checksum and only its records are lost",
          "[format][damage]") {
  const int zstd_level = GENERATE(0, 3);
  CAPTURE(zstd_level);
  const SmallFile file = smallFile(zstd_level);
  // Every chunk after the header: the five batches and the trailer.
  for (size_t chunk = 1; chunk < file.starts.size(); ++chunk) {
    const uint64_t start = file.starts[chunk];
    const uint64_t length = file.ends[chunk] - start;
    const uint64_t payload = start + kChunkHeaderSize;
    for (uint64_t at : {payload, payload + (length - kChunkHeaderSize) / 2, file.ends[chunk] - 1}) {
      INFO("chunk " << chunk << " at byte " << start << ", flipped byte " << at);
      std::vector<uint8_t> damaged = file.bytes;
      damaged[at] ^= 0x5a;
      ReadResult result = readAll(damaged, kName);

      const bool trailer_hit = chunk == file.starts.size() - 1;
      const std::string after = trailer_hit ? "nothing readable after it"
                                            : "skipped " + std::to_string(length) + " bytes to the next intact chunk";
      REQUIRE(result.warnings.size() == 1);
      CHECK(result.warnings[0] == kName + ": damaged chunk at " + offset(start) + " (checksum mismatch); " + after);
      CHECK(result.batches == batchesWithout(file, chunk - 1));
      CHECK(result.trailer.has_value() == !trailer_hit);
      if (result.trailer) CHECK(*result.trailer == file.trailer);
      CHECK(result.stats.damaged_chunks == 1);
      CHECK(result.stats.bytes_skipped == length);
    }
  }
}

TEST_CASE("after a damaged size field the reader resynchronizes at the next chunk", "[format][damage]") {
  const SmallFile file = smallFile(3);
  // Sizes a little off (the checksum fails), past the end of the file (the reader looks for the
  // next sync word), or above the plausible maximum (rejected from the header alone).
  for (size_t batch = 0; batch < file.batches.size(); ++batch) {
    const uint64_t start = file.batchStart(batch);
    for (uint64_t byte = 4; byte < 8; ++byte) {
      for (int mask : {0x01, 0x80, 0xff}) {
        INFO("batch " << batch << " (chunk at byte " << start << "), size byte " << byte << " ^ " << mask);
        std::vector<uint8_t> damaged = file.bytes;
        damaged[start + byte] ^= static_cast<uint8_t>(mask);
        ReadResult result = readAll(damaged, kName);

        const uint64_t length = file.batchEnd(batch) - start;
        REQUIRE(result.warnings.size() == 1);
        CHECK_THAT(result.warnings[0], StartsWith(kName + ": damaged chunk at " + offset(start) + " ("));
        CHECK_THAT(result.warnings[0], Catch::EndsWith("; skipped " + std::to_string(length) +
                                                       " bytes to the next intact chunk"));
        CHECK(result.batches == batchesWithout(file, batch));
        REQUIRE(result.trailer.has_value());
        CHECK(*result.trailer == file.trailer);
      }
    }
  }
}

TEST_CASE("garbage after a valid file is a warning and everything before it is intact", "[format][damage]") {
  struct Garbage {
    const char* what;
    std::vector<uint8_t> bytes;
    std::string warning;  // after "small.gxt: "
  };
  const SmallFile file = smallFile(3);
  const std::string end = offset(file.bytes.size());
  const Garbage garbage = GENERATE_COPY(
      Garbage{"a block of junk", std::vector<uint8_t>(37, 0xee),
              "damaged chunk at " + end + " (not a chunk header); nothing readable after it"},
      Garbage{"less than a chunk header of junk", {'j', 'u', 'n', 'k', '!'},
              "damaged chunk at " + end + " (not a chunk header); nothing readable after it"},
      Garbage{"the start of a chunk header", {'G', 'X', 'C'},
              "torn tail at " + end + ": the last 3 bytes are an incomplete chunk (the capture was cut off)"});
  INFO(garbage.what);
  std::vector<uint8_t> bytes = file.bytes;
  bytes.insert(bytes.end(), garbage.bytes.begin(), garbage.bytes.end());
  ReadResult result = readAll(bytes, kName);

  CHECK(result.warnings == std::vector<std::string>{kName + ": " + garbage.warning});
  CHECK(result.header == sampleHeader());
  CHECK(result.batches == file.batches);
  REQUIRE(result.trailer.has_value());
  CHECK(*result.trailer == file.trailer);
}

TEST_CASE("bytes inserted between two chunks are skipped", "[format][damage]") {
  const SmallFile file = smallFile(3);
  const uint64_t at = file.batchEnd(1);
  std::vector<uint8_t> bytes = file.bytes;
  const std::vector<uint8_t> junk = {0, 0, 0, 'G', 'X', 'C', 'K', 1, 2, 3, 4, 5, 6};  // even a false sync word
  bytes.insert(bytes.begin() + static_cast<ptrdiff_t>(at), junk.begin(), junk.end());
  ReadResult result = readAll(bytes, kName);

  CHECK(result.warnings == std::vector<std::string>{kName + ": damaged chunk at " + offset(at) +
                                                    " (not a chunk header); skipped 13 bytes to the next intact chunk"});
  CHECK(result.batches == file.batches);
  CHECK(result.trailer.has_value());
  CHECK(result.stats.bytes_skipped == junk.size());
}

}  // namespace
