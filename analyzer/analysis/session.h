// The one pipeline every command that reads a run goes through (analyze, export, convert's timeline,
// the tests): load the ranks, put them on one clock, keep --window, find the steps, build the
// per-rank interval sets, and run the analyses into a report. The order is the invariant the
// analyses rely on:
//   1. load (--ranks: only those files' records are read into the model);
//   2. align the clocks (unless turned off), matching NCCL operations across ranks once;
//   3. --window: the origin is the first GPU activity after alignment, so it means the same instant
//      on every rank; records that reach into the window are kept, the rest dropped;
//   4. steps, found on what is kept (--steps restricts per-step figures and the timeline);
//   5. per rank, its digest (rank_digest.h: the per-rank halves of the analyses and what the
//      cross-rank ones ask of its GPU time), then the analyses, which read the ranks' events only
//      through the digests.
// Without keep_events the ranks are digested as they are loaded (the per-rank phase, on `jobs`
// workers, at most `jobs` ranks' events in memory at once) and only their skeletons are kept; steps
// 2-4 then run on the skeletons (the cross-rank phase). A digest is made before the rank's clock
// offset, the other ranks' steps and --window are known, on the rank's own steps; where those
// turn out different (a --window, clock drift, steps found across ranks that differ from its own)
// the rank is read and digested again once they are known.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/analysis/clock_alignment.h"
#include "analyzer/analysis/rank_digest.h"
#include "analyzer/analysis/run_selection.h"
#include "analyzer/model/run_trace.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

struct SessionOptions {
  // Trace files or directories of them (one run); unused by the constructor that takes a run.
  std::vector<std::string> paths;
  bool allow_mixed_runs = false;
  unsigned jobs = 0;  // files loaded at once; 0 = one per core
  // Called after each file with (files done, files in all), from the worker that finished it.
  std::function<void(size_t, size_t)> progress;
  // Put every rank on one clock (--no-align and --compat hta turn it off).
  bool align = true;
  RunSelection selection;
  // Step markers, top-N, HTA compatibility; `steps` is taken from selection.steps.
  AnalysisOptions analysis;
  // Keep every rank's events (for the timeline); false: only the ranks' skeletons and digests.
  bool keep_events = true;
  // The report's typed results (JSON, the X-ray, diff); false: sections, findings and metrics only,
  // which is all text and Markdown show (the same report otherwise, in less memory).
  bool typed_results = true;
  // The analyses' timeline marks (exposed communication, bubbles, late arrivals): for the timeline
  // export only; false where no timeline is written.
  bool timeline_marks = true;
  // --comm-kernel's patterns as given (what a digest file made with them says, digest_file.h).
  std::vector<std::string> comm_kernels;
  // With keep_events: the memory the command may use (--max-memory; 0: no limit). Loading stops with a
  // MemoryBudgetError as soon as the ranks read so far say the run's events will not fit.
  uint64_t memory_budget_bytes = 0;
};

// What the two phases took (for the figures).
struct PhaseTimes {
  double per_rank_s = 0;                            // loading and digesting, wall time
  double cross_rank_s = 0;                          // alignment, window, steps, the analyses on the digests
  double per_rank_cpu_s = 0, cross_rank_cpu_s = 0;  // CPU time of the process in each
  size_t ranks_read_again = 0;
  size_t digest_bytes = 0;  // all digests, roughly
};

// The per-rank phase alone (`gpuxray digest`): loads the files under options.paths and hands each
// rank's skeleton (with the stats its loading counted) and its digest, made as in a session without
// keep_events, to `digested`, from the worker that made them. Returns the run of skeletons.
model::RunTrace digestRanks(
    const SessionOptions& options,
    const std::function<void(const model::RankTrace& skeleton, const RankDigest& digest)>& digested);

class Session {
 public:
  // Loads the run under options.paths and prepares it. Throws InputError (nothing usable) and
  // UsageError (an invalid --step-marker).
  explicit Session(SessionOptions options);
  // Prepares a run already in memory (generated or hand-built), as if it had been loaded.
  Session(model::RunTrace run, SessionOptions options);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const model::RunTrace& run() const { return run_; }
  const AnalysisInput& input() const { return input_; }
  // What alignment did; nullptr when it was turned off.
  const ClockAlignment* clock() const { return clock_ ? &*clock_ : nullptr; }
  // Loading's warnings and the --window line, in order: the report's warnings.
  const std::vector<std::string>& warnings() const { return run_.warnings; }

  // --window's origin on the run clock: the first GPU activity once aligned (0 for an empty run).
  int64_t windowOriginNs() const { return window_origin_ns_; }
  // --window on the run clock; unset without one.
  std::optional<Interval> window() const;
  // Records --window left out.
  uint64_t recordsOutsideWindow() const { return outside_window_; }
  // The part of the run clock a timeline shows: --window intersected with the span of --steps' steps;
  // unset for everything. Throws UsageError when no step has those numbers, or none is in the window.
  std::optional<Interval> timelineWindow() const;

  const PhaseTimes& phaseTimes() const { return phase_times_; }

  // The report of `gpuxray analyze`: the run's summary, the warnings, every analysis, findings most
  // costly first (thresholds are the command's).
  report::Report analyze() const;

 private:
  struct Loaded;
  Session(Loaded loaded, SessionOptions options);
  void prepare();
  // `why`: per rank, why its digest does not hold (named when a digest file's trace cannot be read).
  void digestAgain(const std::vector<size_t>& ranks, const std::vector<std::string>& why,
                   std::optional<bool> hta_filter, const std::function<bool(int64_t)>& keep_lanes);
  // Rank index `r` read again from its file, as the session keeps it: its rank number, the run's clock,
  // --window (the records it left out into `outside_window`).
  model::RunTrace readAgain(size_t r, uint64_t* outside_window = nullptr) const;

  SessionOptions options_;
  model::RunTrace run_;
  std::optional<ClockAlignment> clock_;
  AnalysisInput input_;
  std::vector<RankDigest> digests_;
  // Without keep_events: the digests made while loading, by file.
  std::map<std::string, RankDigest> early_digests_;
  // Ranks read from digest files: their trace -> the digest file, and why a digest was not taken.
  std::map<std::string, std::string> digest_files_, digests_not_taken_;
  bool digested_ = false;
  mutable PhaseTimes phase_times_;
  int64_t window_origin_ns_ = 0;
  uint64_t outside_window_ = 0;
};

}  // namespace gpuxray::analysis
