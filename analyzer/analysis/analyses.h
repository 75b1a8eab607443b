// The analyses of `gpuxray analyze`, one file each, run in this order. Each adds its section,
// findings and metrics to the report (definitions: docs/analyses.md).
#pragma once

#include "analyzer/analysis/analysis_input.h"
#include "analyzer/report/report.h"

namespace gpuxray::analysis {

// The clock section: what alignClocks did (or that it was turned off).
void analyzeClock(const AnalysisInput& input, report::Report& report);
void analyzeTimeBreakdown(const AnalysisInput& input, report::Report& report);
void analyzeOverlap(const AnalysisInput& input, report::Report& report);
void analyzeCollectives(const AnalysisInput& input, report::Report& report);
void analyzeStragglers(const AnalysisInput& input, report::Report& report);
void analyzePipelineBubbles(const AnalysisInput& input, report::Report& report);
void analyzeLinkHotspots(const AnalysisInput& input, report::Report& report);
void analyzeKernels(const AnalysisInput& input, report::Report& report);
void analyzeKernelMetrics(const AnalysisInput& input, report::Report& report);
void analyzeMemory(const AnalysisInput& input, report::Report& report);
void analyzeMemoryCategories(const AnalysisInput& input, report::Report& report);
void analyzeOps(const AnalysisInput& input, report::Report& report);
void analyzeCriticalPath(const AnalysisInput& input, report::Report& report, unsigned jobs = 1);
// Per rank, without matching across ranks: sizes, times and bandwidth (also for one rank's trace).
void analyzeCollectiveBandwidth(const AnalysisInput& input, report::Report& report);
// The median step per rank as lanes of GPU intervals: results only, no section (step_overview.h).
void analyzeStepOverview(const AnalysisInput& input, report::Report& report);
// --compat hta, in place of the time breakdown and the overlap (hta_compat.h).
void analyzeHtaCompat(const AnalysisInput& input, report::Report& report);

// The per-rank halves of the analyses computed rank by rank (rank_digest.h): what each reads of
// rank index r's events, over its windows.
struct RankBreakdown;
struct OverlapPart;
struct KernelsPart;
struct MemoryPart;
struct MemoryCategoriesPart;
struct HtaPart;
RankBreakdown breakdownOfRank(const AnalysisInput& input, size_t r);
OverlapPart overlapOfRank(const AnalysisInput& input, size_t r);
KernelsPart kernelsOfRank(const AnalysisInput& input, size_t r);
MemoryPart memoryOfRank(const model::RankTrace& rank);
MemoryCategoriesPart memoryCategoriesOfRank(const AnalysisInput& input, size_t r);
// --compat hta: whether the last ProfilerStep is dropped (the run's ProfilerStep names), and the figures.
bool htaStepFilterApplied(const model::RunTrace& run, bool include_last_step);
HtaPart htaOfRank(const model::RankTrace& rank, bool filter_applied);

// All of the above (HTA's two in place of gpuxray's with --compat hta), then the findings sorted most
// costly first. The analyses run on up to `jobs` threads (0: one per core), each into its own part of
// the report; the report does not depend on the number.
void runAnalyses(const AnalysisInput& input, report::Report& report, unsigned jobs = 1);

// The names every analysis may put into report.metrics (for --fail-on's check of names).
const std::vector<std::string>& knownMetrics();

}  // namespace gpuxray::analysis
