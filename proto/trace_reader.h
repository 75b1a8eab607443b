// Reads a gpuxray trace file chunk by chunk. Damage is survived, not fatal: a torn tail (the
// process died mid-write) or a chunk that fails its checksum becomes a warning with its byte offset,
// and every intact chunk is still returned. Only a file that is not a gpuxray trace at all, has a
// major version this reader does not know, or has no readable header is an error (FormatError, one
// line that names the file).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "proto/column_decoder.h"
#include "proto/file_layout.h"
#include "proto/id_map.h"
#include "proto/records.h"

namespace gpuxray::format {

namespace pb {
class Chunk;
class EventBatch;
}

class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The file's interned strings. Views it returns stay valid for its lifetime; an id is defined once
// (a second definition, which only a damaged file could hold, is ignored).
class StringTable {
 public:
  // "" for id 0; "<missing string N>" for an id whose definition was lost with a damaged chunk.
  std::string_view get(StringId id) const;
  bool contains(StringId id) const;
  void define(StringId id, std::string value);
  size_t size() const { return values_.size(); }

 private:
  // Growing it never moves a string that a returned view points into.
  IdMap<std::string> values_;
  mutable std::map<StringId, std::string> missing_names_;
};

struct ReadStats {
  uint64_t file_bytes = 0;
  uint64_t chunks = 0;
  uint64_t damaged_chunks = 0;
  uint64_t bytes_skipped = 0;
  // Where an incomplete last chunk starts, if the file ends inside one.
  std::optional<uint64_t> torn_at;
  // Records whose kernel configuration, string or column data was lost with a damaged chunk.
  uint64_t unresolved_references = 0;
};

// Where the bytes come from: a file (read with pread) or memory (tests).
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  virtual bool read(uint64_t offset, size_t length, uint8_t* out) const = 0;
};

class TraceReader {
 public:
  // Throws FormatError.
  explicit TraceReader(const std::string& path);
  // `name` is what messages call the source.
  TraceReader(std::string name, std::span<const uint8_t> bytes);
  ~TraceReader();

  const std::string& path() const { return path_; }
  Preamble version() const { return version_; }
  const FileHeader& header() const { return header_; }

  // The next batch of records; false once the file is exhausted. Reusing one batch for every call
  // keeps its largest vectors' memory.
  bool next(EventBatch& batch);
  // How far into the file reading has come, in bytes (of stats().file_bytes).
  uint64_t position() const { return offset_; }
  // Known once next() has returned false; empty if the capture did not end cleanly.
  const std::optional<Trailer>& trailer() const { return trailer_; }
  const StringTable& strings() const { return strings_; }
  // One line per problem, a few per kind (complete once next() has returned false).
  const std::vector<std::string>& warnings() const { return warnings_; }
  const ReadStats& stats() const { return stats_; }

 private:
  struct KernelConfigs;
  enum class ChunkRead { kOk, kEnd, kDamaged };

  void openSource();
  ChunkRead readChunk(std::vector<uint8_t>& payload);
  ChunkRead unreadable(uint64_t at);
  bool chunkIsIntactAt(uint64_t offset);
  bool decompress(uint64_t at, const ChunkHeader& header, std::vector<uint8_t>& payload);
  bool withinRecordBudget(uint64_t at, std::span<const uint8_t> payload);
  void skipDamage(uint64_t damaged_at, const std::string& what);
  void warn(std::string message);
  void finishWarnings();
  // False, with only the batch's kernels and calls changed, when its columns are not in the form
  // decodeKernelColumns reads.
  bool decodeBatch(uint64_t at, const pb::EventBatch& message, std::span<const uint8_t> kernel_columns,
                   std::span<const uint8_t> api_call_columns, EventBatch& batch);

  std::string path_;
  std::unique_ptr<ByteSource> source_;
  Preamble version_;
  FileHeader header_;
  std::optional<Trailer> trailer_;
  StringTable strings_;
  std::unique_ptr<KernelConfigs> kernel_configs_;
  // Reused (parsing into it keeps its memory): the chunks libprotobuf parses whole (headers, trailers,
  // batches whose columns are not in the writer's form).
  std::unique_ptr<pb::Chunk> chunk_;
  std::unique_ptr<pb::EventBatch> batch_rest_;  // a batch but its columns
  SplitBatch split_;
  std::string kernel_columns_;
  std::string api_call_columns_;
  std::vector<std::string> warnings_;
  static constexpr uint64_t kShownPerKind = 3;
  struct WarningKind {
    uint64_t count = 0;
    size_t last = 0;  // index in warnings_ of the last one shown
  };
  std::map<std::string, WarningKind> warning_kinds_;
  bool warnings_finished_ = false;
  ReadStats stats_;
  uint64_t offset_ = 0;
  // Bytes that resynchronizing after damage may still checksum, and records still to be decoded:
  // both in proportion to the file's size, so that no file costs more than its size allows.
  uint64_t resync_budget_ = 0;
  uint64_t record_budget_ = 0;
  std::vector<uint8_t> stored_;
  std::vector<uint8_t> raw_;
  void* zstd_context_ = nullptr;
};

}  // namespace gpuxray::format
