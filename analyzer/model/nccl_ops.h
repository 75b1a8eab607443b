// A rank's NCCL operations, by enqueue time. While a rank is loaded and changed they are a plain
// vector; a skeleton's are packed (pack(), about 30 bytes an operation instead of NcclOp's 112):
// what describes an operation (kind, communicator, function, algorithm, protocol, data type, sizes,
// root, peer, channels, device) is held once however many operations share it, and what differs
// from one to the next (sequence number, times, operation id, clock error) as packed columns.
// Either way the operations are read by value, as whole NcclOps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

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

class NcclOps {
 public:
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = NcclOp;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = NcclOp;
    struct Arrow {
      NcclOp op;
      const NcclOp* operator->() const { return &op; }
    };
    Iterator() = default;
    Iterator(const NcclOps* ops, size_t i) : ops_(ops), i_(i) {}
    NcclOp operator*() const { return (*ops_)[i_]; }
    Arrow operator->() const { return {(*ops_)[i_]}; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++i_;
      return before;
    }
    difference_type operator-(const Iterator& other) const {
      return static_cast<difference_type>(i_) - static_cast<difference_type>(other.i_);
    }
    bool operator==(const Iterator& other) const { return i_ == other.i_; }

   private:
    const NcclOps* ops_ = nullptr;
    size_t i_ = 0;
  };

  NcclOps() = default;
  explicit NcclOps(std::vector<NcclOp> ops) : plain_(std::move(ops)) {}

  size_t size() const { return packed_ ? packed_size_ : plain_.size(); }
  bool empty() const { return size() == 0; }
  NcclOp operator[](size_t i) const;
  NcclOp front() const { return (*this)[0]; }
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, size()}; }
  std::vector<NcclOp> values() const;

  void push_back(const NcclOp& op);
  void reserve(size_t n) { plain_.reserve(n); }
  // Changes the operations as a vector: unpacked first if packed, and packed again after.
  template <typename Change>
  void change(Change&& change) {
    bool was_packed = packed_;
    unpack();
    change(plain_);
    if (was_packed) pack();
  }
  void pack();
  bool packed() const { return packed_; }
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
  void unpack();

  std::vector<NcclOp> plain_;
  bool packed_ = false;
  size_t packed_size_ = 0;
  std::vector<Description> descriptions_;
  std::vector<uint32_t> description_of_;  // per operation
  PackedColumn seq_, enqueue_ns_, gpu_start_ns_, gpu_end_ns_, operation_id_, gpu_clock_error_ns_;
};

}  // namespace gpuxray::model
