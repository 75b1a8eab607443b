#include "proto/capture_windows.h"

#include <charconv>
#include <cmath>

namespace gpuxray::format {
namespace {

bool parseInteger(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::optional<uint64_t> parseDurationNs(std::string_view text) {
  size_t unit_at = 0;
  while (unit_at < text.size() && ((text[unit_at] >= '0' && text[unit_at] <= '9') || text[unit_at] == '.')) ++unit_at;
  std::string_view number = text.substr(0, unit_at);
  std::string_view unit = text.substr(unit_at);
  if (number.empty() || number.front() == '.' || number.back() == '.') return std::nullopt;
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1e9;
  } else if (unit == "ms") {
    scale = 1e6;
  } else if (unit == "us") {
    scale = 1e3;
  } else if (unit == "ns") {
    scale = 1;
  } else if (unit == "m" || unit == "min") {
    scale = 60e9;
  } else if (unit == "h") {
    scale = 3600e9;
  } else {
    return std::nullopt;
  }
  double value = 0;
  auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (error != std::errc() || end != number.data() + number.size() || !std::isfinite(value)) return std::nullopt;
  double ns = value * scale;
  if (ns < 0 || ns > 1e18) return std::nullopt;
  return static_cast<uint64_t>(std::llround(ns));
}

std::optional<std::string> parseCaptureRange(std::string_view text, CaptureRange& out) {
  CaptureRange range;
  if (text == "cudaProfilerApi") {
    range.kind = CaptureRange::Kind::kProfilerApi;
  } else if (text == "trigger") {
    range.kind = CaptureRange::Kind::kTrigger;
  } else if (text.starts_with("nvtx:")) {
    std::string_view spec = text.substr(5);
    size_t at = spec.rfind('@');
    range.kind = CaptureRange::Kind::kNvtx;
    range.nvtx_name = std::string(spec.substr(0, at));
    if (at != std::string_view::npos) {
      range.nvtx_domain = std::string(spec.substr(at + 1));
      if (range.nvtx_domain.empty()) return "an NVTX domain name after '@'";
    }
    if (range.nvtx_name.empty()) return "an NVTX range name after 'nvtx:' (nvtx:NAME or nvtx:NAME@DOMAIN)";
  } else {
    return "cudaProfilerApi, nvtx:NAME[@DOMAIN] or trigger";
  }
  out = std::move(range);
  return std::nullopt;
}

std::optional<std::string> parseStepRange(std::string_view text, int64_t& first, int64_t& last) {
  size_t dash = text.find('-', 1);
  int64_t a = 0;
  int64_t b = 0;
  if (!parseInteger(text.substr(0, dash), a) ||
      (dash != std::string_view::npos && !parseInteger(text.substr(dash + 1), b)))
    return "a step range A-B (or one step A) of step numbers from 0";
  if (dash == std::string_view::npos) b = a;
  if (a < 0 || b < 0) return "a step range of step numbers from 0";
  if (b < a) return "a step range A-B with A <= B";
  first = a;
  last = b;
  return std::nullopt;
}

namespace {
constexpr std::string_view kLivePrefix = ".gpuxray-live-";
}  // namespace

std::string liveMarkerName(uint32_t pid) {
  return std::string(kLivePrefix) + std::to_string(pid);
}
std::string triggerRequestName(uint32_t pid) {
  return ".gpuxray-trigger-" + std::to_string(pid);
}
std::string triggerAckName(uint32_t pid) {
  return ".gpuxray-trigger-" + std::to_string(pid) + ".ack";
}

uint32_t pidOfLiveMarker(std::string_view file_name) {
  if (!file_name.starts_with(kLivePrefix)) return 0;
  std::string_view digits = file_name.substr(kLivePrefix.size());
  uint32_t pid = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  return error == std::errc() && end == digits.data() + digits.size() ? pid : 0;
}

}  // namespace gpuxray::format
