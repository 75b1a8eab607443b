#include "proto/trace_writer.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <tuple>

#include "proto/field_numbers.h"
#include "proto/file_layout.h"

// Field numbers come from proto/gpuxray.proto through the generated proto/field_numbers.h (f::Message::field);
// tests/format_compat_test.cc decodes this writer's output with the generated classes.
namespace gpuxray::format {
namespace {

using E = WireEncoder;
namespace f = field;

// The fields of a KernelConfig after its id, in the order of TraceWriter::KernelConfigKey.
constexpr uint32_t kKernelConfigKeyFields[] = {
    f::KernelConfig::name_iid, f::KernelConfig::grid_x, f::KernelConfig::grid_y, f::KernelConfig::grid_z,
    f::KernelConfig::block_x, f::KernelConfig::block_y, f::KernelConfig::block_z,
    f::KernelConfig::registers_per_thread, f::KernelConfig::static_shared_memory,
    f::KernelConfig::dynamic_shared_memory, f::KernelConfig::local_memory_per_thread, f::KernelConfig::cluster_x,
    f::KernelConfig::cluster_y, f::KernelConfig::cluster_z, f::KernelConfig::shared_memory_optin,
    f::KernelConfig::shared_memory_carveout_pct, f::KernelConfig::shared_memory_executed,
    f::KernelConfig::launch_type, f::KernelConfig::max_active_clusters};

void encodeClockAnchor(E& e, const ClockAnchor& a) {
  e.uintField(f::ClockAnchor::capture_ns, a.capture_ns);
  e.uintField(f::ClockAnchor::realtime_ns, a.realtime_ns);
  e.uintField(f::ClockAnchor::monotonic_ns, a.monotonic_ns);
  e.uintField(f::ClockAnchor::uncertainty_ns, a.uncertainty_ns);
}

void encodeDevice(E& e, const DeviceProperties& d) {
  e.uintField(f::DeviceProperties::device_id, d.device_id);
  e.stringField(f::DeviceProperties::name, d.name);
  e.bytesField(f::DeviceProperties::uuid, d.uuid);  // `bytes`: raw, not UTF-8
  e.stringField(f::DeviceProperties::pci_bus_id, d.pci_bus_id);
  e.uintField(f::DeviceProperties::compute_major, d.compute_major);
  e.uintField(f::DeviceProperties::compute_minor, d.compute_minor);
  e.uintField(f::DeviceProperties::sm_count, d.sm_count);
  e.uintField(f::DeviceProperties::max_threads_per_sm, d.max_threads_per_sm);
  e.uintField(f::DeviceProperties::max_warps_per_sm, d.max_warps_per_sm);
  e.uintField(f::DeviceProperties::max_blocks_per_sm, d.max_blocks_per_sm);
  e.uintField(f::DeviceProperties::registers_per_sm, d.registers_per_sm);
  e.uintField(f::DeviceProperties::registers_per_block, d.registers_per_block);
  e.uintField(f::DeviceProperties::shared_memory_per_sm, d.shared_memory_per_sm);
  e.uintField(f::DeviceProperties::shared_memory_per_block, d.shared_memory_per_block);
  e.uintField(f::DeviceProperties::shared_memory_per_block_optin, d.shared_memory_per_block_optin);
  e.uintField(f::DeviceProperties::reserved_shared_memory_per_block, d.reserved_shared_memory_per_block);
  e.uintField(f::DeviceProperties::memory_bytes, d.memory_bytes);
  e.uintField(f::DeviceProperties::memory_bandwidth_bytes_per_s, d.memory_bandwidth_bytes_per_s);
  e.uintField(f::DeviceProperties::core_clock_khz, d.core_clock_khz);
  e.uintField(f::DeviceProperties::memory_clock_khz, d.memory_clock_khz);
  e.uintField(f::DeviceProperties::memory_bus_width_bits, d.memory_bus_width_bits);
  e.uintField(f::DeviceProperties::l2_cache_bytes, d.l2_cache_bytes);
  e.uintField(f::DeviceProperties::max_threads_per_block, d.max_threads_per_block);
  e.uintField(f::DeviceProperties::warp_size, d.warp_size);
  e.uintField(f::DeviceProperties::max_registers_per_thread, d.max_registers_per_thread);
  e.uintField(f::DeviceProperties::numa_node, d.numa_node);
  e.uintField(f::DeviceProperties::mig_gpu_instance_id, d.mig_gpu_instance_id);
  e.uintField(f::DeviceProperties::mig_compute_instance_id, d.mig_compute_instance_id);
  e.doubleField(f::DeviceProperties::peak_bf16_flops, d.peak_bf16_flops);
}

void encodeEndpoint(E& e, const Endpoint& p) {
  e.uintField(f::Endpoint::kind, static_cast<uint32_t>(p.kind));
  e.stringField(f::Endpoint::id, p.id);
  e.intField(f::Endpoint::device, p.device);
}

void encodeLink(E& e, const Link& l) {
  e.uintField(f::Link::kind, static_cast<uint32_t>(l.kind));
  e.message(f::Link::a, [&](E& m) { encodeEndpoint(m, l.a); });
  e.message(f::Link::b, [&](E& m) { encodeEndpoint(m, l.b); });
  e.uintField(f::Link::version, l.version);
  e.uintField(f::Link::width, l.width);
  e.uintField(f::Link::bandwidth_bytes_per_s, l.bandwidth_bytes_per_s);
  e.packedUintField(f::Link::ports_a, l.ports_a);
  e.packedUintField(f::Link::ports_b, l.ports_b);
}

void encodeNic(E& e, const NetworkInterface& n) {
  e.stringField(f::NetworkInterface::name, n.name);
  e.uintField(f::NetworkInterface::port, n.port);
  e.uintField(f::NetworkInterface::bandwidth_bytes_per_s, n.bandwidth_bytes_per_s);
  e.stringField(f::NetworkInterface::pci_bus_id, n.pci_bus_id);
  e.stringField(f::NetworkInterface::transport, n.transport);
  e.intField(f::NetworkInterface::numa_node, n.numa_node);
}

void encodeCaptureConfig(E& e, const CaptureConfig& c) {
  for (const auto& a : c.activities) e.repeatedStringElement(f::CaptureConfig::activities, a);
  e.uintField(f::CaptureConfig::buffer_bytes, c.buffer_bytes);
  e.uintField(f::CaptureConfig::max_buffer_memory_bytes, c.max_buffer_memory_bytes);
  e.uintField(f::CaptureConfig::flush_period_ms, c.flush_period_ms);
  e.uintField(f::CaptureConfig::nccl_profiler, c.nccl_profiler);
  e.uintField(f::CaptureConfig::nvtx, c.nvtx);
  e.uintField(f::CaptureConfig::metric_sampling, c.metric_sampling);
  e.uintField(f::CaptureConfig::metric_interval_us, c.metric_interval_us);
  for (const auto& m : c.metrics) e.repeatedStringElement(f::CaptureConfig::metrics, m);
  for (const auto& o : c.options) e.repeatedStringElement(f::CaptureConfig::options, o);
}

void encodeCaptureWindow(E& e, const CaptureWindow& w) {
  e.uintField(f::CaptureWindow::start_ns, w.start_ns);
  e.uintField(f::CaptureWindow::end_ns, w.end_ns);
  e.uintField(f::CaptureWindow::started_by, static_cast<uint32_t>(w.started_by));
  e.uintField(f::CaptureWindow::ended_by, static_cast<uint32_t>(w.ended_by));
  e.stringField(f::CaptureWindow::detail, w.detail);
}

void encodeHeader(E& e, const FileHeader& h) {
  e.uintField(f::FileHeader::format_major, h.format_major);
  e.uintField(f::FileHeader::format_minor, h.format_minor);
  e.stringField(f::FileHeader::tool_version, h.tool_version);
  e.stringField(f::FileHeader::run_id, h.run_id);
  e.stringField(f::FileHeader::run_id_source, h.run_id_source);
  e.intField(f::FileHeader::rank, h.rank);
  e.intField(f::FileHeader::local_rank, h.local_rank);
  e.intField(f::FileHeader::world_size, h.world_size);
  e.intField(f::FileHeader::local_world_size, h.local_world_size);
  e.stringField(f::FileHeader::rank_source, h.rank_source);
  e.stringField(f::FileHeader::hostname, h.hostname);
  e.uintField(f::FileHeader::pid, h.pid);
  for (const auto& arg : h.command_line) e.repeatedStringElement(f::FileHeader::command_line, arg);
  e.uintField(f::FileHeader::start_time_ns, h.start_time_ns);
  e.stringField(f::FileHeader::time_base, h.time_base);
  for (const auto& a : h.clock_anchors) e.message(f::FileHeader::clock_anchors, [&](E& m) { encodeClockAnchor(m, a); });
  for (const auto& d : h.devices) e.message(f::FileHeader::devices, [&](E& m) { encodeDevice(m, d); });
  for (const auto& l : h.links) e.message(f::FileHeader::links, [&](E& m) { encodeLink(m, l); });
  for (const auto& n : h.nics) e.message(f::FileHeader::nics, [&](E& m) { encodeNic(m, n); });
  e.message(f::FileHeader::capture_config, [&](E& m) { encodeCaptureConfig(m, h.capture_config); });
  e.uintField(f::FileHeader::simulated, h.simulated);
  e.stringField(f::FileHeader::simulation_inputs, h.simulation_inputs);
  e.uintField(f::FileHeader::cupti_api_version, h.cupti_api_version);
  e.uintField(f::FileHeader::cuda_driver_version, h.cuda_driver_version);
  e.stringField(f::FileHeader::nccl_version, h.nccl_version);
  e.uintField(f::FileHeader::nccl_capture_source, static_cast<uint32_t>(h.nccl_capture_source));
  e.stringField(f::FileHeader::capture_window_plan, h.capture_window_plan);
  for (const auto& w : h.capture_windows)
    e.message(f::FileHeader::capture_windows, [&](E& m) { encodeCaptureWindow(m, w); });
}

void encodeTrailer(E& e, const Trailer& t) {
  for (const auto& c : t.counts) {
    e.message(f::Trailer::counts, [&](E& m) {
      m.uintField(f::CategoryCount::category, static_cast<uint32_t>(c.category));
      m.uintField(f::CategoryCount::written, c.written);
      m.uintField(f::CategoryCount::dropped, c.dropped);
    });
  }
  e.uintField(f::Trailer::end, static_cast<uint32_t>(t.end));
  e.uintField(f::Trailer::end_time_ns, t.end_time_ns);
  e.stringField(f::Trailer::end_detail, t.end_detail);
  for (const auto& w : t.warnings) e.repeatedStringElement(f::Trailer::warnings, w);
}

int64_t durationOf(uint64_t start, uint64_t end) { return static_cast<int64_t>(end - start); }

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
  chunk_.message(f::Chunk::header, [&](E& m) { encodeHeader(m, header); });
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
  definitions_.message(f::EventBatch::strings, [&](E& m) {
    m.uintField(f::InternedString::iid, id);
    m.stringField(f::InternedString::value, *string_text_[id]);
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
  definitions_.message(f::EventBatch::api_functions, [&](E& m) {
    m.uintField(f::ApiFunction::domain, static_cast<uint32_t>(function.domain));
    m.uintField(f::ApiFunction::cbid, function.cbid);
    m.uintField(f::ApiFunction::name_iid, function.name);
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
  definitions_.message(f::EventBatch::kernel_configs, [&](E& m) {
    m.uintField(f::KernelConfig::id, id);
    static_assert(std::tuple_size_v<KernelConfigKey> == std::size(kKernelConfigKeyFields));
    for (size_t i = 0; i < key.size(); ++i) m.uintField(kKernelConfigKeyFields[i], key[i]);
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
  rows_.message(f::EventBatch::memcpys, [&](E& m) {
    m.uintField(f::Memcpy::start_ns, r.start_ns);
    m.sintField(f::Memcpy::duration_ns, durationOf(r.start_ns, r.end_ns));
    m.uintField(f::Memcpy::device, r.device);
    m.uintField(f::Memcpy::stream, r.stream);
    m.uintField(f::Memcpy::correlation_id, r.correlation_id);
    m.uintField(f::Memcpy::copy_kind, static_cast<uint32_t>(r.copy_kind));
    m.uintField(f::Memcpy::bytes, r.bytes);
    m.uintField(f::Memcpy::src_kind, static_cast<uint32_t>(r.src_kind));
    m.uintField(f::Memcpy::dst_kind, static_cast<uint32_t>(r.dst_kind));
    m.uintField(f::Memcpy::src_device, r.src_device);
    m.uintField(f::Memcpy::dst_device, r.dst_device);
    m.uintField(f::Memcpy::is_async, r.is_async);
    m.uintField(f::Memcpy::context, r.context);
    m.uintField(f::Memcpy::graph_id, r.graph_id);
    m.uintField(f::Memcpy::graph_node_id, r.graph_node_id);
  });
  counted(Category::kMemcpy);
}

void TraceWriter::add(const MemsetRecord& r) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::memsets, [&](E& m) {
    m.uintField(f::Memset::start_ns, r.start_ns);
    m.sintField(f::Memset::duration_ns, durationOf(r.start_ns, r.end_ns));
    m.uintField(f::Memset::device, r.device);
    m.uintField(f::Memset::stream, r.stream);
    m.uintField(f::Memset::correlation_id, r.correlation_id);
    m.uintField(f::Memset::bytes, r.bytes);
    m.uintField(f::Memset::value, r.value);
    m.uintField(f::Memset::memory_kind, static_cast<uint32_t>(r.memory_kind));
    m.uintField(f::Memset::context, r.context);
    m.uintField(f::Memset::graph_id, r.graph_id);
    m.uintField(f::Memset::graph_node_id, r.graph_node_id);
  });
  counted(Category::kMemset);
}

void TraceWriter::add(const MemoryEventRecord& r) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::memory_events, [&](E& m) {
    m.uintField(f::MemoryEvent::timestamp_ns, r.timestamp_ns);
    m.uintField(f::MemoryEvent::operation, static_cast<uint32_t>(r.operation));
    m.uintField(f::MemoryEvent::device, r.device);
    m.uintField(f::MemoryEvent::address, r.address);
    m.uintField(f::MemoryEvent::bytes, r.bytes);
    m.uintField(f::MemoryEvent::memory_kind, static_cast<uint32_t>(r.memory_kind));
    m.uintField(f::MemoryEvent::stream, r.stream);
    m.uintField(f::MemoryEvent::correlation_id, r.correlation_id);
    m.uintField(f::MemoryEvent::is_async, r.is_async);
    m.uintField(f::MemoryEvent::pool_address, r.pool_address);
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
  rows_.message(f::EventBatch::nvtx_events, [&](E& m) {
    m.uintField(f::NvtxEvent::kind, static_cast<uint32_t>(r.kind));
    m.uintField(f::NvtxEvent::start_ns, r.start_ns);
    m.uintField(f::NvtxEvent::end_ns, r.end_ns);
    m.uintField(f::NvtxEvent::domain_iid, r.domain_id);
    m.uintField(f::NvtxEvent::name_iid, r.name_id);
    m.uintField(f::NvtxEvent::thread_id, r.thread_id);
    m.uintField(f::NvtxEvent::device, r.device);
    m.uintField(f::NvtxEvent::stream, r.stream);
    m.uintField(f::NvtxEvent::category, r.category);
    m.uintField(f::NvtxEvent::color, r.color);
    m.uintField(f::NvtxEvent::payload_schema, r.payload_schema);
    for (const auto& field : r.payload) {
      m.message(f::NvtxEvent::payload, [&](E& p) {
        p.uintField(f::PayloadField::name_iid, field.name_id);
        // A oneof member is written even when it holds the default value.
        switch (field.type) {
          case PayloadField::Type::kInt:
            p.tag(f::PayloadField::int_value, E::kVarint);
            p.zigzag(field.int_value);
            break;
          case PayloadField::Type::kUint:
            p.tag(f::PayloadField::uint_value, E::kVarint);
            p.varint(field.uint_value);
            break;
          case PayloadField::Type::kDouble: {
            uint64_t bits;
            std::memcpy(&bits, &field.double_value, sizeof bits);
            p.tag(f::PayloadField::double_value, E::kFixed64);
            uint8_t raw[8];
            for (int i = 0; i < 8; ++i) raw[i] = static_cast<uint8_t>(bits >> (8 * i));
            p.raw(raw);
            break;
          }
          case PayloadField::Type::kString:
            p.tag(f::PayloadField::string_iid, E::kVarint);
            p.varint(field.string_id);
            break;
        }
      });
    }
    m.uintField(f::NvtxEvent::depth, r.depth);
  });
  counted(Category::kNvtx);
}

void TraceWriter::add(const SynchronizationRecord& r) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::synchronizations, [&](E& m) {
    m.uintField(f::Synchronization::start_ns, r.start_ns);
    m.sintField(f::Synchronization::duration_ns, durationOf(r.start_ns, r.end_ns));
    m.uintField(f::Synchronization::kind, static_cast<uint32_t>(r.kind));
    m.uintField(f::Synchronization::device, r.device);
    m.uintField(f::Synchronization::stream, r.stream);
    m.uintField(f::Synchronization::correlation_id, r.correlation_id);
    m.uintField(f::Synchronization::context, r.context);
    m.uintField(f::Synchronization::cuda_event_id, r.cuda_event_id);
    m.uintField(f::Synchronization::thread_id, r.thread_id);
  });
  counted(Category::kSynchronization);
}

void TraceWriter::add(const NcclCommunicatorRecord& r) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::nccl_communicators, [&](E& m) {
    m.fixed64Field(f::NcclCommunicator::comm_hash, r.comm_hash);
    m.stringField(f::NcclCommunicator::name, r.name);
    m.intField(f::NcclCommunicator::comm_rank, r.comm_rank);
    m.intField(f::NcclCommunicator::nranks, r.nranks);
    m.intField(f::NcclCommunicator::nnodes, r.nnodes);
    m.intField(f::NcclCommunicator::global_rank, r.global_rank);
    m.uintField(f::NcclCommunicator::device, r.device);
    m.uintField(f::NcclCommunicator::init_ns, r.init_ns);
    m.uintField(f::NcclCommunicator::profiler_version, r.profiler_version);
  });
  counted(Category::kNcclCommunicator);
}

void TraceWriter::add(const NcclOperationRecord& r) {
  if (!accepting()) return;
  for (StringId id : {r.func_id, r.datatype_id, r.algorithm_id, r.protocol_id, r.reduce_op_id}) useString(id);
  rows_.message(f::EventBatch::nccl_operations, [&](E& m) {
    m.uintField(f::NcclOperation::kind, static_cast<uint32_t>(r.kind));
    m.fixed64Field(f::NcclOperation::comm_hash, r.comm_hash);
    m.uintField(f::NcclOperation::seq, r.seq);
    m.uintField(f::NcclOperation::func_iid, r.func_id);
    m.uintField(f::NcclOperation::enqueue_ns, r.enqueue_ns);
    m.uintField(f::NcclOperation::gpu_start_ns, r.gpu_start_ns);
    m.uintField(f::NcclOperation::gpu_end_ns, r.gpu_end_ns);
    m.uintField(f::NcclOperation::bytes, r.bytes);
    m.uintField(f::NcclOperation::count, r.count);
    m.uintField(f::NcclOperation::datatype_iid, r.datatype_id);
    m.intField(f::NcclOperation::root, r.root);
    m.intField(f::NcclOperation::peer, r.peer);
    m.uintField(f::NcclOperation::algorithm_iid, r.algorithm_id);
    m.uintField(f::NcclOperation::protocol_iid, r.protocol_id);
    m.uintField(f::NcclOperation::channels, r.channels);
    m.uintField(f::NcclOperation::warps, r.warps);
    m.uintField(f::NcclOperation::graph_captured, r.graph_captured);
    m.uintField(f::NcclOperation::reduce_op_iid, r.reduce_op_id);
    m.uintField(f::NcclOperation::stream, r.stream);
    m.uintField(f::NcclOperation::device, r.device);
    m.uintField(f::NcclOperation::operation_id, r.operation_id);
    m.uintField(f::NcclOperation::enqueue_end_ns, r.enqueue_end_ns);
    m.uintField(f::NcclOperation::gpu_clock_error_ns, r.gpu_clock_error_ns);
    m.uintField(f::NcclOperation::kernel_correlation_id, r.kernel_correlation_id);
    m.uintField(f::NcclOperation::gpu_clock_unmapped, r.gpu_clock_unmapped);
  });
  counted(Category::kNcclOperation);
}

void TraceWriter::add(const NetTransferRecord& r) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::net_transfers, [&](E& m) {
    m.uintField(f::NetTransfer::operation_id, r.operation_id);
    m.intField(f::NetTransfer::peer, r.peer);
    m.uintField(f::NetTransfer::channel, r.channel);
    m.uintField(f::NetTransfer::is_send, r.is_send);
    m.uintField(f::NetTransfer::bytes, r.bytes);
    m.uintField(f::NetTransfer::start_ns, r.start_ns);
    m.uintField(f::NetTransfer::end_ns, r.end_ns);
    m.uintField(f::NetTransfer::steps, r.steps);
    m.uintField(f::NetTransfer::wait_gpu_ns, r.wait_gpu_ns);
    m.uintField(f::NetTransfer::wait_peer_ns, r.wait_peer_ns);
    m.uintField(f::NetTransfer::wait_network_ns, r.wait_network_ns);
    m.fixed64Field(f::NetTransfer::comm_hash, r.comm_hash);
  });
  counted(Category::kNetTransfer);
}

void TraceWriter::add(const MetricSampleRecord& r) {
  if (!accepting()) return;
  useString(r.metric_id);
  rows_.message(f::EventBatch::metric_samples, [&](E& m) {
    m.uintField(f::MetricSample::timestamp_ns, r.timestamp_ns);
    m.uintField(f::MetricSample::device, r.device);
    m.uintField(f::MetricSample::metric_iid, r.metric_id);
    m.doubleField(f::MetricSample::value, r.value);
  });
  counted(Category::kMetricSample);
}

void TraceWriter::add(const KernelMetricsRecord& r) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::kernel_metrics, [&](E& m) {
    m.uintField(f::KernelMetrics::correlation_id, r.correlation_id);
    m.uintField(f::KernelMetrics::device, r.device);
    m.uintField(f::KernelMetrics::passes, r.passes);
    m.optionalDoubleField(f::KernelMetrics::achieved_occupancy_pct, r.achieved_occupancy_pct);
    m.optionalDoubleField(f::KernelMetrics::sm_throughput_pct, r.sm_throughput_pct);
    m.optionalDoubleField(f::KernelMetrics::tensor_pipe_pct, r.tensor_pipe_pct);
    m.optionalDoubleField(f::KernelMetrics::dram_read_bytes, r.dram_read_bytes);
    m.optionalDoubleField(f::KernelMetrics::dram_write_bytes, r.dram_write_bytes);
    m.optionalDoubleField(f::KernelMetrics::l2_bytes, r.l2_bytes);
    m.optionalDoubleField(f::KernelMetrics::l2_hit_rate_pct, r.l2_hit_rate_pct);
    m.optionalDoubleField(f::KernelMetrics::l1_bytes, r.l1_bytes);
    m.optionalDoubleField(f::KernelMetrics::l1_hit_rate_pct, r.l1_hit_rate_pct);
    m.optionalDoubleField(f::KernelMetrics::shared_wavefronts, r.shared_wavefronts);
    m.optionalDoubleField(f::KernelMetrics::local_load_bytes, r.local_load_bytes);
    m.optionalDoubleField(f::KernelMetrics::local_store_bytes, r.local_store_bytes);
    m.optionalDoubleField(f::KernelMetrics::gpu_duration_ns, r.gpu_duration_ns);
  });
  counted(Category::kKernelMetrics);
}

void TraceWriter::add(const ClockAnchor& anchor) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::clock_anchors, [&](E& m) { encodeClockAnchor(m, anchor); });
  ++pending_records_;
}

void TraceWriter::add(const ExternalCorrelationRecord& r) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::external_correlations, [&](E& m) {
    m.uintField(f::ExternalCorrelation::kind, r.kind);
    m.uintField(f::ExternalCorrelation::external_id, r.external_id);
    m.uintField(f::ExternalCorrelation::correlation_id, r.correlation_id);
  });
  counted(Category::kExternalCorrelation);
}

void TraceWriter::add(const OverheadRecord& r) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::overheads, [&](E& m) {
    m.uintField(f::Overhead::kind, r.kind);
    m.uintField(f::Overhead::start_ns, r.start_ns);
    m.sintField(f::Overhead::duration_ns, durationOf(r.start_ns, r.end_ns));
    m.uintField(f::Overhead::thread_id, r.thread_id);
    m.uintField(f::Overhead::device, r.device);
  });
  counted(Category::kOverhead);
}

void TraceWriter::add(const ResourceNameRecord& r) {
  if (!accepting()) return;
  useString(r.name_id);
  rows_.message(f::EventBatch::resource_names, [&](E& m) {
    m.uintField(f::ResourceName::kind, static_cast<uint32_t>(r.kind));
    m.uintField(f::ResourceName::id, r.id);
    m.uintField(f::ResourceName::device, r.device);
    m.uintField(f::ResourceName::name_iid, r.name_id);
  });
  counted(Category::kResourceName);
}

void TraceWriter::add(const StreamRecord& r) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::streams, [&](E& m) {
    m.uintField(f::StreamInfo::stream, r.stream);
    m.uintField(f::StreamInfo::device, r.device);
    m.uintField(f::StreamInfo::context, r.context);
    m.intField(f::StreamInfo::priority, r.priority);
    m.uintField(f::StreamInfo::flags, r.flags);
    m.uintField(f::StreamInfo::correlation_id, r.correlation_id);
  });
  counted(Category::kStream);
}

void TraceWriter::add(const DeviceProperties& device) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::devices, [&](E& m) { encodeDevice(m, device); });
  ++pending_records_;
}

void TraceWriter::add(const Link& link) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::links, [&](E& m) { encodeLink(m, link); });
  ++pending_records_;
}

void TraceWriter::add(const CaptureWindow& window) {
  if (!accepting()) return;
  rows_.message(f::EventBatch::capture_windows, [&](E& m) { encodeCaptureWindow(m, window); });
  ++pending_records_;
}

bool TraceWriter::flush() {
  if (!header_written_ || failed_) return false;
  if (pending_records_ == 0 && definitions_.empty()) return true;
  batch_.clear();
  batch_.raw(definitions_.bytes());
  if (kernels_.count > 0) {
    const auto& c = kernels_;
    batch_.message(f::EventBatch::kernels, [&](E& m) {
      m.packedField(f::KernelColumns::start_delta_ns, c.start_delta);
      m.packedField(f::KernelColumns::duration_ns, c.duration);
      m.packedField(f::KernelColumns::device, c.device);
      m.packedField(f::KernelColumns::stream, c.stream);
      m.packedField(f::KernelColumns::correlation_delta, c.correlation_delta);
      m.packedField(f::KernelColumns::config_id, c.config_id);
      if (c.any_context) m.packedField(f::KernelColumns::context, c.context);
      if (c.any_graph) {
        m.packedField(f::KernelColumns::graph_id, c.graph_id);
        m.packedField(f::KernelColumns::graph_node_id, c.graph_node_id);
      }
    });
  }
  if (api_calls_.count > 0) {
    const auto& c = api_calls_;
    batch_.message(f::EventBatch::api_calls, [&](E& m) {
      m.packedField(f::ApiCallColumns::start_delta_ns, c.start_delta);
      m.packedField(f::ApiCallColumns::duration_ns, c.duration);
      m.packedField(f::ApiCallColumns::domain, c.domain);
      m.packedField(f::ApiCallColumns::cbid, c.cbid);
      m.packedField(f::ApiCallColumns::thread_id, c.thread_id);
      m.packedField(f::ApiCallColumns::correlation_delta, c.correlation_delta);
      if (c.any_return_code) m.packedField(f::ApiCallColumns::return_code, c.return_code);
      if (c.any_process_id) m.packedField(f::ApiCallColumns::process_id, c.process_id);
    });
  }
  batch_.raw(rows_.bytes());
  clearBatch();
  ++batch_number_;

  chunk_.clear();
  chunk_.tag(f::Chunk::batch, E::kLengthDelimited);
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
  chunk_.message(f::Chunk::trailer, [&](E& m) { encodeTrailer(m, trailer); });
  sink_->beforeTrailer();
  return writeChunk(chunk_);
}

}  // namespace gpuxray::format
