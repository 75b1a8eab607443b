#include "proto/trace_writer.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>

#include "proto/file_layout.h"

// Field numbers below are those of proto/gpuxray.proto; tests/format_compat_test.cc decodes this
// writer's output with the generated classes, so a wrong number fails there.
namespace gpuxray::format {
namespace {

using E = WireEncoder;

void encodeClockAnchor(E& e, const ClockAnchor& a) {
  e.uintField(1, a.capture_ns);
  e.uintField(2, a.realtime_ns);
  e.uintField(3, a.monotonic_ns);
  e.uintField(4, a.uncertainty_ns);
}

void encodeDevice(E& e, const DeviceProperties& d) {
  e.uintField(1, d.device_id);
  e.stringField(2, d.name);
  e.bytesField(3, d.uuid);  // `bytes`: raw, not UTF-8
  e.stringField(4, d.pci_bus_id);
  e.uintField(5, d.compute_major);
  e.uintField(6, d.compute_minor);
  e.uintField(7, d.sm_count);
  e.uintField(8, d.max_threads_per_sm);
  e.uintField(9, d.max_warps_per_sm);
  e.uintField(10, d.max_blocks_per_sm);
  e.uintField(11, d.registers_per_sm);
  e.uintField(12, d.registers_per_block);
  e.uintField(13, d.shared_memory_per_sm);
  e.uintField(14, d.shared_memory_per_block);
  e.uintField(15, d.shared_memory_per_block_optin);
  e.uintField(16, d.reserved_shared_memory_per_block);
  e.uintField(17, d.memory_bytes);
  e.uintField(18, d.memory_bandwidth_bytes_per_s);
  e.uintField(19, d.core_clock_khz);
  e.uintField(20, d.memory_clock_khz);
  e.uintField(21, d.memory_bus_width_bits);
  e.uintField(22, d.l2_cache_bytes);
  e.uintField(23, d.max_threads_per_block);
  e.uintField(24, d.warp_size);
  e.uintField(25, d.max_registers_per_thread);
  e.uintField(26, d.numa_node);
  e.uintField(27, d.mig_gpu_instance_id);
  e.uintField(28, d.mig_compute_instance_id);
  e.doubleField(29, d.peak_bf16_flops);
}

void encodeEndpoint(E& e, const Endpoint& p) {
  e.uintField(1, static_cast<uint32_t>(p.kind));
  e.stringField(2, p.id);
  e.intField(3, p.device);
}

void encodeLink(E& e, const Link& l) {
  e.uintField(1, static_cast<uint32_t>(l.kind));
  e.message(2, [&](E& m) { encodeEndpoint(m, l.a); });
  e.message(3, [&](E& m) { encodeEndpoint(m, l.b); });
  e.uintField(4, l.version);
  e.uintField(5, l.width);
  e.uintField(6, l.bandwidth_bytes_per_s);
  e.packedUintField(7, l.ports_a);
  e.packedUintField(8, l.ports_b);
}

void encodeNic(E& e, const NetworkInterface& n) {
  e.stringField(1, n.name);
  e.uintField(2, n.port);
  e.uintField(3, n.bandwidth_bytes_per_s);
  e.stringField(4, n.pci_bus_id);
  e.stringField(5, n.transport);
  e.intField(6, n.numa_node);
}

void encodeCaptureConfig(E& e, const CaptureConfig& c) {
  for (const auto& a : c.activities) e.repeatedStringElement(1, a);
  e.uintField(2, c.buffer_bytes);
  e.uintField(3, c.max_buffer_memory_bytes);
  e.uintField(4, c.flush_period_ms);
  e.uintField(5, c.nccl_profiler);
  e.uintField(6, c.nvtx);
  e.uintField(7, c.metric_sampling);
  e.uintField(8, c.metric_interval_us);
  for (const auto& m : c.metrics) e.repeatedStringElement(9, m);
  for (const auto& o : c.options) e.repeatedStringElement(10, o);
}

void encodeCaptureWindow(E& e, const CaptureWindow& w) {
  e.uintField(1, w.start_ns);
  e.uintField(2, w.end_ns);
  e.uintField(3, static_cast<uint32_t>(w.started_by));
  e.uintField(4, static_cast<uint32_t>(w.ended_by));
  e.stringField(5, w.detail);
}

void encodeHeader(E& e, const FileHeader& h) {
  e.uintField(1, h.format_major);
  e.uintField(2, h.format_minor);
  e.stringField(3, h.tool_version);
  e.stringField(4, h.run_id);
  e.stringField(5, h.run_id_source);
  e.intField(6, h.rank);
  e.intField(7, h.local_rank);
  e.intField(8, h.world_size);
  e.intField(9, h.local_world_size);
  e.stringField(10, h.rank_source);
  e.stringField(11, h.hostname);
  e.uintField(12, h.pid);
  for (const auto& arg : h.command_line) e.repeatedStringElement(13, arg);
  e.uintField(14, h.start_time_ns);
  e.stringField(15, h.time_base);
  for (const auto& a : h.clock_anchors) e.message(16, [&](E& m) { encodeClockAnchor(m, a); });
  for (const auto& d : h.devices) e.message(17, [&](E& m) { encodeDevice(m, d); });
  for (const auto& l : h.links) e.message(18, [&](E& m) { encodeLink(m, l); });
  for (const auto& n : h.nics) e.message(19, [&](E& m) { encodeNic(m, n); });
  e.message(20, [&](E& m) { encodeCaptureConfig(m, h.capture_config); });
  e.uintField(21, h.simulated);
  e.stringField(22, h.simulation_inputs);
  e.uintField(23, h.cupti_api_version);
  e.uintField(24, h.cuda_driver_version);
  e.stringField(25, h.nccl_version);
  e.uintField(26, static_cast<uint32_t>(h.nccl_capture_source));
  e.stringField(27, h.capture_window_plan);
  for (const auto& w : h.capture_windows) e.message(28, [&](E& m) { encodeCaptureWindow(m, w); });
}

void encodeTrailer(E& e, const Trailer& t) {
  for (const auto& c : t.counts) {
    e.message(1, [&](E& m) {
      m.uintField(1, static_cast<uint32_t>(c.category));
      m.uintField(2, c.written);
      m.uintField(3, c.dropped);
    });
  }
  e.uintField(2, static_cast<uint32_t>(t.end));
  e.uintField(3, t.end_time_ns);
  e.stringField(4, t.end_detail);
  for (const auto& w : t.warnings) e.repeatedStringElement(5, w);
}

int64_t durationOf(uint64_t start, uint64_t end) { return static_cast<int64_t>(end - start); }

// Chunk.batch / EventBatch field numbers.
enum BatchField : uint32_t {
  kStrings = 1, kKernelConfigs = 2, kKernels = 3, kApiCalls = 4, kMemcpys = 5, kMemsets = 6,
  kMemoryEvents = 7, kNvtxEvents = 8, kSynchronizations = 9, kNcclCommunicators = 10,
  kNcclOperations = 11, kNetTransfers = 12, kMetricSamples = 13, kClockAnchors = 14,
  kExternalCorrelations = 15, kOverheads = 16, kResourceNames = 17, kStreams = 18, kApiFunctions = 19,
  kDevices = 20, kLinks = 21, kCaptureWindows = 22,
};

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Sinks

FileSink::FileSink(const std::string& path, Mode mode) : path_(path) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (mode == Mode::kCreateNew ? O_EXCL : O_TRUNC);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) {
    open_errno_ = errno;
    error_ = path + ": cannot create: " + std::strerror(errno);
  }
}

FileSink::~FileSink() {
  if (fd_ >= 0) ::close(fd_);
}

bool FileSink::append(std::span<const uint8_t> first, std::span<const uint8_t> second) {
  if (fd_ < 0) return false;
  iovec parts[2] = {{const_cast<uint8_t*>(first.data()), first.size()},
                    {const_cast<uint8_t*>(second.data()), second.size()}};
  int index = 0;
  while (index < 2) {
    ssize_t n = ::writev(fd_, parts + index, 2 - index);
    if (n < 0) {
      if (errno == EINTR) continue;
      error_ = path_ + ": write failed: " + std::strerror(errno);
      return false;
    }
    size_t left = static_cast<size_t>(n);
    while (index < 2 && left >= parts[index].iov_len) left -= parts[index++].iov_len;
    if (index < 2) {
      parts[index].iov_base = static_cast<uint8_t*>(parts[index].iov_base) + left;
      parts[index].iov_len -= left;
    }
  }
  return true;
}

bool MemorySink::append(std::span<const uint8_t> first, std::span<const uint8_t> second) {
  bytes_.insert(bytes_.end(), first.begin(), first.end());
  bytes_.insert(bytes_.end(), second.begin(), second.end());
  return true;
}

// ---------------------------------------------------------------------------------------------------
// Writer

size_t TraceWriter::KernelConfigHash::operator()(const KernelConfigKey& key) const {
  uint64_t h = 0x9e3779b97f4a7c15ull;
  for (uint32_t v : key) h = (h ^ v) * 0xff51afd7ed558ccdull;
  return static_cast<size_t>(h ^ (h >> 32));
}

TraceWriter::TraceWriter(std::unique_ptr<ByteSink> sink, WriterOptions options)
    : sink_(std::move(sink)), options_(options) {
  if (options_.zstd_level > 0) zstd_context_ = ZSTD_createCCtx();
}

TraceWriter::~TraceWriter() { ZSTD_freeCCtx(static_cast<ZSTD_CCtx*>(zstd_context_)); }

bool TraceWriter::writeHeader(const FileHeader& header) {
  if (header_written_ || failed_) return false;
  header_written_ = true;
  auto preamble = encodePreamble({static_cast<uint16_t>(kFormatMajor), static_cast<uint16_t>(kFormatMinor)});
  if (!sink_->append(preamble, {})) {
    failed_ = true;
    error_ = sink_->error();
    return false;
  }
  bytes_written_ += preamble.size();
  chunk_.clear();
  chunk_.message(1, [&](E& m) { encodeHeader(m, header); });
  return writeChunk(chunk_);
}

bool TraceWriter::accepting() {
  if (header_written_ && !finished_ && !failed_) return true;
  ++lost_;
  return false;
}

void TraceWriter::counted(Category category) {
  ++written_[static_cast<uint32_t>(category)];
  if (++pending_records_ >= options_.max_records_per_chunk || pendingBytes() >= options_.max_batch_bytes) flush();
}

size_t TraceWriter::pendingBytes() const {
  const auto& k = kernels_;
  const auto& a = api_calls_;
  return definitions_.size() + rows_.size() + k.start_delta.size() + k.duration.size() + k.device.size() +
         k.stream.size() + k.correlation_delta.size() + k.config_id.size() + k.context.size() + k.graph_id.size() +
         k.graph_node_id.size() + a.start_delta.size() + a.duration.size() + a.domain.size() + a.cbid.size() +
         a.thread_id.size() + a.correlation_delta.size() + a.return_code.size() + a.process_id.size();
}

StringId TraceWriter::intern(std::string_view text) {
  if (text.empty()) return 0;
  auto it = strings_.find(text);
  if (it == strings_.end()) {
    it = strings_.emplace(std::string(text), static_cast<StringId>(strings_.size() + 1)).first;
    string_text_.push_back(&it->first);
    string_defined_in_batch_.push_back(0);
  }
  useString(it->second);
  return it->second;
}

void TraceWriter::useString(StringId id) {
  if (id == 0 || id >= string_defined_in_batch_.size() || string_defined_in_batch_[id] == batch_number_) return;
  string_defined_in_batch_[id] = batch_number_;
  definitions_.message(kStrings, [&](E& m) {
    m.uintField(1, id);
    m.stringField(2, *string_text_[id]);
  });
}

void TraceWriter::defineApiFunction(ApiDomain domain, uint32_t cbid, std::string_view name) {
  auto& index = api_function_index_[static_cast<uint32_t>(domain) % api_function_index_.size()];
  if (cbid < index.size() && index[cbid] != 0) return;
  if (cbid >= index.size()) index.resize(cbid + 1, 0);
  api_function_names_.push_back({domain, cbid, intern(name), 0});
  index[cbid] = static_cast<uint32_t>(api_function_names_.size());
  useApiFunction(domain, cbid);
}

void TraceWriter::useApiFunction(ApiDomain domain, uint32_t cbid) {
  const auto& index = api_function_index_[static_cast<uint32_t>(domain) % api_function_index_.size()];
  if (cbid >= index.size() || index[cbid] == 0) return;
  ApiFunctionName& function = api_function_names_[index[cbid] - 1];
  if (function.defined_in_batch == batch_number_) return;
  function.defined_in_batch = batch_number_;
  useString(function.name);
  definitions_.message(kApiFunctions, [&](E& m) {
    m.uintField(1, static_cast<uint32_t>(function.domain));
    m.uintField(2, function.cbid);
    m.uintField(3, function.name);
  });
}

uint32_t TraceWriter::kernelConfigId(const KernelRecord& k) {
  KernelConfigKey key = {k.name_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,
                         k.registers_per_thread, k.static_shared_memory, k.dynamic_shared_memory,
                         k.local_memory_per_thread, k.cluster_x, k.cluster_y, k.cluster_z,
                         k.shared_memory_optin ? 1u : 0u, k.shared_memory_carveout_pct,
                         k.shared_memory_executed, k.launch_type, k.max_active_clusters};
  auto [it, inserted] = kernel_configs_.emplace(key, static_cast<uint32_t>(kernel_configs_.size() + 1));
  if (inserted) {
    config_keys_.push_back(key);
    config_defined_in_batch_.push_back(0);
  }
  useKernelConfig(it->second);
  return it->second;
}

void TraceWriter::useKernelConfig(uint32_t id) {
  if (config_defined_in_batch_[id] == batch_number_) return;
  config_defined_in_batch_[id] = batch_number_;
  const KernelConfigKey& key = config_keys_[id];
  useString(key[0]);
  definitions_.message(kKernelConfigs, [&](E& m) {
    m.uintField(1, id);
    for (uint32_t field = 2; field <= 20; ++field) m.uintField(field, key[field - 2]);
  });
}

void TraceWriter::add(const KernelRecord& k) {
  if (!accepting()) return;
  auto& c = kernels_;
  c.start_delta.zigzag(static_cast<int64_t>(k.start_ns - c.previous_start));
  c.duration.zigzag(durationOf(k.start_ns, k.end_ns));
  c.device.varint(k.device);
  c.stream.varint(k.stream);
  c.correlation_delta.zigzag(static_cast<int64_t>(k.correlation_id) - c.previous_correlation);
  c.config_id.varint(kernelConfigId(k));
  c.context.varint(k.context);
  c.graph_id.varint(k.graph_id);
  c.graph_node_id.varint(k.graph_node_id);
  c.any_context |= k.context != 0;
  c.any_graph |= (k.graph_id | k.graph_node_id) != 0;
  c.previous_start = k.start_ns;
  c.previous_correlation = k.correlation_id;
  ++c.count;
  counted(Category::kKernel);
}

void TraceWriter::add(const ApiCallRecord& a) {
  if (!accepting()) return;
  useApiFunction(a.domain, a.cbid);
  auto& c = api_calls_;
  c.start_delta.zigzag(static_cast<int64_t>(a.start_ns - c.previous_start));
  c.duration.zigzag(durationOf(a.start_ns, a.end_ns));
  c.domain.varint(static_cast<uint32_t>(a.domain));
  c.cbid.varint(a.cbid);
  c.thread_id.varint(a.thread_id);
  c.correlation_delta.zigzag(static_cast<int64_t>(a.correlation_id) - c.previous_correlation);
  c.return_code.varint(a.return_code);
  c.process_id.varint(a.process_id);
  c.any_return_code |= a.return_code != 0;
  c.any_process_id |= a.process_id != 0;
  c.previous_start = a.start_ns;
  c.previous_correlation = a.correlation_id;
  ++c.count;
  counted(Category::kApiCall);
}

void TraceWriter::add(const MemcpyRecord& r) {
  if (!accepting()) return;
  rows_.message(kMemcpys, [&](E& m) {
    m.uintField(1, r.start_ns);
    m.sintField(2, durationOf(r.start_ns, r.end_ns));
    m.uintField(3, r.device);
    m.uintField(4, r.stream);
    m.uintField(5, r.correlation_id);
    m.uintField(6, static_cast<uint32_t>(r.copy_kind));
    m.uintField(7, r.bytes);
    m.uintField(8, static_cast<uint32_t>(r.src_kind));
    m.uintField(9, static_cast<uint32_t>(r.dst_kind));
    m.uintField(10, r.src_device);
    m.uintField(11, r.dst_device);
    m.uintField(12, r.is_async);
    m.uintField(13, r.context);
    m.uintField(14, r.graph_id);
    m.uintField(15, r.graph_node_id);
  });
  counted(Category::kMemcpy);
}

void TraceWriter::add(const MemsetRecord& r) {
  if (!accepting()) return;
  rows_.message(kMemsets, [&](E& m) {
    m.uintField(1, r.start_ns);
    m.sintField(2, durationOf(r.start_ns, r.end_ns));
    m.uintField(3, r.device);
    m.uintField(4, r.stream);
    m.uintField(5, r.correlation_id);
    m.uintField(6, r.bytes);
    m.uintField(7, r.value);
    m.uintField(8, static_cast<uint32_t>(r.memory_kind));
    m.uintField(9, r.context);
    m.uintField(10, r.graph_id);
    m.uintField(11, r.graph_node_id);
  });
  counted(Category::kMemset);
}

void TraceWriter::add(const MemoryEventRecord& r) {
  if (!accepting()) return;
  rows_.message(kMemoryEvents, [&](E& m) {
    m.uintField(1, r.timestamp_ns);
    m.uintField(2, static_cast<uint32_t>(r.operation));
    m.uintField(3, r.device);
    m.uintField(4, r.address);
    m.uintField(5, r.bytes);
    m.uintField(6, static_cast<uint32_t>(r.memory_kind));
    m.uintField(7, r.stream);
    m.uintField(8, r.correlation_id);
    m.uintField(9, r.is_async);
    m.uintField(10, r.pool_address);
  });
  counted(Category::kMemory);
}

void TraceWriter::add(const NvtxEventRecord& r) {
  if (!accepting()) return;
  useString(r.domain_id);
  useString(r.name_id);
  for (const auto& field : r.payload) {
    useString(field.name_id);
    if (field.type == PayloadField::Type::kString) useString(field.string_id);
  }
  rows_.message(kNvtxEvents, [&](E& m) {
    m.uintField(1, static_cast<uint32_t>(r.kind));
    m.uintField(2, r.start_ns);
    m.uintField(3, r.end_ns);
    m.uintField(4, r.domain_id);
    m.uintField(5, r.name_id);
    m.uintField(6, r.thread_id);
    m.uintField(7, r.device);
    m.uintField(8, r.stream);
    m.uintField(9, r.category);
    m.uintField(10, r.color);
    m.uintField(11, r.payload_schema);
    for (const auto& field : r.payload) {
      m.message(12, [&](E& p) {
        p.uintField(1, field.name_id);
        // A oneof member is written even when it holds the default value.
        switch (field.type) {
          case PayloadField::Type::kInt:
            p.tag(2, E::kVarint);
            p.zigzag(field.int_value);
            break;
          case PayloadField::Type::kUint:
            p.tag(3, E::kVarint);
            p.varint(field.uint_value);
            break;
          case PayloadField::Type::kDouble: {
            uint64_t bits;
            std::memcpy(&bits, &field.double_value, sizeof bits);
            p.tag(4, E::kFixed64);
            uint8_t raw[8];
            for (int i = 0; i < 8; ++i) raw[i] = static_cast<uint8_t>(bits >> (8 * i));
            p.raw(raw);
            break;
          }
          case PayloadField::Type::kString:
            p.tag(5, E::kVarint);
            p.varint(field.string_id);
            break;
        }
      });
    }
    m.uintField(13, r.depth);
  });
  counted(Category::kNvtx);
}

void TraceWriter::add(const SynchronizationRecord& r) {
  if (!accepting()) return;
  rows_.message(kSynchronizations, [&](E& m) {
    m.uintField(1, r.start_ns);
    m.sintField(2, durationOf(r.start_ns, r.end_ns));
    m.uintField(3, static_cast<uint32_t>(r.kind));
    m.uintField(4, r.device);
    m.uintField(5, r.stream);
    m.uintField(6, r.correlation_id);
    m.uintField(7, r.context);
    m.uintField(8, r.cuda_event_id);
    m.uintField(9, r.thread_id);
  });
  counted(Category::kSynchronization);
}

void TraceWriter::add(const NcclCommunicatorRecord& r) {
  if (!accepting()) return;
  rows_.message(kNcclCommunicators, [&](E& m) {
    m.fixed64Field(1, r.comm_hash);
    m.stringField(2, r.name);
    m.intField(3, r.comm_rank);
    m.intField(4, r.nranks);
    m.intField(5, r.nnodes);
    m.intField(6, r.global_rank);
    m.uintField(7, r.device);
    m.uintField(8, r.init_ns);
    m.uintField(9, r.profiler_version);
  });
  counted(Category::kNcclCommunicator);
}

void TraceWriter::add(const NcclOperationRecord& r) {
  if (!accepting()) return;
  for (StringId id : {r.func_id, r.datatype_id, r.algorithm_id, r.protocol_id, r.reduce_op_id}) useString(id);
  rows_.message(kNcclOperations, [&](E& m) {
    m.uintField(1, static_cast<uint32_t>(r.kind));
    m.fixed64Field(2, r.comm_hash);
    m.uintField(3, r.seq);
    m.uintField(4, r.func_id);
    m.uintField(5, r.enqueue_ns);
    m.uintField(6, r.gpu_start_ns);
    m.uintField(7, r.gpu_end_ns);
    m.uintField(8, r.bytes);
    m.uintField(9, r.count);
    m.uintField(10, r.datatype_id);
    m.intField(11, r.root);
    m.intField(12, r.peer);
    m.uintField(13, r.algorithm_id);
    m.uintField(14, r.protocol_id);
    m.uintField(15, r.channels);
    m.uintField(16, r.warps);
    m.uintField(17, r.graph_captured);
    m.uintField(18, r.reduce_op_id);
    m.uintField(19, r.stream);
    m.uintField(20, r.device);
    m.uintField(21, r.operation_id);
    m.uintField(22, r.enqueue_end_ns);
    m.uintField(23, r.gpu_clock_error_ns);
    m.uintField(24, r.kernel_correlation_id);
    m.uintField(25, r.gpu_clock_unmapped);
  });
  counted(Category::kNcclOperation);
}

void TraceWriter::add(const NetTransferRecord& r) {
  if (!accepting()) return;
  rows_.message(kNetTransfers, [&](E& m) {
    m.uintField(1, r.operation_id);
    m.intField(2, r.peer);
    m.uintField(3, r.channel);
    m.uintField(4, r.is_send);
    m.uintField(5, r.bytes);
    m.uintField(6, r.start_ns);
    m.uintField(7, r.end_ns);
    m.uintField(8, r.steps);
    m.uintField(9, r.wait_gpu_ns);
    m.uintField(10, r.wait_peer_ns);
    m.uintField(11, r.wait_network_ns);
    m.fixed64Field(12, r.comm_hash);
  });
  counted(Category::kNetTransfer);
}

void TraceWriter::add(const MetricSampleRecord& r) {
  if (!accepting()) return;
  useString(r.metric_id);
  rows_.message(kMetricSamples, [&](E& m) {
    m.uintField(1, r.timestamp_ns);
    m.uintField(2, r.device);
    m.uintField(3, r.metric_id);
    m.doubleField(4, r.value);
  });
  counted(Category::kMetricSample);
}

void TraceWriter::add(const ClockAnchor& anchor) {
  if (!accepting()) return;
  rows_.message(kClockAnchors, [&](E& m) { encodeClockAnchor(m, anchor); });
  ++pending_records_;
}

void TraceWriter::add(const ExternalCorrelationRecord& r) {
  if (!accepting()) return;
  rows_.message(kExternalCorrelations, [&](E& m) {
    m.uintField(1, r.kind);
    m.uintField(2, r.external_id);
    m.uintField(3, r.correlation_id);
  });
  counted(Category::kExternalCorrelation);
}

void TraceWriter::add(const OverheadRecord& r) {
  if (!accepting()) return;
  rows_.message(kOverheads, [&](E& m) {
    m.uintField(1, r.kind);
    m.uintField(2, r.start_ns);
    m.sintField(3, durationOf(r.start_ns, r.end_ns));
    m.uintField(4, r.thread_id);
    m.uintField(5, r.device);
  });
  counted(Category::kOverhead);
}

void TraceWriter::add(const ResourceNameRecord& r) {
  if (!accepting()) return;
  useString(r.name_id);
  rows_.message(kResourceNames, [&](E& m) {
    m.uintField(1, static_cast<uint32_t>(r.kind));
    m.uintField(2, r.id);
    m.uintField(3, r.device);
    m.uintField(4, r.name_id);
  });
  counted(Category::kResourceName);
}

void TraceWriter::add(const StreamRecord& r) {
  if (!accepting()) return;
  rows_.message(kStreams, [&](E& m) {
    m.uintField(1, r.stream);
    m.uintField(2, r.device);
    m.uintField(3, r.context);
    m.intField(4, r.priority);
    m.uintField(5, r.flags);
    m.uintField(6, r.correlation_id);
  });
  counted(Category::kStream);
}

void TraceWriter::add(const DeviceProperties& device) {
  if (!accepting()) return;
  rows_.message(kDevices, [&](E& m) { encodeDevice(m, device); });
  ++pending_records_;
}

void TraceWriter::add(const Link& link) {
  if (!accepting()) return;
  rows_.message(kLinks, [&](E& m) { encodeLink(m, link); });
  ++pending_records_;
}

void TraceWriter::add(const CaptureWindow& window) {
  if (!accepting()) return;
  rows_.message(kCaptureWindows, [&](E& m) { encodeCaptureWindow(m, window); });
  ++pending_records_;
}

bool TraceWriter::flush() {
  if (!header_written_ || failed_) return false;
  if (pending_records_ == 0 && definitions_.empty()) return true;
  batch_.clear();
  batch_.raw(definitions_.bytes());
  if (kernels_.count > 0) {
    const auto& c = kernels_;
    batch_.message(kKernels, [&](E& m) {
      m.packedField(1, c.start_delta);
      m.packedField(2, c.duration);
      m.packedField(3, c.device);
      m.packedField(4, c.stream);
      m.packedField(5, c.correlation_delta);
      m.packedField(6, c.config_id);
      if (c.any_context) m.packedField(7, c.context);
      if (c.any_graph) {
        m.packedField(8, c.graph_id);
        m.packedField(9, c.graph_node_id);
      }
    });
  }
  if (api_calls_.count > 0) {
    const auto& c = api_calls_;
    batch_.message(kApiCalls, [&](E& m) {
      m.packedField(1, c.start_delta);
      m.packedField(2, c.duration);
      m.packedField(3, c.domain);
      m.packedField(4, c.cbid);
      m.packedField(5, c.thread_id);
      m.packedField(6, c.correlation_delta);
      if (c.any_return_code) m.packedField(7, c.return_code);
      if (c.any_process_id) m.packedField(8, c.process_id);
    });
  }
  batch_.raw(rows_.bytes());
  clearBatch();
  ++batch_number_;

  chunk_.clear();
  chunk_.tag(2, E::kLengthDelimited);
  chunk_.varint(batch_.size());
  chunk_.raw(batch_.bytes());
  return writeChunk(chunk_);
}

void TraceWriter::clearBatch() {
  definitions_.clear();
  kernels_ = KernelColumns{};
  api_calls_ = ApiColumns{};
  rows_.clear();
  pending_records_ = 0;
}

bool TraceWriter::writeChunk(const WireEncoder& chunk_payload) {
  auto raw = chunk_payload.bytes();
  std::span<const uint8_t> stored = raw;
  Codec codec = Codec::kNone;
  if (zstd_context_ != nullptr) {
    compressed_.resize(ZSTD_compressBound(raw.size()));
    size_t n = ZSTD_compressCCtx(static_cast<ZSTD_CCtx*>(zstd_context_), compressed_.data(), compressed_.size(),
                                 raw.data(), raw.size(), options_.zstd_level);
    if (!ZSTD_isError(n) && n < raw.size()) {
      stored = {compressed_.data(), n};
      codec = Codec::kZstd;
    }
  }
  auto header = encodeChunkHeader(codec, static_cast<uint32_t>(raw.size()), stored);
  if (!sink_->append(header, stored)) {
    failed_ = true;
    error_ = sink_->error();
    return false;
  }
  bytes_written_ += header.size() + stored.size();
  ++chunks_written_;
  return true;
}

bool TraceWriter::finish(Trailer trailer) {
  if (finished_ || !flush()) return false;
  std::array<uint64_t, kCategoryCount> dropped{};
  for (const auto& c : trailer.counts) {
    auto index = static_cast<uint32_t>(c.category);
    if (index < kCategoryCount) dropped[index] += c.dropped;
  }
  trailer.counts.clear();
  for (uint32_t i = 0; i < kCategoryCount; ++i) {
    if (written_[i] != 0 || dropped[i] != 0) trailer.counts.push_back({static_cast<Category>(i), written_[i], dropped[i]});
  }
  finished_ = true;
  chunk_.clear();
  chunk_.message(3, [&](E& m) { encodeTrailer(m, trailer); });
  sink_->beforeTrailer();
  return writeChunk(chunk_);
}

}  // namespace gpuxray::format
