// One PyTorch-profiler (Kineto) trace event, as far as gpuxray reads it: the common fields and the
// arguments of kernels, copies, runtime calls, collectives and memory events, taken from a simdjson
// document (of a run of events: simdjson's DOM parser picks the fastest SIMD code the CPU has at run
// time, where its on-demand parser is fixed at build time). Strings point into the parser's buffers
// and are valid until the parser's next document.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuxray::load {

enum class KinetoCategory : uint8_t {
  kNone,  // no "cat" (metadata events)
  kKernel,
  kGpuMemcpy,
  kGpuMemset,
  kCudaRuntime,
  kCudaDriver,
  kCudaSync,
  kCpuOp,
  kUserAnnotation,
  kGpuUserAnnotation,
  kCpuInstantEvent,
  kAc2g,
  kOtherKnown,  // categories gpuxray has no use for: python_function, fwdbwd, overhead, Trace, ...
  kUnknown,
};

// A time in nanoseconds, from a JSON number of microseconds: the whole nanoseconds n for which
// n / 1000.0 is the very double the text reads as (so HTA's floating-point rounding can be replayed
// exactly), whenever the text has at most three decimals.
struct Microseconds {
  int64_t ns = 0;
  bool fractional = false;  // written as a floating-point number ("68.0", "4458676522690.655")
};

struct KinetoEvent {
  char phase = 0;
  KinetoCategory category = KinetoCategory::kNone;
  std::string_view category_text;
  std::string_view name;
  std::optional<int64_t> pid, tid;  // empty when absent or not a number ("Spans")
  std::optional<Microseconds> ts, dur;
  std::optional<uint64_t> id;  // flows

  struct Args {
    std::optional<int64_t> correlation, stream, device, external_id, bytes;
    uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
    uint32_t registers = 0, shared_memory = 0;
    // NCCL kernels and record_param_comms.
    std::string_view collective, dtype, group_name, group_description, group_ranks;
    std::optional<int64_t> in_nelems, out_nelems, group_size, src_rank, dst_rank;
    // record_param_comms before PyTorch 2.2 (record_shapes=True): the first input's shape and type,
    // "Input Dims" [[6144], [], ...] and "Input type" ["float", "Scalar", ...]. Elements: -1 unknown.
    int64_t first_input_elements = -1;
    std::string_view first_input_type;
    // cpu_ops, all inputs (for the op tree); valid with the document, empty when not recorded.
    simdjson::dom::array input_dims, input_types;
    bool has_input_dims = false, has_input_types = false;
    // [memory] instant events.
    std::optional<int64_t> device_type, device_id, alloc_bytes;
    uint64_t alloc_address = 0;  // "Addr"; 0: not recorded
  } args;
};

// A cpu_op's inputs as "float[512, 1024], float[1024], Scalar" (each one's "Input type" and, when it
// has one, its shape from "Input Dims"), appended to `out`; nothing when neither is recorded.
void appendInputs(const KinetoEvent::Args& args, std::string& out);

// Fills `event` from one event object. Fields of the wrong type are left out.
void readKinetoEvent(simdjson::dom::object object, KinetoEvent& event);

// A JSON number of microseconds as nanoseconds; empty for anything else.
std::optional<Microseconds> microsecondsOf(simdjson::dom::element value);
Microseconds microsecondsOfDouble(double us);

KinetoCategory kinetoCategoryOf(std::string_view name);

}  // namespace gpuxray::load
