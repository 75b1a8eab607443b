// Runs `gpuxray analyze`'s pipeline (the session) in-process on a directory of trace files, and reads figures back
// out of the report by section, table, row and column key, for the analyzer's golden tests.
#pragma once

#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "analyzer/analysis/session.h"

namespace gpuxray::testing {

// The product's pipeline (analysis::Session) on a directory, as `gpuxray analyze DIR` runs it: each
// rank digested as it is read (the two phases). Every golden test through here also checks that
// the report is the one the session that keeps every event gives (`run` is that session's).
struct AnalyzedRun {
  explicit AnalyzedRun(analysis::SessionOptions options)
      : session(std::make_unique<analysis::Session>(withEvents(options, true))),
        run(session->run()),
        clock(session->clock()),
        report(analysis::Session(withEvents(std::move(options), false)).analyze()) {
    REQUIRE(report::renderJson(report) == report::renderJson(session->analyze()));
  }
  static analysis::SessionOptions withEvents(analysis::SessionOptions options, bool keep) {
    options.keep_events = keep;
    return options;
  }
  std::unique_ptr<analysis::Session> session;
  const model::RunTrace& run;
  const analysis::ClockAlignment* clock;  // nullptr when not aligned
  report::Report report;
};

inline AnalyzedRun analyzeRun(const std::string& dir, bool align = true) {
  analysis::SessionOptions options;
  options.paths = {dir};
  options.align = align;
  return AnalyzedRun(std::move(options));
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
