// A rank's NCCL operations (model::NcclOp), packed in a skeleton to a few bytes an operation
// instead of 112: what describes an operation (kind, communicator, function, algorithm, protocol,
// data type, sizes, root, peer, channels, device) is held once however many operations share it,
// and what differs from one to the next (sequence number, times, operation id, clock error) as
// packed columns.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "analyzer/model/packable_records.h"
#include "analyzer/model/packed_column.h"
#include "proto/records.h"

namespace gpuxray::model {

struct NcclOp {
  format::NcclOperationKind kind = format::NcclOperationKind::kUnknown;
  uint64_t comm_hash = 0;
  uint64_t seq = 0;
  uint32_t func_id = 0;
  uint32_t algorithm_id = 0;
  uint32_t protocol_id = 0;
  uint32_t datatype_id = 0;
  int64_t enqueue_ns = 0;
  int64_t gpu_start_ns = 0;  // 0: no GPU times
  int64_t gpu_end_ns = 0;
  uint64_t bytes = 0;
  uint64_t count = 0;
  int32_t root = 0;
  int32_t peer = 0;
  uint32_t channels = 0;
  uint32_t device = 0;
  uint64_t operation_id = 0;
  uint64_t gpu_clock_error_ns = 0;
  bool hasGpuTimes() const { return gpu_start_ns != 0 && gpu_end_ns >= gpu_start_ns; }
};

class PackedNcclOps {
 public:
  PackedNcclOps() = default;
  explicit PackedNcclOps(const std::vector<NcclOp>& ops);
  size_t size() const { return description_of_.size(); }
  NcclOp operator[](size_t i) const;
  size_t bytes() const;

 private:
  struct Description {
    format::NcclOperationKind kind = format::NcclOperationKind::kUnknown;
    uint64_t comm_hash = 0;
    uint32_t func_id = 0, algorithm_id = 0, protocol_id = 0, datatype_id = 0;
    uint64_t bytes = 0, count = 0;
    int32_t root = 0, peer = 0;
    uint32_t channels = 0, device = 0;
    auto operator<=>(const Description&) const = default;
  };
  std::vector<Description> descriptions_;
  PackedColumn description_of_;  // per operation: its index into descriptions_
  // The GPU times as differences (from the enqueue, from the GPU start): a few microseconds, about a millisecond.
  PackedColumn seq_, enqueue_ns_, gpu_start_after_enqueue_ns_, gpu_duration_ns_, operation_id_, gpu_clock_error_ns_;
};

using NcclOps = PackableRecords<NcclOp, PackedNcclOps>;

}  // namespace gpuxray::model
