#include "analyzer/analysis/session.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
// glibc's mallopt, except under AddressSanitizer, whose allocator replaces glibc's.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUXRAY_ADDRESS_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define GPUXRAY_ADDRESS_SANITIZER 1
#endif
#if defined(__GLIBC__) && !defined(GPUXRAY_ADDRESS_SANITIZER)
#define GPUXRAY_TUNE_HEAP 1
#include <malloc.h>
#endif
#include <ctime>
#include <exception>
#include <filesystem>
#include <limits>
#include <mutex>
#include <utility>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/digest_file.h"
#include "analyzer/analysis/step_overview.h"
#include "analyzer/analysis/steps.h"
#include "analyzer/errors.h"
#include "analyzer/load/run_files.h"
#include "analyzer/load/run_loader.h"
#include "analyzer/report/report.h"
#include "analyzer/report/stats.h"
#include "analyzer/workers.h"

namespace gpuxray::analysis {
namespace {

// The digests a session may take instead of digesting ranks itself, by the rank's trace: those made
// as the ranks were loaded and those read from digest files.
struct EarlyDigests {
  std::mutex mutex;
  std::map<std::string, RankDigest> digests;
  // Ranks read from digest files: the digest file, and why its digest was not taken.
  std::map<std::string, std::string> files, not_taken;
};

std::string digestOptionsOf(const SessionOptions& options) {
  AnalysisOptions analysis = options.analysis;
  analysis.steps = options.selection.steps;
  return digestOptionsText(analysis, options.comm_kernels);
}

// A digest file, for load::LoadOptions::read_digest: the rank's skeleton and its loading's warning
// lines, and its digest when it was made with these options and no --window asks for the events
// again. With keep_events, the rank's trace instead.
model::RankTrace readDigest(const std::string& path, std::vector<std::string>& warnings, const SessionOptions& options,
                            EarlyDigests& early) {
  DigestFile file = readDigestFile(path);
  model::RankTrace& rank = file.skeleton;
  // Where the trace is read again from: as it was named when the digest was made, or absolute
  // (the digests are read from another directory).
  std::error_code error;
  if (!std::filesystem::exists(rank.path, error) && std::filesystem::exists(file.header.source_absolute_path, error))
    rank.path = file.header.source_absolute_path;
  if (options.keep_events) {
    try {
      return load::loadTraceFile(rank.path, warnings);
    } catch (const std::exception& e) {
      throw InputError(
          fmt::format("{}: this command needs the rank's events (a timeline, --critical-path on one rank), and its "
                      "trace cannot be read: {}",
                      path, e.what()));
    }
  }
  for (const auto& line : rank.stats.lines()) warnings.push_back(line.text);
  std::string why;
  if (options.selection.window) {
    why = "--window";
  } else if (options.analysis.critical_path) {
    why = "--critical-path: its steps' graphs are not in digest files";
  } else if (std::string here = digestOptionsOf(options); file.header.options != here) {
    why = fmt::format("it was made with other analysis options: {}; here: {}", file.header.options, here);
  }
  file.digest.dropTimelineOnly();  // with keep_events the trace was read instead
  if (why.empty() && !options.typed_results) file.digest.dropTypedResultsOnly();
  if (why.empty()) file.digest.forgetWindows();
  std::lock_guard lock(early.mutex);
  early.files[rank.path] = path;
  if (why.empty()) {
    early.digests.emplace(rank.path, std::move(file.digest));
  } else {
    early.not_taken[rank.path] = why;
  }
  return std::move(rank);
}

load::LoadOptions loadOptionsOf(const SessionOptions& options, EarlyDigests& early) {
  load::LoadOptions load_options;
  load_options.allow_mixed_runs = options.allow_mixed_runs;
  load_options.threads = options.jobs;
  load_options.ranks = options.selection.ranks;
  load_options.progress = options.progress;
  load_options.read_digest = [&options, &early](const std::string& path, std::vector<std::string>& warnings) {
    return readDigest(path, warnings, options, early);
  };
  return load_options;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double processCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

// The step the overview shows is chosen on the first rank in run order (the lowest rank number), so
// each digest keeps the lanes of that step only, not of every step (~2 MB a rank at 500 steps). The
// loader takes up the first file in name order first, which is the lowest rank's in the usual
// naming: every other rank waits for it to have found its steps (it does so early, while the other
// files are still being read) and keeps the lanes of the step of the lowest rank seen so far. A rank
// digested before a lower one turned up is read again if it lacks the chosen step's lanes.
struct OverviewStepGuess {
  std::mutex mutex;
  std::condition_variable first_file_known;
  bool first_file_done = false;
  bool any = false;
  int32_t lowest_rank = 0;
  int64_t step = -1;

  void firstFileDone() {
    {
      std::lock_guard lock(mutex);
      first_file_done = true;
    }
    first_file_known.notify_all();
  }
  // The step whose lanes rank `rank` keeps, once it has found its own median `own_step`.
  int64_t stepFor(int32_t rank, int64_t own_step, size_t file) {
    std::unique_lock lock(mutex);
    if (!any || rank < lowest_rank) any = true, lowest_rank = rank, step = own_step;
    if (file == 0) {
      first_file_done = true;
      lock.unlock();
      first_file_known.notify_all();
      return own_step;
    }
    first_file_known.wait(lock, [this] { return first_file_done; });
    return step;
  }
};

// A rank digested on its own, as it is loaded: on its own clock, over its own steps, with --compat
// hta's filter of its own step names. Leaves `rank` as it was.
RankDigest digestAlone(model::RankTrace& rank, size_t file, const SessionOptions& options, OverviewStepGuess& guess) {
  model::RunTrace alone;
  alone.ranks.push_back(std::move(rank));
  AnalysisInput input{alone, options.analysis, {}, "none", {}};
  input.options.steps = options.selection.steps;
  findSteps(input);
  input.time_sets.push_back(gpuTimeSetsOf(alone.ranks[0]));
  std::vector<StepWindow> windows = input.windowsOf(0);
  const StepWindow* own = overviewWindowOf(windows);
  int64_t shown_step = guess.stepFor(alone.ranks[0].rank, own != nullptr ? own->number : -1, file);
  RankDigest digest = digestRank(input, 0, std::nullopt, [&](int64_t step) { return step == shown_step; });
  rank = std::move(alone.ranks[0]);
  return digest;
}

report::RunSummary summarize(const AnalysisInput& input) {
  report::RunSummary summary;
  const auto& run = input.run;
  summary.run_id = run.run_id;
  summary.world_size = run.world_size;
  summary.records = run.records();
  int64_t first = 0, last = 0;
  bool any = false;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const auto& rank = run.ranks[r];
    summary.ranks.push_back(rank.rank);
    if (std::find(summary.hosts.begin(), summary.hosts.end(), rank.header.hostname) == summary.hosts.end())
      summary.hosts.push_back(rank.header.hostname);
    Interval span = input.digest(r).gpu_span;
    if (span.length() <= 0) continue;
    first = any ? std::min(first, span.start) : span.start;
    last = any ? std::max(last, span.end) : span.end;
    any = true;
  }
  summary.span_ns = last - first;
  size_t steps = 0;
  for (const auto& s : input.steps) steps = std::max(steps, s.size());
  summary.steps = steps;
  summary.step_source = input.step_source;
  summary.step_markers = input.options.step_markers;
  return summary;
}

// Each rank's events are freed once it is digested, and the next rank allocates as much again. glibc
// gave them back to the system (its trim threshold follows its mmap threshold, which grows after the
// first large free) and faulted them in again for the next rank: a third of analyze's CPU time went
// to page faults and clearing. Fixed thresholds keep the freed heap for the next rank; vectors past
// 32 MiB still come from mmap and go back whole. Peak memory stays one rank's events per worker. With
// every rank's events kept (a timeline) the same holds for each rank's interval
// sets, freed once the rank is digested, and what comes after them.
void keepFreedRanksForReuse() {
#ifdef GPUXRAY_TUNE_HEAP
  static const bool tuned = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    return true;
  }();
  (void)tuned;
#endif
}

// With every rank's events kept: the run's ranks, loaded with `load_options`, refused as soon as the
// ranks read so far say that all of them will not fit in options.memory_budget_bytes (0: no budget), by a clear
// margin (a fourth: the first ranks may be larger than the rest), rather than after the memory has
// run out on the way there (at 1,024 ranks of 1 M events: 29 s and 17.7 GiB of page faults).
model::RunTrace loadKeepingEvents(const SessionOptions& options, load::LoadOptions load_options) {
  const uint64_t budget = options.memory_budget_bytes;
  std::atomic<size_t> files{0}, kept{0};
  std::atomic<uint64_t> held{0};
  if (budget > 0) {
    load_options.progress = [&, progress = options.progress](size_t done, size_t all) {
      files = all;
      if (progress) progress(done, all);
    };
    load_options.reduce = [&](model::RankTrace& rank, size_t) {
      uint64_t bytes = held += rank.heldBytes();
      size_t ranks = ++kept, expected = files;
      if (!options.selection.ranks.empty()) expected = std::min(expected, options.selection.ranks.size());
      if (ranks < std::min<size_t>(expected, 4) || expected == 0) return;
      double projected = static_cast<double>(bytes) / static_cast<double>(ranks) * static_cast<double>(expected);
      if (projected <= 1.25 * static_cast<double>(budget)) return;
      throw MemoryBudgetError(fmt::format(
          "this command keeps every rank's events (a timeline, --critical-path on one rank): about {} for {} "
          "ranks ({} a rank, from the first {}), over the {} it may use (--max-memory); give a larger limit, or "
          "analyze part of the run with --ranks or --window",
          report::formatValue(projected, report::Unit::kBytes), expected,
          report::formatValue(static_cast<double>(bytes) / static_cast<double>(ranks), report::Unit::kBytes), ranks,
          report::formatValue(static_cast<double>(budget), report::Unit::kBytes)));
    };
  }
  return load::loadRun(options.paths, load_options);
}

// The per-rank phase: each rank digested as it is loaded (unless --window: its digest waits for the
// window) and left its skeleton; `keep` takes the digest. Without the events there is no timeline,
// so the digests leave out what only a timeline shows.
model::RunTrace loadDigested(const SessionOptions& options, EarlyDigests& early,
                             const std::function<void(model::RankTrace&, std::optional<RankDigest>)>& keep) {
  // An invalid --step-marker is a usage error before any file is read.
  model::RunTrace none;
  AnalysisInput probe{none, options.analysis, {}, "none", {}};
  findSteps(probe);
  keepFreedRanksForReuse();
  OverviewStepGuess guess;
  load::LoadOptions load_options = loadOptionsOf(options, early);
  load_options.file_done = [&](size_t file) {
    if (file == 0) guess.firstFileDone();
  };
  load_options.reduce = [&](model::RankTrace& rank, size_t file) {
    std::optional<RankDigest> digest;
    if (!options.selection.window) {
      digest = digestAlone(rank, file, options, guess);
      digest->dropTimelineOnly();
    }
    reduceToSkeleton(rank);
    keep(rank, std::move(digest));
  };
  return load::loadRun(options.paths, load_options);
}

}  // namespace

model::RunTrace digestRanks(
    const SessionOptions& options,
    const std::function<void(const model::RankTrace& skeleton, const RankDigest& digest)>& digested) {
  SessionOptions per_rank = options;
  per_rank.keep_events = false;
  per_rank.selection.window.reset();
  EarlyDigests early;
  return loadDigested(per_rank, early,
                      [&](model::RankTrace& rank, std::optional<RankDigest> digest) { digested(rank, *digest); });
}

struct Session::Loaded {
  model::RunTrace run;
  std::map<std::string, RankDigest> digests;  // without keep_events, by file
  std::map<std::string, std::string> digest_files, digests_not_taken;
  double seconds = 0, cpu_seconds = 0;
  bool digested = false;
};

namespace {

// --critical-path on a run of one rank: its path is HTA's, found on its events (docs/analyses.md,
// "Critical path"); across ranks it is found on the ranks' digests.
bool onlyOneRank(const SessionOptions& options) {
  if (options.selection.ranks.size() == 1) return true;
  try {
    return load::discoverTraceFiles(options.paths).files.size() == 1;
  } catch (const std::exception&) {
    return false;  // the loader says why
  }
}

}  // namespace

Session::Session(SessionOptions options)
    : Session(
          [&options] {
            auto started = std::chrono::steady_clock::now();
            double cpu_started = processCpuSeconds();
            Loaded loaded;
            EarlyDigests early;
            SessionOptions load = options;
            load.keep_events = options.keep_events || (options.analysis.critical_path && onlyOneRank(options));
            if (!load.keep_events) {
              loaded.run = loadDigested(load, early, [&](model::RankTrace& rank, std::optional<RankDigest> digest) {
                if (!digest) return;
                if (!options.typed_results) digest->dropTypedResultsOnly();
                digest->forgetWindows();  // until the run's steps are known, a fingerprint will do
                std::lock_guard lock(early.mutex);
                early.digests.emplace(rank.path, std::move(*digest));
              });
              loaded.digests = std::move(early.digests);
              loaded.digest_files = std::move(early.files);
              loaded.digests_not_taken = std::move(early.not_taken);
              loaded.digested = true;
              // A run that turned out to be of one rank is read again whole.
              if (options.analysis.critical_path && loaded.run.ranks.size() == 1) {
                loaded = Loaded{};
                early.digests.clear(), early.files.clear(), early.not_taken.clear();
                load.keep_events = true;
              }
            }
            if (load.keep_events) {
              keepFreedRanksForReuse();  // the ranks' interval sets, freed one by one once digested
              loaded.run = loadKeepingEvents(load, loadOptionsOf(load, early));
            }
            loaded.seconds = secondsSince(started);
            loaded.cpu_seconds = processCpuSeconds() - cpu_started;
            return loaded;
          }(),
          options) {}

Session::Session(model::RunTrace run, SessionOptions options)
    : Session(Loaded{std::move(run), {}, {}, {}, 0, 0, false}, std::move(options)) {}

Session::Session(Loaded loaded, SessionOptions options)
    : options_(std::move(options)),
      run_(std::move(loaded.run)),
      input_{run_, options_.analysis, {}, "none", {}},
      early_digests_(std::move(loaded.digests)),
      digest_files_(std::move(loaded.digest_files)),
      digests_not_taken_(std::move(loaded.digests_not_taken)),
      digested_(loaded.digested) {
  phase_times_.per_rank_s = loaded.seconds;
  phase_times_.per_rank_cpu_s = loaded.cpu_seconds;
  prepare();
}

void Session::prepare() {
  auto started = std::chrono::steady_clock::now();
  double cpu_started = processCpuSeconds();
  double again_s = 0, again_cpu_s = 0;
  if (options_.align) {
    clock_ = alignClocks(run_);
    input_.clock = &*clock_;
  }
  window_origin_ns_ = run_.firstActivityNs();
  std::optional<Interval> kept = window();
  if (kept) outside_window_ = run_.keepWindow(kept->start, kept->end);
  auto warnWindow = [&] {
    report::warn(
        run_.stats, run_.warnings, report::Stat::window_records_left_out, outside_window_,
        fmt::format("--window {}: {} records outside it left out", options_.selection.window->text, outside_window_));
  };
  if (kept && !digested_) warnWindow();
  // Alignment matched the operations before the window dropped some; without it they are matched
  // on first use, on what is kept.
  if (clock_ && !options_.selection.window) input_.collective_index = clock_->matches;
  input_.options.steps = options_.selection.steps;
  findSteps(input_);
  // The step the overview shows: the first rank's median window (its only one without steps).
  int64_t overview_step = -1;
  if (!run_.ranks.empty() && !input_.steps[0].empty()) overview_step = overviewWindowOf(input_.steps[0])->number;
  auto shown = [overview_step](int64_t step) { return step == overview_step; };
  if (!digested_) {
    // The ranks on the workers, as the loader digests them. A rank's interval sets serve its digest
    // only: each is freed once its rank is digested, so that what comes after (the critical path's
    // graphs) reuses their pages rather than fresh ones.
    input_.time_sets.resize(run_.ranks.size());
    digests_.resize(run_.ranks.size());
    onWorkers(run_.ranks.size(), options_.jobs, [&](size_t r) {
      input_.time_sets[r] = gpuTimeSetsOf(run_.ranks[r]);
      digests_[r] = digestRank(input_, r, std::nullopt, shown);
      input_.time_sets[r] = GpuTimeSets();
      if (!options_.typed_results) digests_[r].dropTypedResultsOnly();
    });
  } else {
    // Each digest made while loading holds if what it assumed is what the whole run says.
    std::optional<bool> hta_filter;
    if (input_.options.hta_compat) hta_filter = htaStepFilterApplied(run_, input_.options.include_last_step);
    digests_.resize(run_.ranks.size());
    std::vector<size_t> again;
    std::vector<std::string> why;
    for (size_t r = 0; r < run_.ranks.size(); ++r) {
      const std::string& path = run_.ranks[r].path;
      auto it = early_digests_.find(path);
      std::string not_valid;
      if (it == early_digests_.end()) {
        auto not_taken = digests_not_taken_.find(path);
        not_valid = not_taken != digests_not_taken_.end() ? not_taken->second : "no digest";
      } else if (clock_ && !clock_->rank_clocks[r].pureOffset()) {
        not_valid = "its clock drifts against the other ranks'";
      } else {
        RankDigest& digest = it->second;
        digest.shift(run_.ranks[r].clock_offset_ns);
        std::vector<StepWindow> windows =
            input_.steps[r].empty() ? std::vector<StepWindow>{{-1, digest.gpu_span}} : input_.steps[r];
        auto overview = [overview_step](const auto& w) { return w.number == overview_step; };
        bool shows = std::any_of(windows.begin(), windows.end(), overview);
        bool has_lanes = std::any_of(digest.step_lanes.begin(), digest.step_lanes.end(),
                                     [overview_step](const RankStepLanes& l) { return l.step == overview_step; });
        if (!digest.madeOver(windows)) {
          not_valid = "its steps differ from those found across the ranks";
        } else if (hta_filter && digest.hta->filter_applied != *hta_filter) {
          not_valid = "--compat hta's step filter differs across the ranks";
        } else if (shows && !has_lanes) {
          not_valid = "it lacks the step overview's lanes of the step shown";
        }
      }
      if (not_valid.empty()) {
        digests_[r] = std::move(it->second);
        std::vector<StepWindow>().swap(digests_[r].windows);  // the run's steps hold them now
        if (digest_files_.contains(path)) run_.stats.add(report::Stat::digests_used);
      } else {
        again.push_back(r);
        why.push_back(std::move(not_valid));
      }
    }
    early_digests_.clear();
    auto again_started = std::chrono::steady_clock::now();
    double again_cpu_started = processCpuSeconds();
    digestAgain(again, why, hta_filter, shown);
    again_s = secondsSince(again_started);
    again_cpu_s = processCpuSeconds() - again_cpu_started;
    phase_times_.per_rank_s += again_s;
    phase_times_.per_rank_cpu_s += again_cpu_s;
    phase_times_.ranks_read_again = again.size();
    if (kept) warnWindow();
  }
  input_.digests = &digests_;
  if (digested_) input_.read_events = [this](size_t r) { return std::move(readAgain(r).ranks.front()); };
  for (const auto& digest : digests_) phase_times_.digest_bytes += digest.bytes();
  phase_times_.cross_rank_s += secondsSince(started) - again_s;
  phase_times_.cross_rank_cpu_s += processCpuSeconds() - cpu_started - again_cpu_s;
}

// The ranks whose early digests did not hold, read again and digested now that their clock, steps
// and --window are known.
void Session::digestAgain(const std::vector<size_t>& ranks, const std::vector<std::string>& why,
                          std::optional<bool> hta_filter, const std::function<bool(int64_t)>& keep_lanes) {
  if (ranks.empty()) return;
  std::optional<Interval> kept = window();
  std::vector<uint64_t> outside(ranks.size(), 0);
  onWorkers(ranks.size(), options_.jobs, [&](size_t i) {
    size_t r = ranks[i];
    model::RankTrace& skeleton = run_.ranks[r];
    model::RunTrace alone;
    try {
      alone = readAgain(r, &outside[i]);
    } catch (const std::exception& e) {
      auto file = digest_files_.find(skeleton.path);
      if (file == digest_files_.end()) throw;
      throw InputError(fmt::format("{}: the digest cannot serve ({}), and the rank's trace cannot be read: {}",
                                   file->second, why[i], e.what()));
    }
    model::RankTrace& rank = alone.ranks.front();
    AnalysisInput input{alone, input_.options, {input_.steps[r]}, input_.step_source, {}};
    input.time_sets.push_back(gpuTimeSetsOf(rank));
    digests_[r] = digestRank(input, 0, hta_filter, keep_lanes);
    digests_[r].dropTimelineOnly();  // read again only without keep_events: no timeline
    if (!options_.typed_results) digests_[r].dropTypedResultsOnly();
    reduceToSkeleton(rank);
    skeleton.activities = std::move(rank.activities);
  });
  if (kept) {
    outside_window_ = 0;
    for (uint64_t n : outside) outside_window_ += n;
  }
}

model::RunTrace Session::readAgain(size_t r, uint64_t* outside_window) const {
  const model::RankTrace& skeleton = run_.ranks[r];
  std::vector<std::string> ignored;  // reported when the file was first read
  model::RunTrace alone;
  alone.ranks.push_back(load::loadTraceFile(skeleton.path, ignored));
  model::RankTrace& rank = alone.ranks.front();
  rank.rank = skeleton.rank;
  if (clock_) applyClock(clock_->rank_clocks[r], rank);
  if (std::optional<Interval> kept = window()) {
    uint64_t outside = alone.keepWindow(kept->start, kept->end);
    if (outside_window != nullptr) *outside_window = outside;
  }
  return alone;
}

std::optional<Interval> Session::window() const {
  const auto& window = options_.selection.window;
  if (!window) return std::nullopt;
  // An open end stays open: the origin (ns since 1970) plus kOpenEnd would overflow.
  auto at = [&](int64_t offset) {
    bool overflows = window_origin_ns_ > 0 && offset > std::numeric_limits<int64_t>::max() - window_origin_ns_;
    return overflows ? std::numeric_limits<int64_t>::max() : window_origin_ns_ + offset;
  };
  return Interval{at(window->from_ns),
                  window->to_ns == TimeWindow::kOpenEnd ? std::numeric_limits<int64_t>::max() : at(window->to_ns)};
}

std::optional<Interval> Session::timelineWindow() const {
  std::optional<Interval> result = window();
  const auto& steps = options_.selection.steps;
  if (steps.empty()) return result;
  Interval span{std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  for (const auto& rank_steps : input_.steps) {
    for (const auto& step : rank_steps) {
      if (std::find(steps.begin(), steps.end(), step.number) == steps.end()) continue;
      span.start = std::min(span.start, step.window.start);
      span.end = std::max(span.end, step.window.end);
    }
  }
  if (span.start > span.end && result)
    throw UsageError(fmt::format("--steps: no step with these numbers reaches into --window {} (steps from {})",
                                 options_.selection.window->text, input_.step_source));
  if (span.start > span.end)
    throw UsageError(
        fmt::format("--steps: the run has no step with these numbers (steps from {})", input_.step_source));
  if (result) {
    span = {std::max(span.start, result->start), std::min(span.end, result->end)};
    if (span.end <= span.start) throw UsageError("--window and --steps: the window holds none of the steps");
  }
  return span;
}

report::Report Session::analyze() const {
  auto started = std::chrono::steady_clock::now();
  double cpu_started = processCpuSeconds();
  report::Report report;
  report.keep_results = options_.typed_results;
  report.keep_marks = options_.timeline_marks;
  report.run = summarize(input_);
  report.warnings = run_.warnings;
  report.stats = run_.stats;
  runAnalyses(input_, report, options_.jobs);
  phase_times_.cross_rank_s += secondsSince(started);
  phase_times_.cross_rank_cpu_s += processCpuSeconds() - cpu_started;
  return report;
}

}  // namespace gpuxray::analysis
