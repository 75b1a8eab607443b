// When the capture records: the window state machine. A plan (from GPUXRAY_DELAY, _DURATION,
// _CAPTURE_RANGE, _CAPTURE_RANGE_COUNT, _STEPS, _STEP_MARKER) says what opens and closes windows;
// events feed it from the threads they happen on: the capture thread's clock ticks, CUPTI's
// callbacks for cudaProfilerStart/Stop and NVTX push/pop and start/end ranges on the application's
// threads, NCCL's all-reduce starts (steps without step ranges), and on-demand triggers. Every transition is stamped with the capture clock at the moment it happens,
// so a record is inside a window exactly when its own timestamp falls in one (contains()), however
// late CUPTI delivers it: a window that a record's time falls in has always opened before the
// record is delivered.
//
// isOpen() is one atomic load, for the hot paths (NCCL's event starts); transitions and the
// window list are under a short lock that nothing calls out of.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "proto/capture_windows.h"
#include "proto/records.h"

namespace gpuxray::inject {

struct WindowPlan {
  // From capture start: the window opens after `delay_ns` and stays open `duration_ns`.
  std::optional<uint64_t> delay_ns;
  std::optional<uint64_t> duration_ns;
  format::CaptureRange range;
  // How many ranges open a window; 0 = every one (the default for cudaProfilerApi; nvtx: 1).
  uint32_t range_count = 0;
  std::optional<std::pair<int64_t, int64_t>> steps;
  // An ECMAScript regular expression for step ranges' names (group 1, if any, numbers the step;
  // else they are counted from 0); empty: ProfilerStep#N.
  std::string step_marker;

  // True when nothing limits the capture: one window, the whole run.
  bool wholeRun() const;
  // For the header: "" for the whole run, else e.g. "steps 100-110 (ProfilerStep#N)".
  std::string describe() const;
};

// The NVTX range whose push or start opened a window (a step range, or --capture-range nvtx). CUPTI
// records that call before the window's activity kinds are on, so the capture writes the range
// from here once it ends.
struct OpeningRange {
  std::string domain;  // "" for the default domain
  std::string name;
  uint64_t thread_id = 0;  // as CUPTI numbers threads (the low 32 bits of pthread_self)
  uint32_t depth = 0;      // pushed ranges of its domain open on its thread beneath it
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
};

class CaptureWindows {
 public:
  // The step marker must already be a valid expression (readCaptureConfig checks it).
  CaptureWindows(WindowPlan plan, uint64_t capture_start_ns);
  ~CaptureWindows();
  CaptureWindows(const CaptureWindows&) = delete;
  CaptureWindows& operator=(const CaptureWindows&) = delete;

  bool isOpen() const { return open_.load(std::memory_order_acquire); }
  const WindowPlan& plan() const { return plan_; }
  bool followsProfilerApi() const { return plan_.range.kind == format::CaptureRange::Kind::kProfilerApi; }
  bool followsNvtx() const { return plan_.range.kind == format::CaptureRange::Kind::kNvtx || plan_.steps.has_value(); }

  // The capture thread's clock: opens and closes timed windows (delay, duration, trigger).
  void tick(uint64_t now);
  // When tick() next has something to do (UINT64_MAX: never).
  uint64_t nextTimedEdge() const;
  // The application's threads, through CUPTI's callbacks.
  void profilerStart(uint64_t now);
  void profilerStop(uint64_t now);
  // An NVTX push on this thread, in `domain` (nullptr: the default domain); name may be null.
  // `recorded`: the caller records the range itself (NvtxRecorder), so a window it opens keeps no
  // opening range.
  void rangePush(const void* domain, const char* name, uint64_t now, bool recorded = false);
  void rangePop(const void* domain, uint64_t now);
  // An NVTX start/end range (nvtxRangeStart*/nvtxDomainRangeStartEx, then nvtxRangeEnd or
  // nvtxDomainRangeEnd with the id the start returned): process-wide, it may end on another thread
  // and overlap others. Opens a window like a push of that name; only the end of the range that
  // opened the window closes it.
  void rangeStart(const void* domain, const char* name, uint64_t id, uint64_t now);
  void rangeEnd(const void* domain, uint64_t id, uint64_t now);
  // nvtxDomainCreateA returned `handle` for `name`.
  void domainCreated(const char* name, const void* handle);
  // `gpuxray trigger`: a window from now for `duration_ns` (a window already open is extended to
  // at least that). Returns false when the plan's own window is open and not extended.
  bool trigger(uint64_t now, uint64_t duration_ns);
  // Closes an open window at the capture's end.
  void finish(uint64_t now);

  // --steps without step ranges: steps counted by the repeating data-parallel all-reduce (see
  // collectiveStarted). Called by the capture once it runs, with its clock; NCCL's collective starts
  // then reach this object through noteNcclCollective(). Steps marked by NVTX ranges, once one is
  // seen, take over for good.
  void countStepsByCollectives(std::function<uint64_t()> clock);
  // NCCL starts an all-reduce on `communicator`; `shape` tells its element count and type apart.
  // Rule: the all-reduces repeat with a period P (the shortest P <= kMaxStepPeriod such that the
  // last 2P repeat the P before them); a step begins at the all-reduce that follows the longest
  // pause within the period (the forward pass, which reduces nothing), summed over two periods.
  // Steps are numbered from 0 at the first step of the repeating run still in the history. A
  // collective that breaks the pattern is skipped, unless it is the one that begins a step.
  void collectiveStarted(const void* communicator, uint64_t shape, uint64_t now);
  static constexpr size_t kMaxStepPeriod = 128;
  // The step the all-reduces say is running (-1 before the pattern is found), for tests.
  int64_t collectiveStep() const;

  // Whether time `t` (capture clock) is inside a window. Call from the capture thread only; it
  // reads a copy of the windows refreshed by snapshot().
  void snapshot();
  bool contains(uint64_t t) const;

  // Windows closed since the last call (to write as they close).
  std::vector<format::CaptureWindow> takeClosed();
  // Opening ranges that ended since the last call; with `final`, also one still open, returned
  // with end_ns 0 (it never ended).
  std::vector<OpeningRange> takeOpeningRanges(bool final);
  // How many windows have opened so far.
  size_t opened() const;

 private:
  struct Interval {
    uint64_t start;
    uint64_t end;  // UINT64_MAX while open
  };
  void openLocked(uint64_t at, format::WindowEdge by, std::string detail);
  void closeLocked(uint64_t at, format::WindowEdge by);
  // Whether a range or step may open a window now (none open, past --delay, under the count).
  bool mayOpenLocked(uint64_t now) const;
  // Whether an NVTX range of this name in this domain is the plan's capture range.
  bool isCaptureRange(const void* domain, const char* name) const;
  // The step number of an NVTX range name, or -1 when it does not mark a step.
  int64_t stepNumber(const char* name);

  const WindowPlan plan_;
  const uint64_t capture_start_ns_;
  std::optional<std::regex> step_pattern_;
  std::atomic<bool> open_{false};
  std::atomic<const void*> nvtx_domain_{nullptr};
  // Which generation of CaptureWindows the threads' NVTX stacks belong to.
  const uint64_t generation_;

  mutable std::mutex mutex_;
  std::vector<format::CaptureWindow> windows_;  // all, the last one open while open_
  size_t closed_taken_ = 0;
  format::WindowEdge opened_by_ = format::WindowEdge::kUnknown;
  std::optional<uint64_t> timed_open_at_;
  // When the open window closes by itself, and what closes it then.
  std::optional<uint64_t> close_at_;
  format::WindowEdge close_edge_ = format::WindowEdge::kDuration;
  uint32_t ranges_opened_ = 0;
  // The start/end range (domain, id) that opened the window now open.
  std::optional<std::pair<const void*, uint64_t>> opening_start_range_;
  // The opening range not yet ended, and those that ended since takeOpeningRanges().
  std::optional<OpeningRange> open_opening_range_;
  // The start/end range (domain, id) whose end ends open_opening_range_ (kept after the window closes).
  std::optional<std::pair<const void*, uint64_t>> opening_range_key_;
  std::vector<OpeningRange> ended_opening_ranges_;
  // Every domain nvtxDomainCreateA named, for the opening ranges' domains.
  std::vector<std::pair<const void*, std::string>> domain_names_;
  void beginOpeningRangeLocked(const void* domain, const char* name, uint32_t depth, uint64_t now);
  void endOpeningRangeLocked(uint64_t now);
  int64_t step_ordinal_ = 0;
  std::atomic<bool> steps_done_{false};
  // A ProfilerStep (or --step-marker) range was seen: NVTX numbers the steps.
  std::atomic<bool> nvtx_steps_seen_{false};

  // Step counting by all-reduces: the history until the period is found (at most 3 periods of
  // kMaxStepPeriod), then the period's keys and where in it the next all-reduce should be.
  struct Collective {
    uint64_t key;
    uint64_t time;
  };
  std::function<uint64_t()> collective_clock_;
  std::vector<Collective> collective_history_;
  std::vector<uint64_t> step_pattern_keys_;
  size_t pattern_cursor_ = 0;
  size_t pattern_phase_ = 0;
  int64_t collective_step_ = -1;
  bool findStepPattern();
  void collectiveStepBegins(uint64_t now);

  std::vector<Interval> snapshot_;
};

// Whether the process's capture is inside a window now: true when no capture has a plan. For the
// NCCL plugin's event starts (one atomic load).
bool captureWindowOpen();

// An NCCL collective starts (the plugin, for every version): counts steps when a capture counts
// them by all-reduces, else one atomic load. `func` is NCCL's name ("AllReduce"), `datatype` its
// type's name.
void noteNcclCollective(const void* communicator, const char* func, size_t count, const char* datatype);

}  // namespace gpuxray::inject
