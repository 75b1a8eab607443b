// Before and after (docs/diff.md): two runs' reports, analyzed now or read back from their JSON, compared
// on their typed results and metrics, never on table cells. The comparison is data; the renderers
// (comparison_output.cc) show it as text, Markdown or JSON (schema gpuxray.diff).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/report/report.h"

namespace gpuxray::compare {

// One side: what was given, and its report.
struct ComparisonSide {
  std::string label;  // the path as given
  std::string kind;   // "run" (analyzed now) or "report" (read from JSON)
  report::Report report;
};

enum class Change { kSame, kChanged, kNew, kGone };
const char* changeName(Change change);

struct MetricDelta {
  std::string name;
  report::Unit unit = report::Unit::kNone;
  std::string description;
  std::optional<double> before, after;
};

enum class StepVerdict { kNoSteps, kOneStep, kNoChange, kWithinNoise, kFaster, kSlower };
const char* stepVerdictName(StepVerdict verdict);

struct StepSide {
  size_t steps = 0;
  int64_t first_step = 0, last_step = 0;  // step numbers
  int64_t median_ns = 0;
  double stddev_ns = 0;
  std::optional<double> tokens_per_s;
};

struct StepComparison {
  StepSide before, after;
  StepVerdict verdict = StepVerdict::kNoSteps;
  // The spread the verdict is taken against: the larger side's step-to-step standard deviation.
  double noise_ns = 0;
  int64_t deltaNs() const { return after.median_ns - before.median_ns; }
  double deltaPct() const {
    return before.median_ns > 0 ? 100.0 * static_cast<double>(deltaNs()) / static_cast<double>(before.median_ns) : 0;
  }
};

// A kernel or op by its normalized name (normalizeKernelName): totals over the steps of all ranks, and per
// step and rank (the totals divided by the side's step windows, so runs of other lengths compare).
struct ActivityDelta {
  std::string name;  // normalized
  std::string kind;
  Change change = Change::kSame;
  uint64_t count_before = 0, count_after = 0;
  int64_t time_before_ns = 0, time_after_ns = 0;
  double per_step_before_ns = 0, per_step_after_ns = 0;
  // Kernels: the launch shape that took most time ("grid 528x1x1 block 384x1x1"), when recorded.
  std::string launch_before, launch_after;
  double perStepDeltaNs() const { return per_step_after_ns - per_step_before_ns; }
  int64_t timeDeltaNs() const { return time_after_ns - time_before_ns; }
};

struct MemorySide {
  bool recorded = false;
  int64_t peak_bytes = 0;
  std::optional<double> peak_pct;
  int32_t rank = -1;
  std::string phase;
};

struct FindingChange {
  Change change = Change::kSame;  // kGone: resolved; kNew; kSame: still there
  std::string analysis;
  report::Severity severity = report::Severity::kInfo;
  std::string summary_before, summary_after;
};

// Rows of an analysis's typed result matched across runs by key fields (a collective by communicator
// role, operation and size; a link by host and name), with value fields side by side.
struct KeyedDelta {
  std::vector<std::string> key;  // the key fields' values, as text
  Change change = Change::kSame;
  std::vector<std::optional<double>> before, after;  // per value field; unset: not recorded or absent
};

struct KeyedComparison {
  std::string id;  // "collectives", "links", ...
  std::string title;
  std::vector<std::string> key_fields;
  std::vector<std::string> value_fields;
  std::vector<report::Unit> units;  // per value field
  std::vector<KeyedDelta> rows;     // largest change of the first value field first
};

// What a keyed comparison reads: the result's array of rows and which of their fields to key and show.
struct KeyedSpec {
  std::string id, title;
  std::string analysis;  // the result's section id
  std::string list;      // the array field of the result holding the rows ("" when the result is the array)
  std::vector<std::string> key_fields;  // none: every row adds up into one
  std::vector<std::string> value_fields;
  std::vector<report::Unit> units;
  // Whole-number values (counts, times, bytes) divided by the side's steps (and ranks), so runs of
  // other lengths or world sizes compare.
  enum class Scale { kTotal, kPerStep, kPerStepAndRank };
  Scale scale = Scale::kTotal;
};

// The keyed comparisons gpuxray diff shows: collectives, links, NIC groups, time attribution, exposed
// communication per communicator role, pipeline bubbles.
const std::vector<KeyedSpec>& keyedSpecs();

KeyedComparison compareKeyed(const KeyedSpec& spec, const report::Report& before, const report::Report& after);

struct RunComparison {
  std::string before_label, after_label;
  std::string before_kind, after_kind;
  // What could not be matched or compared (other world sizes, other step numbers, a result one side lacks).
  std::vector<std::string> notes;
  // Inputs that make the comparison weaker (a side missing ranks).
  std::vector<std::string> warnings;
  StepComparison steps;
  std::vector<MetricDelta> metrics;    // every metric of either side, by name
  std::vector<ActivityDelta> kernels;  // largest per-step change first
  std::vector<ActivityDelta> ops;
  bool kernels_from_totals = true;  // false: only compute kernels were comparable (kernels result)
  MemorySide memory_before, memory_after;
  std::vector<FindingChange> findings;  // resolved, then new, then still there
  std::vector<KeyedComparison> tables;  // collectives, links, time attribution (where both sides have them)
  bool identical() const;               // nothing changed anywhere
};

// Kernel names as runs are compared by: the return type and the parameter list dropped, template
// arguments kept, white space collapsed ("void gemm<128, 64>(float*, int)" -> "gemm<128, 64>").
std::string normalizeKernelName(const std::string& name);
// A finding's identity across runs: its analysis and summary with measurements (numbers with a
// decimal point or followed by %, x or a unit, and counts: "1182 of 1251 collectives") replaced by
// '#', so that "NIC mlx5_3 moves data at 21.3 GB/s" is the same finding at 35.0 GB/s. Rank numbers are
// kept, or masked too when the runs do not have the same ranks (rank 4 of one and rank 12 of the
// other then name no common GPU).
enum class RankNumbers { kCompared, kIgnored };
std::string findingKey(const report::Finding& finding, RankNumbers ranks = RankNumbers::kCompared);

RunComparison compareRuns(const ComparisonSide& before, const ComparisonSide& after);

// Renderers: the whole document. `top` bounds the kernel and op tables in text and Markdown.
std::string renderComparisonText(const RunComparison& comparison, size_t top);
std::string renderComparisonMarkdown(const RunComparison& comparison, size_t top);
std::string renderComparisonJson(const RunComparison& comparison);
inline constexpr int kDiffSchemaVersion = 1;

}  // namespace gpuxray::compare
