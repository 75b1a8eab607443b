// libFuzzer target for the native trace reader and loader: any bytes must load as a run or give an
// error naming the file, never a crash, a hang, a sanitizer report or memory out of proportion.
//
// The first byte picks how the rest is used:
//   even: the rest is a whole file, as found on disk;
//   odd:  the rest is a list of chunk payloads, each `u8 codec, u16 length (LE), payload`, framed with
//         valid checksums (zstd-compressed when the codec byte is odd) after a preamble, so that
//         mutations reach the decoder and the loader instead of stopping at the checksum.
//
//   scripts/fuzz.sh [SECONDS]     builds it with clang (ASan, UBSan) and runs it on seeds made from a
//                                 simulated run (native_fuzz_seeds)
#include <unistd.h>
#include <zstd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "analyzer/errors.h"
#include "analyzer/load/run_loader.h"
#include "proto/file_layout.h"
#include "proto/records.h"

namespace {

namespace format = gpuxray::format;

const std::string& scratchPath() {
  static const std::string path = [] {
    std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    return dir + "/gpuxray-native-fuzz-" + std::to_string(getpid()) + ".gpuxray";
  }();
  return path;
}

void append(std::vector<uint8_t>& out, const uint8_t* bytes, size_t size) {
  out.insert(out.end(), bytes, bytes + size);
}

std::vector<uint8_t> framed(const uint8_t* data, size_t size) {
  std::vector<uint8_t> file;
  auto preamble = format::encodePreamble(
      {static_cast<uint16_t>(format::kFormatMajor), static_cast<uint16_t>(format::kFormatMinor)});
  append(file, preamble.data(), preamble.size());
  std::vector<uint8_t> compressed;
  size_t at = 0;
  while (at + 3 <= size) {
    bool zstd = (data[at] & 1) != 0;
    size_t length = std::min<size_t>(data[at + 1] | (size_t{data[at + 2]} << 8), size - at - 3);
    const uint8_t* payload = data + at + 3;
    at += 3 + length;
    std::span<const uint8_t> stored(payload, length);
    if (zstd) {
      compressed.resize(ZSTD_compressBound(length));
      size_t n = ZSTD_compress(compressed.data(), compressed.size(), payload, length, 1);
      if (ZSTD_isError(n)) continue;
      stored = std::span<const uint8_t>(compressed.data(), n);
    }
    auto header = format::encodeChunkHeader(zstd ? format::Codec::kZstd : format::Codec::kNone,
                                            static_cast<uint32_t>(length), stored);
    append(file, header.data(), header.size());
    append(file, stored.data(), stored.size());
  }
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<uint8_t> file =
      (data[0] & 1) != 0 ? framed(data + 1, size - 1) : std::vector<uint8_t>(data + 1, data + size);
  FILE* out = std::fopen(scratchPath().c_str(), "wb");
  if (out == nullptr) return 0;
  std::fwrite(file.data(), 1, file.size(), out);
  std::fclose(out);
  gpuxray::load::LoadOptions options;
  options.threads = 1;
  try {
    gpuxray::model::RunTrace run = gpuxray::load::loadRun({scratchPath()}, options);
    // What the analyses rely on: activities by start, valid indices, no activity ending before it starts.
    for (const auto& rank : run.ranks) {
      for (size_t i = 1; i < rank.activities.size(); ++i) {
        if (rank.activities[i].start_ns < rank.activities[i - 1].start_ns) std::abort();
      }
      for (const auto& a : rank.activities) {
        if (a.stream >= rank.streams.size() || a.name_id >= rank.strings.size() || a.end_ns < a.start_ns ||
            a.start_ns < 0)
          std::abort();
      }
      for (const auto& call : rank.host_calls) {
        if (call.end_ns < call.start_ns || call.start_ns < 0) std::abort();
      }
      for (size_t i = 1; i < rank.host_calls.size(); ++i) {
        if (rank.host_calls[i].correlation_id < rank.host_calls[i - 1].correlation_id) std::abort();
      }
      for (uint32_t name : rank.api_functions) {
        if (name >= rank.strings.size()) std::abort();
      }
    }
  } catch (const gpuxray::InputError&) {
  }
  return 0;
}
