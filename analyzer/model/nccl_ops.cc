#include "analyzer/model/nccl_ops.h"

#include <map>

namespace gpuxray::model {
namespace {

int64_t asSigned(uint64_t v) { return static_cast<int64_t>(v); }
uint64_t asUnsigned(int64_t v) { return static_cast<uint64_t>(v); }

template <typename Field>
PackedColumn packedField(const std::vector<NcclOp>& ops, Field field) {
  std::vector<int64_t> column(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) column[i] = field(ops[i]);
  return PackedColumn(column);
}

}  // namespace

NcclOp NcclOps::operator[](size_t i) const {
  if (!packed_) return plain_[i];
  const Description& d = descriptions_[description_of_[i]];
  NcclOp op;
  op.kind = d.kind;
  op.comm_hash = d.comm_hash;
  op.seq = asUnsigned(seq_[i]);
  op.func_id = d.func_id, op.algorithm_id = d.algorithm_id, op.protocol_id = d.protocol_id;
  op.datatype_id = d.datatype_id;
  op.enqueue_ns = enqueue_ns_[i], op.gpu_start_ns = gpu_start_ns_[i], op.gpu_end_ns = gpu_end_ns_[i];
  op.bytes = d.bytes, op.count = d.count;
  op.root = d.root, op.peer = d.peer;
  op.channels = d.channels, op.device = d.device;
  op.operation_id = asUnsigned(operation_id_[i]);
  op.gpu_clock_error_ns = asUnsigned(gpu_clock_error_ns_[i]);
  return op;
}

std::vector<NcclOp> NcclOps::values() const {
  if (!packed_) return plain_;
  std::vector<NcclOp> all;
  all.reserve(size());
  for (size_t i = 0; i < size(); ++i) all.push_back((*this)[i]);
  return all;
}

void NcclOps::push_back(const NcclOp& op) {
  unpack();
  plain_.push_back(op);
}

void NcclOps::pack() {
  if (packed_) return;
  std::map<Description, uint32_t> known;
  description_of_.reserve(plain_.size());
  for (const NcclOp& op : plain_) {
    Description d{op.kind,  op.comm_hash, op.func_id, op.algorithm_id, op.protocol_id, op.datatype_id,
                  op.bytes, op.count,     op.root,    op.peer,         op.channels,     op.device};
    auto [it, added] = known.emplace(d, static_cast<uint32_t>(descriptions_.size()));
    if (added) descriptions_.push_back(d);
    description_of_.push_back(it->second);
  }
  descriptions_.shrink_to_fit();
  seq_ = packedField(plain_, [](const NcclOp& op) { return asSigned(op.seq); });
  enqueue_ns_ = packedField(plain_, [](const NcclOp& op) { return op.enqueue_ns; });
  gpu_start_ns_ = packedField(plain_, [](const NcclOp& op) { return op.gpu_start_ns; });
  gpu_end_ns_ = packedField(plain_, [](const NcclOp& op) { return op.gpu_end_ns; });
  operation_id_ = packedField(plain_, [](const NcclOp& op) { return asSigned(op.operation_id); });
  gpu_clock_error_ns_ = packedField(plain_, [](const NcclOp& op) { return asSigned(op.gpu_clock_error_ns); });
  packed_size_ = plain_.size();
  packed_ = true;
  std::vector<NcclOp>().swap(plain_);
}

void NcclOps::unpack() {
  if (!packed_) return;
  plain_ = values();
  packed_ = false;
  packed_size_ = 0;
  std::vector<Description>().swap(descriptions_);
  std::vector<uint32_t>().swap(description_of_);
  seq_ = enqueue_ns_ = gpu_start_ns_ = gpu_end_ns_ = operation_id_ = gpu_clock_error_ns_ = PackedColumn();
}

size_t NcclOps::bytes() const {
  return plain_.capacity() * sizeof(NcclOp) + descriptions_.capacity() * sizeof(Description) +
         description_of_.capacity() * sizeof(uint32_t) + seq_.bytes() + enqueue_ns_.bytes() + gpu_start_ns_.bytes() +
         gpu_end_ns_.bytes() + operation_id_.bytes() + gpu_clock_error_ns_.bytes();
}

}  // namespace gpuxray::model
