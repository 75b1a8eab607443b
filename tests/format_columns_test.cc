// The kernel and API-call columns, which the reader decodes itself rather than through libprotobuf:
// every form of them that libprotobuf accepts reads as the packed form the writer writes, columns of
// different lengths lose their batch's kernels or calls alone, and a malformed column loses its chunk.

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "proto/file_layout.h"
#include "proto/gpuxray.pb.h"
#include "proto/trace_reader.h"
#include "proto/wire_encoder.h"
#include "tests/support/record_printing.h"
#include "tests/support/trace_files.h"

namespace {

using namespace gpuxray::format;
using namespace gpuxray::testing;
using E = WireEncoder;

// How a batch writes its columns: as the writer and libprotobuf do (packed, once), or in a form only
// other writers produce, which libprotobuf reads just the same.
enum class Form { kPacked, kUnpacked, kColumnsInTwoParts, kColumnMessagesTwice };

struct Column {
  uint32_t field;
  std::vector<uint64_t> values;  // as on the wire (signed ones zigzagged)
};

uint64_t zigzag(int64_t value) {
  return (static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63);
}

void writeColumn(E& message, const Column& column, size_t from, size_t to, Form form) {
  std::vector<uint64_t> values(column.values.begin() + static_cast<long>(from),
                               column.values.begin() + static_cast<long>(to));
  if (form == Form::kUnpacked) {
    for (uint64_t v : values) {
      message.tag(column.field, E::kVarint);
      message.varint(v);
    }
  } else if (form == Form::kColumnsInTwoParts) {
    size_t half = values.size() / 2;
    message.packedUintField(column.field,
                            std::vector<uint64_t>(values.begin(), values.begin() + static_cast<long>(half)));
    message.packedUintField(column.field,
                            std::vector<uint64_t>(values.begin() + static_cast<long>(half), values.end()));
  } else {
    message.packedUintField(column.field, values);
  }
}

// The batch's column message (field `message_field`), once or in two messages that libprotobuf merges.
void writeColumns(E& batch, uint32_t message_field, const std::vector<Column>& columns, Form form) {
  if (form == Form::kColumnMessagesTwice) {
    batch.message(message_field, [&](E& m) {
      for (const Column& c : columns) writeColumn(m, c, 0, 1, Form::kPacked);
    });
    batch.message(message_field, [&](E& m) {
      for (const Column& c : columns) writeColumn(m, c, 1, c.values.size(), Form::kPacked);
    });
    return;
  }
  batch.message(message_field, [&](E& m) {
    for (const Column& c : columns) writeColumn(m, c, 0, c.values.size(), form);
  });
}

std::vector<uint8_t> fileWithBatch(const E& batch) {
  std::vector<uint8_t> file;
  auto preamble = encodePreamble({static_cast<uint16_t>(kFormatMajor), static_cast<uint16_t>(kFormatMinor)});
  file.insert(file.end(), preamble.begin(), preamble.end());
  auto append = [&](const E& payload) {
    auto header = encodeChunkHeader(Codec::kNone, static_cast<uint32_t>(payload.size()), payload.bytes());
    file.insert(file.end(), header.begin(), header.end());
    file.insert(file.end(), payload.bytes().begin(), payload.bytes().end());
  };
  E header;
  header.message(pb::Chunk::kHeaderFieldNumber,
                 [](E& h) { h.uintField(pb::FileHeader::kFormatMajorFieldNumber, kFormatMajor); });
  append(header);
  append(batch);
  return file;
}

using K = pb::KernelColumns;
using A = pb::ApiCallColumns;

std::vector<Column> kernelColumns() {
  return {{K::kStartDeltaNsFieldNumber, {zigzag(1'000), zigzag(50), zigzag(-30)}},
          {K::kDurationNsFieldNumber, {zigzag(40), zigzag(30), zigzag(20)}},
          {K::kDeviceFieldNumber, {0, 0, 1}},
          {K::kStreamFieldNumber, {7, 7, 9}},
          {K::kCorrelationDeltaFieldNumber, {zigzag(10), zigzag(2), zigzag(-1)}},
          {K::kConfigIdFieldNumber, {1, 1, 2}},
          {K::kGraphNodeIdFieldNumber, {0, 0, uint64_t{1} << 40}}};
}

std::vector<Column> apiCallColumns() {
  return {{A::kStartDeltaNsFieldNumber, {zigzag(900), zigzag(60), zigzag(60)}},
          {A::kDurationNsFieldNumber, {zigzag(30), zigzag(20), zigzag(10)}},
          {A::kDomainFieldNumber, {1, 1, 2}},
          {A::kCbidFieldNumber, {211, 211, 13}},
          {A::kThreadIdFieldNumber, {123'456'789'012, 123'456'789'012, 7}},
          {A::kCorrelationDeltaFieldNumber, {zigzag(10), zigzag(2), zigzag(-1)}},
          {A::kReturnCodeFieldNumber, {0, 2, 0}}};
}

E batchChunk(Form form, const std::vector<Column>& kernels, const std::vector<Column>& calls) {
  E chunk;
  chunk.message(pb::Chunk::kBatchFieldNumber, [&](E& b) {
    for (uint32_t id : {1u, 2u}) {
      b.message(pb::EventBatch::kKernelConfigsFieldNumber, [&](E& c) {
        c.uintField(pb::KernelConfig::kIdFieldNumber, id);
        c.uintField(pb::KernelConfig::kGridXFieldNumber, 100 * id);
        c.uintField(pb::KernelConfig::kBlockXFieldNumber, 128);
      });
    }
    writeColumns(b, pb::EventBatch::kKernelsFieldNumber, kernels, form);
    writeColumns(b, pb::EventBatch::kApiCallsFieldNumber, calls, form);
    b.message(pb::EventBatch::kMemcpysFieldNumber, [](E& m) { m.uintField(pb::Memcpy::kBytesFieldNumber, 4'096); });
  });
  return chunk;
}

TEST_CASE("kernel and API-call columns read alike in every form libprotobuf accepts", "[format][columns]") {
  ReadResult packed = readAll(fileWithBatch(batchChunk(Form::kPacked, kernelColumns(), apiCallColumns())));
  REQUIRE(packed.warnings.empty());
  REQUIRE(packed.batches.size() == 1);
  const EventBatch& batch = packed.batches[0];
  REQUIRE(batch.kernels.size() == 3);
  CHECK(batch.kernels[1].start_ns == 1'050);
  CHECK(batch.kernels[2].start_ns == 1'020);
  CHECK(batch.kernels[2].end_ns == 1'040);
  CHECK(batch.kernels[2].correlation_id == 11);
  CHECK(batch.kernels[2].stream == 9);
  CHECK(batch.kernels[2].device == 1);
  CHECK(batch.kernels[2].graph_node_id == uint64_t{1} << 40);
  CHECK(batch.kernels[2].grid_x == 200);
  CHECK(batch.kernels[0].grid_x == 100);
  CHECK(batch.kernels[0].block_x == 128);
  CHECK(batch.kernels[0].config_id.value == 1);
  REQUIRE(batch.api_calls.size() == 3);
  CHECK(batch.api_calls[2].start_ns == 1'020);
  CHECK(batch.api_calls[2].end_ns == 1'030);
  CHECK(batch.api_calls[0].thread_id == 123'456'789'012);
  CHECK(batch.api_calls[1].return_code == 2);
  CHECK(batch.api_calls[2].domain == ApiDomain::kDriver);
  CHECK(batch.api_calls[2].correlation_id == 11);
  CHECK(batch.api_calls[2].process_id == 0);
  CHECK(batch.memcpys.size() == 1);
  CHECK(packed.stats.unresolved_references == 0);

  for (Form form : {Form::kUnpacked, Form::kColumnsInTwoParts, Form::kColumnMessagesTwice}) {
    INFO("form " << static_cast<int>(form));
    ReadResult other = readAll(fileWithBatch(batchChunk(form, kernelColumns(), apiCallColumns())));
    CHECK(other.warnings.empty());
    REQUIRE(other.batches.size() == 1);
    CHECK(other.batches[0].kernels == batch.kernels);
    CHECK(other.batches[0].api_calls == batch.api_calls);
    CHECK(other.batches[0].memcpys == batch.memcpys);
  }
}

TEST_CASE("column values of every varint length, one to ten bytes, read back whole", "[format][columns]") {
  // Values of 1 to 10 bytes as varints, graph node ids as they are; the start column's deltas zigzagged,
  // from the largest negative to the largest positive.
  std::vector<uint64_t> node_ids, start_deltas;
  std::vector<int64_t> deltas;
  for (int bytes = 1; bytes <= 10; ++bytes) {
    uint64_t value = uint64_t{1} << (7 * (bytes - 1));  // the least value that takes `bytes` bytes
    node_ids.push_back(value);
    int64_t delta = bytes % 2 == 0 ? static_cast<int64_t>(value >> 1) : -static_cast<int64_t>(value >> 1) - 1;
    deltas.push_back(delta);
    start_deltas.push_back(zigzag(delta));
  }
  node_ids.back() = ~uint64_t{0};
  E chunk;
  chunk.message(pb::Chunk::kBatchFieldNumber, [&](E& b) {
    b.message(pb::EventBatch::kKernelsFieldNumber, [&](E& m) {
      m.packedUintField(K::kStartDeltaNsFieldNumber, start_deltas);
      m.packedUintField(K::kGraphNodeIdFieldNumber, node_ids);
    });
  });
  ReadResult read = readAll(fileWithBatch(chunk));
  CHECK(read.warnings.empty());
  REQUIRE(read.batches.size() == 1);
  REQUIRE(read.batches[0].kernels.size() == node_ids.size());
  uint64_t start = 0;
  for (size_t i = 0; i < node_ids.size(); ++i) {
    INFO("value " << i);
    start += static_cast<uint64_t>(deltas[i]);
    CHECK(read.batches[0].kernels[i].graph_node_id == node_ids[i]);
    CHECK(read.batches[0].kernels[i].start_ns == start);
    CHECK(read.batches[0].kernels[i].end_ns == start);
  }
}

TEST_CASE("a kernel whose configuration the file does not define counts as unresolved", "[format][columns]") {
  std::vector<Column> kernels = kernelColumns();
  kernels[5].values = {1, 9, 1};
  ReadResult read = readAll(fileWithBatch(batchChunk(Form::kPacked, kernels, apiCallColumns())));
  REQUIRE(read.batches.size() == 1);
  REQUIRE(read.batches[0].kernels.size() == 3);
  CHECK(read.stats.unresolved_references == 1);
  CHECK(read.batches[0].kernels[1].config_id.value == 0);
  CHECK(read.batches[0].kernels[1].grid_x == 0);
  CHECK(read.batches[0].kernels[1].start_ns == 1'050);
  CHECK(read.batches[0].kernels[2].grid_x == 100);
}

TEST_CASE("columns of different lengths lose their batch's kernels or calls, not its other records",
          "[format][columns]") {
  std::vector<Column> kernels = kernelColumns();
  kernels[3].values.push_back(7);  // one stream too many
  std::vector<Column> calls = apiCallColumns();
  calls[2].values.pop_back();  // one domain too few
  for (Form form : {Form::kPacked, Form::kUnpacked}) {
    ReadResult read = readAll(fileWithBatch(batchChunk(form, kernels, calls)));
    REQUIRE(read.batches.size() == 1);
    CHECK(read.batches[0].kernels.empty());
    CHECK(read.batches[0].api_calls.empty());
    CHECK(read.batches[0].memcpys.size() == 1);
    REQUIRE(read.warnings.size() == 2);
    CHECK_THAT(read.warnings[0], Catch::Contains("kernel columns have different lengths; its 3 kernels skipped"));
    CHECK_THAT(read.warnings[1], Catch::Contains("API call columns have different lengths; its 3 calls skipped"));
  }
}

TEST_CASE("a malformed value in a column loses its chunk, as libprotobuf refuses it", "[format][columns]") {
  E chunk;
  chunk.message(pb::Chunk::kBatchFieldNumber, [&](E& b) {
    b.message(pb::EventBatch::kKernelsFieldNumber, [&](E& m) {
      m.packedUintField(K::kStartDeltaNsFieldNumber, std::vector<uint64_t>{zigzag(10), zigzag(20)});
      // A duration column whose last value never ends (its last byte has the continuation bit).
      m.tag(K::kDurationNsFieldNumber, E::kLengthDelimited);
      m.varint(2);
      m.raw(std::vector<uint8_t>{0x04, 0x80});
    });
    b.message(pb::EventBatch::kMemcpysFieldNumber, [](E& m) { m.uintField(pb::Memcpy::kBytesFieldNumber, 1); });
  });
  ReadResult read = readAll(fileWithBatch(chunk));
  CHECK(read.batches.empty());
  CHECK(read.stats.damaged_chunks == 1);
  REQUIRE(read.warnings.size() == 1);
  CHECK_THAT(read.warnings[0], Catch::Contains("passes its checksum but does not decode; skipped"));
}

TEST_CASE("a column a newer minor version adds is skipped", "[format][columns]") {
  E chunk;
  chunk.message(pb::Chunk::kBatchFieldNumber, [&](E& b) {
    b.message(pb::EventBatch::kKernelsFieldNumber, [&](E& m) {
      m.packedUintField(K::kStartDeltaNsFieldNumber, std::vector<uint64_t>{zigzag(10), zigzag(20)});
      m.packedUintField(K::kDurationNsFieldNumber, std::vector<uint64_t>{zigzag(5), zigzag(6)});
      m.packedUintField(K::kGraphNodeIdFieldNumber + 7, std::vector<uint64_t>{1, 2, 3});
      m.uintField(K::kGraphNodeIdFieldNumber + 8, 99);
    });
  });
  ReadResult read = readAll(fileWithBatch(chunk));
  CHECK(read.warnings.empty());
  REQUIRE(read.batches.size() == 1);
  REQUIRE(read.batches[0].kernels.size() == 2);
  CHECK(read.batches[0].kernels[1].start_ns == 30);
  CHECK(read.batches[0].kernels[1].end_ns == 36);
}

// What libprotobuf makes of a batch's columns, by the rules the reader had before it decoded them itself:
// a column is empty or has one value per start value, else the batch has no kernels (calls).
struct Expected {
  std::vector<KernelRecord> kernels;
  std::vector<ApiCallRecord> api_calls;
  uint64_t unresolved = 0;
};

template <typename Column>
bool fits(const Column& column, int count) {
  return column.empty() || column.size() == count;
}

template <typename Column>
auto at(const Column& column, int i) {
  return column.empty() ? typename Column::value_type{} : column[i];
}

Expected expectedOf(const pb::EventBatch& b) {
  Expected e;
  std::map<uint32_t, pb::KernelConfig> configs;
  for (const auto& c : b.kernel_configs())
    if (c.id() != 0) configs.try_emplace(c.id(), c);
  const auto& k = b.kernels();
  int n = k.start_delta_ns_size();
  if (fits(k.duration_ns(), n) && fits(k.device(), n) && fits(k.stream(), n) && fits(k.correlation_delta(), n) &&
      fits(k.config_id(), n) && fits(k.context(), n) && fits(k.graph_id(), n) && fits(k.graph_node_id(), n)) {
    uint64_t start = 0;
    uint32_t correlation = 0;
    for (int i = 0; i < n; ++i) {
      KernelRecord r;
      start += static_cast<uint64_t>(k.start_delta_ns(i));
      correlation += static_cast<uint32_t>(at(k.correlation_delta(), i));
      r.start_ns = start;
      r.end_ns = start + static_cast<uint64_t>(at(k.duration_ns(), i));
      r.device = at(k.device(), i);
      r.stream = at(k.stream(), i);
      r.correlation_id = correlation;
      r.context = at(k.context(), i);
      r.graph_id = at(k.graph_id(), i);
      r.graph_node_id = at(k.graph_node_id(), i);
      auto config = configs.find(at(k.config_id(), i));
      if (config == configs.end()) {
        ++e.unresolved;
      } else {
        const pb::KernelConfig& c = config->second;
        r.config_id.value = c.id();
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
      }
      e.kernels.push_back(r);
    }
  }
  const auto& a = b.api_calls();
  n = a.start_delta_ns_size();
  if (fits(a.duration_ns(), n) && fits(a.domain(), n) && fits(a.cbid(), n) && fits(a.thread_id(), n) &&
      fits(a.correlation_delta(), n) && fits(a.return_code(), n) && fits(a.process_id(), n)) {
    uint64_t start = 0;
    uint32_t correlation = 0;
    for (int i = 0; i < n; ++i) {
      ApiCallRecord r;
      start += static_cast<uint64_t>(a.start_delta_ns(i));
      correlation += static_cast<uint32_t>(at(a.correlation_delta(), i));
      r.start_ns = start;
      r.end_ns = start + static_cast<uint64_t>(at(a.duration_ns(), i));
      r.domain = static_cast<ApiDomain>(at(a.domain(), i));
      r.cbid = at(a.cbid(), i);
      r.thread_id = at(a.thread_id(), i);
      r.correlation_id = correlation;
      r.return_code = at(a.return_code(), i);
      r.process_id = at(a.process_id(), i);
      e.api_calls.push_back(r);
    }
  }
  return e;
}

TEST_CASE("damaged columns read as libprotobuf reads them, byte by byte changed", "[format][columns]") {
  const E chunk = batchChunk(Form::kPacked, kernelColumns(), apiCallColumns());
  const std::vector<uint8_t> intact(chunk.bytes().begin(), chunk.bytes().end());
  std::mt19937 random(13);
  int compared = 0, refused = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<uint8_t> payload = intact;
    int changes = 1 + static_cast<int>(random() % 3);
    for (int c = 0; c < changes; ++c) payload[random() % payload.size()] = static_cast<uint8_t>(random());
    E damaged;
    damaged.raw(payload);
    ReadResult read = readAll(fileWithBatch(damaged));
    pb::Chunk parsed;
    if (!parsed.ParseFromArray(payload.data(), static_cast<int>(payload.size()))) {
      CHECK(read.batches.empty());
      CHECK(read.stats.damaged_chunks == 1);
      ++refused;
      continue;
    }
    if (parsed.content_case() != pb::Chunk::kBatch) continue;
    INFO("trial " << trial);
    CAPTURE(read.warnings, read.stats.damaged_chunks, read.stats.chunks, payload);
    Expected expected = expectedOf(parsed.batch());
    REQUIRE(read.batches.size() == 1);
    CHECK(read.batches[0].kernels == expected.kernels);
    CHECK(read.batches[0].api_calls == expected.api_calls);
    CHECK(read.stats.unresolved_references == expected.unresolved);
    ++compared;
  }
  // Both kinds of outcome were met often.
  CHECK(compared > 5000);
  CHECK(refused > 1000);
}

}  // namespace
