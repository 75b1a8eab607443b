#include "analyzer/analysis/digest_file.h"

#include <fmt/format.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

#include "analyzer/errors.h"
#include "gpuxray/version.h"
#include "proto/file_layout.h"
#include "proto/trace_reader.h"
#include "proto/trace_writer.h"

namespace gpuxray::analysis {
namespace {

namespace fs = std::filesystem;

constexpr std::array<uint8_t, 8> kDigestMagic = {'G', 'X', 'D', 'I', 'G', 'S', 'T', '\n'};
constexpr size_t kDigestPreambleSize = 16;
constexpr size_t kBodyPieceBytes = 16u << 20;

// What each record of a digest holds, in the order it is written: the one description both the
// writer and the reader follow. A field added to one of these structs is added here.
template <typename T>
struct Fields;

#define GPUXRAY_DIGEST_FIELDS(Type, ...) \
  template <>                            \
  struct Fields<Type> {                  \
    template <typename Io>               \
    static void visit(Io& io, Type& v) { \
      io(__VA_ARGS__);                   \
    }                                    \
  }

GPUXRAY_DIGEST_FIELDS(DigestFileHeader, v.format_version, v.gpuxray_version, v.run_id, v.rank, v.world_size,
                      v.source_path, v.source_absolute_path, v.options, v.body_bytes);

GPUXRAY_DIGEST_FIELDS(model::LaunchConfig, v.grid_x, v.grid_y, v.grid_z, v.block_x, v.block_y, v.block_z,
                      v.registers_per_thread, v.shared_memory_bytes, v.local_memory_per_thread);
GPUXRAY_DIGEST_FIELDS(model::StreamKey, v.device, v.stream);
GPUXRAY_DIGEST_FIELDS(model::GpuActivity, v.start_ns, v.end_ns, v.name_id, v.detail, v.correlation_id, v.stream,
                      v.device, v.kind);
GPUXRAY_DIGEST_FIELDS(model::HostCall, v.start_ns, v.end_ns, v.correlation_id, v.thread, v.function);
GPUXRAY_DIGEST_FIELDS(model::NvtxRange, v.start_ns, v.end_ns, v.name_id, v.domain_id, v.thread_id, v.depth);
GPUXRAY_DIGEST_FIELDS(model::HostOp, v.start_ns, v.end_ns, v.name_id, v.inputs_id, v.thread_id);
GPUXRAY_DIGEST_FIELDS(model::MemoryChange, v.time_ns, v.delta_bytes, v.device, v.address);
GPUXRAY_DIGEST_FIELDS(model::MetricSample, v.time_ns, v.value, v.name_id, v.device);
GPUXRAY_DIGEST_FIELDS(model::Communicator, v.comm_hash, v.name, v.comm_rank, v.nranks, v.nnodes, v.global_rank,
                      v.device);
GPUXRAY_DIGEST_FIELDS(model::NcclOp, v.kind, v.comm_hash, v.seq, v.func_id, v.algorithm_id, v.protocol_id,
                      v.datatype_id, v.enqueue_ns, v.gpu_start_ns, v.gpu_end_ns, v.bytes, v.count, v.root, v.peer,
                      v.channels, v.device, v.operation_id, v.gpu_clock_error_ns);
GPUXRAY_DIGEST_FIELDS(model::NetTransfer, v.operation_id, v.comm_hash, v.peer, v.channel, v.is_send, v.bytes,
                      v.start_ns, v.end_ns, v.wait_gpu_ns, v.wait_peer_ns, v.wait_network_ns);
GPUXRAY_DIGEST_FIELDS(format::Endpoint, v.kind, v.id, v.device);
GPUXRAY_DIGEST_FIELDS(format::Link, v.kind, v.a, v.b, v.version, v.width, v.bandwidth_bytes_per_s, v.ports_a,
                      v.ports_b);
GPUXRAY_DIGEST_FIELDS(format::KernelMetricsRecord, v.correlation_id, v.device, v.passes, v.achieved_occupancy_pct,
                      v.sm_throughput_pct, v.tensor_pipe_pct, v.dram_read_bytes, v.dram_write_bytes, v.l2_bytes,
                      v.l2_hit_rate_pct, v.l1_bytes, v.l1_hit_rate_pct, v.shared_wavefronts, v.local_load_bytes,
                      v.local_store_bytes, v.gpu_duration_ns);
GPUXRAY_DIGEST_FIELDS(model::ProfiledKernel, v.launch, v.launch_found, v.metrics);
GPUXRAY_DIGEST_FIELDS(model::RankTrace, v.rank, v.path, v.source, v.whole_microsecond_times, v.header, v.strings,
                      v.launch_configs, v.streams, v.activities, v.host_calls, v.threads, v.api_functions, v.nvtx,
                      v.host_ops, v.memory, v.communicators, v.nccl_ops, v.transfers, v.links, v.metric_samples,
                      v.profiled_kernels, v.records_read, v.stats, v.clock_offset_ns);

GPUXRAY_DIGEST_FIELDS(Interval, v.start, v.end);
GPUXRAY_DIGEST_FIELDS(StepWindow, v.number, v.window);
GPUXRAY_DIGEST_FIELDS(IdleSplit, v.host_bound, v.dependency, v.other);
GPUXRAY_DIGEST_FIELDS(BreakdownTimes, v.time, v.compute, v.communication, v.memory, v.idle, v.captured, v.idle_split);
GPUXRAY_DIGEST_FIELDS(StepBreakdown, v.step, v.window, v.times);
GPUXRAY_DIGEST_FIELDS(StreamBreakdown, v.device, v.stream, v.busy, v.idle);
GPUXRAY_DIGEST_FIELDS(RankBreakdown, v.rank, v.host, v.recorded, v.totals, v.steps, v.streams, v.replayed_kernels);
GPUXRAY_DIGEST_FIELDS(RankOverlap, v.rank, v.communication_ns, v.exposed_ns, v.time_ns, v.exposed_per_step_ns,
                      v.exposed_step_median_ns, v.exposed_step_worst_ns, v.steps, v.exposed_marks);
GPUXRAY_DIGEST_FIELDS(OtherCommunication, v.library, v.operation, v.kernels, v.time_ns);
GPUXRAY_DIGEST_FIELDS(OverlapPart, v.rank, v.other_communication);
GPUXRAY_DIGEST_FIELDS(KernelsPart::Launch, v.name_id, v.config_id, v.device, v.count, v.time);
GPUXRAY_DIGEST_FIELDS(KernelsPart, v.launches);
GPUXRAY_DIGEST_FIELDS(KernelMetricsPart::Launch, v.name, v.metrics, v.found, v.shape, v.device, v.flops,
                      v.flops_source);
GPUXRAY_DIGEST_FIELDS(FusionCandidate, v.first, v.second, v.rank, v.device, v.stream, v.bytes_saved,
                      v.first_written_bytes, v.second_read_bytes);
GPUXRAY_DIGEST_FIELDS(KernelMetricsPart, v.launches, v.fusion);
GPUXRAY_DIGEST_FIELDS(MemoryPart::Device, v.device, v.peak_bytes, v.peak_at_ns, v.end_bytes, v.allocations,
                      v.peak_phase, v.curve);
GPUXRAY_DIGEST_FIELDS(MemoryPart, v.first_change_ns, v.devices, v.phase_peaks);
GPUXRAY_DIGEST_FIELDS(CategoryPoint, v.time_ns, v.bytes);
GPUXRAY_DIGEST_FIELDS(DeviceMemoryCategories, v.rank, v.device, v.peak_bytes, v.peak_at_ns, v.at_peak, v.peak_phase,
                      v.peak_step, v.allocations, v.unmatched_release_bytes, v.curve);
GPUXRAY_DIGEST_FIELDS(MemoryCategoriesPart, v.recorded, v.addresses_recorded, v.phases_recorded, v.devices);
GPUXRAY_DIGEST_FIELDS(OpKernel, v.name, v.count, v.time_ns);
GPUXRAY_DIGEST_FIELDS(RankOpNode, v.parent, v.name, v.inputs, v.count, v.host_time_ns, v.kernels);
GPUXRAY_DIGEST_FIELDS(RankOps, v.host_ranges, v.kernels, v.kernel_time_ns, v.correlated_kernels, v.correlated_time_ns,
                      v.outside_ranges_kernels, v.outside_ranges_time_ns, v.uncorrelated_kernels,
                      v.uncorrelated_time_ns, v.nodes);
GPUXRAY_DIGEST_FIELDS(ActivityTotal, v.name, v.kind, v.count, v.time_ns);
GPUXRAY_DIGEST_FIELDS(RankActivityTotals, v.gpu, v.ops);
GPUXRAY_DIGEST_FIELDS(OverviewLane, v.intervals, v.merged_intervals, v.gaps_closed_up_to_ns, v.busy_ns);
GPUXRAY_DIGEST_FIELDS(RankStepLanes, v.step, v.window, v.compute, v.communication, v.memory, v.exposed,
                      v.exposed_left_out, v.exposed_ns);
GPUXRAY_DIGEST_FIELDS(hta::HtaStreamIdle, v.stream, v.host_wait_ns, v.kernel_wait_ns, v.other_ns);
GPUXRAY_DIGEST_FIELDS(hta::HtaRank, v.rank, v.span_ns, v.idle_ns, v.compute_ns, v.non_compute_ns, v.idle_pct,
                      v.compute_pct, v.non_compute_pct, v.overlap_pct, v.streams);
GPUXRAY_DIGEST_FIELDS(HtaPart, v.filter_applied, v.figures);
GPUXRAY_DIGEST_FIELDS(PipelineComputeBlock, v.span, v.forward, v.micro_batch);
GPUXRAY_DIGEST_FIELDS(TimePoints::Gap, v.start, v.end, v.launch);
GPUXRAY_DIGEST_FIELDS(TimePoints::OtherLaunch, v.point, v.launch);
GPUXRAY_DIGEST_FIELDS(TimePoints, v.time, v.compute, v.communication, v.host_bound, v.gap, v.gaps, v.other_launches);
GPUXRAY_DIGEST_FIELDS(RankDigest, v.windows, v.gpu_span, v.first_activity_ns, v.first_activity_device, v.breakdown,
                      v.overlap, v.kernels, v.kernel_metrics, v.memory, v.memory_categories, v.ops, v.activity_totals,
                      v.step_lanes, v.hta, v.points, v.compute, v.compute_launch, v.pipeline_blocks);

#undef GPUXRAY_DIGEST_FIELDS

template <typename T>
struct IsVector : std::false_type {};
template <typename T, typename A>
struct IsVector<std::vector<T, A>> : std::true_type {};
template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsArray : std::false_type {};
template <typename T, size_t N>
struct IsArray<std::array<T, N>> : std::true_type {};
template <typename T>
struct IsPackableRecords : std::false_type {};
template <typename Record, typename Packing>
struct IsPackableRecords<model::PackableRecords<Record, Packing>> : std::true_type {};
template <typename T>
struct IsPair : std::false_type {};
template <typename A, typename B>
struct IsPair<std::pair<A, B>> : std::true_type {};

// A digest's body went wrong while it was read (the reader adds the file's name).
struct Damage {
  std::string what;
};

// Varints, zigzag for signed values, doubles as their 8 bytes, sizes before strings and vectors.
class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>& out) : out_(out) {}

  template <typename... T>
  void operator()(T&... values) {
    (value(values), ...);
  }

  template <typename T>
  void value(T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      varint(v ? 1 : 0);
    } else if constexpr (std::is_enum_v<T>) {
      varint(static_cast<uint64_t>(static_cast<std::underlying_type_t<T>>(v)));
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      auto x = static_cast<int64_t>(v);
      varint((static_cast<uint64_t>(x) << 1) ^ static_cast<uint64_t>(x >> 63));
    } else if constexpr (std::is_integral_v<T>) {
      varint(static_cast<uint64_t>(v));
    } else if constexpr (std::is_same_v<T, double>) {
      uint64_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(bits >> (8 * i)));
    } else if constexpr (std::is_same_v<T, std::string>) {
      varint(v.size());
      out_.insert(out_.end(), v.begin(), v.end());
    } else if constexpr (IsVector<T>::value) {
      varint(v.size());
      for (auto& element : v) value(element);
    } else if constexpr (IsOptional<T>::value) {
      bool present = v.has_value();
      value(present);
      if (present) value(*v);
    } else if constexpr (IsArray<T>::value) {
      for (auto& element : v) value(element);
    } else if constexpr (IsPair<T>::value) {
      value(v.first), value(v.second);
    } else if constexpr (std::is_same_v<T, format::FileHeader>) {
      header(v);
    } else if constexpr (std::is_same_v<T, report::Stats>) {
      stats(v);
    } else if constexpr (std::is_same_v<T, PackedColumn> || std::is_same_v<T, TimePoints::Gaps> ||
                         std::is_same_v<T, TimePoints::GapIndexes> || IsPackableRecords<T>::value ||
                         std::is_same_v<T, model::RankStrings>) {
      auto values = v.values();  // as a vector: packing is the memory's business, not the file's
      value(values);
    } else {
      Fields<T>::visit(*this, v);
    }
  }

 private:
  void varint(uint64_t x) {
    while (x >= 0x80) {
      out_.push_back(static_cast<uint8_t>(x | 0x80));
      x >>= 7;
    }
    out_.push_back(static_cast<uint8_t>(x));
  }

  // The file header travels as a trace file of its own (the trace format's one description of it).
  class VectorSink final : public format::ByteSink {
   public:
    explicit VectorSink(std::vector<uint8_t>& bytes) : bytes_(bytes) {}
    bool append(std::span<const uint8_t> first, std::span<const uint8_t> second) override {
      bytes_.insert(bytes_.end(), first.begin(), first.end());
      bytes_.insert(bytes_.end(), second.begin(), second.end());
      return true;
    }
    std::string error() const override { return {}; }

   private:
    std::vector<uint8_t>& bytes_;
  };

  void header(const format::FileHeader& header) {
    std::vector<uint8_t> bytes;
    {
      format::TraceWriter writer(std::make_unique<VectorSink>(bytes));
      writer.writeHeader(header);
      writer.finish({});
    }
    varint(bytes.size());
    out_.insert(out_.end(), bytes.begin(), bytes.end());
  }

  void stats(const report::Stats& stats) {
    std::vector<std::pair<std::string, uint64_t>> values;
    for (report::Stat stat : stats.nonZero()) values.emplace_back(report::statInfo(stat).name, stats.value(stat));
    std::vector<std::pair<std::string, std::string>> lines;
    for (const auto& line : stats.lines()) lines.emplace_back(report::statInfo(line.stat).name, line.text);
    value(values);
    value(lines);
  }

  std::vector<uint8_t>& out_;
};

class Decoder {
 public:
  explicit Decoder(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  template <typename... T>
  void operator()(T&... values) {
    (value(values), ...);
  }

  template <typename T>
  void value(T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      uint64_t x = varint();
      if (x > 1) throw Damage{"a flag is neither 0 nor 1"};
      v = x == 1;
    } else if constexpr (std::is_enum_v<T>) {
      using U = std::underlying_type_t<T>;
      v = static_cast<T>(narrow<U>(varint()));
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      uint64_t x = varint();
      auto wide = static_cast<int64_t>((x >> 1) ^ (~(x & 1) + 1));
      if (wide < std::numeric_limits<T>::min() || wide > std::numeric_limits<T>::max())
        throw Damage{"a value is out of its range"};
      v = static_cast<T>(wide);
    } else if constexpr (std::is_integral_v<T>) {
      v = narrow<T>(varint());
    } else if constexpr (std::is_same_v<T, double>) {
      auto piece = take(8);
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits |= uint64_t{piece[static_cast<size_t>(i)]} << (8 * i);
      std::memcpy(&v, &bits, sizeof bits);
    } else if constexpr (std::is_same_v<T, std::string>) {
      auto piece = take(size(1));
      v.assign(piece.begin(), piece.end());
    } else if constexpr (IsVector<T>::value) {
      // Every element takes at least one byte: a size beyond what is left is damage, not an allocation.
      v.clear();
      v.resize(size(1));
      for (auto& element : v) value(element);
    } else if constexpr (IsOptional<T>::value) {
      bool present = false;
      value(present);
      if (present) {
        v.emplace();
        value(*v);
      } else {
        v.reset();
      }
    } else if constexpr (IsArray<T>::value) {
      for (auto& element : v) value(element);
    } else if constexpr (IsPair<T>::value) {
      value(v.first), value(v.second);
    } else if constexpr (std::is_same_v<T, format::FileHeader>) {
      header(v);
    } else if constexpr (std::is_same_v<T, report::Stats>) {
      stats(v);
    } else if constexpr (std::is_same_v<T, PackedColumn> || std::is_same_v<T, TimePoints::Gaps> ||
                         std::is_same_v<T, TimePoints::GapIndexes>) {
      decltype(v.values()) values;
      value(values);
      v = T(values);
    } else if constexpr (IsPackableRecords<T>::value) {
      decltype(v.values()) values;
      value(values);
      v = T(std::move(values));
      v.pack();  // a skeleton's
    } else if constexpr (std::is_same_v<T, model::RankStrings>) {
      std::vector<std::string> values;
      value(values);
      if (values.empty() || !values.front().empty()) throw Damage{"its strings do not begin with the empty one"};
      v = model::RankStrings(values);
      v.pack();  // a skeleton's
    } else {
      Fields<T>::visit(*this, v);
    }
  }

  bool atEnd() const { return position_ == bytes_.size(); }

 private:
  uint64_t varint() {
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (position_ >= bytes_.size()) throw Damage{"it ends inside a value"};
      uint8_t byte = bytes_[position_++];
      x |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return x;
    }
    throw Damage{"a value is longer than ten bytes"};
  }

  template <typename T>
  T narrow(uint64_t x) {
    if (x > std::numeric_limits<T>::max()) throw Damage{"a value is out of its range"};
    return static_cast<T>(x);
  }

  size_t size(size_t bytes_per_element) {
    uint64_t n = varint();
    if (n > (bytes_.size() - position_) / bytes_per_element) throw Damage{"a length runs past its end"};
    return static_cast<size_t>(n);
  }

  std::span<const uint8_t> take(size_t n) {
    if (n > bytes_.size() - position_) throw Damage{"it ends inside a value"};
    auto piece = bytes_.subspan(position_, n);
    position_ += n;
    return piece;
  }

  void header(format::FileHeader& header) {
    auto bytes = take(size(1));
    try {
      format::TraceReader reader("the digest's file header", bytes);
      header = reader.header();
    } catch (const std::exception& e) {
      throw Damage{fmt::format("its file header cannot be read ({})", e.what())};
    }
  }

  void stats(report::Stats& stats) {
    std::vector<std::pair<std::string, uint64_t>> values;
    std::vector<std::pair<std::string, std::string>> lines;
    value(values);
    value(lines);
    auto named = [](const std::string& name) {
      std::optional<report::Stat> stat = report::statNamed(name);
      if (!stat) throw Damage{fmt::format("it counts a stat this gpuxray does not know ('{}')", name)};
      return *stat;
    };
    stats = {};
    for (const auto& [name, count] : values) stats.add(named(name), count);
    for (const auto& [name, text] : lines) stats.warn(named(name), 0, text);
  }

  std::span<const uint8_t> bytes_;
  size_t position_ = 0;
};

void putU32(std::vector<uint8_t>& out, uint32_t x) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(x >> (8 * i)));
}

uint32_t getU32(std::span<const uint8_t> bytes) {
  uint32_t x = 0;
  for (size_t i = 0; i < 4; ++i) x |= uint32_t{bytes[i]} << (8 * i);
  return x;
}

void appendChunk(std::vector<uint8_t>& file, std::span<const uint8_t> raw) {
  std::vector<uint8_t> stored(ZSTD_compressBound(raw.size()));
  size_t n = ZSTD_compress(stored.data(), stored.size(), raw.data(), raw.size(), 3);
  if (ZSTD_isError(n)) throw InputError(fmt::format("cannot compress a digest: {}", ZSTD_getErrorName(n)));
  stored.resize(n);
  auto header = format::encodeChunkHeader(format::Codec::kZstd, static_cast<uint32_t>(raw.size()), stored);
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), stored.begin(), stored.end());
}

// The raw payload of the chunk at `at`, which moves past it.
std::vector<uint8_t> readChunk(std::span<const uint8_t> file, size_t& at) {
  if (file.size() - at < format::kChunkHeaderSize) throw Damage{fmt::format("cut short at byte {}", file.size())};
  auto header_bytes = file.subspan(at, format::kChunkHeaderSize);
  format::ChunkHeader header;
  if (format::decodeChunkHeader(header_bytes, &header) != format::ChunkHeaderProblem::kNone)
    throw Damage{fmt::format("damaged at byte {} (no valid chunk header)", at)};
  if (file.size() - at - format::kChunkHeaderSize < header.stored_size)
    throw Damage{fmt::format("cut short at byte {}", file.size())};
  auto stored = file.subspan(at + format::kChunkHeaderSize, header.stored_size);
  if (!format::chunkChecksumMatches(header_bytes, stored))
    throw Damage{fmt::format("damaged at byte {} (checksum mismatch)", at)};
  at += format::kChunkHeaderSize + header.stored_size;
  if (header.codec == format::Codec::kNone) return {stored.begin(), stored.end()};
  std::vector<uint8_t> raw(header.raw_size);
  size_t n = ZSTD_decompress(raw.data(), raw.size(), stored.data(), stored.size());
  if (ZSTD_isError(n) || n != raw.size()) throw Damage{fmt::format("damaged at byte {} (cannot decompress)", at)};
  return raw;
}

template <typename T>
std::vector<uint8_t> encoded(const T& value) {
  std::vector<uint8_t> bytes;
  Encoder encoder(bytes);
  encoder.value(const_cast<T&>(value));  // the encoder only reads
  return bytes;
}

void checkReferences(const model::RankTrace& rank) {
  for (const auto& a : rank.activities) {
    if (a.stream >= rank.streams.size() && !rank.streams.empty()) throw Damage{"an activity names no stream"};
    if (static_cast<size_t>(a.kind) >= model::kActivityKindCount) throw Damage{"an activity is of no known kind"};
  }
  for (const auto& call : rank.host_calls) {
    if (call.function >= rank.api_functions.size()) throw Damage{"a host call names no function"};
  }
}

void checkReferences(const RankDigest& digest) {
  const TimePoints& points = digest.points;
  size_t n = points.size();
  for (size_t size : {points.compute.size(), points.communication.size(), points.host_bound.size(), points.gap.size()})
    if (size != n) throw Damage{"its time points' columns differ in length"};
  std::vector<uint32_t> gap_of = points.gap.values();
  for (uint32_t gap : gap_of)
    if (gap != TimePoints::kNoGap && gap >= points.gaps.size()) throw Damage{"a time point names no gap"};
  const auto& others = points.other_launches;
  for (size_t i = 0; i < others.size(); ++i) {
    if (others[i].point >= n || gap_of[others[i].point] == TimePoints::kNoGap ||
        (i > 0 && others[i - 1].point >= others[i].point))
      throw Damage{"a launch of its time points names no point in a gap, or comes out of order"};
  }
  if (digest.compute_launch.size() != digest.compute.size())
    throw Damage{"its compute intervals and their launches differ in number"};
}

}  // namespace

std::string digestOptionsText(const AnalysisOptions& options, const std::vector<std::string>& comm_kernels) {
  auto list = [](const auto& values) {
    std::string text;
    for (const auto& value : values) text += fmt::format("{}{}", text.empty() ? "" : " ", value);
    return text;
  };
  auto quoted = [](const std::vector<std::string>& values) {
    std::string text;
    for (const auto& value : values) text += fmt::format("{}'{}'", text.empty() ? "" : " ", value);
    return text;
  };
  return fmt::format("step markers [{}]; comm kernels [{}]; compat {}; include last step {}; steps [{}]",
                     quoted(options.step_markers), quoted(comm_kernels), options.hta_compat ? "hta" : "none",
                     options.include_last_step ? "yes" : "no", list(options.steps));
}

std::string digestFileName(const std::string& source_path) {
  return fs::path(source_path).filename().string() + std::string(kDigestFileExtension);
}

bool isDigestFileName(std::string_view path) {
  return path.ends_with(kDigestFileExtension);
}

void writeDigestFile(const std::string& path, const model::RankTrace& skeleton, const RankDigest& digest,
                     const std::string& options) {
  std::vector<uint8_t> body = encoded(skeleton);
  std::vector<uint8_t> digest_bytes = encoded(digest);
  body.insert(body.end(), digest_bytes.begin(), digest_bytes.end());

  DigestFileHeader header;
  header.gpuxray_version = kToolVersion;
  header.run_id = skeleton.header.run_id;
  header.rank = skeleton.rank;
  header.world_size = skeleton.header.world_size;
  header.source_path = skeleton.path;
  std::error_code error;
  fs::path absolute = fs::absolute(skeleton.path, error);
  header.source_absolute_path = error ? skeleton.path : absolute.lexically_normal().string();
  header.options = options;
  header.body_bytes = body.size();

  std::vector<uint8_t> file(kDigestMagic.begin(), kDigestMagic.end());
  putU32(file, kDigestFormatVersion);
  putU32(file, 0);
  appendChunk(file, encoded(header));
  for (size_t at = 0; at < body.size(); at += kBodyPieceBytes)
    appendChunk(file, std::span<const uint8_t>(body).subspan(at, std::min(kBodyPieceBytes, body.size() - at)));

  // Written whole under a temporary name and renamed, so that a digest job killed midway leaves no
  // digest that looks complete.
  std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
    out.close();
    if (!out) throw InputError(fmt::format("{}: cannot write: {}", partial, std::strerror(errno)));
  }
  fs::rename(partial, path, error);
  if (error) throw InputError(fmt::format("{}: cannot write: {}", path, error.message()));
}

DigestFile readDigestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (file.size() < kDigestPreambleSize || !std::equal(kDigestMagic.begin(), kDigestMagic.end(), file.begin()))
    throw InputError(fmt::format("{}: not a gpuxray digest (it does not start with the digest magic)", path));
  uint32_t version = getU32(std::span<const uint8_t>(file).subspan(8, 4));
  if (version != kDigestFormatVersion) {
    throw InputError(
        fmt::format("{}: a digest of format version {}, and this gpuxray ({}) reads version {}: make "
                    "the digests again with this gpuxray",
                    path, version, kToolVersion, kDigestFormatVersion));
  }
  DigestFile digest;
  try {
    size_t at = kDigestPreambleSize;
    std::vector<uint8_t> header_bytes = readChunk(file, at);
    Decoder header_decoder(header_bytes);
    header_decoder.value(digest.header);
    if (digest.header.gpuxray_version != kToolVersion) {
      throw InputError(
          fmt::format("{}: a digest made by gpuxray {}, not by this gpuxray ({}): make the digests "
                      "again with this gpuxray",
                      path, digest.header.gpuxray_version, kToolVersion));
    }
    std::vector<uint8_t> body;
    while (at < file.size()) {
      std::vector<uint8_t> piece = readChunk(file, at);
      body.insert(body.end(), piece.begin(), piece.end());
    }
    if (body.size() != digest.header.body_bytes)
      throw Damage{fmt::format("cut short: its body holds {} of {} bytes", body.size(), digest.header.body_bytes)};
    Decoder decoder(body);
    decoder.value(digest.skeleton);
    decoder.value(digest.digest);
    if (!decoder.atEnd()) throw Damage{"bytes follow its body"};
    checkReferences(digest.skeleton);
    checkReferences(digest.digest);
  } catch (const Damage& damage) {
    throw InputError(fmt::format("{}: not a usable digest: {}", path, damage.what));
  }
  return digest;
}

}  // namespace gpuxray::analysis
