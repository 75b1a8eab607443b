#include "inject/activity_buffers.h"

#include <cstdlib>

namespace gpuxray::inject {

ActivityBuffers::ActivityBuffers(size_t limit_bytes, size_t buffer_bytes)
    : limit_bytes_(limit_bytes), buffer_bytes_(buffer_bytes) {}

ActivityBuffers::~ActivityBuffers() {
  for (uint8_t* buffer : free_) std::free(buffer);
  for (const auto& filled : filled_) std::free(filled.buffer);
}

uint8_t* ActivityBuffers::acquire() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      uint8_t* buffer = free_.back();
      free_.pop_back();
      return buffer;
    }
    if (allocated_ + buffer_bytes_ > limit_bytes_) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    allocated_ += buffer_bytes_;
  }
  auto* buffer = static_cast<uint8_t*>(std::aligned_alloc(8, buffer_bytes_));
  if (buffer == nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    allocated_ -= buffer_bytes_;
    refused_.fetch_add(1, std::memory_order_relaxed);
  }
  return buffer;
}

void ActivityBuffers::complete(uint8_t* buffer, size_t valid_bytes) {
  if (buffer == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  filled_.push_back({buffer, valid_bytes});
}

std::vector<ActivityBuffers::Filled> ActivityBuffers::takeFilled() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Filled> taken;
  taken.swap(filled_);
  return taken;
}

void ActivityBuffers::release(uint8_t* buffer) {
  if (buffer == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(buffer);
}

size_t ActivityBuffers::bytesAllocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_;
}

}  // namespace gpuxray::inject
