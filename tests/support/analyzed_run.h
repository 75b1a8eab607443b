// Loads a written run, runs every analysis the way `gpuxray analyze` does, and reads cells of the
// report's tables by section, table and column key, for the analyzer's golden tests.
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "analyzer/analysis/analyses.h"
#include "analyzer/analysis/steps.h"
#include "analyzer/load/run_loader.h"

namespace gpuxray::testing {

struct Analyzed {
  model::RunTrace run;
  report::Report report;
};

inline Analyzed analyze(const std::string& dir) {
  Analyzed a{load::loadRun({dir}, {}), {}};
  analysis::AnalysisInput input{a.run, {}, {}, "none", {}};
  analysis::findSteps(input);
  for (const auto& rank : a.run.ranks) input.time_sets.push_back(analysis::gpuTimeSetsOf(rank));
  analysis::runAnalyses(input, a.report);
  return a;
}

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
    if (t.columns[c].key == key) return t.rows.at(row).at(c);
  }
  FAIL("no column " << key);
  throw;
}

inline double cell(const report::Table& t, size_t row, const std::string& key) {
  return cellAt(t, row, key).number;
}
inline std::string text(const report::Table& t, size_t row, const std::string& key) {
  return cellAt(t, row, key).text;
}

}  // namespace gpuxray::testing
