// TraceWriter -> bytes -> TraceReader gives back exactly what was written: the header, every record
// type field by field, the string table, API function definitions and the trailer, in one chunk or
// split over many, compressed or not, in memory or through a real file.

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "proto/file_layout.h"
#include "proto/trace_reader.h"
#include "proto/trace_writer.h"
#include "tests/support/record_printing.h"
#include "tests/support/sample_records.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_files.h"

namespace {

using namespace gpuxray::format;
using namespace gpuxray::testing;

WriterOptions uncompressed() {
  WriterOptions options;
  options.zstd_level = 0;
  return options;
}

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e37'79b9'7f4a'7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58'476d'1ce4'e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d0'49bb'1331'11ebull;
  return z ^ (z >> 31);
}

// `count` kernel launches as a long capture produces them: starts that jitter by more than the
// launch interval (so start deltas are positive and negative), some negative durations, correlation
// ids that wrap past UINT32_MAX, optional columns that are mostly zero, and 4999 configurations
// reused throughout plus 1000 more that are first launched in the last 1000 records.
std::vector<KernelRecord> manyKernels(TraceWriter& writer, uint32_t count) {
  std::vector<StringId> names;
  for (int i = 0; i < 97; ++i) names.push_back(writer.intern("kernel_" + std::to_string(i)));
  std::vector<KernelRecord> kernels(count);
  uint64_t random = 42;
  for (uint32_t i = 0; i < count; ++i) {
    KernelRecord& k = kernels[i];
    k.start_ns = 1'764'410'400'000'000'000ull + 1'000ull * i + splitmix64(random) % 5'000;
    k.end_ns = k.start_ns + splitmix64(random) % 100'000 - 1'000;
    k.device = i % 8;
    k.stream = 7 + i % 13;
    k.correlation_id = 4'294'000'000u + 7u * i;
    k.context = i % 3;
    k.graph_id = i % 50 == 0 ? 9 : 0;
    k.graph_node_id = k.graph_id != 0 ? 0xffff'ffff'ffff'0000ull + i : 0;
    uint32_t config = i + 1'000 < count ? i % 4'999 : 5'000 + i % 1'000;
    k.name_id = names[config % names.size()];
    k.grid_x = 1 + config;
    k.grid_y = 1 + config % 3;
    k.grid_z = 1;
    k.block_x = 128;
    k.block_y = 2;
    k.block_z = 1;
    k.registers_per_thread = 32 + config % 64;
    k.dynamic_shared_memory = config % 7 == 0 ? 98'304 : 0;
    k.shared_memory_optin = config % 7 == 0;
    k.launch_type = config % 11 == 0 ? 1 : 0;
  }
  return kernels;
}

TEST_CASE("the header round-trips with every field", "[format][roundtrip]") {
  // Variants differ in which CaptureConfig booleans are set, so a swap between them shows.
  const uint32_t variant = GENERATE(0u, 1u, 2u);
  CAPTURE(variant);
  MemoryTrace trace(uncompressed());
  const FileHeader written = sampleHeader(variant);
  REQUIRE(trace.writer().writeHeader(written));

  TraceReader reader("header.gxt", trace.bytes());
  CHECK(reader.version().major == kFormatMajor);
  CHECK(reader.version().minor == kFormatMinor);
  CHECK(reader.header() == written);
  // Also as text: that tells -0.0 (device 1's peak_bf16_flops) from 0.0.
  CHECK(describe(reader.header()) == describe(written));
  REQUIRE(reader.header().devices.size() == 2);
  CHECK(std::signbit(reader.header().devices[1].peak_bf16_flops));
}

TEMPLATE_TEST_CASE("every record type round-trips field by field", "[format][roundtrip]", KernelRecord, ApiCallRecord,
                   MemcpyRecord, MemsetRecord, MemoryEventRecord, NvtxEventRecord, SynchronizationRecord,
                   NcclCommunicatorRecord, NcclOperationRecord, NetTransferRecord, MetricSampleRecord,
                   KernelMetricsRecord, ClockAnchor, ExternalCorrelationRecord, OverheadRecord, ResourceNameRecord,
                   StreamRecord, DeviceProperties, Link) {
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  // Variant 1 ends before it starts and variant 2 lasts no time, where a record has a duration.
  EventBatch expected;
  for (uint32_t variant = 0; variant < 3; ++variant) {
    TestType record = sample<TestType>(writer, variant);
    writer.add(record);
    recordsIn<TestType>(expected).push_back(record);
  }
  REQUIRE(writer.finish({}));

  ReadResult result = readAll(trace.bytes());
  REQUIRE(result.batches.size() == 1);
  checkSameRecords(recordsIn<TestType>(result.batches[0]), recordsIn<TestType>(expected));
  // ...and nothing landed in another list.
  CHECK(result.batches[0] == expected);
  CHECK(result.warnings.empty());
}

TEST_CASE("a batch with every record type round-trips", "[format][roundtrip]") {
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  std::vector<EventBatch> expected;
  for (uint32_t variant = 0; variant < 3; ++variant) {
    expected.push_back(addSampleBatch(writer, variant));
    REQUIRE(writer.flush());
  }
  REQUIRE(writer.finish(sampleTrailer()));

  ReadResult result = readAll(trace.bytes());
  REQUIRE(result.batches.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    INFO("batch " << i);
    checkSameBatch(result.batches[i], expected[i]);
  }
  CHECK(result.warnings.empty());
}

TEST_CASE("compressed and uncompressed files read back the same records", "[format][roundtrip]") {
  const int zstd_level = GENERATE(0, 1, 3, 19);
  CAPTURE(zstd_level);
  WriterOptions options;
  options.zstd_level = zstd_level;
  MemoryTrace trace(options);
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  EventBatch expected = addSampleBatch(writer, 0);
  std::vector<KernelRecord> kernels = manyKernels(writer, 2'000);
  for (const KernelRecord& k : kernels) writer.add(k);
  expected.kernels.insert(expected.kernels.end(), kernels.begin(), kernels.end());
  REQUIRE(writer.finish(sampleTrailer()));

  size_t compressed_chunks = 0;
  for (const ChunkView& chunk : splitChunks(trace.bytes()))
    compressed_chunks += chunk.header.codec == Codec::kZstd ? 1 : 0;
  if (zstd_level == 0) {
    CHECK(compressed_chunks == 0);
  } else {
    CHECK(compressed_chunks > 0);  // at least the big batch
  }

  ReadResult result = readAll(trace.bytes());
  REQUIRE(result.batches.size() == 1);
  checkSameBatch(result.batches[0], expected);
  CHECK(result.header == sampleHeader());
  CHECK(result.trailer.has_value());
}

TEST_CASE("200k kernels are split into chunks of max_records_per_chunk and come back exactly",
          "[format][roundtrip]") {
  MemoryTrace trace;  // default options: 64 Ki records per chunk, zstd
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  const std::vector<KernelRecord> kernels = manyKernels(writer, 200'000);
  for (const KernelRecord& k : kernels) writer.add(k);
  REQUIRE(writer.finish({}));
  CHECK(writer.chunksWritten() == 1 + 4 + 1);
  CHECK(writer.bytesWritten() == trace.bytes().size());

  ReadResult result = readAll(trace.bytes());
  std::vector<size_t> batch_sizes;
  std::vector<KernelRecord> read_back;
  for (const EventBatch& batch : result.batches) {
    batch_sizes.push_back(batch.kernels.size());
    read_back.insert(read_back.end(), batch.kernels.begin(), batch.kernels.end());
  }
  CHECK(batch_sizes == std::vector<size_t>{65'536, 65'536, 65'536, 3'392});
  // Start and correlation deltas restart in every chunk; configurations are defined once per file.
  checkSameRecords(read_back, kernels);
  CHECK(result.stats.unresolved_references == 0);
  CHECK(result.warnings.empty());
  // Each configuration is named by one id of the file, in every chunk, and each id names one.
  auto configOf = [](const KernelRecord& k) {
    KernelRecord c = k;
    c.start_ns = c.end_ns = c.correlation_id = c.device = c.stream = c.context = c.graph_id = 0;
    c.graph_node_id = 0;
    return c;
  };
  std::map<uint32_t, KernelRecord> config_of_id;
  std::set<uint32_t> grids;  // one configuration per grid_x (manyKernels)
  for (const KernelRecord& k : read_back) {
    REQUIRE(k.config_id.value != 0);
    auto [it, inserted] = config_of_id.try_emplace(k.config_id.value, configOf(k));
    CHECK(it->second == configOf(k));
    grids.insert(k.grid_x);
  }
  CHECK(grids.size() == 5'999);
  CHECK(config_of_id.size() == grids.size());
}

TEST_CASE("kernel and API call columns survive extreme values at every chunk boundary", "[format][roundtrip]") {
  constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
  constexpr uint32_t kMax32 = std::numeric_limits<uint32_t>::max();
  // Starts and correlation ids that jump across the whole range; deltas and durations wrap.
  const std::vector<uint64_t> starts = {kMax64, 0, 1ull << 63, 5, kMax64 - 1, 0, 1, (1ull << 63) - 1, kMax64};
  const std::vector<uint64_t> ends = {0, kMax64, 0, 5, 1, kMax64, 1ull << 63, 1ull << 63, kMax64 - 7};
  const std::vector<uint32_t> correlations = {kMax32, 0, 1u << 31, 1, kMax32 - 1, 0, kMax32, 2, 1u << 31};
  const size_t per_chunk = GENERATE(1u, 2u, 3u, 100u);
  CAPTURE(per_chunk);
  WriterOptions options;
  options.max_records_per_chunk = per_chunk;
  MemoryTrace trace(options);
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  std::vector<KernelRecord> kernels;
  std::vector<ApiCallRecord> calls;
  for (size_t i = 0; i < starts.size(); ++i) {
    KernelRecord k = sampleKernel(writer, static_cast<uint32_t>(i % 2));
    k.start_ns = starts[i];
    k.end_ns = ends[i];
    k.correlation_id = correlations[i];
    writer.add(k);
    kernels.push_back(k);
    ApiCallRecord a = sampleApiCall(static_cast<uint32_t>(i));
    a.start_ns = ends[i];
    a.end_ns = starts[i];
    a.correlation_id = correlations[correlations.size() - 1 - i];
    writer.add(a);
    calls.push_back(a);
  }
  REQUIRE(writer.finish({}));

  ReadResult result = readAll(trace.bytes());
  std::vector<KernelRecord> read_kernels;
  std::vector<ApiCallRecord> read_calls;
  for (const EventBatch& batch : result.batches) {
    CHECK(batch.kernels.size() + batch.api_calls.size() <= per_chunk);
    read_kernels.insert(read_kernels.end(), batch.kernels.begin(), batch.kernels.end());
    read_calls.insert(read_calls.end(), batch.api_calls.begin(), batch.api_calls.end());
  }
  checkSameRecords(read_kernels, kernels);
  checkSameRecords(read_calls, calls);
}

TEST_CASE("max_batch_bytes also ends a chunk", "[format][roundtrip]") {
  WriterOptions options = uncompressed();
  options.max_batch_bytes = 2'048;
  MemoryTrace trace(options);
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  std::vector<MemcpyRecord> copies;
  for (uint32_t i = 0; i < 300; ++i) {
    copies.push_back(sampleMemcpy(i));
    writer.add(copies.back());
  }
  REQUIRE(writer.finish({}));

  const std::vector<ChunkView> chunks = splitChunks(trace.bytes());
  REQUIRE(chunks.size() > 10);
  // Every batch chunk but the last went over the limit with its last record, and not by more.
  for (size_t i = 1; i + 2 < chunks.size(); ++i) {
    INFO("chunk " << i);
    CHECK(chunks[i].header.raw_size >= 2'048);
    CHECK(chunks[i].header.raw_size < 2'048 + 100);
  }
  ReadResult result = readAll(trace.bytes());
  CHECK(result.batches.size() == chunks.size() - 2);
  std::vector<MemcpyRecord> read_back;
  for (const EventBatch& batch : result.batches)
    read_back.insert(read_back.end(), batch.memcpys.begin(), batch.memcpys.end());
  checkSameRecords(read_back, copies);
}

TEST_CASE("interned strings get one id each and resolve through the reader's string table", "[format][roundtrip]") {
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  const std::vector<std::string> texts = {
      "ncclAllReduce",
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)",
      std::string("embedded\0zero", 13),
      "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",  // UTF-8 text
      std::string(100'000, 'x'),
      " ",
  };
  CHECK(writer.intern("") == 0);
  std::vector<StringId> ids;
  for (const std::string& text : texts) ids.push_back(writer.intern(text));
  for (size_t i = 0; i < texts.size(); ++i) {
    CHECK(ids[i] == i + 1);                  // ids are handed out in order, from 1
    CHECK(writer.intern(texts[i]) == ids[i]);  // and the same text keeps its id
  }
  // A string interned after the last record is still written (in a batch of its own at finish).
  writer.add(sampleMemcpy(0));
  REQUIRE(writer.flush());
  const StringId late = writer.intern("interned after the last record");
  REQUIRE(writer.finish({}));

  TraceReader reader("strings.gxt", trace.bytes());
  EventBatch batch;
  while (reader.next(batch)) {
  }
  const StringTable& table = reader.strings();
  CHECK(table.size() == texts.size() + 1);
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO("string id " << ids[i]);
    CHECK(table.contains(ids[i]));
    CHECK(table.get(ids[i]) == texts[i]);
  }
  CHECK(table.get(late) == "interned after the last record");
  CHECK(table.get(0).empty());
  CHECK_FALSE(table.contains(late + 1));
  CHECK(table.get(late + 1) == "<missing string " + std::to_string(late + 1) + ">");
}

TEST_CASE("API functions are defined once per (domain, cbid), in the chunk where they were first named",
          "[format][roundtrip]") {
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  writer.defineApiFunction(ApiDomain::kDriver, 17, "cuLaunchKernel");
  writer.defineApiFunction(ApiDomain::kRuntime, 17, "cudaLaunchKernel");  // same cbid, other domain
  writer.defineApiFunction(ApiDomain::kDriver, 17, "ignored: already defined");
  writer.add(sampleApiCall(0));
  REQUIRE(writer.flush());
  writer.defineApiFunction(ApiDomain::kRuntime, 211, "cudaMemcpyAsync");
  writer.defineApiFunction(ApiDomain::kRuntime, 17, "ignored: defined in an earlier chunk");
  writer.add(sampleApiCall(1));
  REQUIRE(writer.finish({}));

  TraceReader reader("api.gxt", trace.bytes());
  ReadResult result = readAll(reader);
  REQUIRE(result.batches.size() == 2);
  const std::vector<ApiFunction> first = {{ApiDomain::kDriver, 17, 1}, {ApiDomain::kRuntime, 17, 2}};
  const std::vector<ApiFunction> second = {{ApiDomain::kRuntime, 211, 3}};
  CHECK(result.batches[0].api_functions == first);
  CHECK(result.batches[1].api_functions == second);
  CHECK(reader.strings().get(1) == "cuLaunchKernel");
  CHECK(reader.strings().get(2) == "cudaLaunchKernel");
  CHECK(reader.strings().get(3) == "cudaMemcpyAsync");
  CHECK(reader.strings().size() == 3);  // the ignored names were never interned
}

TEST_CASE("the trailer has the writer's written counts and the capture's dropped counts", "[format][roundtrip]") {
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  for (uint32_t i = 0; i < 3; ++i) writer.add(sampleKernel(writer, i));
  REQUIRE(writer.flush());
  for (uint32_t i = 0; i < 2; ++i) writer.add(sampleMemcpy(i));
  writer.add(sampleStream(0));
  for (uint32_t i = 0; i < 5; ++i) writer.add(sampleClockAnchor(i));  // not a counted category
  REQUIRE(writer.finish(sampleTrailer()));

  CHECK(writer.written(Category::kKernel) == 3);
  CHECK(writer.written(Category::kMemcpy) == 2);
  CHECK(writer.written(Category::kStream) == 1);
  CHECK(writer.written(Category::kNvtx) == 0);

  ReadResult result = readAll(trace.bytes());
  REQUIRE(result.trailer.has_value());
  const Trailer given = sampleTrailer();
  Trailer expected = given;
  // In category order, only categories with something written or dropped; the bogus written count
  // passed for kernels is replaced, the two NVTX entries add up, kUnknown is never listed.
  expected.counts = {
      {Category::kKernel, 3, 12},
      {Category::kMemcpy, 2, 0},
      {Category::kNvtx, 0, 7},
      {Category::kNetTransfer, 0, 8'589'934'592ull},
      {Category::kStream, 1, 0},
  };
  CHECK(*result.trailer == expected);
  CHECK(expectedTrailer(given, countAll(result.batches)) == expected);
}

TEST_CASE("a file without a trailer reads to its end, with no trailer and no warnings", "[format][roundtrip]") {
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  const EventBatch expected = addSampleBatch(writer, 0);
  REQUIRE(writer.flush());  // the capture died after this chunk: no finish()

  TraceReader reader("no_trailer.gxt", trace.bytes());
  EventBatch batch;
  REQUIRE(reader.next(batch));
  checkSameBatch(batch, expected);
  CHECK_FALSE(reader.next(batch));
  CHECK_FALSE(reader.trailer().has_value());
  CHECK(reader.warnings().empty());
  CHECK_FALSE(reader.stats().torn_at.has_value());
}

TEST_CASE("a file with a header and a trailer only has no batches", "[format][roundtrip]") {
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  REQUIRE(writer.writeHeader(sampleHeader()));
  Trailer given;
  given.end = CaptureEnd::kProcessExit;
  given.end_time_ns = 99;
  REQUIRE(writer.finish(given));
  CHECK(writer.chunksWritten() == 2);

  ReadResult result = readAll(trace.bytes());
  CHECK(result.batches.empty());
  REQUIRE(result.trailer.has_value());
  CHECK(*result.trailer == given);  // no counts: nothing written or dropped
}

TEST_CASE("the writer takes nothing before the header or after finish() and counts it as lost",
          "[format][roundtrip]") {
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  writer.add(sampleMemcpy(0));
  CHECK(writer.lost() == 1);
  REQUIRE(writer.writeHeader(sampleHeader()));
  CHECK_FALSE(writer.writeHeader(sampleHeader()));  // only once
  writer.add(sampleMemcpy(1));
  REQUIRE(writer.finish({}));
  CHECK_FALSE(writer.finish({}));
  writer.add(sampleMemcpy(2));
  CHECK(writer.lost() == 2);
  CHECK(writer.written(Category::kMemcpy) == 1);

  ReadResult result = readAll(trace.bytes());
  REQUIRE(result.batches.size() == 1);
  CHECK(result.batches[0].memcpys == std::vector<MemcpyRecord>{sampleMemcpy(1)});
}

TEST_CASE("FileSink writes a file that TraceReader reads by path", "[format][roundtrip]") {
  TempDir dir;
  const std::string path = dir / "rank0.gxt";
  auto sink = std::make_unique<FileSink>(path);
  REQUIRE(sink->ok());
  TraceWriter writer(std::move(sink));
  REQUIRE(writer.writeHeader(sampleHeader()));
  std::vector<EventBatch> expected;
  expected.push_back(addSampleBatch(writer, 0));
  REQUIRE(writer.flush());
  expected.push_back(addSampleBatch(writer, 1));
  REQUIRE(writer.finish(sampleTrailer()));
  CHECK_FALSE(writer.failed());

  TraceReader reader(path);
  CHECK(reader.path() == path);
  ReadResult result = readAll(reader);
  CHECK(result.stats.file_bytes == writer.bytesWritten());
  CHECK(result.header == sampleHeader());
  REQUIRE(result.batches.size() == 2);
  checkSameBatch(result.batches[0], expected[0]);
  checkSameBatch(result.batches[1], expected[1]);
  REQUIRE(result.trailer.has_value());
  CHECK(*result.trailer == expectedTrailer(sampleTrailer(), countAll(expected)));
  CHECK(result.warnings.empty());
}

}  // namespace

namespace {

TEST_CASE("strings that are not UTF-8 are written with U+FFFD in their place, and the file stays readable",
          "[format][roundtrip]") {
  // A parser drops the whole chunk when a string field is not valid UTF-8; but command lines, host
  // names and NVTX or kernel names are whatever bytes the application passed. Each byte that does
  // not belong to a valid UTF-8 sequence is written as U+FFFD.
  const std::string fffd = "\xef\xbf\xbd";
  struct Case {
    std::string written, read;
  };
  const std::vector<Case> cases = {
      {"caf\xe9.py", "caf" + fffd + ".py"},                           // Latin-1
      {"\xc0\x80", fffd + fffd},                                      // overlong encoding of NUL
      {"\xed\xa0\x80", fffd + fffd + fffd},                           // a UTF-16 surrogate
      {"\xf4\x90\x80\x80", fffd + fffd + fffd + fffd},                // above U+10FFFF
      {"cut \xe2\x82", "cut " + fffd + fffd},                         // a sequence cut short
      {"\xe2\x82\xac \xf0\x9f\x98\x80 ok", "\xe2\x82\xac \xf0\x9f\x98\x80 ok"},  // valid: unchanged
  };
  MemoryTrace trace;
  TraceWriter& writer = trace.writer();
  FileHeader header = sampleHeader();
  header.hostname = "node\xff";
  for (const Case& c : cases) header.command_line.push_back(c.written);
  REQUIRE(writer.writeHeader(header));
  std::vector<StringId> ids;
  for (const Case& c : cases) ids.push_back(writer.intern(c.written));
  NvtxEventRecord range = sampleNvtxEvent(writer, 0);
  range.name_id = ids[0];
  writer.add(range);
  REQUIRE(writer.finish({}));

  TraceReader reader("utf8.gxt", trace.bytes());
  CHECK(reader.header().hostname == "node" + fffd);
  REQUIRE(reader.header().command_line.size() == sampleHeader().command_line.size() + cases.size());
  const size_t first = sampleHeader().command_line.size();
  for (size_t i = 0; i < cases.size(); ++i) CHECK(reader.header().command_line[first + i] == cases[i].read);
  // The device UUID is a bytes field: its raw bytes (not UTF-8) are kept as they are.
  CHECK(reader.header().devices == header.devices);

  ReadResult result = readAll(reader);
  REQUIRE(result.batches.size() == 1);
  CHECK(result.batches[0].nvtx_events == std::vector<NvtxEventRecord>{range});
  for (size_t i = 0; i < cases.size(); ++i) CHECK(reader.strings().get(ids[i]) == cases[i].read);
  CHECK(result.warnings.empty());
}

}  // namespace
