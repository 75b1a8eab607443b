// The JSON report written straight to a file as it is rendered (renderJson in report.h returns the
// same text whole): a report of a thousand ranks is hundreds of megabytes of JSON, which need not
// be held in memory.
#pragma once

#include <cstdio>
#include <functional>
#include <string_view>

#include "analyzer/report/report.h"

namespace gpuxray::report {

void writeJson(const Report& report, std::FILE* file);
// The same, handed to `write` in pieces of about a megabyte.
void writeJson(const Report& report, const std::function<void(std::string_view)>& write);

}  // namespace gpuxray::report
