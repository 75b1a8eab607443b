// Seeds for native_load_fuzz, made from real trace files (scripts/fuzz.sh gives it a simulated run):
// for each file, its header chunk and first batches cut down to a few records of every kind, once as a
// whole file and once as the framed payloads that the target's odd mode checksums itself.
//
//   native_fuzz_seeds OUTPUT_DIR TRACE_FILE...
#include <zstd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "proto/file_layout.h"
#include "proto/gpuxray.pb.h"

namespace {

namespace format = gpuxray::format;
namespace protobuf = google::protobuf;

constexpr int kRecordsKept = 6;
constexpr size_t kBatchesKept = 3;

// Every repeated field, at any depth, down to its first kRecordsKept entries.
void cutDown(protobuf::Message& message) {
  const protobuf::Reflection* reflection = message.GetReflection();
  const protobuf::Descriptor* type = message.GetDescriptor();
  for (int i = 0; i < type->field_count(); ++i) {
    const protobuf::FieldDescriptor* field = type->field(i);
    if (field->is_repeated()) {
      while (reflection->FieldSize(message, field) > kRecordsKept) reflection->RemoveLast(&message, field);
      if (field->cpp_type() == protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
        for (int j = 0; j < reflection->FieldSize(message, field); ++j)
          cutDown(*reflection->MutableRepeatedMessage(&message, field, j));
      }
    } else if (field->cpp_type() == protobuf::FieldDescriptor::CPPTYPE_MESSAGE &&
               reflection->HasField(message, field)) {
      cutDown(*reflection->MutableMessage(&message, field));
    }
  }
}

std::vector<uint8_t> readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The payloads of the file's intact chunks, decompressed.
std::vector<std::string> payloads(const std::vector<uint8_t>& file) {
  std::vector<std::string> out;
  size_t at = format::kPreambleSize;
  while (at + format::kChunkHeaderSize <= file.size()) {
    format::ChunkHeader header;
    std::span<const uint8_t> header_bytes(&file[at], format::kChunkHeaderSize);
    if (format::decodeChunkHeader(header_bytes, &header) != format::ChunkHeaderProblem::kNone ||
        at + format::kChunkHeaderSize + header.stored_size > file.size())
      break;
    const uint8_t* stored = &file[at + format::kChunkHeaderSize];
    at += format::kChunkHeaderSize + header.stored_size;
    if (header.codec == format::Codec::kNone) {
      out.emplace_back(reinterpret_cast<const char*>(stored), header.stored_size);
      continue;
    }
    std::string raw(header.raw_size, '\0');
    size_t n = ZSTD_decompress(raw.data(), raw.size(), stored, header.stored_size);
    if (!ZSTD_isError(n)) out.push_back(std::move(raw));
  }
  return out;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: native_fuzz_seeds OUTPUT_DIR TRACE_FILE...\n");
    return 1;
  }
  std::string dir = argv[1];
  int written = 0;
  for (int i = 2; i < argc; ++i) {
    std::vector<uint8_t> file = readFile(argv[i]);
    if (file.size() < format::kPreambleSize) continue;
    std::vector<std::string> chunks;
    size_t batches = 0;
    for (const std::string& payload : payloads(file)) {
      format::pb::Chunk chunk;
      if (!chunk.ParseFromString(payload)) continue;
      if (chunk.has_batch() && batches++ >= kBatchesKept) continue;
      cutDown(chunk);
      chunks.push_back(chunk.SerializeAsString());
    }
    if (chunks.empty()) continue;
    // Even first byte: a whole file; odd: framed payloads (codec byte, u16 length, payload).
    std::string whole(1, '\0'), framed(1, '\1');
    auto preamble = format::encodePreamble({static_cast<uint16_t>(file[8] | (file[9] << 8)), 0});
    whole.append(reinterpret_cast<const char*>(preamble.data()), preamble.size());
    for (size_t c = 0; c < chunks.size(); ++c) {
      const std::string& raw = chunks[c];
      // Alternate the codecs so that both are seeded.
      bool zstd = c % 2 == 1;
      std::string stored = raw;
      if (zstd) {
        stored.resize(ZSTD_compressBound(raw.size()));
        stored.resize(ZSTD_compress(stored.data(), stored.size(), raw.data(), raw.size(), 3));
      }
      std::span<const uint8_t> stored_bytes(reinterpret_cast<const uint8_t*>(stored.data()), stored.size());
      auto header = format::encodeChunkHeader(zstd ? format::Codec::kZstd : format::Codec::kNone,
                                              static_cast<uint32_t>(raw.size()), stored_bytes);
      whole.append(reinterpret_cast<const char*>(header.data()), header.size());
      whole.append(stored);
      if (raw.size() <= 0xffff) {
        framed.push_back(static_cast<char>(zstd ? 1 : 0));
        framed.push_back(static_cast<char>(raw.size() & 0xff));
        framed.push_back(static_cast<char>(raw.size() >> 8));
        framed.append(raw);
      }
    }
    write(dir + "/whole-" + std::to_string(i - 1), whole);
    write(dir + "/framed-" + std::to_string(i - 1), framed);
    written += 2;
  }
  std::printf("native_fuzz_seeds: %d seeds in %s\n", written, dir.c_str());
  return written > 0 ? 0 : 1;
}
