#include "proto/column_decoder.h"

#include <algorithm>
#include <array>

#include "proto/gpuxray.pb.h"
#include "proto/wire_decoder.h"

namespace gpuxray::format {
namespace {

// Each column's packed bytes by field number (empty when the column is).
using ColumnBytes = std::array<std::span<const uint8_t>, 16>;

// False when a column is not packed once: the form the writer and libprotobuf write, and the only one
// decoded here. Fields past `last_column` are a newer version's, skipped as libprotobuf skips them.
bool collectColumns(std::span<const uint8_t> message, uint64_t last_column, ColumnBytes& columns) {
  static_assert(std::tuple_size_v<ColumnBytes> > pb::KernelColumns::kGraphNodeIdFieldNumber);
  std::array<bool, std::tuple_size_v<ColumnBytes>> seen{};
  bool packed_once = true;
  bool message_bytes =
      forEachField(message, [&](uint64_t number, uint64_t wire_type, std::span<const uint8_t> value, auto) {
        if (number > last_column) return;
        if (number == 0 || wire_type != 2 || seen[number]) {
          packed_once = false;
          return;
        }
        seen[number] = true;
        columns[number] = value;
      });
  return message_bytes && packed_once;
}

// A column read value by value beside the others, so that each record is written once, in one pass.
class Cursor {
 public:
  explicit Cursor(std::span<const uint8_t> column)
      : p_(column.data()), end_(column.data() + column.size()), present_(!column.empty()) {}

  // The next value, 0 throughout a column left out. False at a malformed value or past the last.
  bool next(uint64_t& value) {
    value = 0;
    return !present_ || readVarint(p_, end_, value);
  }
  bool finished() const { return p_ == end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  bool present_;
};

// Why columns did not decode row by row: a malformed value, or a column of another length.
ColumnsDecoded whyNotDecoded(const ColumnBytes& columns) {
  for (std::span<const uint8_t> column : columns) {
    if (column.empty()) continue;
    const uint8_t* p = column.data();
    const uint8_t* end = p + column.size();
    uint64_t value;
    while (p < end)
      if (!readVarint(p, end, value)) return ColumnsDecoded::kUnusual;
  }
  return ColumnsDecoded::kLengthsDiffer;
}

uint64_t endOf(uint64_t start, uint64_t zigzag_duration) {
  return start + static_cast<uint64_t>(unzigzag(zigzag_duration));
}

// False when a column is malformed or of another length than `kernels`.
bool decodeKernelRows(const ColumnBytes& bytes, const IdMap<KernelRecord>& configured,
                      std::vector<KernelRecord>& kernels, uint64_t& unresolved) {
  using Field = pb::KernelColumns;
  static const KernelRecord kUnconfigured;
  Cursor config_id(bytes[Field::kConfigIdFieldNumber]), start_delta(bytes[Field::kStartDeltaNsFieldNumber]),
      duration(bytes[Field::kDurationNsFieldNumber]), correlation_delta(bytes[Field::kCorrelationDeltaFieldNumber]),
      device(bytes[Field::kDeviceFieldNumber]), stream(bytes[Field::kStreamFieldNumber]),
      context(bytes[Field::kContextFieldNumber]), graph_id(bytes[Field::kGraphIdFieldNumber]),
      graph_node_id(bytes[Field::kGraphNodeIdFieldNumber]);
  uint64_t start = 0;
  uint32_t correlation = 0;
  for (KernelRecord& r : kernels) {
    uint64_t id, start_value, duration_value, correlation_value, device_value, stream_value, context_value, graph_value,
        node_value;
    if (!(config_id.next(id) && start_delta.next(start_value) && duration.next(duration_value) &&
          correlation_delta.next(correlation_value) && device.next(device_value) && stream.next(stream_value) &&
          context.next(context_value) && graph_id.next(graph_value) && graph_node_id.next(node_value)))
      return false;
    // The configuration sets the whole record, the kernel's own columns then theirs.
    const KernelRecord* kernel = configured.find(static_cast<uint32_t>(id));
    if (kernel == nullptr) ++unresolved;
    r = kernel != nullptr ? *kernel : kUnconfigured;
    start += static_cast<uint64_t>(unzigzag(start_value));
    correlation += static_cast<uint32_t>(unzigzag(correlation_value));
    r.start_ns = start;
    r.end_ns = endOf(start, duration_value);
    r.correlation_id = correlation;
    r.device = static_cast<uint32_t>(device_value);
    r.stream = static_cast<uint32_t>(stream_value);
    r.context = static_cast<uint32_t>(context_value);
    r.graph_id = static_cast<uint32_t>(graph_value);
    r.graph_node_id = node_value;
  }
  return config_id.finished() && start_delta.finished() && duration.finished() && correlation_delta.finished() &&
         device.finished() && stream.finished() && context.finished() && graph_id.finished() &&
         graph_node_id.finished();
}

bool decodeApiCallRows(const ColumnBytes& bytes, std::vector<ApiCallRecord>& calls) {
  using Field = pb::ApiCallColumns;
  Cursor start_delta(bytes[Field::kStartDeltaNsFieldNumber]), duration(bytes[Field::kDurationNsFieldNumber]),
      correlation_delta(bytes[Field::kCorrelationDeltaFieldNumber]), domain(bytes[Field::kDomainFieldNumber]),
      cbid(bytes[Field::kCbidFieldNumber]), thread_id(bytes[Field::kThreadIdFieldNumber]),
      return_code(bytes[Field::kReturnCodeFieldNumber]), process_id(bytes[Field::kProcessIdFieldNumber]);
  uint64_t start = 0;
  uint32_t correlation = 0;
  for (ApiCallRecord& r : calls) {
    uint64_t start_value, duration_value, correlation_value, domain_value, cbid_value, thread_value, code_value,
        process_value;
    if (!(start_delta.next(start_value) && duration.next(duration_value) && correlation_delta.next(correlation_value) &&
          domain.next(domain_value) && cbid.next(cbid_value) && thread_id.next(thread_value) &&
          return_code.next(code_value) && process_id.next(process_value)))
      return false;
    start += static_cast<uint64_t>(unzigzag(start_value));
    correlation += static_cast<uint32_t>(unzigzag(correlation_value));
    r.start_ns = start;
    r.end_ns = endOf(start, duration_value);
    r.domain = static_cast<ApiDomain>(static_cast<uint32_t>(domain_value));
    r.cbid = static_cast<uint32_t>(cbid_value);
    r.thread_id = thread_value;
    r.correlation_id = correlation;
    r.return_code = static_cast<uint32_t>(code_value);
    r.process_id = static_cast<uint32_t>(process_value);
  }
  return start_delta.finished() && duration.finished() && correlation_delta.finished() && domain.finished() &&
         cbid.finished() && thread_id.finished() && return_code.finished() && process_id.finished();
}

}  // namespace

ColumnsRead decodeKernelColumns(std::span<const uint8_t> columns, const IdMap<KernelRecord>& configured,
                                std::vector<KernelRecord>& kernels, uint64_t& unresolved) {
  ColumnBytes bytes;
  if (!collectColumns(columns, pb::KernelColumns::kGraphNodeIdFieldNumber, bytes)) return {ColumnsDecoded::kUnusual};
  uint64_t records = varintsIn(bytes[pb::KernelColumns::kStartDeltaNsFieldNumber]);
  kernels.resize(records);
  uint64_t missing = 0;
  if (decodeKernelRows(bytes, configured, kernels, missing)) {
    unresolved += missing;
    return {ColumnsDecoded::kOk, records};
  }
  kernels.clear();
  return {whyNotDecoded(bytes), records};
}

ColumnsRead decodeApiCallColumns(std::span<const uint8_t> columns, std::vector<ApiCallRecord>& calls) {
  ColumnBytes bytes;
  if (!collectColumns(columns, pb::ApiCallColumns::kProcessIdFieldNumber, bytes)) return {ColumnsDecoded::kUnusual};
  uint64_t records = varintsIn(bytes[pb::ApiCallColumns::kStartDeltaNsFieldNumber]);
  calls.resize(records);
  if (decodeApiCallRows(bytes, calls)) return {ColumnsDecoded::kOk, records};
  calls.clear();
  return {whyNotDecoded(bytes), records};
}

bool splitBatch(std::span<const uint8_t> chunk, SplitBatch& split) {
  std::span<const uint8_t> batch;
  int fields = 0;
  bool chunk_bytes =
      forEachField(chunk, [&](uint64_t number, uint64_t wire_type, std::span<const uint8_t> value, auto) {
        fields += number == pb::Chunk::kBatchFieldNumber && wire_type == 2 ? 1 : 2;
        batch = value;
      });
  if (!chunk_bytes || fields != 1) return false;

  split.rest.clear();
  split.kernels = {};
  split.api_calls = {};
  bool columns_once = true;
  bool kernels_seen = false, api_calls_seen = false;
  bool batch_bytes = forEachField(
      batch, [&](uint64_t number, uint64_t wire_type, std::span<const uint8_t> value, std::span<const uint8_t> field) {
        bool kernels = number == pb::EventBatch::kKernelsFieldNumber;
        bool api_calls = number == pb::EventBatch::kApiCallsFieldNumber;
        if (!kernels && !api_calls) {
          split.rest.insert(split.rest.end(), field.begin(), field.end());
          return;
        }
        bool& seen = kernels ? kernels_seen : api_calls_seen;
        // libprotobuf merges a message field that comes twice.
        columns_once = columns_once && wire_type == 2 && !seen;
        seen = true;
        (kernels ? split.kernels : split.api_calls) = value;
      });
  return batch_bytes && columns_once;
}

}  // namespace gpuxray::format
