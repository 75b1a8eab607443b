// Writes a gpuxray trace file. It needs neither libprotobuf nor libfmt, so the injection library can
// link it (statically, position-independent) into a process that may carry its own copies of both.
//
// Records are buffered per batch and written as one checksummed, compressed chunk when the batch is
// full or on flush(). Not thread-safe: the capture hands it records from one thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "proto/records.h"
#include "proto/wire_encoder.h"

namespace gpuxray::format {

// Where chunks go: a file, or memory in tests.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Appends both parts; false (with error()) if that failed.
  virtual bool append(std::span<const uint8_t> first, std::span<const uint8_t> second) = 0;
  // The next append is the trailer (RingFileSink puts it after the ring).
  virtual void beforeTrailer() {}
  virtual std::string error() const = 0;
};

class FileSink final : public ByteSink {
 public:
  enum class Mode { kTruncate, kCreateNew };
  // Creates `path` (truncating an existing file, or failing if it exists with kCreateNew); check ok().
  explicit FileSink(const std::string& path, Mode mode = Mode::kTruncate);
  // Why ok() is false: errno of the failed open (EEXIST for an existing file with kCreateNew).
  int openErrno() const { return open_errno_; }
  ~FileSink() override;
  bool ok() const { return fd_ >= 0; }
  bool append(std::span<const uint8_t> first, std::span<const uint8_t> second) override;
  std::string error() const override { return error_; }

 private:
  std::string path_;
  int fd_ = -1;
  int open_errno_ = 0;
  std::string error_;
};

class MemorySink final : public ByteSink {
 public:
  bool append(std::span<const uint8_t> first, std::span<const uint8_t> second) override;
  std::string error() const override { return {}; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

struct WriterOptions {
  // 0 stores chunks uncompressed.
  int zstd_level = 3;
  // A batch is written when it holds this many records or this many encoded bytes.
  size_t max_records_per_chunk = 64 * 1024;
  size_t max_batch_bytes = 4u << 20;
};

class TraceWriter {
 public:
  explicit TraceWriter(std::unique_ptr<ByteSink> sink, WriterOptions options = {});
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Writes the preamble and the header chunk; must come first.
  bool writeHeader(const FileHeader& header);

  // The id of `text` in this file's string table, defined in the next chunk written.
  StringId intern(std::string_view text);
  // Names an API function once per file; later calls for the same (domain, cbid) do nothing.
  void defineApiFunction(ApiDomain domain, uint32_t cbid, std::string_view name);

  void add(const KernelRecord& kernel);
  void add(const ApiCallRecord& call);
  void add(const MemcpyRecord& copy);
  void add(const MemsetRecord& memset);
  void add(const MemoryEventRecord& event);
  void add(const NvtxEventRecord& event);
  void add(const SynchronizationRecord& sync);
  void add(const NcclCommunicatorRecord& comm);
  void add(const NcclOperationRecord& op);
  void add(const NetTransferRecord& transfer);
  void add(const MetricSampleRecord& sample);
  void add(const KernelMetricsRecord& metrics);
  void add(const ClockAnchor& anchor);
  void add(const ExternalCorrelationRecord& correlation);
  void add(const OverheadRecord& overhead);
  void add(const ResourceNameRecord& name);
  void add(const StreamRecord& stream);
  // Topology learned after the header was written.
  void add(const DeviceProperties& device);
  void add(const Link& link);
  void add(const CaptureWindow& window);

  // Writes the pending batch as one chunk (nothing if it is empty).
  bool flush();
  // Flushes, then writes the trailer. `trailer.counts` may carry dropped counts per category; the
  // written counts are the writer's own. The writer accepts nothing afterwards.
  bool finish(Trailer trailer);

  bool failed() const { return failed_; }
  const std::string& error() const { return error_; }
  uint64_t written(Category category) const { return written_[static_cast<uint32_t>(category)]; }
  // Records accepted after a write failure, which were lost.
  uint64_t lost() const { return lost_; }
  uint64_t bytesWritten() const { return bytes_written_; }
  uint64_t chunksWritten() const { return chunks_written_; }

 private:
  // Every KernelRecord field from name_id to max_active_clusters.
  using KernelConfigKey = std::array<uint32_t, 19>;
  struct KernelConfigHash {
    size_t operator()(const KernelConfigKey& key) const;
  };
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  bool accepting();
  void counted(Category category);
  size_t pendingBytes() const;
  uint32_t kernelConfigId(const KernelRecord& kernel);
  bool writeChunk(const WireEncoder& chunk_payload);
  void clearBatch();

  std::unique_ptr<ByteSink> sink_;
  WriterOptions options_;
  bool header_written_ = false;
  bool finished_ = false;
  bool failed_ = false;
  std::string error_;

  // Every batch defines the strings, kernel configurations and API functions its records use, so a
  // damaged chunk takes only its own records with it. For each id: its content, and the number of
  // the batch that last defined it.
  void useString(StringId id);
  void useKernelConfig(uint32_t id);
  void useApiFunction(ApiDomain domain, uint32_t cbid);
  struct ApiFunctionName {
    ApiDomain domain;
    uint32_t cbid;
    StringId name;
    uint32_t defined_in_batch;
  };
  std::unordered_map<std::string, StringId, StringHash, std::equal_to<>> strings_;
  std::vector<const std::string*> string_text_{nullptr};
  std::vector<uint32_t> string_defined_in_batch_{0};
  std::unordered_map<KernelConfigKey, uint32_t, KernelConfigHash> kernel_configs_;
  std::vector<KernelConfigKey> config_keys_{KernelConfigKey{}};
  std::vector<uint32_t> config_defined_in_batch_{0};
  // Index into api_function_names_ + 1 (0: not defined), by domain and cbid.
  std::array<std::vector<uint32_t>, 3> api_function_index_;
  std::vector<ApiFunctionName> api_function_names_;
  uint32_t batch_number_ = 1;

  // The pending batch: definitions, one encoder per column, and the row messages in arrival order.
  WireEncoder definitions_;
  struct KernelColumns {
    WireEncoder start_delta, duration, device, stream, correlation_delta, config_id, context, graph_id,
        graph_node_id;
    bool any_context = false, any_graph = false;
    uint64_t previous_start = 0;
    uint32_t previous_correlation = 0;
    size_t count = 0;
  } kernels_;
  struct ApiColumns {
    WireEncoder start_delta, duration, domain, cbid, thread_id, correlation_delta, return_code, process_id;
    bool any_return_code = false, any_process_id = false;
    uint64_t previous_start = 0;
    uint32_t previous_correlation = 0;
    size_t count = 0;
  } api_calls_;
  WireEncoder rows_;
  size_t pending_records_ = 0;

  WireEncoder batch_;
  WireEncoder chunk_;
  std::vector<uint8_t> compressed_;
  void* zstd_context_ = nullptr;

  std::array<uint64_t, kCategoryCount> written_{};
  uint64_t lost_ = 0;
  uint64_t bytes_written_ = 0;
  uint64_t chunks_written_ = 0;
};

}  // namespace gpuxray::format
