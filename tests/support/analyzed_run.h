// Runs `gpuxray analyze`'s pipeline in-process on a directory of trace files, and reads figures back
// out of the report by section, table, row and column key, for the analyzer's golden tests.
#pragma once

#include <catch2/catch.hpp>
#include <optional>
#include <string>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/clock_alignment.h"
#include "analyzer/analysis/steps.h"
#include "analyzer/load/run_loader.h"

namespace gpuxray::testing {

struct AnalyzedRun {
  model::RunTrace run;
  std::optional<analysis::ClockAlignment> clock;
  report::Report report;
};

// As the CLI does it: load, align the clocks (unless `align` is false), find steps, analyze.
inline AnalyzedRun analyzeRun(const std::string& dir, bool align = true) {
  AnalyzedRun a{load::loadRun({dir}, {}), std::nullopt, {}};
  if (align) a.clock = analysis::alignClocks(a.run);
  analysis::AnalysisInput input{a.run, {}, {}, "none", {}};
  if (a.clock) {
    input.clock = &*a.clock;
    input.collective_index = a.clock->matches;
  }
  analysis::findSteps(input);
  for (const auto& rank : a.run.ranks) input.time_sets.push_back(analysis::gpuTimeSetsOf(rank));
  a.report.warnings = a.run.warnings;
  a.report.stats = a.run.stats;
  analysis::runAnalyses(input, a.report);
  return a;
}

inline AnalyzedRun analyze(const std::string& dir) { return analyzeRun(dir); }

inline const report::Section& section(const report::Report& r, const std::string& id) {
  for (const auto& s : r.sections) {
    if (s.id == id) return s;
  }
  FAIL("no section " << id);
  throw;
}

inline const report::Table& table(const report::Report& r, const std::string& section_id, const std::string& id) {
  for (const auto& t : section(r, section_id).tables) {
    if (t.id == id) return t;
  }
  FAIL("no table " << section_id << "/" << id);
  throw;
}

inline const report::Cell& cellAt(const report::Table& t, size_t row, const std::string& key) {
  for (size_t c = 0; c < t.columns.size(); ++c) {
    if (t.columns[c].key == key) {
      REQUIRE(row < t.rows.size());
      return t.rows[row].at(c);
    }
  }
  FAIL("no column " << key);
  throw;
}

inline double cell(const report::Table& t, size_t row, const std::string& key) { return cellAt(t, row, key).number; }
inline std::string text(const report::Table& t, size_t row, const std::string& key) { return cellAt(t, row, key).text; }

// The row whose column `key` shows `shown`.
inline size_t rowWhere(const report::Table& t, const std::string& key, const std::string& shown) {
  for (size_t row = 0; row < t.rows.size(); ++row) {
    if (cellAt(t, row, key).display() == shown) return row;
  }
  FAIL("no row with " << key << " = " << shown);
  throw;
}

}  // namespace gpuxray::testing
