#include "tests/support/failing_allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace gpuxray::testing {
namespace {

std::atomic<int64_t> g_left{-1};
std::atomic<bool> g_failed{false};

}  // namespace

void failAllocationAfter(int64_t allocations) {
  g_failed.store(false);
  g_left.store(allocations);
}

bool allocationFailed() {
  return g_failed.load();
}

namespace {

void* allocate(std::size_t size) {
  int64_t left = g_left.load(std::memory_order_relaxed);
  if (left >= 0 && g_left.fetch_sub(1) == 0) {
    g_left.store(-1);
    g_failed.store(true);
    throw std::bad_alloc();
  }
  void* memory = std::malloc(size == 0 ? 1 : size);
  if (memory == nullptr) throw std::bad_alloc();
  return memory;
}

}  // namespace
}  // namespace gpuxray::testing

void* operator new(std::size_t size) {
  return gpuxray::testing::allocate(size);
}
void* operator new[](std::size_t size) {
  return gpuxray::testing::allocate(size);
}
void operator delete(void* memory) noexcept {
  std::free(memory);
}
void operator delete[](void* memory) noexcept {
  std::free(memory);
}
void operator delete(void* memory, std::size_t) noexcept {
  std::free(memory);
}
void operator delete[](void* memory, std::size_t) noexcept {
  std::free(memory);
}
