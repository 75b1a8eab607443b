#include "tests/support/hostile_traces.h"

#include <sys/stat.h>
#include <zstd.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "proto/file_layout.h"
#include "proto/gpuxray.pb.h"
#include "proto/records.h"
#include "proto/trace_writer.h"

namespace gpuxray::testing {
namespace {

namespace fs = std::filesystem;
namespace pb = format::pb;
using format::Codec;

constexpr uint32_t kMaxId = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kNearMaxTime = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - 5;

std::string preamble() {
  auto bytes = format::encodePreamble(
      {static_cast<uint16_t>(format::kFormatMajor), static_cast<uint16_t>(format::kFormatMinor)});
  return {bytes.begin(), bytes.end()};
}

// A chunk whose header claims `raw_size` for `stored` (which it checksums, so the claim is believed).
std::string frame(const std::string& stored, Codec codec, uint32_t raw_size) {
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(stored.data()), stored.size());
  auto header = format::encodeChunkHeader(codec, raw_size, bytes);
  return std::string(header.begin(), header.end()) + stored;
}

std::string compress(const std::string& raw) {
  std::string out(ZSTD_compressBound(raw.size()), '\0');
  out.resize(ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 19));
  return out;
}

std::string chunk(const std::string& raw, bool zstd = false) {
  return zstd ? frame(compress(raw), Codec::kZstd, static_cast<uint32_t>(raw.size()))
              : frame(raw, Codec::kNone, static_cast<uint32_t>(raw.size()));
}

std::string headerChunk(int32_t world_size = 1) {
  pb::Chunk c;
  pb::FileHeader& h = *c.mutable_header();
  h.set_format_major(format::kFormatMajor);
  h.set_run_id("hostile");
  h.set_rank(0);
  h.set_world_size(world_size);
  h.set_hostname("node-0");
  return chunk(c.SerializeAsString());
}

std::string batchChunk(const pb::EventBatch& batch, bool zstd = false) {
  pb::Chunk c;
  *c.mutable_batch() = batch;
  return chunk(c.SerializeAsString(), zstd);
}

std::string trailerChunk() {
  pb::Chunk c;
  c.mutable_trailer()->set_end_time_ns(2'000'000);
  return chunk(c.SerializeAsString());
}

std::string varint(uint64_t value) {
  std::string out;
  do {
    out.push_back(static_cast<char>((value & 0x7f) | (value > 0x7f ? 0x80 : 0)));
    value >>= 7;
  } while (value > 0);
  return out;
}

// A zstd chunk whose payload is a batch of `count` empty memcpy messages, compressed as it is
// generated (the payload itself is never held).
std::string emptyMemcpysChunk(uint64_t count) {
  const uint64_t body = 2 * count;  // each: field 5, length-delimited, length 0
  std::string prefix = "\x12" + varint(body);
  std::string block(1 << 20, '\0');
  for (size_t i = 0; i < block.size(); i += 2) block[i] = '\x2a';
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_compressionLevel, 19);
  ZSTD_CCtx_setPledgedSrcSize(context, prefix.size() + body);
  std::string stored;
  std::string out(ZSTD_CStreamOutSize(), '\0');
  auto feed = [&](const char* data, size_t size, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{data, size, 0};
    size_t left;
    do {
      ZSTD_outBuffer o{out.data(), out.size(), 0};
      left = ZSTD_compressStream2(context, &o, &in, mode);
      if (ZSTD_isError(left)) throw std::runtime_error(ZSTD_getErrorName(left));
      stored.append(out.data(), o.pos);
    } while (mode == ZSTD_e_end ? left != 0 : in.pos < in.size);
  };
  feed(prefix.data(), prefix.size(), ZSTD_e_continue);
  for (uint64_t left = body; left > 0;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(left, block.size()));
    left -= n;
    feed(block.data(), n, left == 0 ? ZSTD_e_end : ZSTD_e_continue);
  }
  ZSTD_freeCCtx(context);
  return frame(stored, Codec::kZstd, static_cast<uint32_t>(prefix.size() + body));
}

void writeBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// Interned ids of 2^32 - 1 in every record that refers to one.
std::string maxIds() {
  pb::EventBatch b;
  auto* s = b.add_strings();
  s->set_iid(kMaxId);
  s->set_value("a name at the largest id");
  auto* n = b.add_nvtx_events();
  n->set_kind(pb::NVTX_RANGE);
  n->set_start_ns(1000);
  n->set_end_ns(2000);
  n->set_name_iid(kMaxId);
  n->set_domain_iid(kMaxId - 1);
  auto* config = b.add_kernel_configs();
  config->set_id(kMaxId);
  config->set_name_iid(kMaxId - 2);
  b.mutable_kernels()->add_start_delta_ns(1000);
  b.mutable_kernels()->add_duration_ns(10);
  b.mutable_kernels()->add_config_id(kMaxId);
  auto* f = b.add_api_functions();
  f->set_cbid(kMaxId);
  f->set_name_iid(kMaxId - 3);
  auto* op = b.add_nccl_operations();
  op->set_func_iid(kMaxId - 4);
  op->set_algorithm_iid(kMaxId);
  op->set_enqueue_ns(1500);
  auto* m = b.add_metric_samples();
  m->set_metric_iid(kMaxId - 5);
  m->set_timestamp_ns(1600);
  return preamble() + headerChunk() + batchChunk(b) + trailerChunk();
}

// Only an NVTX range named by id 2^32 - 1 (the id + 1 of a 32-bit resize wrapped to 0).
std::string maxNvtxNameId() {
  pb::EventBatch b;
  auto* n = b.add_nvtx_events();
  n->set_kind(pb::NVTX_RANGE);
  n->set_start_ns(1000);
  n->set_end_ns(2000);
  n->set_name_iid(kMaxId);
  return preamble() + headerChunk() + batchChunk(b) + trailerChunk();
}

std::string hugeRelease() {
  pb::EventBatch b;
  for (auto [operation, bytes] :
       {std::pair{pb::MEMORY_ALLOCATE, uint64_t{1} << 20}, std::pair{pb::MEMORY_RELEASE, uint64_t{1} << 63}}) {
    auto* e = b.add_memory_events();
    e->set_timestamp_ns(1000);
    e->set_operation(operation);
    e->set_bytes(bytes);
    e->set_memory_kind(pb::MEMORY_DEVICE);
  }
  return preamble() + headerChunk() + batchChunk(b) + trailerChunk();
}

std::string timesNearMax() {
  pb::EventBatch b;
  auto* copy = b.add_memcpys();
  copy->set_start_ns(kNearMaxTime);
  copy->set_duration_ns(1000);
  auto* late = b.add_memcpys();
  late->set_start_ns(std::numeric_limits<uint64_t>::max());
  late->set_duration_ns(std::numeric_limits<int64_t>::max());
  b.mutable_kernels()->add_start_delta_ns(static_cast<int64_t>(kNearMaxTime));
  b.mutable_kernels()->add_duration_ns(std::numeric_limits<int64_t>::max());
  b.mutable_kernels()->add_start_delta_ns(std::numeric_limits<int64_t>::max());
  b.mutable_kernels()->add_duration_ns(-5);
  b.mutable_api_calls()->add_start_delta_ns(static_cast<int64_t>(kNearMaxTime));
  b.mutable_api_calls()->add_duration_ns(1000);
  auto* sync = b.add_synchronizations();
  sync->set_start_ns(kNearMaxTime);
  sync->set_duration_ns(std::numeric_limits<int64_t>::max());
  return preamble() + headerChunk() + batchChunk(b) + trailerChunk();
}

std::string largeKernelConfigId() {
  pb::EventBatch b;
  b.add_kernel_configs()->set_id((1u << 26) - 1);
  return preamble() + headerChunk() + batchChunk(b);
}

std::string largeStringId() {
  pb::EventBatch b;
  auto* s = b.add_strings();
  s->set_iid((1u << 26) - 1);
  s->set_value("x");
  return preamble() + headerChunk() + batchChunk(b);
}

// Header chunks that claim the largest raw size for a payload of a few bytes, alternating with
// small chunks (each claim used to be allocated and zeroed).
std::string rawSizeClaims() {
  pb::EventBatch b;
  b.add_memcpys()->set_start_ns(1000);
  pb::Chunk c;
  *c.mutable_batch() = b;
  std::string raw = c.SerializeAsString();
  std::string file = preamble() + headerChunk();
  for (int i = 0; i < 8; ++i) {
    file += frame(compress(raw), Codec::kZstd, format::kMaxRawChunkSize);
    file += chunk(raw, true);
  }
  return file;
}

// After one damaged chunk, 2 MB of false chunk headers, each claiming a payload up to the end of the
// file (each used to be read and checksummed: quadratic).
std::string falseHeaders(size_t bytes) {
  std::string file = preamble() + headerChunk();
  std::string damaged = batchChunk(pb::EventBatch{});
  damaged.back() ^= 0x55;
  file += damaged;
  const size_t start = file.size();
  const size_t count = bytes / format::kChunkHeaderSize;
  const size_t end = start + count * format::kChunkHeaderSize;
  for (size_t i = 0; i < count; ++i) {
    uint8_t header[format::kChunkHeaderSize] = {'G', 'X', 'C', 'K'};
    auto stored = static_cast<uint32_t>(end - (start + (i + 1) * format::kChunkHeaderSize));
    for (int k = 0; k < 4; ++k) header[4 + k] = static_cast<uint8_t>(stored >> (8 * k));
    header[16] = static_cast<uint8_t>(i);
    file.append(reinterpret_cast<const char*>(header), sizeof header);
  }
  return file + trailerChunk();
}

fs::path makeDir(const fs::path& dir, const std::string& name) {
  fs::path d = dir / name;
  fs::create_directories(d);
  writeValidTrace(d / "rank-00000.gpuxray");
  return d;
}

}  // namespace

void writeValidTrace(const fs::path& file, int rank, int world_size) {
  format::TraceWriter writer(std::make_unique<format::FileSink>(file.string()));
  format::FileHeader header;
  header.run_id = "hostile";
  header.rank = rank;
  header.world_size = world_size;
  header.hostname = "node-0";
  writer.writeHeader(header);
  format::StringId name = writer.intern("gemm_kernel");
  for (uint64_t i = 0; i < 20; ++i) {
    format::KernelRecord kernel;
    kernel.start_ns = 1000 + 100 * i;
    kernel.end_ns = kernel.start_ns + 50;
    kernel.name_id = name;
    writer.add(kernel);
  }
  writer.finish(format::Trailer{});
}

std::vector<HostileTrace> writeHostileTraces(const fs::path& dir) {
  std::vector<HostileTrace> traces;
  auto file = [&](const std::string& name, const std::string& bytes) {
    fs::path path = dir / (name + ".gpuxray");
    writeBytes(path, bytes);
    traces.push_back({name, path});
  };
  file("nvtx-name-id-2^32-1", maxNvtxNameId());
  file("interned-ids-2^32-1", maxIds());
  file("memory-release-2^63-bytes", hugeRelease());
  file("times-near-int64-max", timesNearMax());
  file("kernel-config-id-2^26-1", largeKernelConfigId());
  file("string-id-2^26-1", largeStringId());
  std::string empties = emptyMemcpysChunk(12'000'000);
  file("zstd-12M-empty-records", preamble() + headerChunk() + empties);
  std::string many = preamble() + headerChunk();
  for (int i = 0; i < 16; ++i) many += empties;
  file("zstd-16x12M-empty-records", many);
  // Chunk after chunk of as many empty records as the bound on expansion lets through (the reader
  // allows 4 KiB plus 256 times the stored size).
  std::string small;
  for (uint64_t count = 1024;; count *= 2) {
    std::string next = emptyMemcpysChunk(count);
    if (2 * count + 8 > 4096 + 256 * (next.size() - format::kChunkHeaderSize)) break;
    small = std::move(next);
  }
  std::string bounded = preamble() + headerChunk();
  for (int i = 0; i < 64; ++i) bounded += small;
  file("zstd-empty-records-within-bounds", bounded);
  file("raw-size-claims-256MiB", rawSizeClaims());
  file("false-headers-0.5MB", falseHeaders(512 << 10));
  file("false-headers-2MB", falseHeaders(2 << 20));

  fs::path world = makeDir(dir, "world-size-2^31-1");
  fs::remove(world / "rank-00000.gpuxray");
  writeBytes(world / "rank-00000.gpuxray",
             preamble() + headerChunk(std::numeric_limits<int32_t>::max()) + trailerChunk());
  traces.push_back({"world-size-2^31-1 (directory)", world});

  fs::path fifo = dir / "fifo.gpuxray";
  if (mkfifo(fifo.c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
  traces.push_back({"fifo (named)", fifo});
  fs::path fifo_dir = makeDir(dir, "fifo-in-directory");
  if (mkfifo((fifo_dir / "rank-00001.gpuxray").c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
  traces.push_back({"fifo in a directory", fifo_dir});

  fs::path loop = dir / "loop.gpuxray";
  fs::create_symlink(loop.filename(), loop);
  traces.push_back({"symlink loop (named)", loop});
  fs::path loop_dir = makeDir(dir, "symlink-loop-in-directory");
  fs::create_symlink("rank-00001.gpuxray", loop_dir / "rank-00001.gpuxray");
  traces.push_back({"symlink loop in a directory", loop_dir});
  return traces;
}

}  // namespace gpuxray::testing
