// What a reader says about files it cannot read at all, word for word: every message is one line
// that starts with the file's path.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "proto/file_layout.h"
#include "proto/trace_reader.h"
#include "proto/trace_writer.h"
#include "tests/support/sample_records.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_files.h"

namespace {

using namespace gpuxray::format;
using namespace gpuxray::testing;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

// The message of the FormatError that opening `path` throws, or "" if it opens.
std::string openError(const std::string& path) {
  try {
    TraceReader reader(path);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

// A complete, valid file: header, one batch, trailer.
std::vector<uint8_t> validFile() {
  MemoryTrace trace;
  REQUIRE(trace.writer().writeHeader(sampleHeader()));
  addSampleBatch(trace.writer(), 0);
  REQUIRE(trace.writer().finish(sampleTrailer()));
  return trace.bytes();
}

TEST_CASE("an empty file is not a gpuxray trace", "[format][errors]") {
  TempDir dir;
  const std::string path = dir / "empty.gxt";
  writeFile(path, {});
  CHECK(openError(path) == path + ": empty file (0 bytes), not a gpuxray trace");
}

TEST_CASE("a file of random bytes is not a gpuxray trace", "[format][errors]") {
  TempDir dir;
  const std::string path = dir / "random.gxt";
  std::vector<uint8_t> bytes(4'096);
  uint32_t state = 12'345;
  for (uint8_t& b : bytes) {
    state = state * 1'103'515'245u + 12'345u;
    b = static_cast<uint8_t>(state >> 24);
  }
  writeFile(path, bytes);
  CHECK(openError(path) == path + ": not a gpuxray trace (no GPUXRAY signature at the start)");
}

TEST_CASE("a file that starts like a trace but stops within the magic is not a gpuxray trace", "[format][errors]") {
  TempDir dir;
  const std::string path = dir / "short.gxt";
  writeFile(path, std::vector<uint8_t>(kFileMagic.begin(), kFileMagic.begin() + 5));
  CHECK(openError(path) == path + ": not a gpuxray trace (no GPUXRAY signature at the start)");
}

TEST_CASE("a file of a newer major version asks for a newer gpuxray", "[format][errors]") {
  TempDir dir;
  const std::string path = dir / "future.gxt";
  std::vector<uint8_t> bytes = validFile();
  const auto preamble = encodePreamble({7, 3});
  std::copy(preamble.begin(), preamble.end(), bytes.begin());
  writeFile(path, bytes);

  const std::string error = openError(path);
  CHECK(error == path + ": trace format 7.3 is not readable by this gpuxray, which reads format " +
                     std::to_string(kFormatMajor) + ".x (written by a newer gpuxray: upgrade)");
  CHECK_THAT(error, StartsWith(path + ": ") && Contains("newer") && Contains("upgrade"));
}

TEST_CASE("a file of an older major version is refused without asking for an upgrade", "[format][errors]") {
  TempDir dir;
  const std::string path = dir / "past.gxt";
  std::vector<uint8_t> bytes = validFile();
  const auto preamble = encodePreamble({0, 9});
  std::copy(preamble.begin(), preamble.end(), bytes.begin());
  writeFile(path, bytes);
  CHECK(openError(path) == path + ": trace format 0.9 is not readable by this gpuxray, which reads format " +
                               std::to_string(kFormatMajor) + ".x");
}

TEST_CASE("a file that ends after its preamble has no readable header", "[format][errors]") {
  TempDir dir;
  const std::string path = dir / "preamble_only.gxt";
  const auto preamble = encodePreamble({static_cast<uint16_t>(kFormatMajor), static_cast<uint16_t>(kFormatMinor)});
  writeFile(path, preamble);
  CHECK(openError(path) == path + ": no readable header at byte offset 16 (the file ends before it)");
}

TEST_CASE("a file whose header chunk fails its checksum has no readable header", "[format][errors]") {
  TempDir dir;
  const std::string path = dir / "bad_header.gxt";
  std::vector<uint8_t> bytes = validFile();
  bytes[kPreambleSize + kChunkHeaderSize + 10] ^= 0x01;
  writeFile(path, bytes);
  CHECK(openError(path) == path + ": no readable header at byte offset 16 (its chunk is damaged)");
}

TEST_CASE("a path that does not exist cannot be opened", "[format][errors]") {
  TempDir dir;
  const std::string path = dir / "missing.gxt";
  CHECK(openError(path) == path + ": cannot open: No such file or directory");
}

TEST_CASE("a directory is not a regular file", "[format][errors]") {
  TempDir dir;
  const std::string path = dir.path().string();
  CHECK(openError(path) == path + ": not a regular file (a directory)");
}

TEST_CASE("a FileSink that cannot create its file says why, and the writer fails", "[format][errors]") {
  TempDir dir;
  const std::string path = (dir.path() / "no_such_directory" / "rank0.gxt").string();
  auto sink = std::make_unique<FileSink>(path);
  CHECK_FALSE(sink->ok());
  CHECK(sink->error() == path + ": cannot create: No such file or directory");
  TraceWriter writer(std::move(sink));
  CHECK_FALSE(writer.writeHeader(sampleHeader()));
  CHECK(writer.failed());
  CHECK(writer.error() == path + ": cannot create: No such file or directory");
}

}  // namespace
