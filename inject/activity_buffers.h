// The memory CUPTI fills with activity records, bounded. CUPTI's callbacks only take a buffer from
// here and give it back full; the background thread takes the full ones, translates them and
// returns them for reuse. Past the bound a request gets no buffer, which makes CUPTI drop records
// (and count them) instead of the application waiting. Every buffer handed out is zeroed, cleared
// on the background thread as it comes back (CUPTI is told so and need not clear it on the
// application's thread), and a few are made ready up front so that the first requests neither
// allocate nor fault pages in.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace gpuxray::inject {

class ActivityBuffers {
 public:
  struct Filled {
    uint8_t* buffer;
    size_t valid_bytes;
  };

  ActivityBuffers(size_t limit_bytes, size_t buffer_bytes, size_t ready_buffers = 0);
  ~ActivityBuffers();
  ActivityBuffers(const ActivityBuffers&) = delete;
  ActivityBuffers& operator=(const ActivityBuffers&) = delete;

  // For CUPTI's buffer request: a buffer of bufferBytes() (8-byte aligned), or nullptr at the bound.
  uint8_t* acquire();
  // For CUPTI's buffer completion: queues the buffer for the background thread.
  void complete(uint8_t* buffer, size_t valid_bytes);
  // Everything completed so far, oldest first.
  std::vector<Filled> takeFilled();
  // Returns a translated buffer for reuse (zeroing it here, on the caller's thread).
  void release(uint8_t* buffer);

  size_t bufferBytes() const { return buffer_bytes_; }
  // Requests refused at the bound.
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  size_t bytesAllocated() const;

 private:
  uint8_t* allocateZeroed() const;

  const size_t limit_bytes_;
  const size_t buffer_bytes_;
  mutable std::mutex mutex_;
  std::vector<uint8_t*> free_;
  std::vector<Filled> filled_;
  size_t allocated_ = 0;
  std::atomic<uint64_t> refused_{0};
};

}  // namespace gpuxray::inject
