#include "analyzer/analysis/rank_digest.h"

#include <algorithm>
#include <stdexcept>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/idle_split.h"

namespace gpuxray::analysis {
namespace {

// Empties `items` and gives its memory back (`items = {}` or clear() keep the capacity).
template <typename Items>
void release(Items& items) {
  Items().swap(items);
}

// When the first GPU work starting at or after `t` was launched (TimePoint::kNoLaunch when no
// launch is recorded or nothing comes after), as idle_split.cc classifies gaps. Successive calls
// with times that do not decrease walk on from `cursor`.
int64_t launchAfter(const model::RankTrace& rank, const GpuTimeSets& sets, int64_t t, size_t& cursor) {
  const auto& activities = rank.activities;
  while (cursor < activities.size() && activities[cursor].start_ns < t) ++cursor;
  size_t next = cursor;
  while (next < activities.size() && !model::isGpuWork(activities[next].kind)) ++next;
  return next < activities.size() ? sets.launch_start[next] : TimePoint::kNoLaunch;
}

int64_t launchAfter(const model::RankTrace& rank, const GpuTimeSets& sets, int64_t t) {
  auto first = std::lower_bound(rank.activities.begin(), rank.activities.end(), t,
                                [](const model::GpuActivity& a, int64_t v) { return a.start_ns < v; });
  size_t cursor = static_cast<size_t>(first - rank.activities.begin());
  return launchAfter(rank, sets, t, cursor);
}

// The measure of `set` before each of the sorted `times`.
std::vector<int64_t> lengthsBefore(const IntervalSet& set, const std::vector<int64_t>& times) {
  std::vector<int64_t> lengths(times.size(), 0);
  size_t i = 0;
  int64_t done = 0;
  for (size_t k = 0; k < times.size(); ++k) {
    while (i < set.size() && set[i].end <= times[k]) done += set[i++].length();
    lengths[k] = done + (i < set.size() && set[i].start < times[k] ? times[k] - set[i].start : 0);
  }
  return lengths;
}

TimePoints timePoints(const model::RankTrace& rank, const GpuTimeSets& sets) {
  std::vector<int64_t> times;
  if (!rank.activities.empty()) times.push_back(rank.activities.front().start_ns);
  for (const auto& op : rank.nccl_ops) {
    if (op.gpu_start_ns != 0) times.push_back(op.gpu_start_ns);
    if (op.gpu_end_ns != 0) times.push_back(op.gpu_end_ns);
  }
  std::sort(times.begin(), times.end());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  std::vector<int64_t> compute = lengthsBefore(sets.compute, times);
  std::vector<int64_t> communication = lengthsBefore(sets.communication, times);
  std::vector<TimePoint> points;
  points.reserve(times.size());
  const IntervalSet& busy = sets.busy;
  auto gapBefore = [&](size_t i) {  // the gap that ends where busy[i] starts; the first starts at the earliest time
    return Interval{i == 0 ? INT64_MIN : busy[i - 1].end, i < busy.size() ? busy[i].start : INT64_MAX};
  };
  size_t counted = 0;    // gaps before busy[0 .. counted) are in host_bound
  size_t cursor = 0;     // into rank.activities, for the gaps' ends in order
  size_t next_busy = 0;  // the first busy interval that ends after the current time
  int64_t host_bound = 0;
  for (size_t k = 0; k < times.size(); ++k) {
    const int64_t t = times[k];
    // Gaps that end by t, each classified as idle_split.cc classifies a gap wholly inside a window.
    for (; counted < busy.size() && busy[counted].start <= t; ++counted) {
      Interval gap = gapBefore(counted);
      if (counted == 0 || gap.length() <= 0) continue;
      int64_t launch = launchAfter(rank, sets, gap.end, cursor);
      if (launch != TimePoint::kNoLaunch && launch >= gap.start) host_bound += gap.length();
    }
    while (next_busy < busy.size() && busy[next_busy].end <= t) ++next_busy;
    TimePoint p;
    p.time = t, p.compute = compute[k], p.communication = communication[k], p.host_bound = host_bound;
    if (next_busy >= busy.size() || busy[next_busy].start > t) {  // not inside busy time
      Interval gap = gapBefore(next_busy);
      p.launch_after = launchAfter(rank, sets, t);
      p.in_gap = true;
      p.gap_start = gap.start, p.gap_end = gap.end;
      p.gap_launch = next_busy < busy.size() ? launchAfter(rank, sets, gap.end) : TimePoint::kNoLaunch;
    }
    points.push_back(p);
  }
  return TimePoints(points);
}

}  // namespace

TimePoints::TimePoints(const std::vector<TimePoint>& points) {
  time = packedField(points, &TimePoint::time);
  compute = packedField(points, &TimePoint::compute);
  communication = packedField(points, &TimePoint::communication);
  host_bound = packedField(points, &TimePoint::host_bound);
  std::vector<uint32_t> gap_of;
  gap_of.reserve(points.size());
  std::vector<Gap> distinct;
  for (const TimePoint& p : points) {
    if (!p.in_gap) {
      gap_of.push_back(kNoGap);
      continue;
    }
    // Points come by time, so those in one gap follow each other.
    if (distinct.empty() || distinct.back().start != p.gap_start || distinct.back().end != p.gap_end ||
        distinct.back().launch != p.gap_launch)
      distinct.push_back({p.gap_start, p.gap_end, p.gap_launch});
    gap_of.push_back(static_cast<uint32_t>(distinct.size() - 1));
    if (p.launch_after != p.gap_launch)
      other_launches.push_back({static_cast<uint32_t>(gap_of.size() - 1), p.launch_after});
  }
  other_launches.shrink_to_fit();
  gap = GapIndexes(gap_of);
  gaps = Gaps(distinct);
}

TimePoints::GapIndexes::GapIndexes(const std::vector<uint32_t>& indexes) {
  std::vector<int64_t> column(indexes.size());
  for (size_t i = 0; i < indexes.size(); ++i) column[i] = indexes[i] == kNoGap ? INT64_MAX : int64_t{indexes[i]};
  packed_ = PackedColumn(column);
}

uint32_t TimePoints::GapIndexes::operator[](size_t i) const {
  int64_t index = packed_[i];
  return index == INT64_MAX ? kNoGap : static_cast<uint32_t>(index);
}

std::vector<uint32_t> TimePoints::GapIndexes::values() const {
  std::vector<uint32_t> all(size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = (*this)[i];
  return all;
}

TimePoints::Gaps::Gaps(const std::vector<Gap>& gaps) : start_(packedField(gaps, &Gap::start)) {
  for (size_t i = 0; i < gaps.size(); ++i) {
    const Gap& g = gaps[i];
    if (model::isOpenEnd(g.start)) {
      open_start_.emplace_back(static_cast<uint32_t>(i), g);
      continue;
    }
    for (int64_t t : {g.end, g.launch}) {
      if (!model::isOpenEnd(t) && model::isOpenEnd(model::differenceOf(t, g.start))) differences_ = false;
    }
  }
  open_start_.shrink_to_fit();
  // An open end or "none" as itself; the columns' rows of gaps held aside hold 0.
  auto held = [this](int64_t t, int64_t start) {
    return model::isOpenEnd(start) ? 0 : model::isOpenEnd(t) || !differences_ ? t : model::differenceOf(t, start);
  };
  end_ = packedField(gaps, [&](const Gap& g) { return held(g.end, g.start); });
  launch_ = packedField(gaps, [&](const Gap& g) { return held(g.launch, g.start); });
}

TimePoints::Gap TimePoints::Gaps::operator[](size_t i) const {
  const int64_t start = start_[i];
  if (model::isOpenEnd(start)) {
    auto aside = std::lower_bound(open_start_.begin(), open_start_.end(), i,
                                  [](const auto& held, size_t index) { return held.first < index; });
    return aside->second;
  }
  auto back = [&](int64_t held) {
    return model::isOpenEnd(held) || !differences_ ? held : model::plusDifference(start, held);
  };
  return {start, back(end_[i]), back(launch_[i])};
}

void TimePoints::Gaps::shift(int64_t offset) {
  std::vector<Gap> all = values();
  for (Gap& g : all) {
    for (int64_t* t : {&g.start, &g.end, &g.launch}) {
      if (!model::isOpenEnd(*t)) *t += offset;
    }
  }
  *this = Gaps(all);
}

std::vector<TimePoints::Gap> TimePoints::Gaps::values() const {
  std::vector<Gap> all(size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = (*this)[i];
  return all;
}

TimePoint TimePoints::operator[](size_t i) const {
  TimePoint p;
  p.time = time[i], p.compute = compute[i], p.communication = communication[i], p.host_bound = host_bound[i];
  if (gap[i] != kNoGap) {
    const Gap g = gaps[gap[i]];
    p.in_gap = true;
    p.gap_start = g.start, p.gap_end = g.end, p.gap_launch = g.launch;
    auto other = std::lower_bound(other_launches.begin(), other_launches.end(), i,
                                  [](const OtherLaunch& o, size_t point) { return o.point < point; });
    p.launch_after = other != other_launches.end() && other->point == i ? other->launch : g.launch;
  }
  return p;
}

size_t TimePoints::bytes() const {
  return time.bytes() + compute.bytes() + communication.bytes() + host_bound.bytes() + gap.bytes() + gaps.bytes() +
         other_launches.capacity() * sizeof(OtherLaunch);
}

TimePoint RankDigest::at(int64_t t) const {
  size_t i = points.time.lowerBound(t);
  if (i == points.size() || points.time[i] != t) throw std::logic_error("rank digest: no time point at " + std::to_string(t));
  return points[i];
}

int64_t RankDigest::computeWithin(int64_t from, int64_t to) const {
  return to <= from ? 0 : at(to).compute - at(from).compute;
}

int64_t RankDigest::communicationWithin(int64_t from, int64_t to) const {
  return to <= from ? 0 : at(to).communication - at(from).communication;
}

// As idleWithin(rank, busy, [from, to)).host_bound: the gaps wholly inside, plus the pieces of the
// gaps the two ends fall in, which are classified from where the piece starts.
int64_t RankDigest::hostBoundWithin(int64_t from, int64_t to) const {
  if (to <= from) return 0;
  const TimePoint a = at(from);
  const TimePoint b = at(to);
  auto hostBound = [](int64_t launch, int64_t start, int64_t end) {
    return launch != TimePoint::kNoLaunch && launch >= start ? end - start : 0;
  };
  // Both ends in one gap: one piece, classified by the work after `to`.
  if (a.in_gap && b.in_gap && a.gap_start == b.gap_start) return hostBound(b.launch_after, from, to);
  int64_t total = b.host_bound - a.host_bound;
  if (a.in_gap) {
    // The gap `from` lies in ends by `to` and was counted whole (unless it is the leading one).
    if (a.gap_start != INT64_MIN) total -= hostBound(a.gap_launch, a.gap_start, a.gap_end);
    total += hostBound(a.gap_launch, from, a.gap_end);
  }
  if (b.in_gap) total += hostBound(b.launch_after, b.gap_start, to);
  return total;
}

int64_t RankDigest::computeLaunchAt(int64_t t) const {
  auto it =
      std::lower_bound(compute.begin(), compute.end(), t, [](const Interval& i, int64_t v) { return i.start < v; });
  if (it == compute.end() || it->start != t) return TimePoint::kNoLaunch;
  return compute_launch[static_cast<size_t>(it - compute.begin())];
}

namespace {

uint64_t mixed(uint64_t h, int64_t v) {
  uint64_t x = h ^ (static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The windows' fingerprint, each time moved back by `back_ns` as shift() would have moved it.
uint64_t fingerprintOf(const std::vector<StepWindow>& windows, int64_t back_ns) {
  auto back = [back_ns](int64_t t) { return model::isOpenEnd(t) ? t : t - back_ns; };
  uint64_t h = mixed(0, static_cast<int64_t>(windows.size()));
  for (const StepWindow& w : windows) h = mixed(mixed(mixed(h, w.number), back(w.window.start)), back(w.window.end));
  return h;
}

}  // namespace

void RankDigest::forgetWindows() {
  if (windows_fingerprint_) return;
  windows_fingerprint_ = fingerprintOf(windows, 0);
  shifted_ns_ = 0;
  release(windows);
}

bool RankDigest::madeOver(const std::vector<StepWindow>& run_windows) const {
  if (windows_fingerprint_) return fingerprintOf(run_windows, shifted_ns_) == *windows_fingerprint_;
  return std::equal(windows.begin(), windows.end(), run_windows.begin(), run_windows.end(),
                    [](const StepWindow& x, const StepWindow& y) {
                      return x.number == y.number && x.window.start == y.window.start &&
                             x.window.end == y.window.end;
                    });
}

void RankDigest::shift(int64_t offset_ns) {
  if (offset_ns == 0) return;
  shifted_ns_ += offset_ns;
  auto move = [offset_ns](int64_t& t) {
    if (!model::isOpenEnd(t) && t != TimePoint::kNoLaunch) t += offset_ns;
  };
  for (auto& w : windows) move(w.window.start), move(w.window.end);
  if (gpu_span.length() > 0) move(gpu_span.start), move(gpu_span.end);
  if (first_activity_ns) move(*first_activity_ns);
  for (auto& step : breakdown.steps) move(step.window.start), move(step.window.end);
  if (overlap.rank)
    for (auto& piece : overlap.rank->exposed_marks) move(piece.start), move(piece.end);
  if (memory.first_change_ns) move(*memory.first_change_ns);
  for (auto& device : memory.devices) {
    move(device.peak_at_ns);
    for (auto& point : device.curve) move(point.first);
  }
  for (auto& device : memory_categories.devices) {
    move(device.peak_at_ns);
    for (auto& point : device.curve) move(point.time_ns);
  }
  for (auto& lanes : step_lanes) {
    move(lanes.window.start), move(lanes.window.end);
    for (OverviewLane* lane : {&lanes.compute, &lanes.communication, &lanes.memory})
      for (auto& i : lane->intervals) move(i.start), move(i.end);
    for (auto& i : lanes.exposed) move(i.start), move(i.end);
  }
  points.time.shift(offset_ns);
  for (auto& other : points.other_launches) move(other.launch);
  points.gaps.shift(offset_ns);  // their open ends (INT64_MIN, INT64_MAX) and kNoLaunch stay
  for (auto& i : compute) move(i.start), move(i.end);
  for (auto& t : compute_launch) move(t);
  for (auto& block : pipeline_blocks) move(block.span.start), move(block.span.end);
  if (critical_path) critical_path->shift(offset_ns);
}

void RankDigest::dropTypedResultsOnly() {
  release(breakdown.steps);
  if (overlap.rank) release(overlap.rank->steps), release(overlap.rank->exposed_per_step_ns);
  for (auto& device : memory.devices) release(device.curve);
  for (auto& device : memory_categories.devices) release(device.curve);
}

void RankDigest::dropTimelineOnly() {
  if (overlap.rank) release(overlap.rank->exposed_marks);
}

size_t RankDigest::bytes() const {
  auto text = [](const std::string& t) { return t.capacity() > 15 ? t.capacity() : 0; };
  size_t total = sizeof(*this) + windows.capacity() * sizeof(StepWindow) +
                 breakdown.steps.capacity() * sizeof(StepBreakdown) +
                 breakdown.streams.capacity() * sizeof(StreamBreakdown) + text(breakdown.host) +
                 kernels.launches.capacity() * sizeof(KernelsPart::Launch) + points.bytes() +
                 compute.capacity() * sizeof(Interval) + compute_launch.capacity() * 8 +
                 pipeline_blocks.capacity() * sizeof(PipelineComputeBlock);
  if (overlap.rank)
    total += overlap.rank->exposed_per_step_ns.capacity() * 8 + overlap.rank->steps.capacity() * 8 +
             overlap.rank->exposed_marks.capacity() * sizeof(Interval);
  for (const auto& family : overlap.other_communication)
    total += sizeof(family) + text(family.library) + text(family.operation);
  for (const auto& device : memory.devices)
    total += sizeof(device) + text(device.peak_phase) + device.curve.capacity() * sizeof(device.curve[0]);
  for (const auto& [phase, bytes] : memory.phase_peaks) total += sizeof(std::pair<std::string, int64_t>) + text(phase);
  for (const auto& device : memory_categories.devices)
    total += sizeof(device) + device.curve.capacity() * sizeof(CategoryPoint);
  for (const auto& launch : kernel_metrics.launches)
    total += sizeof(launch) + text(launch.name) + text(launch.flops_source);
  for (const auto& f : kernel_metrics.fusion) total += sizeof(f) + text(f.first) + text(f.second);
  for (const auto& node : ops.nodes) {
    total += sizeof(node) + text(node.name) + text(node.inputs);
    for (const auto& k : node.kernels) total += sizeof(k) + text(k.name);
  }
  if (critical_path) total += critical_path->bytes();
  for (const auto* list : {&activity_totals.gpu, &activity_totals.ops})
    for (const auto& t : *list) total += sizeof(t) + text(t.name) + text(t.kind);
  for (const auto& lanes : step_lanes) {
    total += sizeof(lanes);
    for (const OverviewLane* lane : {&lanes.compute, &lanes.communication, &lanes.memory})
      total += lane->intervals.capacity() * sizeof(Interval);
    total += lanes.exposed.capacity() * sizeof(Interval);
  }
  if (hta && hta->figures) total += hta->figures->streams.capacity() * sizeof(hta::HtaStreamIdle);
  return total;
}

void reduceToSkeleton(model::RankTrace& rank) {
  if (rank.activities.size() > 1) rank.activities.resize(1);
  rank.activities.shrink_to_fit();
  // release, not `v = {}`: that assigns an empty initializer list and keeps the capacity (12 MB a
  // rank of host calls at 1 M events).
  release(rank.host_calls);
  rank.clearLaunchIndex();
  release(rank.memory);
  release(rank.metric_samples);
  // What stays is held until the end: no room for growth (the loader's vectors doubled, so up to
  // half of each is spare: 30 kB a rank of string slots alone at 500 steps).
  rank.strings.pack();
  rank.launch_configs.shrink_to_fit();
  rank.streams.shrink_to_fit();
  rank.threads.shrink_to_fit();
  rank.api_functions.shrink_to_fit();
  rank.nvtx.pack();
  rank.host_ops.shrink_to_fit();
  rank.communicators.shrink_to_fit();
  rank.nccl_ops.pack();
  rank.transfers.shrink_to_fit();
  rank.links.shrink_to_fit();
}

RankDigest digestRank(const AnalysisInput& input, size_t r, std::optional<bool> hta_filter_applied,
                      const std::function<bool(int64_t)>& keep_lanes) {
  const model::RankTrace& rank = input.run.ranks[r];
  const GpuTimeSets& sets = input.time_sets[r];
  RankDigest digest;
  digest.windows = input.windowsOf(r);
  digest.gpu_span = sets.span;
  if (!rank.activities.empty()) {
    digest.first_activity_ns = rank.activities.front().start_ns;
    digest.first_activity_device = rank.activities.front().device;
  }
  digest.breakdown = breakdownOfRank(input, r);
  digest.overlap = overlapOfRank(input, r);
  digest.kernels = kernelsOfRank(input, r);
  digest.kernel_metrics = kernelMetricsOfRank(input, r);
  digest.memory = memoryOfRank(rank);
  digest.memory_categories = memoryCategoriesOfRank(input, r);
  digest.ops = opsOfRank(rank);
  digest.activity_totals = activityTotalsOfRank(input, r);
  digest.step_lanes = stepLanesOfRank(input, r, keep_lanes);
  if (input.options.hta_compat)
    digest.hta = htaOfRank(rank, hta_filter_applied ? *hta_filter_applied
                                                    : htaStepFilterApplied(input.run, input.options.include_last_step));
  digest.points = timePoints(rank, sets);
  bool point_to_point = std::any_of(rank.nccl_ops.begin(), rank.nccl_ops.end(), [](const model::NcclOp& op) {
    return op.kind == format::NcclOperationKind::kSend || op.kind == format::NcclOperationKind::kRecv;
  });
  if (point_to_point) {
    digest.compute = sets.compute;
    digest.compute_launch.reserve(sets.compute.size());
    auto next = rank.activities.begin();
    for (const Interval& i : sets.compute) {
      next = std::lower_bound(next, rank.activities.end(), i.start,
                              [](const model::GpuActivity& a, int64_t t) { return a.start_ns < t; });
      int64_t launch = TimePoint::kNoLaunch;
      for (auto it = next; it != rank.activities.end() && it->start_ns == i.start; ++it) {
        if (it->kind == model::ActivityKind::kCompute && it->correlation_id != 0) {
          launch = sets.launch_start[static_cast<size_t>(it - rank.activities.begin())];
          break;
        }
      }
      digest.compute_launch.push_back(launch);
    }
    digest.pipeline_blocks = rangedComputeBlocks(rank);
  }
  if (input.options.critical_path) digest.critical_path = criticalPathOfRank(input, r);
  return digest;
}

}  // namespace gpuxray::analysis
