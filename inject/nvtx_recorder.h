// The default NVTX domain's push/pop ranges (nvtxRangePushA/W/Ex, nvtxRangePop), recorded by
// gpuxray itself instead of by CUPTI. On an H200 with CUDA 13.0, CUPTI's NVTX handlers cost a
// PyTorch job with emit_nvtx (about 2,100 operator ranges a step) 10.3 -> 23.7 ms a step, and still
// 15.4 ms with its NVTX records switched off; these handlers take the capture clock and copy the
// name into the calling thread's list, which the capture thread collects at each flush.
//
// install() writes the handlers into an NVTX client's function table after CUPTI has filled it
// (InitializeInjectionNvtx2), so every other NVTX call (named domains, marks, start/end ranges,
// resource names, extended payloads) stays CUPTI's. Each thread keeps its stack of open ranges and
// the ranges it finished since the last collect() under a lock of its own, which only collect()
// ever contends. At most kMaxPendingPerThread finished ranges wait per thread; past that they are
// dropped and counted.
#pragma once

#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "proto/records.h"

namespace gpuxray::inject {

struct RecordedRange {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;     // 0: still open when collected at the end
  uint64_t thread_id = 0;  // as CUPTI numbers threads (the low 32 bits of pthread_self)
  uint32_t depth = 0;      // default-domain ranges open on the thread beneath it
  uint32_t category = 0;
  uint32_t color = 0;  // ARGB; 0 when none was given
  bool has_payload = false;
  format::PayloadField payload;  // a scalar payload of nvtxRangePushEx, unnamed
  std::string name;
};

struct NvtxRecorderHooks {
  // The capture clock.
  std::function<uint64_t()> clock;
  // Whether ranges are kept (the capture's nvtx category); pushes and pops reach the hooks below
  // either way.
  bool record = true;
  // The capture windows follow the pushes and pops (may be empty).
  std::function<void(const char* name, uint64_t now)> on_push;
  std::function<void(uint64_t now)> on_pop;
};

class NvtxRecorder {
 public:
  static constexpr size_t kMaxPendingPerThread = 1u << 18;

  explicit NvtxRecorder(NvtxRecorderHooks hooks);
  ~NvtxRecorder();
  NvtxRecorder(const NvtxRecorder&) = delete;
  NvtxRecorder& operator=(const NvtxRecorder&) = delete;

  // Makes this the recorder the handlers feed (one per process at a time), or none.
  void activate();
  void deactivate();

  // The capture thread: the ranges finished since the last call, per thread in the order they
  // ended; with `final`, also those still open (end_ns 0).
  std::vector<RecordedRange> collect(bool final);
  // Ranges dropped past kMaxPendingPerThread, and pops without a push, so far.
  uint64_t dropped() const;
  uint64_t unmatchedPops() const;

  // Writes the handlers into the core function table of the NVTX client whose export-table getter
  // is `get_export_table` (an NvtxGetExportTableFunc_t). False, and the table unchanged, when the
  // client offers no such table or one too small.
  static bool install(const void* get_export_table);

  // The handlers, as NVTX calls them.
  static int rangePushA(const char* message);
  static int rangePushW(const wchar_t* message);
  static int rangePushEx(const nvtxEventAttributes_t* attributes);
  static int rangePop();

  struct ThreadRanges;

 private:
  int push(RecordedRange range, const char* name_for_windows);
  int pop();
  ThreadRanges& threadRanges();

  const NvtxRecorderHooks hooks_;
  const uint64_t generation_;
  mutable std::mutex threads_mutex_;
  // One list per thread that ever pushed while this recorder was active (a thread's list stays
  // here after the thread ends; collect() gives back the memory of empty ones).
  std::vector<std::unique_ptr<ThreadRanges>> threads_;
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> unmatched_pops_{0};
};

}  // namespace gpuxray::inject
