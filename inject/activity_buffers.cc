#include "inject/activity_buffers.h"

#include <cstdlib>
#include <cstring>

namespace gpuxray::inject {

ActivityBuffers::ActivityBuffers(size_t limit_bytes, size_t buffer_bytes, size_t ready_buffers)
    : limit_bytes_(limit_bytes), buffer_bytes_(buffer_bytes) {
  for (size_t i = 0; i < ready_buffers && allocated_ + buffer_bytes_ <= limit_bytes_; ++i) {
    uint8_t* buffer = allocateZeroed();
    if (buffer == nullptr) break;
    allocated_ += buffer_bytes_;
    free_.push_back(buffer);
  }
}

uint8_t* ActivityBuffers::allocateZeroed() const {
  auto* buffer = static_cast<uint8_t*>(std::aligned_alloc(8, buffer_bytes_));
  if (buffer != nullptr) std::memset(buffer, 0, buffer_bytes_);
  return buffer;
}

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
  uint8_t* buffer = allocateZeroed();
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
  std::memset(buffer, 0, buffer_bytes_);
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(buffer);
}

size_t ActivityBuffers::bytesAllocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allocated_;
}

}  // namespace gpuxray::inject
