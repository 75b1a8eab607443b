// A map from ids read from a file (interned strings, kernel configurations) to values. Ids are dense
// in files the writer produces, so it is a vector while ids stay near the number defined; an id far
// beyond that (which only a damaged or hostile file holds) goes to a hash map, so that it costs what
// any other entry costs instead of a vector of its size. References stay valid as the map grows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpuxray::format {

template <typename T>
class IdMap {
 public:
  const T* find(uint32_t id) const {
    if (id < present_.size()) return present_[id] ? &dense_[id] : nullptr;
    if (sparse_.empty()) return nullptr;
    auto it = sparse_.find(id);
    return it == sparse_.end() ? nullptr : &it->second;
  }
  T* find(uint32_t id) { return const_cast<T*>(std::as_const(*this).find(id)); }

  // The entry for `id`, value-initialized when it is new (then the second member is true).
  std::pair<T*, bool> emplace(uint32_t id) {
    if (T* existing = find(id)) return {existing, false};
    ++size_;
    if (id < present_.size() || id < kDenseSlack + 2 * size_) {
      if (id >= present_.size()) {
        dense_.resize(static_cast<size_t>(id) + 1);
        present_.resize(static_cast<size_t>(id) + 1);
      }
      present_[id] = true;
      return {&dense_[id], true};
    }
    return {&sparse_[id], true};
  }

  size_t size() const { return size_; }

 private:
  // Ids below this many (and twice the entries) are kept in the vector.
  static constexpr size_t kDenseSlack = 4096;
  std::deque<T> dense_;
  std::vector<bool> present_;
  std::unordered_map<uint32_t, T> sparse_;
  size_t size_ = 0;
};

}  // namespace gpuxray::format
