#include "proto/doctor_report.h"

#include <array>

namespace gpuxray::format {
namespace {

constexpr std::string_view kFirstLine = "gpuxray-doctor 1";
constexpr std::array<DoctorStatus, 3> kStatuses = {DoctorStatus::kOk, DoctorStatus::kWarning, DoctorStatus::kProblem};

void appendField(std::string& out, std::string_view field) {
  for (char c : field) out += c == '\t' || c == '\n' || c == '\r' ? ' ' : c;
}

std::vector<std::string_view> split(std::string_view line, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t at; (at = line.find(separator, start)) != std::string_view::npos; start = at + 1)
    parts.push_back(line.substr(start, at - start));
  parts.push_back(line.substr(start));
  return parts;
}

}  // namespace

std::string_view doctorStatusName(DoctorStatus status) {
  switch (status) {
    case DoctorStatus::kOk:
      return "ok";
    case DoctorStatus::kWarning:
      return "warning";
    case DoctorStatus::kProblem:
      return "problem";
  }
  return "problem";
}

std::string encodeDoctorReport(const std::vector<DoctorCheck>& checks) {
  std::string out(kFirstLine);
  out += '\n';
  for (const auto& check : checks) {
    appendField(out, check.name);
    out += '\t';
    out += doctorStatusName(check.status);
    out += '\t';
    appendField(out, check.detail);
    out += '\t';
    appendField(out, check.fix);
    out += '\n';
  }
  return out;
}

bool decodeDoctorReport(std::string_view text, std::vector<DoctorCheck>& checks, std::string& error) {
  std::vector<std::string_view> lines = split(text, '\n');
  if (lines.empty() || lines.front() != kFirstLine) {
    error = "the injection library's report does not start with '" + std::string(kFirstLine) + "'";
    return false;
  }
  checks.clear();
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    std::vector<std::string_view> fields = split(lines[i], '\t');
    const DoctorStatus* status = nullptr;
    if (fields.size() == 4) {
      for (const auto& candidate : kStatuses) {
        if (doctorStatusName(candidate) == fields[1]) status = &candidate;
      }
    }
    if (status == nullptr) {
      error = "line " + std::to_string(i + 1) + " of the injection library's report is not 'name, status, detail, fix'";
      return false;
    }
    checks.push_back({std::string(fields[0]), *status, std::string(fields[2]), std::string(fields[3])});
  }
  return true;
}

}  // namespace gpuxray::format
