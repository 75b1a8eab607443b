// Records of one kind that a rank holds to its end (its skeleton's NCCL operations and NVTX ranges):
// a plain vector while the rank is loaded and changed, packed by `Packing` once it is a skeleton
// (pack()), and read by value either way. Packing is constructed from the records, gives record i
// back whole (operator[]) and says how many bytes it holds (bytes()).
#pragma once

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace gpuxray::model {

template <typename Record, typename Packing>
class PackableRecords {
 public:
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Record;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Record;
    struct Arrow {
      Record record;
      const Record* operator->() const { return &record; }
    };
    Iterator() = default;
    Iterator(const PackableRecords* records, size_t i) : records_(records), i_(i) {}
    Record operator*() const { return (*records_)[i_]; }
    Arrow operator->() const { return {(*records_)[i_]}; }
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
    const PackableRecords* records_ = nullptr;
    size_t i_ = 0;
  };

  PackableRecords() = default;
  explicit PackableRecords(std::vector<Record> records) : plain_(std::move(records)) {}

  size_t size() const { return packed_ ? packing_.size() : plain_.size(); }
  bool empty() const { return size() == 0; }
  Record operator[](size_t i) const { return packed_ ? packing_[i] : plain_[i]; }
  Record front() const { return (*this)[0]; }
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, size()}; }
  std::vector<Record> values() const {
    if (!packed_) return plain_;
    std::vector<Record> all;
    all.reserve(size());
    for (size_t i = 0; i < size(); ++i) all.push_back(packing_[i]);
    return all;
  }

  void push_back(const Record& record) {
    unpack();
    plain_.push_back(record);
  }
  void reserve(size_t n) { plain_.reserve(n); }
  // Changes the records as a vector: unpacked first if packed, and packed again after.
  template <typename Change>
  void change(Change&& change) {
    bool was_packed = packed_;
    unpack();
    change(plain_);
    if (was_packed) pack();
  }
  void pack() {
    if (packed_) return;
    packing_ = Packing(plain_);
    packed_ = true;
    std::vector<Record>().swap(plain_);
  }
  bool packed() const { return packed_; }
  size_t bytes() const { return plain_.capacity() * sizeof(Record) + (packed_ ? packing_.bytes() : 0); }

 private:
  void unpack() {
    if (!packed_) return;
    plain_ = values();
    packing_ = Packing();
    packed_ = false;
  }

  std::vector<Record> plain_;
  Packing packing_;
  bool packed_ = false;
};

}  // namespace gpuxray::model
