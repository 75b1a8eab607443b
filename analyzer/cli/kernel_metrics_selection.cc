#include "analyzer/cli/kernel_metrics_selection.h"

#include "analyzer/compare/report_reader.h"
#include "analyzer/errors.h"

namespace gpuxray::cli {

std::string exactNamesPattern(const std::vector<std::string>& names) {
  std::string pattern = "^(?:";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) pattern += '|';
    for (char c : names[i]) {
      if (std::string_view("\\^$.|?*+()[]{}/").find(c) != std::string_view::npos) pattern += '\\';
      pattern += c;
    }
  }
  return pattern + ")$";
}

std::string kernelPatternFromReport(const std::string& path, size_t top) {
  report::Report report = compare::readAnalyzeReport(path);
  const report::ResultValue* kernels = nullptr;
  for (const auto& [id, value] : report.results) {
    if (id == "kernels") kernels = value.find("kernels");
  }
  std::vector<std::string> names;
  if (kernels != nullptr) {
    for (const auto& kernel : kernels->items()) {
      const report::ResultValue* name = kernel.find("name");
      if (name != nullptr && name->kind() == report::ResultValue::Kind::kText && !name->asText().empty())
        names.push_back(name->asText());
      if (names.size() == top) break;
    }
  }
  if (names.empty()) throw InputError(path + ": the report lists no kernels (results.kernels.kernels is empty)");
  return exactNamesPattern(names);
}

}  // namespace gpuxray::cli
