#include "analyzer/load/kineto_event.h"

#include <cmath>
#include <limits>

namespace gpuxray::load {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// An integer argument; numbers written as floats are truncated, anything else is ignored.
std::optional<int64_t> integerOf(element v) {
  switch (v.type()) {
    case element_type::INT64: return v.get_int64().value_unsafe();
    case element_type::UINT64:
      return static_cast<int64_t>(std::min<uint64_t>(v.get_uint64().value_unsafe(), std::numeric_limits<int64_t>::max()));
    case element_type::DOUBLE: {
      double d = v.get_double().value_unsafe();
      if (std::isfinite(d) && std::fabs(d) < 9e18) return static_cast<int64_t>(d);
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

std::string_view stringOf(element v) {
  std::string_view s;
  if (v.get_string().get(s) != simdjson::SUCCESS) return {};
  return s;
}

void readDimensions(element v, uint32_t (&out)[3]) {
  simdjson::dom::array array;
  if (v.get_array().get(array) != simdjson::SUCCESS) return;
  size_t i = 0;
  for (element item : array) {
    std::optional<int64_t> n = integerOf(item);
    if (i < 3 && n && *n >= 0) out[i] = static_cast<uint32_t>(std::min<int64_t>(*n, std::numeric_limits<uint32_t>::max()));
    ++i;
  }
}

// "Input Dims" [[6144, 2], [], ...]: the elements of the first shape; -1 when it has none (a
// TensorList or a scalar records no shape) or is malformed.
int64_t firstShapeElements(element v) {
  simdjson::dom::array shapes, shape;
  if (v.get_array().get(shapes) != simdjson::SUCCESS) return -1;
  for (element first : shapes) {
    if (first.get_array().get(shape) != simdjson::SUCCESS || shape.size() == 0) return -1;
    int64_t elements = 1;
    for (element d : shape) {
      std::optional<int64_t> n = integerOf(d);
      if (!n || *n < 0) return -1;
      elements = *n == 0 || elements <= std::numeric_limits<int64_t>::max() / *n ? elements * *n : -1;
      if (elements < 0) return -1;
    }
    return elements;
  }
  return -1;
}

std::string_view firstString(element v) {
  simdjson::dom::array array;
  if (v.get_array().get(array) != simdjson::SUCCESS) return {};
  for (element first : array) return stringOf(first);
  return {};
}

uint32_t clamp32(const std::optional<int64_t>& n) {
  return n && *n > 0 ? static_cast<uint32_t>(std::min<int64_t>(*n, std::numeric_limits<uint32_t>::max())) : 0;
}

void readArgs(simdjson::dom::object object, KinetoEvent::Args& args) {
  for (simdjson::dom::key_value_pair field : object) {
    std::string_view key = field.key;
    element v = field.value;
    if (key.empty()) continue;
    switch (key[0]) {
      case 'c':
        if (key == "correlation") args.correlation = integerOf(v);
        break;
      case 's':
        if (key == "stream") args.stream = integerOf(v);
        else if (key == "shared memory") args.shared_memory = clamp32(integerOf(v));
        break;
      case 'd':
        if (key == "device") args.device = integerOf(v);
        else if (key == "dtype") args.dtype = stringOf(v);
        break;
      case 'b':
        if (key == "bytes") args.bytes = integerOf(v);
        else if (key == "block") readDimensions(v, args.block);
        break;
      case 'g':
        if (key == "grid") readDimensions(v, args.grid);
        break;
      case 'r':
        if (key == "registers per thread") args.registers = clamp32(integerOf(v));
        break;
      case 'E':
        if (key == "External id") args.external_id = integerOf(v);
        break;
      case 'C':
        if (key == "Collective name") args.collective = stringOf(v);
        break;
      case 'I':
        if (key == "In msg nelems") args.in_nelems = integerOf(v);
        else if (key == "Input Dims") {
          args.first_input_elements = firstShapeElements(v);
          args.has_input_dims = v.get_array().get(args.input_dims) == simdjson::SUCCESS;
        } else if (key == "Input type") {
          args.first_input_type = firstString(v);
          args.has_input_types = v.get_array().get(args.input_types) == simdjson::SUCCESS;
        }
        break;
      case 'O':
        if (key == "Out msg nelems") args.out_nelems = integerOf(v);
        break;
      case 'G':
        if (key == "Group size") args.group_size = integerOf(v);
        break;
      case 'P':
        if (key == "Process Group Name") args.group_name = stringOf(v);
        else if (key == "Process Group Description") args.group_description = stringOf(v);
        else if (key == "Process Group Ranks") args.group_ranks = stringOf(v);
        break;
      case 'S':
        if (key == "Src Rank") args.src_rank = integerOf(v);
        break;
      case 'D':
        if (key == "Dst Rank") args.dst_rank = integerOf(v);
        else if (key == "Device Type") args.device_type = integerOf(v);
        else if (key == "Device Id") args.device_id = integerOf(v);
        break;
      case 'B':
        if (key == "Bytes") args.alloc_bytes = integerOf(v);
        break;
      case 'A':
        if (key == "Addr") {
          std::optional<int64_t> address = integerOf(v);
          if (address && *address > 0) args.alloc_address = static_cast<uint64_t>(*address);
        }
        break;
      default: break;
    }
  }
}

}  // namespace

void appendInputs(const KinetoEvent::Args& args, std::string& out) {
  if (!args.has_input_dims && !args.has_input_types) return;
  const size_t count = std::max(args.has_input_dims ? args.input_dims.size() : 0,
                                args.has_input_types ? args.input_types.size() : 0);
  auto dims = args.input_dims.begin();
  auto types = args.input_types.begin();
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) out += ", ";
    if (args.has_input_types && i < args.input_types.size()) out += stringOf(*types), ++types;
    if (!args.has_input_dims || i >= args.input_dims.size()) continue;
    simdjson::dom::array shape;
    if ((*dims).get_array().get(shape) == simdjson::SUCCESS && shape.size() > 0) {
      out += '[';
      bool first = true;
      for (element d : shape) {
        if (!first) out += ", ";
        first = false;
        std::optional<int64_t> n = integerOf(d);
        out += n ? std::to_string(*n) : "?";
      }
      out += ']';
    }
    ++dims;
  }
}

KinetoCategory kinetoCategoryOf(std::string_view name) {
  struct Known {
    std::string_view name;
    KinetoCategory category;
  };
  static constexpr Known kKnown[] = {
      {"kernel", KinetoCategory::kKernel},
      {"cpu_op", KinetoCategory::kCpuOp},
      {"cuda_runtime", KinetoCategory::kCudaRuntime},
      {"ac2g", KinetoCategory::kAc2g},
      {"gpu_memcpy", KinetoCategory::kGpuMemcpy},
      {"gpu_memset", KinetoCategory::kGpuMemset},
      {"cuda_driver", KinetoCategory::kCudaDriver},
      {"cuda_sync", KinetoCategory::kCudaSync},
      {"user_annotation", KinetoCategory::kUserAnnotation},
      {"gpu_user_annotation", KinetoCategory::kGpuUserAnnotation},
      {"cpu_instant_event", KinetoCategory::kCpuInstantEvent},
      // Read and left aside: Python frames, autograd links, profiler bookkeeping, other devices.
      {"python_function", KinetoCategory::kOtherKnown},
      {"fwdbwd", KinetoCategory::kOtherKnown},
      {"overhead", KinetoCategory::kOtherKnown},
      {"Trace", KinetoCategory::kOtherKnown},
      {"gpu_instant_event", KinetoCategory::kOtherKnown},
      {"cuda_profiler_range", KinetoCategory::kOtherKnown},
      {"mtia_runtime", KinetoCategory::kOtherKnown},
      {"mtia_ccp_events", KinetoCategory::kOtherKnown},
      {"glow_runtime", KinetoCategory::kOtherKnown},
      {"privateuse1_runtime", KinetoCategory::kOtherKnown},
      {"privateuse1_driver", KinetoCategory::kOtherKnown},
      {"xpu_runtime", KinetoCategory::kOtherKnown},
      {"xpu_driver", KinetoCategory::kOtherKnown},
  };
  for (const Known& known : kKnown) {
    if (known.name == name) return known.category;
  }
  return KinetoCategory::kUnknown;
}

Microseconds microsecondsOfDouble(double us) {
  auto ns = static_cast<int64_t>(std::llround(us * 1000.0));
  // The nanoseconds the text had (three decimals): the n near us x 1000 with n / 1000.0 == us.
  for (int64_t candidate : {ns, ns - 1, ns + 1, ns - 2, ns + 2}) {
    if (static_cast<double>(candidate) / 1000.0 == us) return {candidate, true};
  }
  return {ns, true};
}

std::optional<Microseconds> microsecondsOf(element value) {
  // Beyond ±4e15 µs (127 years) no real trace goes; the bound keeps start + duration within int64.
  constexpr int64_t kLimitUs = 4'000'000'000'000'000;
  switch (value.type()) {
    case element_type::INT64: {
      int64_t us = value.get_int64().value_unsafe();
      if (us > kLimitUs || us < -kLimitUs) return std::nullopt;
      return Microseconds{us * 1000, false};
    }
    case element_type::UINT64: return std::nullopt;
    case element_type::DOUBLE: {
      double us = value.get_double().value_unsafe();
      if (!std::isfinite(us) || std::fabs(us) > static_cast<double>(kLimitUs)) return std::nullopt;
      return microsecondsOfDouble(us);
    }
    default: return std::nullopt;
  }
}

void readKinetoEvent(simdjson::dom::object object, KinetoEvent& event) {
  for (simdjson::dom::key_value_pair field : object) {
    std::string_view key = field.key;
    element v = field.value;
    if (key == "ph") {
      std::string_view phase = stringOf(v);
      event.phase = phase.empty() ? 0 : phase[0];
    } else if (key == "cat") {
      event.category_text = stringOf(v);
      event.category = kinetoCategoryOf(event.category_text);
    } else if (key == "name") {
      event.name = stringOf(v);
    } else if (key == "ts") {
      event.ts = microsecondsOf(v);
    } else if (key == "dur") {
      event.dur = microsecondsOf(v);
    } else if (key == "pid") {
      event.pid = integerOf(v);
    } else if (key == "tid") {
      event.tid = integerOf(v);
    } else if (key == "id") {
      std::optional<int64_t> id = integerOf(v);
      if (id && *id >= 0) event.id = static_cast<uint64_t>(*id);
    } else if (key == "args") {
      simdjson::dom::object args;
      if (v.get_object().get(args) == simdjson::SUCCESS) readArgs(args, event.args);
    }
  }
}

}  // namespace gpuxray::load
