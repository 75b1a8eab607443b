#include "analyzer/analysis/steps.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "analyzer/errors.h"

namespace gpuxray::analysis {
namespace {

std::vector<StepWindow> stepsFromNvtx(const model::RankTrace& rank, const std::vector<std::regex>& patterns) {
  std::vector<StepWindow> steps;
  std::vector<uint8_t> matches(rank.strings.size(), 2);  // 2 = not yet decided
  int64_t ordinal = 0;
  for (const auto& range : rank.nvtx) {
    // The PyTorch profiler repeats ProfilerStep#N on the GPU's timeline: the host's range is the step.
    if (rank.name(range.domain_id) == model::kGpuUserAnnotationDomain) continue;
    uint8_t& match = matches[range.name_id];
    if (match == 0) continue;
    std::smatch found;
    const std::string name(rank.name(range.name_id));
    bool matched = false;
    for (const auto& pattern : patterns) {
      if (std::regex_search(name, found, pattern)) {
        matched = true;
        break;
      }
    }
    match = matched ? 1 : 0;
    if (!matched) continue;
    int64_t number = ordinal++;
    if (found.size() > 1 && found[1].matched) number = std::stoll(found[1].str());
    steps.push_back({number, {range.start_ns, range.end_ns}});
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.window.start < b.window.start; });
  return steps;
}

// The collective (communicator, function, bytes) that recurs on every rank the same number of
// times and moves the most bytes in all; each occurrence's GPU end closes a step.
std::vector<std::vector<StepWindow>> stepsFromCollectives(const model::RunTrace& run) {
  using Signature = std::tuple<uint64_t, std::string, uint64_t>;
  std::map<Signature, std::vector<size_t>> counts;  // per signature: occurrences per rank index
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    for (const auto& op : rank.nccl_ops) {
      if (op.kind != format::NcclOperationKind::kCollective || !op.hasGpuTimes()) continue;
      auto& per_rank = counts[{op.comm_hash, std::string(rank.name(op.func_id)), op.bytes}];
      per_rank.resize(run.ranks.size(), 0);
      ++per_rank[r];
    }
  }
  const Signature* best = nullptr;
  uint64_t best_bytes = 0;
  for (const auto& [signature, per_rank] : counts) {
    size_t n = per_rank.front();
    if (n < 3) continue;
    // Ranks outside the communicator have none; the members must agree.
    std::set<size_t> distinct(per_rank.begin(), per_rank.end());
    distinct.erase(0);
    if (distinct.size() != 1) continue;
    uint64_t bytes = std::get<2>(signature) * n;
    if (bytes > best_bytes) best = &signature, best_bytes = bytes;
  }
  std::vector<std::vector<StepWindow>> steps(run.ranks.size());
  if (best == nullptr) return steps;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    std::vector<int64_t> ends;
    for (const auto& op : rank.nccl_ops) {
      if (op.kind == format::NcclOperationKind::kCollective && op.hasGpuTimes() && op.comm_hash == std::get<0>(*best) &&
          op.bytes == std::get<2>(*best) && rank.name(op.func_id) == std::get<1>(*best))
        ends.push_back(op.gpu_end_ns);
    }
    std::sort(ends.begin(), ends.end());
    for (size_t i = 1; i < ends.size(); ++i) steps[r].push_back({static_cast<int64_t>(i - 1), {ends[i - 1], ends[i]}});
  }
  return steps;
}

// The capture windows of a rank (cudaProfilerStart/Stop ranges, triggers, ...), on the run clock,
// one step each. Windows hold the steps someone chose to capture, so they bound steps when nothing
// marks them; the clock offset is the rank's (its drift correction is small over a window).
std::vector<StepWindow> stepsFromCaptureWindows(const model::RankTrace& rank) {
  std::vector<StepWindow> steps;
  for (const auto& window : rank.header.capture_windows) {
    if (window.end_ns <= window.start_ns) continue;
    int64_t start = static_cast<int64_t>(window.start_ns) + rank.clock_offset_ns;
    int64_t end = static_cast<int64_t>(window.end_ns) + rank.clock_offset_ns;
    steps.push_back({static_cast<int64_t>(steps.size()), {start, end}});
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.window.start < b.window.start; });
  for (size_t i = 0; i < steps.size(); ++i) steps[i].number = static_cast<int64_t>(i);
  return steps;
}

// NVTX ranges numbered like steps that no marker matched ("step 3", "iteration_12", a training
// loop's own names): what --step-marker would make them the steps; "" when the first rank with
// ranges has no two of one such name.
std::string stepMarkerHint(const model::RunTrace& run) {
  static const std::regex numbered("^((?:train[ _-]?)?(?:step|iter|iteration))([ _#:=-]*)(\\d+)$", std::regex::icase);
  for (const auto& rank : run.ranks) {
    if (rank.nvtx.empty()) continue;
    std::map<std::pair<std::string, std::string>, std::pair<std::string, std::set<std::string>>> found;
    for (const auto& range : rank.nvtx) {
      std::string_view text = rank.name(range.name_id);
      // Cheap first: the regular expression only on names that may match (emit_nvtx's aten ops do not).
      if (text.empty() || text.size() > 64 || !std::isdigit(static_cast<unsigned char>(text.back())) ||
          std::string_view("sSiItT").find(text.front()) == std::string_view::npos)
        continue;
      std::string name(text);
      std::smatch m;
      if (!std::regex_match(name, m, numbered)) continue;
      auto& [example, numbers] = found[{m[1].str(), m[2].str()}];
      if (example.empty()) example = name;
      numbers.insert(m[3].str());
    }
    for (const auto& [name, seen] : found) {
      if (seen.second.size() >= 2)
        return fmt::format("NVTX ranges such as \"{}\" look like steps: --step-marker '^{}{}(\\d+)$'", seen.first,
                           name.first, name.second);
    }
    return {};
  }
  return {};
}

}  // namespace

void findSteps(AnalysisInput& input) {
  std::vector<std::regex> patterns{std::regex("^ProfilerStep#(\\d+)$")};
  std::string source = "NVTX ranges ProfilerStep#N";
  for (const auto& marker : input.options.step_markers) {
    try {
      patterns.emplace_back(marker);
    } catch (const std::regex_error& e) {
      throw UsageError(fmt::format("--step-marker '{}': not a regular expression: {}", marker, e.what()));
    }
    source += fmt::format(" or /{}/", marker);
  }
  input.steps.assign(input.run.ranks.size(), {});
  for (size_t r = 0; r < input.run.ranks.size(); ++r) input.steps[r] = stepsFromNvtx(input.run.ranks[r], patterns);
  auto from_windows = [&] {
    for (size_t r = 0; r < input.run.ranks.size(); ++r) input.steps[r] = stepsFromCaptureWindows(input.run.ranks[r]);
  };
  size_t most_windows = 0;
  for (const auto& rank : input.run.ranks) most_windows = std::max(most_windows, rank.header.capture_windows.size());
  if (input.hasSteps()) {
    input.step_source = source;
  } else if (most_windows >= 2) {
    // Repeated windows (one cudaProfilerStart/Stop range per step, say) are the steps.
    from_windows();
    input.step_source = "capture windows";
  } else {
    input.steps = stepsFromCollectives(input.run);
    input.step_source = input.hasSteps() ? "the repeating pattern of collectives" : "none";
    if (!input.hasSteps() && most_windows == 1) {
      from_windows();
      input.step_source = "capture windows";
    }
    if (!input.hasSteps()) {
      std::string hint = stepMarkerHint(input.run);
      if (!hint.empty()) input.step_source = "none; " + hint;
    }
  }
  if (!input.options.steps.empty()) {
    std::set<int64_t> wanted(input.options.steps.begin(), input.options.steps.end());
    for (auto& rank_steps : input.steps) std::erase_if(rank_steps, [&](const StepWindow& s) { return !wanted.contains(s.number); });
  }
}

}  // namespace gpuxray::analysis
