#include "proto/trace_reader.h"

#include <fcntl.h>
#include <google/protobuf/stubs/logging.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>

#include "proto/column_decoder.h"
#include "proto/gpuxray.pb.h"
#include "proto/wire_decoder.h"

namespace gpuxray::format {
namespace {

// A chunk may decompress to at most this many times its stored size, plus an allowance. The writer's
// batches hold at most 4 MiB before compression and come to a few times their stored size (zstd on
// varint columns), but one long string (a 100 KB NVTX message) in a batch of its own compresses
// thousands of times, so any chunk up to the allowance is accepted whatever its ratio: what a tiny
// hostile file can make the reader allocate stays within the allowance.
constexpr uint64_t kMaxExpansion = 256;
constexpr uint64_t kExpansionAllowance = 16u << 20;
// Records decoded per byte of file (beyond a small allowance), and in one chunk. The writer's files
// hold about 0.2 records per byte and its chunks up to 64 Ki records; each record costs a few hundred
// bytes while decoded, so no file costs memory out of proportion to its size.
constexpr uint64_t kMaxRecordsPerFileByte = 16;
constexpr uint64_t kRecordAllowance = 4096;
constexpr uint64_t kMaxRecordsPerChunk = 256 * 1024;
// Bytes checksummed while looking for the next intact chunk after damage, per byte of file (besides
// the file itself once): false sync words each cost a checksum of what their header claims.
constexpr uint64_t kResyncBytesPerFileByte = 4;

class FileSource final : public ByteSource {
 public:
  FileSource(int fd, uint64_t size) : fd_(fd), size_(size) {}
  ~FileSource() override { ::close(fd_); }
  uint64_t size() const override { return size_; }
  bool read(uint64_t offset, size_t length, uint8_t* out) const override {
    while (length > 0) {
      ssize_t n = ::pread(fd_, out, length, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      out += n;
      offset += static_cast<uint64_t>(n);
      length -= static_cast<size_t>(n);
    }
    return true;
  }

 private:
  int fd_;
  uint64_t size_;
};

class MemorySource final : public ByteSource {
 public:
  explicit MemorySource(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  bool read(uint64_t offset, size_t length, uint8_t* out) const override {
    if (offset > bytes_.size() || length > bytes_.size() - offset) return false;
    if (length == 0) return true;  // `out` may be null (an empty vector's data()): memcpy must not see it
    std::memcpy(out, bytes_.data() + offset, length);
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
};

std::string offsetText(uint64_t offset) { return "byte offset " + std::to_string(offset); }

// libprotobuf logs what it rejects while parsing (invalid UTF-8 in a string) to stderr; the reader
// reports the chunk itself, on one line naming the file.
void silenceProtobufLogging() {
  static const bool silenced = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)silenced;
}

std::string fileKindName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a plain file";
}

ClockAnchor fromPb(const pb::ClockAnchor& p) {
  return {p.capture_ns(), p.realtime_ns(), p.monotonic_ns(), p.uncertainty_ns()};
}

CaptureWindow fromPb(const pb::CaptureWindow& p) {
  return {p.start_ns(), p.end_ns(), static_cast<WindowEdge>(p.started_by()), static_cast<WindowEdge>(p.ended_by()),
          p.detail()};
}

template <typename T>
std::vector<T> toVector(const google::protobuf::RepeatedField<T>& field) {
  return {field.begin(), field.end()};
}

std::vector<std::string> toVector(const google::protobuf::RepeatedPtrField<std::string>& field) {
  return {field.begin(), field.end()};
}

DeviceProperties fromPb(const pb::DeviceProperties& p) {
  DeviceProperties d;
  d.device_id = p.device_id();
  d.name = p.name();
  d.uuid = p.uuid();
  d.pci_bus_id = p.pci_bus_id();
  d.compute_major = p.compute_major();
  d.compute_minor = p.compute_minor();
  d.sm_count = p.sm_count();
  d.max_threads_per_sm = p.max_threads_per_sm();
  d.max_warps_per_sm = p.max_warps_per_sm();
  d.max_blocks_per_sm = p.max_blocks_per_sm();
  d.registers_per_sm = p.registers_per_sm();
  d.registers_per_block = p.registers_per_block();
  d.shared_memory_per_sm = p.shared_memory_per_sm();
  d.shared_memory_per_block = p.shared_memory_per_block();
  d.shared_memory_per_block_optin = p.shared_memory_per_block_optin();
  d.reserved_shared_memory_per_block = p.reserved_shared_memory_per_block();
  d.memory_bytes = p.memory_bytes();
  d.memory_bandwidth_bytes_per_s = p.memory_bandwidth_bytes_per_s();
  d.core_clock_khz = p.core_clock_khz();
  d.memory_clock_khz = p.memory_clock_khz();
  d.memory_bus_width_bits = p.memory_bus_width_bits();
  d.l2_cache_bytes = p.l2_cache_bytes();
  d.max_threads_per_block = p.max_threads_per_block();
  d.warp_size = p.warp_size();
  d.max_registers_per_thread = p.max_registers_per_thread();
  d.numa_node = p.numa_node();
  d.mig_gpu_instance_id = p.mig_gpu_instance_id();
  d.mig_compute_instance_id = p.mig_compute_instance_id();
  d.peak_bf16_flops = p.peak_bf16_flops();
  return d;
}

Endpoint fromPb(const pb::Endpoint& p) {
  return {static_cast<EndpointKind>(p.kind()), p.id(), p.device()};
}

Link fromPb(const pb::Link& p) {
  Link l;
  l.kind = static_cast<LinkKind>(p.kind());
  l.a = fromPb(p.a());
  l.b = fromPb(p.b());
  l.version = p.version();
  l.width = p.width();
  l.bandwidth_bytes_per_s = p.bandwidth_bytes_per_s();
  l.ports_a = toVector(p.ports_a());
  l.ports_b = toVector(p.ports_b());
  return l;
}

NetworkInterface fromPb(const pb::NetworkInterface& p) {
  return {p.name(), p.port(), p.bandwidth_bytes_per_s(), p.pci_bus_id(), p.transport(), p.numa_node()};
}

CaptureConfig fromPb(const pb::CaptureConfig& p) {
  CaptureConfig c;
  c.activities = toVector(p.activities());
  c.buffer_bytes = p.buffer_bytes();
  c.max_buffer_memory_bytes = p.max_buffer_memory_bytes();
  c.flush_period_ms = p.flush_period_ms();
  c.nccl_profiler = p.nccl_profiler();
  c.nvtx = p.nvtx();
  c.metric_sampling = p.metric_sampling();
  c.metric_interval_us = p.metric_interval_us();
  c.metrics = toVector(p.metrics());
  c.options = toVector(p.options());
  return c;
}

FileHeader fromPb(const pb::FileHeader& p) {
  FileHeader h;
  h.format_major = p.format_major();
  h.format_minor = p.format_minor();
  h.tool_version = p.tool_version();
  h.run_id = p.run_id();
  h.run_id_source = p.run_id_source();
  h.rank = p.rank();
  h.local_rank = p.local_rank();
  h.world_size = p.world_size();
  h.local_world_size = p.local_world_size();
  h.rank_source = p.rank_source();
  h.hostname = p.hostname();
  h.pid = p.pid();
  h.command_line = toVector(p.command_line());
  h.start_time_ns = p.start_time_ns();
  h.time_base = p.time_base();
  for (const auto& a : p.clock_anchors()) h.clock_anchors.push_back(fromPb(a));
  for (const auto& d : p.devices()) h.devices.push_back(fromPb(d));
  for (const auto& l : p.links()) h.links.push_back(fromPb(l));
  for (const auto& n : p.nics()) h.nics.push_back(fromPb(n));
  h.capture_config = fromPb(p.capture_config());
  h.simulated = p.simulated();
  h.simulation_inputs = p.simulation_inputs();
  h.cupti_api_version = p.cupti_api_version();
  h.cuda_driver_version = p.cuda_driver_version();
  h.nccl_version = p.nccl_version();
  h.nccl_capture_source = static_cast<NcclCaptureSource>(p.nccl_capture_source());
  h.capture_window_plan = p.capture_window_plan();
  for (const auto& w : p.capture_windows()) h.capture_windows.push_back(fromPb(w));
  return h;
}

Trailer fromPb(const pb::Trailer& p) {
  Trailer t;
  for (const auto& c : p.counts()) t.counts.push_back({static_cast<Category>(c.category()), c.written(), c.dropped()});
  t.end = static_cast<CaptureEnd>(p.end());
  t.end_time_ns = p.end_time_ns();
  t.end_detail = p.end_detail();
  t.warnings = toVector(p.warnings());
  return t;
}

uint64_t endOf(uint64_t start, int64_t duration) { return start + static_cast<uint64_t>(duration); }

MemcpyRecord fromPb(const pb::Memcpy& p) {
  MemcpyRecord r;
  r.start_ns = p.start_ns();
  r.end_ns = endOf(p.start_ns(), p.duration_ns());
  r.device = p.device();
  r.stream = p.stream();
  r.correlation_id = p.correlation_id();
  r.copy_kind = static_cast<CopyKind>(p.copy_kind());
  r.bytes = p.bytes();
  r.src_kind = static_cast<MemoryKind>(p.src_kind());
  r.dst_kind = static_cast<MemoryKind>(p.dst_kind());
  r.src_device = p.src_device();
  r.dst_device = p.dst_device();
  r.is_async = p.is_async();
  r.context = p.context();
  r.graph_id = p.graph_id();
  r.graph_node_id = p.graph_node_id();
  return r;
}

MemsetRecord fromPb(const pb::Memset& p) {
  MemsetRecord r;
  r.start_ns = p.start_ns();
  r.end_ns = endOf(p.start_ns(), p.duration_ns());
  r.device = p.device();
  r.stream = p.stream();
  r.correlation_id = p.correlation_id();
  r.bytes = p.bytes();
  r.value = p.value();
  r.memory_kind = static_cast<MemoryKind>(p.memory_kind());
  r.context = p.context();
  r.graph_id = p.graph_id();
  r.graph_node_id = p.graph_node_id();
  return r;
}

MemoryEventRecord fromPb(const pb::MemoryEvent& p) {
  MemoryEventRecord r;
  r.timestamp_ns = p.timestamp_ns();
  r.operation = static_cast<MemoryOperation>(p.operation());
  r.device = p.device();
  r.address = p.address();
  r.bytes = p.bytes();
  r.memory_kind = static_cast<MemoryKind>(p.memory_kind());
  r.stream = p.stream();
  r.correlation_id = p.correlation_id();
  r.is_async = p.is_async();
  r.pool_address = p.pool_address();
  return r;
}

PayloadField fromPb(const pb::PayloadField& p) {
  PayloadField f;
  f.name_id = p.name_iid();
  switch (p.value_case()) {
    case pb::PayloadField::kUintValue:
      f.type = PayloadField::Type::kUint;
      f.uint_value = p.uint_value();
      break;
    case pb::PayloadField::kDoubleValue:
      f.type = PayloadField::Type::kDouble;
      f.double_value = p.double_value();
      break;
    case pb::PayloadField::kStringIid:
      f.type = PayloadField::Type::kString;
      f.string_id = p.string_iid();
      break;
    case pb::PayloadField::kIntValue:
    case pb::PayloadField::VALUE_NOT_SET:
      f.type = PayloadField::Type::kInt;
      f.int_value = p.int_value();
      break;
  }
  return f;
}

NvtxEventRecord fromPb(const pb::NvtxEvent& p) {
  NvtxEventRecord r;
  r.kind = static_cast<NvtxEventKind>(p.kind());
  r.start_ns = p.start_ns();
  r.end_ns = p.end_ns();
  r.domain_id = p.domain_iid();
  r.name_id = p.name_iid();
  r.thread_id = p.thread_id();
  r.device = p.device();
  r.stream = p.stream();
  r.category = p.category();
  r.color = p.color();
  r.payload_schema = p.payload_schema();
  for (const auto& f : p.payload()) r.payload.push_back(fromPb(f));
  r.depth = p.depth();
  return r;
}

SynchronizationRecord fromPb(const pb::Synchronization& p) {
  SynchronizationRecord r;
  r.start_ns = p.start_ns();
  r.end_ns = endOf(p.start_ns(), p.duration_ns());
  r.kind = static_cast<SynchronizationKind>(p.kind());
  r.device = p.device();
  r.stream = p.stream();
  r.correlation_id = p.correlation_id();
  r.context = p.context();
  r.cuda_event_id = p.cuda_event_id();
  r.thread_id = p.thread_id();
  return r;
}

NcclCommunicatorRecord fromPb(const pb::NcclCommunicator& p) {
  return {p.comm_hash(), p.name(),   p.comm_rank(), p.nranks(),          p.nnodes(),
          p.global_rank(), p.device(), p.init_ns(), p.profiler_version()};
}

NcclOperationRecord fromPb(const pb::NcclOperation& p) {
  NcclOperationRecord r;
  r.kind = static_cast<NcclOperationKind>(p.kind());
  r.comm_hash = p.comm_hash();
  r.seq = p.seq();
  r.func_id = p.func_iid();
  r.enqueue_ns = p.enqueue_ns();
  r.gpu_start_ns = p.gpu_start_ns();
  r.gpu_end_ns = p.gpu_end_ns();
  r.bytes = p.bytes();
  r.count = p.count();
  r.datatype_id = p.datatype_iid();
  r.root = p.root();
  r.peer = p.peer();
  r.algorithm_id = p.algorithm_iid();
  r.protocol_id = p.protocol_iid();
  r.channels = p.channels();
  r.warps = p.warps();
  r.graph_captured = p.graph_captured();
  r.reduce_op_id = p.reduce_op_iid();
  r.stream = p.stream();
  r.device = p.device();
  r.operation_id = p.operation_id();
  r.enqueue_end_ns = p.enqueue_end_ns();
  r.gpu_clock_error_ns = p.gpu_clock_error_ns();
  r.kernel_correlation_id = p.kernel_correlation_id();
  r.gpu_clock_unmapped = p.gpu_clock_unmapped();
  return r;
}

NetTransferRecord fromPb(const pb::NetTransfer& p) {
  NetTransferRecord r;
  r.operation_id = p.operation_id();
  r.peer = p.peer();
  r.channel = p.channel();
  r.is_send = p.is_send();
  r.bytes = p.bytes();
  r.start_ns = p.start_ns();
  r.end_ns = p.end_ns();
  r.steps = p.steps();
  r.wait_gpu_ns = p.wait_gpu_ns();
  r.wait_peer_ns = p.wait_peer_ns();
  r.wait_network_ns = p.wait_network_ns();
  r.comm_hash = p.comm_hash();
  return r;
}

// A kernel launched with configuration `id`: the configuration's fields set, the kernel's own not yet.
KernelRecord configuredKernel(uint32_t id, const pb::KernelConfig& c) {
  KernelRecord r;
  r.config_id.value = id;
  r.name_id = c.name_iid();
  r.grid_x = c.grid_x();
  r.grid_y = c.grid_y();
  r.grid_z = c.grid_z();
  r.block_x = c.block_x();
  r.block_y = c.block_y();
  r.block_z = c.block_z();
  r.registers_per_thread = c.registers_per_thread();
  r.static_shared_memory = c.static_shared_memory();
  r.dynamic_shared_memory = c.dynamic_shared_memory();
  r.local_memory_per_thread = c.local_memory_per_thread();
  r.cluster_x = c.cluster_x();
  r.cluster_y = c.cluster_y();
  r.cluster_z = c.cluster_z();
  r.shared_memory_optin = c.shared_memory_optin();
  r.shared_memory_carveout_pct = c.shared_memory_carveout_pct();
  r.shared_memory_executed = c.shared_memory_executed();
  r.launch_type = c.launch_type();
  r.max_active_clusters = c.max_active_clusters();
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

std::string_view StringTable::get(StringId id) const {
  if (id == 0) return {};
  if (const std::string* value = values_.find(id)) return *value;
  auto [it, inserted] = missing_names_.try_emplace(id);
  if (inserted) it->second = "<missing string " + std::to_string(id) + ">";
  return it->second;
}

bool StringTable::contains(StringId id) const { return values_.find(id) != nullptr; }

void StringTable::define(StringId id, std::string value) {
  if (id == 0) return;
  auto [slot, inserted] = values_.emplace(id);
  if (inserted) *slot = std::move(value);
}

// Each configuration as the kernels launched with it begin: converted once, copied whole per kernel.
struct TraceReader::KernelConfigs {
  IdMap<KernelRecord> by_id;
};

TraceReader::TraceReader(const std::string& path) : path_(path), kernel_configs_(std::make_unique<KernelConfigs>()) {
  silenceProtobufLogging();
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw FormatError(path + ": cannot open: " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw FormatError(path + ": not a regular file (" + fileKindName(info.st_mode) + ")");
  }
  source_ = std::make_unique<FileSource>(fd, static_cast<uint64_t>(info.st_size));
  openSource();
}

TraceReader::TraceReader(std::string name, std::span<const uint8_t> bytes)
    : path_(std::move(name)), kernel_configs_(std::make_unique<KernelConfigs>()) {
  silenceProtobufLogging();
  source_ = std::make_unique<MemorySource>(bytes);
  openSource();
}

TraceReader::~TraceReader() { ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(zstd_context_)); }

void TraceReader::openSource() {
  stats_.file_bytes = source_->size();
  if (stats_.file_bytes == 0) throw FormatError(path_ + ": empty file (0 bytes), not a gpuxray trace");
  resync_budget_ = (1 + kResyncBytesPerFileByte) * stats_.file_bytes;
  record_budget_ = kRecordAllowance + kMaxRecordsPerFileByte * stats_.file_bytes;
  uint8_t preamble_bytes[kPreambleSize] = {};
  size_t available = static_cast<size_t>(std::min<uint64_t>(kPreambleSize, stats_.file_bytes));
  if (!source_->read(0, available, preamble_bytes)) throw FormatError(path_ + ": cannot read its first bytes");
  auto preamble = decodePreamble({preamble_bytes, available});
  if (!preamble) throw FormatError(path_ + ": not a gpuxray trace (no GPUXRAY signature at the start)");
  version_ = *preamble;
  if (version_.major != kFormatMajor) {
    throw FormatError(path_ + ": trace format " + std::to_string(version_.major) + "." +
                      std::to_string(version_.minor) + " is not readable by this gpuxray, which reads format " +
                      std::to_string(kFormatMajor) + ".x" +
                      (version_.major > kFormatMajor ? " (written by a newer gpuxray: upgrade)" : ""));
  }
  offset_ = kPreambleSize;
  zstd_context_ = ZSTD_createDCtx();

  std::vector<uint8_t> payload;
  uint64_t header_offset = offset_;
  ChunkRead result = readChunk(payload);
  pb::Chunk chunk;
  if (result != ChunkRead::kOk || !chunk.ParseFromArray(payload.data(), static_cast<int>(payload.size())) ||
      !chunk.has_header()) {
    std::string why = result == ChunkRead::kEnd ? "the file ends before it" : "its chunk is damaged";
    // The destructor does not run when the constructor throws.
    ZSTD_freeDCtx(static_cast<ZSTD_DCtx*>(zstd_context_));
    zstd_context_ = nullptr;
    throw FormatError(path_ + ": no readable header at " + offsetText(header_offset) + " (" + why + ")");
  }
  header_ = fromPb(chunk.header());
}

// A few lines per kind of problem: past kShownPerKind messages that differ only in their numbers (the
// same damage in chunk after chunk), the rest are counted on the last one's line.
void TraceReader::warn(std::string message) {
  std::string kind;
  std::copy_if(message.begin(), message.end(), std::back_inserter(kind), [](char c) { return c < '0' || c > '9'; });
  WarningKind& seen = warning_kinds_[std::move(kind)];
  if (++seen.count > kShownPerKind) return;
  seen.last = warnings_.size();
  warnings_.push_back(path_ + ": " + std::move(message));
}

void TraceReader::finishWarnings() {
  if (warnings_finished_) return;
  warnings_finished_ = true;
  for (const auto& [kind, seen] : warning_kinds_) {
    if (seen.count > kShownPerKind)
      warnings_[seen.last] += " (and " + std::to_string(seen.count - kShownPerKind) + " more like it)";
  }
}

bool TraceReader::chunkIsIntactAt(uint64_t offset) {
  uint8_t header_bytes[kChunkHeaderSize];
  ChunkHeader header;
  if (offset + kChunkHeaderSize > stats_.file_bytes || !source_->read(offset, kChunkHeaderSize, header_bytes) ||
      decodeChunkHeader(header_bytes, &header) != ChunkHeaderProblem::kNone ||
      offset + kChunkHeaderSize + header.stored_size > stats_.file_bytes)
    return false;
  if (header.stored_size > resync_budget_) {
    resync_budget_ = 0;  // no more looking: what is left of the file is skipped
    return false;
  }
  resync_budget_ -= header.stored_size;
  stored_.resize(header.stored_size);
  return source_->read(offset + kChunkHeaderSize, stored_.size(), stored_.data()) &&
         chunkChecksumMatches(header_bytes, stored_);
}

// Moves offset_ to the next intact chunk after damage at `damaged_at`, or to the end of the file.
void TraceReader::skipDamage(uint64_t damaged_at, const std::string& what) {
  ++stats_.damaged_chunks;
  constexpr size_t kBlock = 64 * 1024;
  std::vector<uint8_t> block(kBlock + 3);
  uint64_t resume = stats_.file_bytes;
  uint64_t from = damaged_at + 1;
  for (; from + kChunkHeaderSize <= stats_.file_bytes && resume == stats_.file_bytes && resync_budget_ > 0;
       from += kBlock) {
    size_t length = static_cast<size_t>(std::min<uint64_t>(kBlock + 3, stats_.file_bytes - from));
    if (!source_->read(from, length, block.data())) break;
    for (size_t i = 0; i + 4 <= length; ++i) {
      if (block[i] == 'G' && block[i + 1] == 'X' && block[i + 2] == 'C' && block[i + 3] == 'K' &&
          chunkIsIntactAt(from + i)) {
        resume = from + i;
        break;
      }
    }
  }
  stats_.bytes_skipped += resume - damaged_at;
  std::string outcome = resume < stats_.file_bytes ? "skipped " + std::to_string(resume - damaged_at) +
                                                         " bytes to the next intact chunk"
                        : resync_budget_ == 0 && from + kChunkHeaderSize <= stats_.file_bytes
                            ? "too many false chunk headers after it to look further; the rest of the file skipped"
                            : "nothing readable after it";
  warn("damaged chunk at " + offsetText(damaged_at) + " (" + what + "); " + outcome);
  offset_ = resume;
}

// Ends the file early when its bytes cannot be read (it shrank or the device failed while reading).
TraceReader::ChunkRead TraceReader::unreadable(uint64_t at) {
  warn("cannot read the bytes at " + offsetText(at) + " (did the file shrink while being read?); the rest skipped");
  stats_.bytes_skipped += stats_.file_bytes - at;
  offset_ = stats_.file_bytes;
  return ChunkRead::kEnd;
}

TraceReader::ChunkRead TraceReader::readChunk(std::vector<uint8_t>& payload) {
  while (offset_ < stats_.file_bytes) {
    uint64_t at = offset_;
    uint64_t left = stats_.file_bytes - at;
    uint8_t header_bytes[kChunkHeaderSize];
    ChunkHeader header;
    if (left < kChunkHeaderSize) {
      if (!source_->read(at, static_cast<size_t>(left), header_bytes)) return unreadable(at);
      if (!std::equal(header_bytes, header_bytes + std::min<uint64_t>(left, 4), "GXCK")) {
        skipDamage(at, "not a chunk header");
        continue;
      }
      stats_.torn_at = at;
      warn("torn tail at " + offsetText(at) + ": the last " + std::to_string(left) +
           " bytes are an incomplete chunk (the capture was cut off)");
      offset_ = stats_.file_bytes;
      return ChunkRead::kEnd;
    }
    if (!source_->read(at, kChunkHeaderSize, header_bytes)) return unreadable(at);
    ChunkHeaderProblem problem = decodeChunkHeader(header_bytes, &header);
    if (problem != ChunkHeaderProblem::kNone) {
      skipDamage(at, problem == ChunkHeaderProblem::kNoSync ? "not a chunk header" : "implausible chunk header");
      continue;
    }
    if (header.stored_size > left - kChunkHeaderSize) {
      // Either the writer was cut off inside this chunk, or its size field is damaged.
      stored_.resize(static_cast<size_t>(left - kChunkHeaderSize));
      if (!source_->read(at + kChunkHeaderSize, stored_.size(), stored_.data())) return unreadable(at);
      bool later_chunk = std::search(stored_.begin(), stored_.end(), "GXCK", "GXCK" + 4) != stored_.end();
      if (!later_chunk) {
        stats_.torn_at = at;
        warn("torn tail at " + offsetText(at) + ": the chunk there needs " + std::to_string(header.stored_size) +
             " bytes but the file has " + std::to_string(left - kChunkHeaderSize) + " (the capture was cut off)");
        offset_ = stats_.file_bytes;
        return ChunkRead::kEnd;
      }
      skipDamage(at, "chunk size runs past the end of the file");
      continue;
    }
    stored_.resize(header.stored_size);
    if (!source_->read(at + kChunkHeaderSize, stored_.size(), stored_.data())) return unreadable(at);
    if (!chunkChecksumMatches(header_bytes, stored_)) {
      skipDamage(at, "checksum mismatch");
      continue;
    }
    offset_ = at + kChunkHeaderSize + header.stored_size;
    if (header.codec == Codec::kNone) {
      payload = stored_;
    } else if (!decompress(at, header, payload)) {
      ++stats_.damaged_chunks;
      return ChunkRead::kDamaged;
    }
    if (!withinRecordBudget(at, payload)) {
      ++stats_.damaged_chunks;
      return ChunkRead::kDamaged;
    }
    ++stats_.chunks;
    return ChunkRead::kOk;
  }
  return ChunkRead::kEnd;
}

// The size comes from the zstd frame and must agree with the header and be a plausible expansion of
// the stored bytes, before anything is allocated for it.
bool TraceReader::decompress(uint64_t at, const ChunkHeader& header, std::vector<uint8_t>& payload) {
  unsigned long long frame_size = ZSTD_getFrameContentSize(stored_.data(), stored_.size());
  if (frame_size == ZSTD_CONTENTSIZE_ERROR || frame_size == ZSTD_CONTENTSIZE_UNKNOWN || frame_size != header.raw_size) {
    warn("chunk at " + offsetText(at) + " does not decompress (its zstd frame does not give the size its header " +
         "does); skipped");
    return false;
  }
  if (header.raw_size > kExpansionAllowance + kMaxExpansion * uint64_t{header.stored_size}) {
    warn("chunk at " + offsetText(at) + " claims to expand from " + std::to_string(header.stored_size) + " to " +
         std::to_string(header.raw_size) + " bytes, more than a trace chunk can; skipped");
    return false;
  }
  payload.resize(header.raw_size);
  size_t n = ZSTD_decompressDCtx(static_cast<ZSTD_DCtx*>(zstd_context_), payload.data(), payload.size(),
                                 stored_.data(), stored_.size());
  if (ZSTD_isError(n) || n != header.raw_size) {
    warn("chunk at " + offsetText(at) + " does not decompress; skipped");
    return false;
  }
  return true;
}

namespace {

std::span<const uint8_t> bytesOf(const std::string& bytes) {
  return {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()};
}

// How many messages a serialized message of `type` decodes to, counted on the wire without decoding
// it: every message field at any depth, and each value of the kernel and API-call columns (one record
// per value of their start column, packed or not: one per byte that ends a varint).
uint64_t messagesOnTheWire(std::span<const uint8_t> message, const google::protobuf::Descriptor* type) {
  static const google::protobuf::Descriptor* const kKernelColumns = pb::KernelColumns::descriptor();
  static const google::protobuf::Descriptor* const kApiCallColumns = pb::ApiCallColumns::descriptor();
  static_assert(static_cast<int>(pb::KernelColumns::kStartDeltaNsFieldNumber) ==
                static_cast<int>(pb::ApiCallColumns::kStartDeltaNsFieldNumber));
  const bool columns = type == kKernelColumns || type == kApiCallColumns;
  uint64_t count = 0;
  forEachField(message, [&](uint64_t number, uint64_t wire_type, std::span<const uint8_t> bytes, auto) {
    if (columns && number == pb::KernelColumns::kStartDeltaNsFieldNumber) {
      count += wire_type == 0 ? 1 : varintsIn(bytes);
      return;
    }
    if (wire_type != 2 || number > static_cast<uint64_t>(std::numeric_limits<int>::max())) return;
    const google::protobuf::FieldDescriptor* field = type->FindFieldByNumber(static_cast<int>(number));
    if (field != nullptr && field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE)
      count += 1 + messagesOnTheWire(bytes, field->message_type());
  });
  return count;
}

}  // namespace

bool TraceReader::withinRecordBudget(uint64_t at, std::span<const uint8_t> payload) {
  uint64_t records = messagesOnTheWire(payload, pb::Chunk::descriptor());
  if (records > kMaxRecordsPerChunk || records > record_budget_) {
    warn("chunk at " + offsetText(at) + " holds " + std::to_string(records) + " records, more than a " +
         std::to_string(stats_.file_bytes) + "-byte file can plausibly hold; skipped");
    return false;
  }
  record_budget_ -= records;
  return true;
}

bool TraceReader::next(EventBatch& batch) {
  // Kernels and API calls are most of a batch: their vectors keep their memory, and their records,
  // which decodeBatch overwrites field by field rather than zeroing them first.
  std::vector<KernelRecord> kernels = std::move(batch.kernels);
  std::vector<ApiCallRecord> api_calls = std::move(batch.api_calls);
  batch = EventBatch{};
  batch.kernels = std::move(kernels);
  batch.api_calls = std::move(api_calls);
  std::vector<uint8_t>& payload = raw_;
  if (!chunk_) chunk_ = std::make_unique<pb::Chunk>();
  if (!batch_rest_) batch_rest_ = std::make_unique<pb::EventBatch>();
  pb::Chunk& chunk = *chunk_;
  while (true) {
    uint64_t at = offset_;
    ChunkRead result = readChunk(payload);
    if (result == ChunkRead::kEnd) {
      finishWarnings();
      batch.kernels.clear();
      batch.api_calls.clear();
      return false;
    }
    if (result == ChunkRead::kDamaged) continue;
    // Most chunks: libprotobuf parses the batch but its columns, which are decoded straight into records.
    if (splitBatch(payload, split_) &&
        batch_rest_->ParseFromArray(split_.rest.data(), static_cast<int>(split_.rest.size())) &&
        decodeBatch(at, *batch_rest_, split_.kernels, split_.api_calls, batch))
      return true;
    if (!chunk.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      ++stats_.damaged_chunks;
      warn("chunk at " + offsetText(at) + " passes its checksum but does not decode; skipped");
      continue;
    }
    switch (chunk.content_case()) {
      case pb::Chunk::kBatch:
        // Columns written in another form than libprotobuf's (twice, unpacked) are written again in its,
        // without the fields it did not know (a column's number with another wire type is one).
        chunk.mutable_batch()->mutable_kernels()->DiscardUnknownFields();
        chunk.mutable_batch()->mutable_api_calls()->DiscardUnknownFields();
        chunk.batch().kernels().SerializeToString(&kernel_columns_);
        chunk.batch().api_calls().SerializeToString(&api_call_columns_);
        if (decodeBatch(at, chunk.batch(), bytesOf(kernel_columns_), bytesOf(api_call_columns_), batch)) return true;
        ++stats_.damaged_chunks;
        warn("chunk at " + offsetText(at) + " holds columns that do not decode; skipped");
        continue;
      case pb::Chunk::kTrailer:
        if (trailer_) warn("a second trailer at " + offsetText(at) + "; the last one counts");
        trailer_ = fromPb(chunk.trailer());
        continue;
      case pb::Chunk::kHeader:
        warn("a second header at " + offsetText(at) + " ignored");
        continue;
      case pb::Chunk::CONTENT_NOT_SET:
        warn("chunk at " + offsetText(at) + " holds nothing this reader knows (newer minor version?)");
        continue;
    }
  }
}

bool TraceReader::decodeBatch(uint64_t at, const pb::EventBatch& b, std::span<const uint8_t> kernel_columns,
                              std::span<const uint8_t> api_call_columns, EventBatch& batch) {
  for (const auto& s : b.strings()) strings_.define(s.iid(), s.value());
  for (const auto& c : b.kernel_configs()) {
    if (c.id() == 0) continue;
    auto [slot, inserted] = kernel_configs_->by_id.emplace(c.id());
    if (inserted) *slot = configuredKernel(c.id(), c);
  }
  // Calls first: of the two, only the kernels count what they cannot resolve.
  ColumnsRead calls = decodeApiCallColumns(api_call_columns, batch.api_calls);
  if (calls.outcome == ColumnsDecoded::kUnusual) return false;
  ColumnsRead kernels =
      decodeKernelColumns(kernel_columns, kernel_configs_->by_id, batch.kernels, stats_.unresolved_references);
  if (kernels.outcome == ColumnsDecoded::kUnusual) return false;

  if (trailer_) warn("records after the trailer at " + offsetText(at));
  if (kernels.outcome == ColumnsDecoded::kLengthsDiffer)
    warn("a batch's kernel columns have different lengths; its " + std::to_string(kernels.records) +
         " kernels skipped");
  if (calls.outcome == ColumnsDecoded::kLengthsDiffer)
    warn("a batch's API call columns have different lengths; its " + std::to_string(calls.records) + " calls skipped");
  for (const auto& f : b.api_functions())
    batch.api_functions.push_back({static_cast<ApiDomain>(f.domain()), f.cbid(), f.name_iid()});

  for (const auto& m : b.memcpys()) batch.memcpys.push_back(fromPb(m));
  for (const auto& m : b.memsets()) batch.memsets.push_back(fromPb(m));
  for (const auto& m : b.memory_events()) batch.memory_events.push_back(fromPb(m));
  for (const auto& m : b.nvtx_events()) batch.nvtx_events.push_back(fromPb(m));
  for (const auto& m : b.synchronizations()) batch.synchronizations.push_back(fromPb(m));
  for (const auto& m : b.nccl_communicators()) batch.nccl_communicators.push_back(fromPb(m));
  for (const auto& m : b.nccl_operations()) batch.nccl_operations.push_back(fromPb(m));
  for (const auto& m : b.net_transfers()) batch.net_transfers.push_back(fromPb(m));
  for (const auto& m : b.metric_samples())
    batch.metric_samples.push_back({m.timestamp_ns(), m.device(), m.metric_iid(), m.value()});
  for (const auto& m : b.clock_anchors()) batch.clock_anchors.push_back(fromPb(m));
  for (const auto& m : b.external_correlations())
    batch.external_correlations.push_back({m.kind(), m.external_id(), m.correlation_id()});
  for (const auto& m : b.overheads())
    batch.overheads.push_back({m.kind(), m.start_ns(), endOf(m.start_ns(), m.duration_ns()), m.thread_id(), m.device()});
  for (const auto& m : b.resource_names())
    batch.resource_names.push_back({static_cast<ResourceKind>(m.kind()), m.id(), m.device(), m.name_iid()});
  for (const auto& m : b.streams())
    batch.streams.push_back({m.stream(), m.device(), m.context(), m.priority(), m.flags(), m.correlation_id()});
  for (const auto& m : b.devices()) batch.devices.push_back(fromPb(m));
  for (const auto& m : b.links()) batch.links.push_back(fromPb(m));
  for (const auto& m : b.capture_windows()) batch.capture_windows.push_back(fromPb(m));
  for (const auto& m : b.kernel_metrics()) {
    KernelMetricsRecord& metrics = batch.kernel_metrics.emplace_back();
    metrics.correlation_id = m.correlation_id();
    metrics.device = m.device();
    metrics.passes = m.passes();
    if (m.has_achieved_occupancy_pct()) metrics.achieved_occupancy_pct = m.achieved_occupancy_pct();
    if (m.has_sm_throughput_pct()) metrics.sm_throughput_pct = m.sm_throughput_pct();
    if (m.has_tensor_pipe_pct()) metrics.tensor_pipe_pct = m.tensor_pipe_pct();
    if (m.has_dram_read_bytes()) metrics.dram_read_bytes = m.dram_read_bytes();
    if (m.has_dram_write_bytes()) metrics.dram_write_bytes = m.dram_write_bytes();
    if (m.has_l2_bytes()) metrics.l2_bytes = m.l2_bytes();
    if (m.has_l2_hit_rate_pct()) metrics.l2_hit_rate_pct = m.l2_hit_rate_pct();
    if (m.has_l1_bytes()) metrics.l1_bytes = m.l1_bytes();
    if (m.has_l1_hit_rate_pct()) metrics.l1_hit_rate_pct = m.l1_hit_rate_pct();
    if (m.has_shared_wavefronts()) metrics.shared_wavefronts = m.shared_wavefronts();
    if (m.has_local_load_bytes()) metrics.local_load_bytes = m.local_load_bytes();
    if (m.has_local_store_bytes()) metrics.local_store_bytes = m.local_store_bytes();
    if (m.has_gpu_duration_ns()) metrics.gpu_duration_ns = m.gpu_duration_ns();
  }
  return true;
}

}  // namespace gpuxray::format
