// Reads a report `gpuxray analyze --format json` wrote (schema gpuxray.analyze, docs/report-schema.md)
// back into the in-memory report: run summary, metrics, findings, typed results and warnings (the
// sections, tables for people, are not read). So a run analyzed now and one read from its report
// reach `gpuxray diff` and `--baseline` in the same form.
#pragma once

#include <string>

#include "analyzer/report/report.h"

namespace gpuxray::compare {

// Whether the file at `path` is a gpuxray.analyze JSON report (rather than a trace): it names the
// schema near its start.
bool isAnalyzeReport(const std::string& path);

// Throws InputError naming the file: unreadable, not JSON, not a gpuxray.analyze report, or of a
// schema version other than report::kReportSchemaVersion (1 has no typed results; a later one was
// written by a newer gpuxray).
report::Report readAnalyzeReport(const std::string& path);

}  // namespace gpuxray::compare
