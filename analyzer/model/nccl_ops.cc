#include "analyzer/model/nccl_ops.h"

namespace gpuxray::model {
namespace {

int64_t asSigned(uint64_t v) {
  return static_cast<int64_t>(v);
}
uint64_t asUnsigned(int64_t v) {
  return static_cast<uint64_t>(v);
}

}  // namespace

PackedNcclOps::PackedNcclOps(const std::vector<NcclOp>& ops) {
  auto description = [](const NcclOp& op) {
    return Description{op.kind,  op.comm_hash, op.func_id, op.algorithm_id, op.protocol_id, op.datatype_id,
                       op.bytes, op.count,     op.root,    op.peer,         op.channels,    op.device};
  };
  description_of_ = internedField(ops, description, descriptions_);
  seq_ = packedField(ops, [](const NcclOp& op) { return asSigned(op.seq); });
  enqueue_ns_ = packedField(ops, [](const NcclOp& op) { return op.enqueue_ns; });
  gpu_start_after_enqueue_ns_ =
      packedField(ops, [](const NcclOp& op) { return differenceOf(op.gpu_start_ns, op.enqueue_ns); });
  gpu_duration_ns_ = packedField(ops, [](const NcclOp& op) { return differenceOf(op.gpu_end_ns, op.gpu_start_ns); });
  operation_id_ = packedField(ops, [](const NcclOp& op) { return asSigned(op.operation_id); });
  gpu_clock_error_ns_ = packedField(ops, [](const NcclOp& op) { return asSigned(op.gpu_clock_error_ns); });
}

NcclOp PackedNcclOps::operator[](size_t i) const {
  const Description& d = descriptions_[static_cast<size_t>(description_of_[i])];
  NcclOp op;
  op.kind = d.kind;
  op.comm_hash = d.comm_hash;
  op.seq = asUnsigned(seq_[i]);
  op.func_id = d.func_id, op.algorithm_id = d.algorithm_id, op.protocol_id = d.protocol_id;
  op.datatype_id = d.datatype_id;
  op.enqueue_ns = enqueue_ns_[i];
  op.gpu_start_ns = plusDifference(op.enqueue_ns, gpu_start_after_enqueue_ns_[i]);
  op.gpu_end_ns = plusDifference(op.gpu_start_ns, gpu_duration_ns_[i]);
  op.bytes = d.bytes, op.count = d.count;
  op.root = d.root, op.peer = d.peer;
  op.channels = d.channels, op.device = d.device;
  op.operation_id = asUnsigned(operation_id_[i]);
  op.gpu_clock_error_ns = asUnsigned(gpu_clock_error_ns_[i]);
  return op;
}

size_t PackedNcclOps::bytes() const {
  return descriptions_.capacity() * sizeof(Description) + description_of_.bytes() + seq_.bytes() + enqueue_ns_.bytes() +
         gpu_start_after_enqueue_ns_.bytes() + gpu_duration_ns_.bytes() + operation_id_.bytes() +
         gpu_clock_error_ns_.bytes();
}

}  // namespace gpuxray::model
