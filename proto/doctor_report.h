// What `gpuxray doctor` learns: one check per thing capture depends on. The injection library runs
// the checks with the capture's own code and hands them to the gpuxray command as text in this
// form (gpuxray_doctor_report_v1), so both sides share it here, as they share the trace format.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpuxray::format {

enum class DoctorStatus { kOk, kWarning, kProblem };

struct DoctorCheck {
  std::string name;  // "cupti", "driver", ...
  DoctorStatus status = DoctorStatus::kOk;
  std::string detail;  // what was found, one line
  std::string fix;     // what to do about a warning or problem; empty for ok
  bool operator==(const DoctorCheck&) const = default;
};

std::string_view doctorStatusName(DoctorStatus status);

// A first line "gpuxray-doctor 1", then one line per check: name, status, detail and fix separated
// by tabs. Tabs and line breaks inside a field become spaces.
std::string encodeDoctorReport(const std::vector<DoctorCheck>& checks);
// False, with `error` saying why, when `text` is not such a report.
bool decodeDoctorReport(std::string_view text, std::vector<DoctorCheck>& checks, std::string& error);

}  // namespace gpuxray::format
