// Device memory by category: pairs each release with its allocation (same device and address),
// classifies every allocation by when it was made and released against the steps and the phase
// ranges (the rules, in order, are in docs/analyses.md, "Memory by category"), and adds the
// changes up per category, so that the categories always sum to the memory analysis's curve.

#include "analyzer/analysis/memory_categories.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <optional>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/memory.h"
#include "analyzer/analysis/rank_digest.h"

namespace gpuxray::analysis {
namespace {

using model::MemoryCategory;
using report::Cell;
using report::ResultValue;
using report::Unit;

bool contains(std::string_view text, std::string_view word) {
  auto it = std::search(text.begin(), text.end(), word.begin(), word.end(),
                        [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  return it != text.end();
}

// The phase a range's name marks; kOutsideSteps for none.
MemoryPhase phaseOfName(std::string_view name) {
  if (contains(name, "optimizer")) return MemoryPhase::kOptimizer;
  if (contains(name, "recompute") || contains(name, "checkpoint")) return MemoryPhase::kRecompute;
  if (contains(name, "backward")) return MemoryPhase::kBackward;
  if (contains(name, "forward")) return MemoryPhase::kForward;
  return MemoryPhase::kOutsideSteps;
}

// One rank's steps and phase ranges, asked what was going on at an allocation or a release. An
// allocation at the instant a range starts belongs to it, and one at the instant it ends does
// not; a release at the instant a range ends still belongs to it (its last act).
class RankPhases {
 public:
  RankPhases(const model::RankTrace& rank, std::vector<StepWindow> steps) : steps_(std::move(steps)) {
    std::vector<Interval> ranges[5];
    for (const auto& range : rank.nvtx) {
      if (rank.name(range.domain_id) == model::kGpuUserAnnotationDomain) continue;
      MemoryPhase phase = phaseOfName(rank.name(range.name_id));
      Interval interval{range.start_ns, range.end_ns};
      bool is_step = std::any_of(steps_.begin(), steps_.end(), [&](const StepWindow& s) {
        return s.window.start == interval.start && s.window.end == interval.end;
      });
      if (!is_step && interval.length() > 0) ops_.push_back(interval);
      if (phase != MemoryPhase::kOutsideSteps) ranges[static_cast<size_t>(phase)].push_back(interval);
    }
    // cpu_ops are ops (for temporaries) and mark backward (autograd's nodes) and the optimizer; an aten
    // op with "forward" in its name is not the model's forward.
    for (const auto& op : rank.host_ops) {
      Interval interval{op.start_ns, op.end_ns};
      if (interval.length() > 0) ops_.push_back(interval);
      MemoryPhase phase = phaseOfName(rank.name(op.name_id));
      if (phase == MemoryPhase::kBackward || phase == MemoryPhase::kOptimizer)
        ranges[static_cast<size_t>(phase)].push_back(interval);
    }
    std::stable_sort(ops_.begin(), ops_.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
    for (size_t p = 0; p < 5; ++p) phase_ranges_[p] = unionOf(std::move(ranges[p]));
    explicit_forward_ = !phase_ranges_[static_cast<size_t>(MemoryPhase::kForward)].empty();
    for (const auto& set : phase_ranges_) recorded_ = recorded_ || !set.empty();
  }

  bool recorded() const { return recorded_; }
  bool hasSteps() const { return !steps_.empty(); }
  int64_t firstStepStart() const { return steps_.front().window.start; }
  int64_t lastStepEnd() const { return steps_.back().window.end; }

  const StepWindow* stepAt(int64_t t) const {
    for (const auto& step : steps_) {
      if (step.window.start <= t && t < step.window.end) return &step;
    }
    return nullptr;
  }

  MemoryPhase phaseAt(int64_t t, bool release) const {
    for (MemoryPhase phase :
         {MemoryPhase::kOptimizer, MemoryPhase::kRecompute, MemoryPhase::kBackward, MemoryPhase::kForward}) {
      if (inside(phase_ranges_[static_cast<size_t>(phase)], t, release)) return phase;
    }
    const StepWindow* step = stepAt(t);
    if (step == nullptr) return MemoryPhase::kOutsideSteps;
    // PyTorch's traces mark backward (autograd) and the optimizer but not forward: before the
    // step's first backward range it is forward.
    if (!explicit_forward_) {
      std::optional<int64_t> backward = firstStartIn(MemoryPhase::kBackward, step->window);
      if (backward && t < *backward) return MemoryPhase::kForward;
    }
    return MemoryPhase::kUnclassified;
  }

  // The end of the innermost range (not a step, not a GPU-side copy) open at `t`, if any: its
  // shortest, since ranges nest.
  std::optional<int64_t> innermostRangeEnd(int64_t t) const {
    std::optional<int64_t> best_end;
    int64_t best_length = 0;
    for (const auto& range : ops_) {
      if (range.start > t) break;
      if (t < range.end && (!best_end || range.length() < best_length))
        best_end = range.end, best_length = range.length();
    }
    return best_end;
  }

  // The start of the first optimizer range after `t`, if any.
  std::optional<int64_t> nextOptimizer(int64_t t) const {
    for (const auto& range : phase_ranges_[static_cast<size_t>(MemoryPhase::kOptimizer)]) {
      if (range.start >= t) return range.start;
    }
    return std::nullopt;
  }

  // The end of the optimizer range open at `t` (an allocation's), if any.
  std::optional<int64_t> optimizerEnd(int64_t t) const {
    for (const auto& range : phase_ranges_[static_cast<size_t>(MemoryPhase::kOptimizer)]) {
      if (range.start <= t && t < range.end) return range.end;
    }
    return std::nullopt;
  }

 private:
  static bool inside(const IntervalSet& set, int64_t t, bool release) {
    auto it = std::upper_bound(set.begin(), set.end(), t, [](int64_t v, const Interval& i) { return v < i.start; });
    if (release) {
      // (start, end]: the last interval starting before t.
      auto before =
          std::lower_bound(set.begin(), set.end(), t, [](const Interval& i, int64_t v) { return i.start < v; });
      return before != set.begin() && t <= std::prev(before)->end;
    }
    return it != set.begin() && t < std::prev(it)->end;
  }

  std::optional<int64_t> firstStartIn(MemoryPhase phase, Interval window) const {
    for (const auto& range : phase_ranges_[static_cast<size_t>(phase)]) {
      if (range.start >= window.start && range.start < window.end) return range.start;
    }
    return std::nullopt;
  }

  std::vector<StepWindow> steps_;
  IntervalSet phase_ranges_[5];
  std::vector<Interval> ops_;  // ranges and cpu_ops, by start
  bool explicit_forward_ = false;
  bool recorded_ = false;
};

std::vector<StepWindow> stepsOf(const AnalysisInput& input, size_t r) {
  return r < input.steps.size() ? input.steps[r] : std::vector<StepWindow>{};
}

// The rules of docs/analyses.md, in their order.
MemoryCategory categoryOf(const CategorizedAllocation& a, const RankPhases& phases) {
  const bool released = a.released_ns >= 0;
  if (phases.hasSteps() && a.allocated_ns < phases.firstStepStart() &&
      (!released || a.released_ns >= phases.lastStepEnd()))
    return MemoryCategory::kParameters;
  if (released) {
    std::optional<int64_t> op_end = phases.innermostRangeEnd(a.allocated_ns);
    if (op_end && a.released_ns <= *op_end) return MemoryCategory::kTemporaries;
  }
  const MemoryPhase allocated_in = phases.phaseAt(a.allocated_ns, false);
  if (allocated_in == MemoryPhase::kOptimizer) {
    std::optional<int64_t> end = phases.optimizerEnd(a.allocated_ns);
    if (!released || (end && a.released_ns > *end)) return MemoryCategory::kOptimizerState;
  }
  if (allocated_in == MemoryPhase::kBackward) {
    if (!released) return MemoryCategory::kGradients;
    std::optional<int64_t> optimizer = phases.nextOptimizer(a.allocated_ns);
    const StepWindow* step = phases.stepAt(a.allocated_ns);
    if (optimizer ? a.released_ns >= *optimizer : step != nullptr && a.released_ns >= step->window.end)
      return MemoryCategory::kGradients;
  }
  if ((allocated_in == MemoryPhase::kForward || allocated_in == MemoryPhase::kRecompute) && released) {
    MemoryPhase released_in = phases.phaseAt(a.released_ns, true);
    if (released_in == MemoryPhase::kBackward || released_in == MemoryPhase::kRecompute)
      return MemoryCategory::kActivations;
  }
  return MemoryCategory::kOther;
}

// Allocations of one rank in order, each with its release (same device and address) if seen; the
// index of the allocation each change belongs to (-1: a release of nothing seen).
struct PairedChanges {
  std::vector<CategorizedAllocation> allocations;
  std::vector<int64_t> owner;  // per rank.memory change
};

PairedChanges pairChanges(const model::RankTrace& rank) {
  PairedChanges paired;
  paired.owner.reserve(rank.memory.size());
  std::map<std::pair<uint32_t, uint64_t>, size_t> live;
  for (const auto& change : rank.memory) {
    if (change.delta_bytes >= 0) {
      paired.owner.push_back(static_cast<int64_t>(paired.allocations.size()));
      if (change.address != 0) live[{change.device, change.address}] = paired.allocations.size();
      paired.allocations.push_back({change.time_ns, -1, change.delta_bytes, change.address, change.device});
      continue;
    }
    auto it = change.address != 0 ? live.find({change.device, change.address}) : live.end();
    if (it == live.end()) {
      paired.owner.push_back(-1);
      continue;
    }
    paired.owner.push_back(static_cast<int64_t>(it->second));
    paired.allocations[it->second].released_ns = change.time_ns;
    live.erase(it);
  }
  return paired;
}

ResultValue categoryBytes(const CategoryBytes& bytes) {
  ResultValue object = ResultValue::object();
  for (size_t c = 0; c < model::kMemoryCategories; ++c)
    object.set(std::string(model::memoryCategoryName(static_cast<MemoryCategory>(c))), ResultValue::integer(bytes[c]));
  return object;
}

ResultValue resultValue(const MemoryCategoriesResult& result) {
  ResultValue categories = ResultValue::array();
  for (size_t c = 0; c < model::kMemoryCategories; ++c)
    categories.push(ResultValue::text(std::string(model::memoryCategoryName(static_cast<MemoryCategory>(c)))));
  ResultValue devices = ResultValue::array();
  for (const auto& d : result.devices) {
    ResultValue curve = ResultValue::array();
    for (const auto& point : d.curve) {
      ResultValue row = ResultValue::array().push(ResultValue::integer(point.time_ns - result.origin_ns));
      for (int64_t bytes : point.bytes) row.push(ResultValue::integer(bytes));
      curve.push(std::move(row));
    }
    ResultValue allocations = ResultValue::object();
    for (size_t c = 0; c < model::kMemoryCategories; ++c)
      allocations.set(std::string(model::memoryCategoryName(static_cast<MemoryCategory>(c))),
                      ResultValue::integer(static_cast<int64_t>(d.allocations[c])));
    devices.push(ResultValue::object()
                     .set("rank", ResultValue::integer(d.rank))
                     .set("device", ResultValue::integer(d.device))
                     .set("peak_bytes", ResultValue::integer(d.peak_bytes))
                     .set("peak_at_ns", ResultValue::integer(d.peak_at_ns - result.origin_ns))
                     .set("peak_phase", ResultValue::text(std::string(memoryPhaseName(d.peak_phase))))
                     .set("peak_step", d.peak_step >= 0 ? ResultValue::integer(d.peak_step) : ResultValue())
                     .set("at_peak", categoryBytes(d.at_peak))
                     .set("allocations", std::move(allocations))
                     .set("unmatched_release_bytes", ResultValue::integer(d.unmatched_release_bytes))
                     .set("curve", std::move(curve)));
  }
  return ResultValue::object()
      .set("recorded", ResultValue::flag(result.recorded))
      .set("addresses_recorded", ResultValue::flag(result.addresses_recorded))
      .set("phases_recorded", ResultValue::flag(result.phases_recorded))
      .set("origin_ns", ResultValue::integer(result.origin_ns))
      .set("categories", std::move(categories))
      .set("devices", std::move(devices));
}

}  // namespace

std::string_view memoryPhaseName(MemoryPhase phase) {
  switch (phase) {
    case MemoryPhase::kOutsideSteps:
      return "outside the steps";
    case MemoryPhase::kForward:
      return "forward";
    case MemoryPhase::kBackward:
      return "backward";
    case MemoryPhase::kRecompute:
      return "recompute";
    case MemoryPhase::kOptimizer:
      return "optimizer";
    case MemoryPhase::kUnclassified:
      return "unclassified";  // in a step, in no phase range
  }
  return "";
}

int64_t CategoryPoint::total() const {
  return std::accumulate(bytes.begin(), bytes.end(), int64_t{0});
}

std::vector<std::vector<CategorizedAllocation>> categorizeAllocations(const AnalysisInput& input) {
  std::vector<std::vector<CategorizedAllocation>> out;
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    RankPhases phases(input.run.ranks[r], stepsOf(input, r));
    PairedChanges paired = pairChanges(input.run.ranks[r]);
    for (auto& a : paired.allocations) a.category = categoryOf(a, phases);
    out.push_back(std::move(paired.allocations));
  }
  return out;
}

MemoryCategoriesPart memoryCategoriesOfRank(const AnalysisInput& input, size_t r) {
  const auto& rank = input.run.ranks[r];
  MemoryCategoriesPart part;
  if (rank.memory.empty()) return part;
  part.recorded = true;
  RankPhases phases(rank, stepsOf(input, r));
  part.phases_recorded = phases.recorded();
  PairedChanges paired = pairChanges(rank);
  for (auto& a : paired.allocations) a.category = categoryOf(a, phases);
  std::map<uint32_t, DeviceMemoryCategories> devices;
  std::map<uint32_t, std::vector<CategoryPoint>> curves;
  std::map<uint32_t, CategoryBytes> in_use;
  for (size_t i = 0; i < rank.memory.size(); ++i) {
    const auto& change = rank.memory[i];
    auto [it, added] = devices.try_emplace(change.device);
    DeviceMemoryCategories& d = it->second;
    if (added) d.rank = rank.rank, d.device = change.device;
    CategoryBytes& now = in_use[change.device];
    const int64_t owner = paired.owner[i];
    MemoryCategory category =
        owner >= 0 ? paired.allocations[static_cast<size_t>(owner)].category : MemoryCategory::kOther;
    if (change.address != 0) part.addresses_recorded = true;
    if (owner < 0) d.unmatched_release_bytes -= change.delta_bytes;
    if (change.delta_bytes >= 0) ++d.allocations[static_cast<size_t>(category)];
    now[static_cast<size_t>(category)] += change.delta_bytes;
    CategoryPoint point{change.time_ns, now};
    if (point.total() > d.peak_bytes) {
      d.peak_bytes = point.total();
      d.peak_at_ns = change.time_ns;
      d.at_peak = now;
    }
    curves[change.device].push_back(point);
  }
  for (auto& [device, d] : devices) {
    d.peak_phase = phases.phaseAt(d.peak_at_ns, false);  // a peak is reached by an allocation
    if (const StepWindow* step = phases.stepAt(d.peak_at_ns)) d.peak_step = step->number;
    d.curve = keepHighest(std::move(curves[device]), DeviceMemory::kMaxCurvePoints,
                          [](const CategoryPoint& p) { return p.total(); });
    part.devices.push_back(std::move(d));
  }
  return part;
}

MemoryCategoriesResult computeMemoryCategories(const AnalysisInput& input) {
  MemoryCategoriesResult result;
  result.origin_ns = memoryOrigin(input);
  for (size_t r = 0; r < input.run.ranks.size(); ++r) {
    const MemoryCategoriesPart& part = input.digest(r).memory_categories;
    if (!part.recorded) continue;
    result.recorded = true;
    result.phases_recorded = result.phases_recorded || part.phases_recorded;
    result.addresses_recorded = result.addresses_recorded || part.addresses_recorded;
    for (DeviceMemoryCategories d : part.devices) {
      d.rank = input.run.ranks[r].rank;  // a PyTorch-profiler trace's rank is given after it is digested
      result.devices.push_back(std::move(d));
    }
  }
  return result;
}

void presentMemoryCategories(const MemoryCategoriesResult& result, size_t top, report::Report& report) {
  auto& section = report.addSection("memory_categories", "Device memory by category");
  report.addResult("memory_categories", [&] { return resultValue(result); });
  if (!result.recorded) {
    section.notes.push_back("No device memory allocations in the trace.");
    return;
  }
  section.notes.push_back(
      "What each device's memory held at its peak, each allocation's category inferred from when it was made and "
      "released against the steps and the forward, backward, recompute and optimizer ranges (docs/analyses.md).");
  if (!result.addresses_recorded)
    section.notes.push_back(
        "The trace records no addresses, so releases cannot be paired with allocations: all is 'other'.");
  if (!result.phases_recorded)
    section.notes.push_back(
        "No forward, backward or optimizer ranges: only parameters and temporaries can be told apart.");
  std::vector<report::Column> columns = {{"rank", "rank"}, {"device", "device"}, {"peak", "peak"}};
  for (size_t c = 0; c < model::kMemoryCategories; ++c) {
    std::string name(model::memoryCategoryName(static_cast<MemoryCategory>(c)));
    std::string title = name;
    std::replace(title.begin(), title.end(), '_', ' ');
    columns.push_back({name, title});
  }
  columns.push_back({"phase", "during"});
  report::Table peaks{"at_peak", "", std::move(columns), {}};
  for (const auto& d : result.devices) {
    std::vector<Cell> row = {Cell::of(d.rank, Unit::kNone), Cell::of(d.device, Unit::kNone),
                             Cell::of(static_cast<double>(d.peak_bytes), Unit::kBytes)};
    for (int64_t bytes : d.at_peak) row.push_back(Cell::of(static_cast<double>(bytes), Unit::kBytes));
    row.push_back(Cell::of(d.peak_step >= 0 ? fmt::format("{} (step {})", memoryPhaseName(d.peak_phase), d.peak_step)
                                            : std::string(memoryPhaseName(d.peak_phase))));
    peaks.rows.push_back(std::move(row));
  }
  report::keepWorstRows(peaks, top, "devices", "highest peak first",
                        [](const std::vector<Cell>& row) { return row[2].number; });
  section.tables.push_back(std::move(peaks));
}

void analyzeMemoryCategories(const AnalysisInput& input, report::Report& report) {
  presentMemoryCategories(computeMemoryCategories(input), input.options.top, report);
}

}  // namespace gpuxray::analysis
