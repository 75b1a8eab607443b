#include "inject/capture_window.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace gpuxray::inject {
namespace {

std::atomic<bool> g_window_open{true};
std::atomic<uint64_t> g_generations{0};
// The capture counting steps by all-reduces, and the calls that may be using it.
std::atomic<CaptureWindows*> g_collective_steps{nullptr};
std::atomic<int> g_collective_calls{0};

uint64_t mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9e37'79b9'7f4a'7c15ull + (hash << 6) + (hash >> 2);
  return hash;
}

// One entry per NVTX push on this thread that has not been popped yet.
struct NvtxPush {
  const void* domain;
  bool opened_window;
  int64_t step;
  // This push opened a window; its pop ends the opening range.
  bool opening_range = false;
};
struct ThreadNvtxStack {
  uint64_t generation = 0;
  std::vector<NvtxPush> pushes;
};
thread_local ThreadNvtxStack t_nvtx;

std::vector<NvtxPush>& threadPushes(uint64_t generation) {
  if (t_nvtx.generation != generation) {
    t_nvtx.generation = generation;
    t_nvtx.pushes.clear();
  }
  return t_nvtx.pushes;
}

std::string durationText(uint64_t ns) {
  if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + " s";
  if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + " ms";
  return std::to_string(ns) + " ns";
}

// "ProfilerStep#123" -> 123, the fast path for PyTorch's own marker; -1 otherwise.
int64_t profilerStepNumber(const char* name) {
  constexpr std::string_view kPrefix = "ProfilerStep#";
  if (std::strncmp(name, kPrefix.data(), kPrefix.size()) != 0) return -1;
  const char* digits = name + kPrefix.size();
  if (*digits == '\0') return -1;
  int64_t number = 0;
  for (const char* c = digits; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9' || number > (INT64_MAX - 9) / 10) return -1;
    number = number * 10 + (*c - '0');
  }
  return number;
}

}  // namespace

bool WindowPlan::wholeRun() const {
  return !delay_ns && !duration_ns && range.kind == format::CaptureRange::Kind::kNone && !steps;
}

std::string WindowPlan::describe() const {
  if (wholeRun()) return "";
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (steps) {
    add("steps " + std::to_string(steps->first) + "-" + std::to_string(steps->second) + " (" +
        (step_marker.empty() ? std::string("ProfilerStep#N, else the repeating all-reduce") : "/" + step_marker + "/") +
        ")");
  }
  if (range.kind == format::CaptureRange::Kind::kProfilerApi) add("cudaProfilerStart/Stop");
  if (range.kind == format::CaptureRange::Kind::kTrigger) add("on trigger only");
  if (range.kind == format::CaptureRange::Kind::kNvtx)
    add("NVTX range '" + range.nvtx_name + "'" +
        (range.nvtx_domain.empty() ? "" : " in domain '" + range.nvtx_domain + "'"));
  if (range.kind == format::CaptureRange::Kind::kProfilerApi || range.kind == format::CaptureRange::Kind::kNvtx)
    add(range_count == 0 ? "every range" : std::to_string(range_count) + (range_count == 1 ? " range" : " ranges"));
  if (delay_ns) add("after " + durationText(*delay_ns));
  if (duration_ns)
    add((range.kind == format::CaptureRange::Kind::kNone && !steps ? "for " : "at most ") + durationText(*duration_ns));
  return text;
}

bool captureWindowOpen() {
  return g_window_open.load(std::memory_order_relaxed);
}

void noteNcclCollective(const void* communicator, const char* func, size_t count, const char* datatype) {
  if (g_collective_steps.load(std::memory_order_relaxed) == nullptr) return;
  if (func == nullptr || std::strcmp(func, "AllReduce") != 0) return;
  g_collective_calls.fetch_add(1, std::memory_order_acq_rel);
  if (CaptureWindows* windows = g_collective_steps.load(std::memory_order_acquire); windows != nullptr) {
    uint64_t shape = count;
    for (const char* c = datatype; c != nullptr && *c != '\0'; ++c) shape = mix(shape, static_cast<uint8_t>(*c));
    windows->collectiveStarted(communicator, shape, 0);
  }
  g_collective_calls.fetch_sub(1, std::memory_order_acq_rel);
}

CaptureWindows::CaptureWindows(WindowPlan plan, uint64_t capture_start_ns)
    : plan_(std::move(plan)), capture_start_ns_(capture_start_ns), generation_(++g_generations) {
  if (plan_.steps && !plan_.step_marker.empty()) step_pattern_.emplace(plan_.step_marker);
  std::lock_guard<std::mutex> lock(mutex_);
  if (plan_.wholeRun()) {
    openLocked(capture_start_ns_, format::WindowEdge::kCaptureStart, "");
  } else if (plan_.range.kind == format::CaptureRange::Kind::kNone && !plan_.steps) {
    if (plan_.delay_ns) {
      timed_open_at_ = capture_start_ns_ + *plan_.delay_ns;
    } else {
      openLocked(capture_start_ns_, format::WindowEdge::kCaptureStart, "");
      close_at_ = capture_start_ns_ + plan_.duration_ns.value_or(0);
    }
  }
  g_window_open.store(open_.load(), std::memory_order_relaxed);
}

CaptureWindows::~CaptureWindows() {
  // No capture, no plan: NCCL's events are assembled again (captureWindowOpen()).
  g_window_open.store(true, std::memory_order_relaxed);
  CaptureWindows* self = this;
  if (g_collective_steps.compare_exchange_strong(self, nullptr)) {
    // An NCCL thread inside noteNcclCollective leaves it within microseconds.
    while (g_collective_calls.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }
}

void CaptureWindows::openLocked(uint64_t at, format::WindowEdge by, std::string detail) {
  windows_.push_back({at, 0, by, format::WindowEdge::kUnknown, std::move(detail)});
  opened_by_ = by;
  // A window opened by a range or a step is cut at --duration; a timed one closes after it.
  if (plan_.duration_ns && by != format::WindowEdge::kTrigger && by != format::WindowEdge::kCaptureStart) {
    close_at_ = at + *plan_.duration_ns;
    close_edge_ = format::WindowEdge::kDuration;
  }
  open_.store(true, std::memory_order_release);
  g_window_open.store(true, std::memory_order_relaxed);
}

void CaptureWindows::closeLocked(uint64_t at, format::WindowEdge by) {
  opening_start_range_.reset();
  windows_.back().end_ns = std::max(at, windows_.back().start_ns);
  windows_.back().ended_by = by;
  close_at_.reset();
  close_edge_ = format::WindowEdge::kDuration;
  open_.store(false, std::memory_order_release);
  g_window_open.store(false, std::memory_order_relaxed);
}

void CaptureWindows::tick(uint64_t now) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (timed_open_at_ && now >= *timed_open_at_) {
    uint64_t at = *timed_open_at_;
    timed_open_at_.reset();
    if (!open_) openLocked(at, format::WindowEdge::kDelay, "");
  }
  if (open_ && close_at_ && now >= *close_at_) closeLocked(*close_at_, close_edge_);
}

uint64_t CaptureWindows::nextTimedEdge() const {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t next = UINT64_MAX;
  if (timed_open_at_) next = std::min(next, *timed_open_at_);
  if (open_ && close_at_) next = std::min(next, *close_at_);
  return next;
}

bool CaptureWindows::mayOpenLocked(uint64_t now) const {
  if (open_) return false;
  if (plan_.delay_ns && now < capture_start_ns_ + *plan_.delay_ns) return false;
  return plan_.range_count == 0 || ranges_opened_ < plan_.range_count;
}

void CaptureWindows::profilerStart(uint64_t now) {
  if (!followsProfilerApi()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!mayOpenLocked(now)) return;
  ++ranges_opened_;
  openLocked(now, format::WindowEdge::kProfilerApi, "");
}

void CaptureWindows::profilerStop(uint64_t now) {
  if (!followsProfilerApi()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_ && opened_by_ == format::WindowEdge::kProfilerApi) closeLocked(now, format::WindowEdge::kProfilerApi);
}

void CaptureWindows::domainCreated(const char* name, const void* handle) {
  if (name == nullptr || handle == nullptr || !followsNvtx()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    domain_names_.emplace_back(handle, name);
  }
  if (plan_.range.kind == format::CaptureRange::Kind::kNvtx && !plan_.range.nvtx_domain.empty() &&
      plan_.range.nvtx_domain == name)
    nvtx_domain_.store(handle, std::memory_order_release);
}

void CaptureWindows::beginOpeningRangeLocked(const void* domain, const char* name, uint32_t depth, uint64_t now) {
  OpeningRange range;
  if (domain != nullptr) {
    auto named = std::find_if(domain_names_.begin(), domain_names_.end(), [&](auto& d) { return d.first == domain; });
    if (named != domain_names_.end()) range.domain = named->second;
  }
  range.name = name != nullptr ? name : "";
  range.thread_id = static_cast<uint32_t>(pthread_self());
  range.depth = depth;
  range.start_ns = now;
  // The range that opened an earlier window and has not ended yet is returned as never ended (0).
  if (open_opening_range_) ended_opening_ranges_.push_back(std::move(*open_opening_range_));
  open_opening_range_ = std::move(range);
  opening_range_key_.reset();
}

void CaptureWindows::endOpeningRangeLocked(uint64_t now) {
  if (!open_opening_range_) return;
  open_opening_range_->end_ns = std::max(now, open_opening_range_->start_ns);
  ended_opening_ranges_.push_back(std::move(*open_opening_range_));
  open_opening_range_.reset();
}

std::vector<OpeningRange> CaptureWindows::takeOpeningRanges(bool final) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<OpeningRange> taken = std::move(ended_opening_ranges_);
  ended_opening_ranges_.clear();
  if (final && open_opening_range_) {
    taken.push_back(std::move(*open_opening_range_));
    open_opening_range_.reset();
  }
  return taken;
}

int64_t CaptureWindows::stepNumber(const char* name) {
  if (name == nullptr) return -1;
  if (!step_pattern_) return profilerStepNumber(name);
  std::cmatch found;
  if (!std::regex_search(name, found, *step_pattern_)) return -1;
  if (found.size() > 1 && found[1].matched) {
    int64_t number = 0;
    for (const char* c = found[1].first; c != found[1].second; ++c) {
      if (*c < '0' || *c > '9' || number > (INT64_MAX - 9) / 10) return step_ordinal_++;
      number = number * 10 + (*c - '0');
    }
    return number;
  }
  return step_ordinal_++;
}

void CaptureWindows::rangePush(const void* domain, const char* name, uint64_t now, bool recorded) {
  if (!followsNvtx()) return;
  NvtxPush push{domain, false, -1};
  if (plan_.steps) {
    if (steps_done_.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mutex_);
    push.step = stepNumber(name);
    if (push.step >= 0) nvtx_steps_seen_.store(true, std::memory_order_relaxed);
    if (push.step >= 0 && !steps_done_) {
      auto [first, last] = *plan_.steps;
      if (push.step > last) {
        if (open_ && opened_by_ == format::WindowEdge::kStep) closeLocked(now, format::WindowEdge::kStep);
        steps_done_ = true;
      } else if (push.step >= first && !open_) {
        openLocked(now, format::WindowEdge::kStep, name);
        push.opening_range = true;
      }
    }
  } else {
    if (isCaptureRange(domain, name)) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (mayOpenLocked(now)) {
        ++ranges_opened_;
        openLocked(now, format::WindowEdge::kNvtxRange, name);
        push.opened_window = true;
        push.opening_range = true;
      }
    }
  }
  auto& pushes = threadPushes(generation_);
  if (recorded) push.opening_range = false;
  if (push.opening_range) {
    auto depth = std::count_if(pushes.begin(), pushes.end(), [&](const NvtxPush& p) { return p.domain == domain; });
    std::lock_guard<std::mutex> lock(mutex_);
    beginOpeningRangeLocked(domain, name, static_cast<uint32_t>(depth), now);
  }
  pushes.push_back(push);
}

bool CaptureWindows::isCaptureRange(const void* domain, const char* name) const {
  if (plan_.range.kind != format::CaptureRange::Kind::kNvtx || name == nullptr) return false;
  const void* wanted = plan_.range.nvtx_domain.empty() ? nullptr : nvtx_domain_.load(std::memory_order_acquire);
  bool domain_matches = domain == wanted && (wanted != nullptr || plan_.range.nvtx_domain.empty());
  return domain_matches && plan_.range.nvtx_name == name;
}

void CaptureWindows::rangeStart(const void* domain, const char* name, uint64_t id, uint64_t now) {
  if (!isCaptureRange(domain, name)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!mayOpenLocked(now)) return;
  ++ranges_opened_;
  openLocked(now, format::WindowEdge::kNvtxRange, name);
  opening_start_range_.emplace(domain, id);
  beginOpeningRangeLocked(domain, name, 0, now);
  opening_range_key_.emplace(domain, id);
}

void CaptureWindows::rangeEnd(const void* domain, uint64_t id, uint64_t now) {
  if (plan_.range.kind != format::CaptureRange::Kind::kNvtx) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (opening_range_key_ == std::pair<const void*, uint64_t>{domain, id}) {
    opening_range_key_.reset();
    endOpeningRangeLocked(now);
  }
  if (!opening_start_range_ || *opening_start_range_ != std::pair<const void*, uint64_t>{domain, id}) return;
  opening_start_range_.reset();
  if (open_ && opened_by_ == format::WindowEdge::kNvtxRange) closeLocked(now, format::WindowEdge::kNvtxRange);
}

void CaptureWindows::rangePop(const void* domain, uint64_t now) {
  if (!followsNvtx()) return;
  auto& pushes = threadPushes(generation_);
  auto it = std::find_if(pushes.rbegin(), pushes.rend(), [&](const NvtxPush& p) { return p.domain == domain; });
  if (it == pushes.rend()) return;
  NvtxPush push = *it;
  pushes.erase(std::next(it).base());
  if (!push.opened_window && push.step < 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (push.opening_range) endOpeningRangeLocked(now);
  if (!open_) return;
  if (push.opened_window && opened_by_ == format::WindowEdge::kNvtxRange) {
    closeLocked(now, format::WindowEdge::kNvtxRange);
  } else if (plan_.steps && push.step >= plan_.steps->second && opened_by_ == format::WindowEdge::kStep) {
    closeLocked(now, format::WindowEdge::kStep);
    steps_done_ = true;
  }
}

bool CaptureWindows::trigger(uint64_t now, uint64_t duration_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_) {
    if (!close_at_) return false;
    close_at_ = std::max(*close_at_, now + duration_ns);
    return true;
  }
  openLocked(now, format::WindowEdge::kTrigger, "trigger for " + durationText(duration_ns));
  close_at_ = now + duration_ns;
  close_edge_ = format::WindowEdge::kTrigger;
  return true;
}

void CaptureWindows::finish(uint64_t now) {
  std::lock_guard<std::mutex> lock(mutex_);
  timed_open_at_.reset();
  if (open_) closeLocked(now, format::WindowEdge::kCaptureEnd);
}

void CaptureWindows::snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  snapshot_.clear();
  for (const auto& w : windows_)
    snapshot_.push_back({w.start_ns, w.ended_by == format::WindowEdge::kUnknown ? UINT64_MAX : w.end_ns});
}

bool CaptureWindows::contains(uint64_t t) const {
  // Windows are in time order and do not overlap: the last one starting at or before t decides.
  auto after = std::upper_bound(snapshot_.begin(), snapshot_.end(), t,
                                [](uint64_t time, const Interval& w) { return time < w.start; });
  return after != snapshot_.begin() && t < std::prev(after)->end;
}

std::vector<format::CaptureWindow> CaptureWindows::takeClosed() {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t closed = open_ ? windows_.size() - 1 : windows_.size();
  std::vector<format::CaptureWindow> taken(windows_.begin() + static_cast<ptrdiff_t>(closed_taken_),
                                           windows_.begin() + static_cast<ptrdiff_t>(closed));
  closed_taken_ = closed;
  return taken;
}

void CaptureWindows::countStepsByCollectives(std::function<uint64_t()> clock) {
  if (!plan_.steps || !plan_.step_marker.empty() || !clock) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    collective_clock_ = std::move(clock);
  }
  g_collective_steps.store(this, std::memory_order_release);
}

void CaptureWindows::collectiveStarted(const void* communicator, uint64_t shape, uint64_t now) {
  if (!plan_.steps || nvtx_steps_seen_.load(std::memory_order_relaxed) || steps_done_.load(std::memory_order_relaxed))
    return;
  uint64_t key = mix(reinterpret_cast<uintptr_t>(communicator), shape);
  std::lock_guard<std::mutex> lock(mutex_);
  if (collective_clock_) now = collective_clock_();
  if (step_pattern_keys_.empty()) {
    if (collective_history_.size() == 3 * kMaxStepPeriod) collective_history_.erase(collective_history_.begin());
    collective_history_.push_back({key, now});
    findStepPattern();
    return;
  }
  if (key != step_pattern_keys_[pattern_cursor_]) {
    if (key != step_pattern_keys_[pattern_phase_]) return;
    pattern_cursor_ = pattern_phase_;
  }
  if (pattern_cursor_ == pattern_phase_) collectiveStepBegins(now);
  pattern_cursor_ = (pattern_cursor_ + 1) % step_pattern_keys_.size();
}

bool CaptureWindows::findStepPattern() {
  const auto& h = collective_history_;
  size_t n = h.size();
  for (size_t period = 1; period <= kMaxStepPeriod && 3 * period <= n; ++period) {
    bool repeats = true;
    for (size_t i = n - 2 * period; i < n && repeats; ++i) repeats = h[i].key == h[i - period].key;
    if (!repeats) continue;
    // Positions are history indices modulo the period; the step begins after the longest pause.
    std::vector<uint64_t> pause(period, 0);
    for (size_t i = n - 2 * period; i < n; ++i) pause[i % period] += h[i].time - std::min(h[i].time, h[i - 1].time);
    size_t phase = static_cast<size_t>(std::max_element(pause.begin(), pause.end()) - pause.begin());
    size_t start = n - 3 * period;
    while (start > 0 && h[start - 1].key == h[start - 1 + period].key) --start;
    size_t first_boundary = start + (phase + period - start % period) % period;
    step_pattern_keys_.assign(period, 0);
    for (size_t i = n - period; i < n; ++i) step_pattern_keys_[i % period] = h[i].key;
    pattern_phase_ = phase;
    pattern_cursor_ = n % period;
    collective_step_ = first_boundary < n ? static_cast<int64_t>((n - 1 - first_boundary) / period) : -1;
    collective_history_.clear();
    collective_history_.shrink_to_fit();
    return true;
  }
  return false;
}

void CaptureWindows::collectiveStepBegins(uint64_t now) {
  ++collective_step_;
  auto [first, last] = *plan_.steps;
  if (collective_step_ > last) {
    if (open_ && opened_by_ == format::WindowEdge::kStep) closeLocked(now, format::WindowEdge::kStep);
    steps_done_ = true;
    return;
  }
  if (collective_step_ >= first && !open_ && !(plan_.delay_ns && now < capture_start_ns_ + *plan_.delay_ns))
    openLocked(now, format::WindowEdge::kStep, "all-reduce step " + std::to_string(collective_step_));
}

int64_t CaptureWindows::collectiveStep() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return collective_step_;
}

size_t CaptureWindows::opened() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return windows_.size();
}

}  // namespace gpuxray::inject
