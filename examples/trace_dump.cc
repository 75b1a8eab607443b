// Prints the records of gpuxray trace files one per line, for scripts to grep and awk (until an
// exporter exists). scripts/gpu-check.sh compares it with what its example programs say they did.
//
//   trace_dump [--api] PATH...      (a PATH that is a directory means its *.gpuxray files)
//
// Each line starts with the record kind and has key=value fields; a name, which may hold spaces,
// always comes last as name=<rest of the line>. Durations are end - start in ns. Lines:
//
//   file path=P
//   header pid= rank= world_size= run_id= tool_version= cupti_api= driver= devices= links= nics= nccl=
//          nccl_capture=profiler-plugin|nvtx|none|unknown   (one line)
//   device source=header|batch id= cc=M.m sms= memory_bytes= bandwidth_bytes_per_s= pci= name=
//   link source=header|batch kind=nvlink|pcie|network|unknown a=KIND:ID:DEV b=KIND:ID:DEV version= width= bandwidth_bytes_per_s=
//   kernel start_ns= end_ns= dur_ns= device= stream= correlation= grid=x,y,z block=x,y,z name=
//   memcpy kind=HtoD src=pinned dst=device bytes= start_ns= end_ns= dur_ns= device= stream= async=0|1
//   memset bytes= value= memory=device start_ns= end_ns= dur_ns= device= stream=
//   memory op=allocate|release kind= bytes= device= stream= async=0|1 timestamp_ns=
//   nvtx kind=range|mark start_ns= end_ns= dur_ns= depth= thread= domain=D name=
//   nvtx_field schema=0xS type=int|uint|double|string value=V name=   (after its nvtx line, one per
//           payload field; a string value has its spaces replaced)
//   sync kind= start_ns= end_ns= dur_ns= device= stream=
//   stream id= device= priority= flags=
//   resource kind= id= device= name=
//   overhead kind= start_ns= end_ns= dur_ns=
//   api domain=runtime|driver cbid= start_ns= end_ns= dur_ns= thread= correlation= return= name=   (with --api)
//   nccl_comm hash=0xH rank= nranks= nnodes= global_rank= device= init_ns= version= name=
//   nccl_op kind=collective|send|recv func= seq= bytes= count= datatype= algo= proto= channels= warps= root= peer=
//           enqueue_ns= enqueue_end_ns= gpu_start= gpu_end= gpu_dur_ns= gpu_clock_error_ns= kernel_correlation=
//           device= op_id= comm=0xH   (one line)
//   net_transfer dir=send|recv peer= channel= bytes= steps= start_ns= end_ns= dur_ns= wait_gpu_ns= wait_peer_ns=
//           wait_network_ns= op_id= comm=0xH   (one line)
//   count category=C read=N written=N dropped=N
//   trailer end=E detail=...
//   warning ...
//
// Domains with spaces have them replaced by '_'; the default (empty) domain is '-'.
//
// NCCL: version= is the profiler-plugin ABI version NCCL chose (4, 5, 6); func, datatype, algo and
// proto are NCCL's strings ('-' when NCCL gave none: send/recv carry no algorithm or protocol);
// gpu_start and gpu_end are the first channel's start and the last channel's end (0 when no kernel
// channel reported), mapped from the GPU's %globaltimer onto the capture clock to within
// gpu_clock_error_ns; kernel_correlation names the CUPTI kernel that ran the operation (0: none found);
// op_id links a net_transfer (network transports only) to its nccl_op.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "proto/records.h"
#include "proto/trace_reader.h"

namespace {

using namespace gpuxray::format;
namespace fs = std::filesystem;

std::string noSpaces(std::string_view text, const char* empty = "-") {
  if (text.empty()) return empty;
  std::string out(text);
  for (char& c : out) {
    if (c == ' ' || c == '\t' || c == '\n') c = '_';
  }
  return out;
}

uint64_t duration(uint64_t start, uint64_t end) { return end >= start ? end - start : 0; }

const char* copyKindName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHtoD: return "HtoD";
    case CopyKind::kDtoH: return "DtoH";
    case CopyKind::kHtoA: return "HtoA";
    case CopyKind::kAtoH: return "AtoH";
    case CopyKind::kAtoA: return "AtoA";
    case CopyKind::kAtoD: return "AtoD";
    case CopyKind::kDtoA: return "DtoA";
    case CopyKind::kDtoD: return "DtoD";
    case CopyKind::kHtoH: return "HtoH";
    case CopyKind::kPtoP: return "PtoP";
    case CopyKind::kUnknown: break;
  }
  return "unknown";
}

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kPageable: return "pageable";
    case MemoryKind::kPinned: return "pinned";
    case MemoryKind::kDevice: return "device";
    case MemoryKind::kArray: return "array";
    case MemoryKind::kManaged: return "managed";
    case MemoryKind::kDeviceStatic: return "device_static";
    case MemoryKind::kManagedStatic: return "managed_static";
    case MemoryKind::kUnknown: break;
  }
  return "unknown";
}

const char* linkKindName(LinkKind kind) {
  switch (kind) {
    case LinkKind::kNvLink: return "nvlink";
    case LinkKind::kPcie: return "pcie";
    case LinkKind::kNetwork: return "network";
    case LinkKind::kUnknown: break;
  }
  return "unknown";
}

const char* endpointKindName(EndpointKind kind) {
  switch (kind) {
    case EndpointKind::kGpu: return "gpu";
    case EndpointKind::kCpu: return "cpu";
    case EndpointKind::kNvSwitch: return "nvswitch";
    case EndpointKind::kPcieBridge: return "pcie_bridge";
    case EndpointKind::kNic: return "nic";
    case EndpointKind::kUnknown: break;
  }
  return "unknown";
}

const char* syncKindName(SynchronizationKind kind) {
  switch (kind) {
    case SynchronizationKind::kEventSynchronize: return "event_synchronize";
    case SynchronizationKind::kStreamWaitEvent: return "stream_wait_event";
    case SynchronizationKind::kStreamSynchronize: return "stream_synchronize";
    case SynchronizationKind::kContextSynchronize: return "context_synchronize";
    case SynchronizationKind::kUnknown: break;
  }
  return "unknown";
}

const char* resourceKindName(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kThread: return "thread";
    case ResourceKind::kDevice: return "device";
    case ResourceKind::kContext: return "context";
    case ResourceKind::kStream: return "stream";
    case ResourceKind::kCudaEvent: return "cuda_event";
    case ResourceKind::kUnknown: break;
  }
  return "unknown";
}

const char* ncclKindName(NcclOperationKind kind) {
  switch (kind) {
    case NcclOperationKind::kCollective: return "collective";
    case NcclOperationKind::kSend: return "send";
    case NcclOperationKind::kRecv: return "recv";
    case NcclOperationKind::kUnknown: break;
  }
  return "unknown";
}

const char* apiDomainName(ApiDomain domain) {
  switch (domain) {
    case ApiDomain::kRuntime: return "runtime";
    case ApiDomain::kDriver: return "driver";
    case ApiDomain::kUnknown: break;
  }
  return "unknown";
}

void printDevice(const char* source, const DeviceProperties& d) {
  std::printf("device source=%s id=%u cc=%u.%u sms=%u memory_bytes=%llu bandwidth_bytes_per_s=%llu pci=%s name=%s\n",
              source, d.device_id, d.compute_major, d.compute_minor, d.sm_count,
              static_cast<unsigned long long>(d.memory_bytes),
              static_cast<unsigned long long>(d.memory_bandwidth_bytes_per_s), noSpaces(d.pci_bus_id).c_str(),
              d.name.c_str());
}

std::string endpointText(const Endpoint& e) {
  return std::string(endpointKindName(e.kind)) + ":" + noSpaces(e.id) + ":" + std::to_string(e.device);
}

void printLink(const char* source, const Link& l) {
  std::printf("link source=%s kind=%s a=%s b=%s version=%u width=%u bandwidth_bytes_per_s=%llu\n", source,
              linkKindName(l.kind), endpointText(l.a).c_str(), endpointText(l.b).c_str(), l.version, l.width,
              static_cast<unsigned long long>(l.bandwidth_bytes_per_s));
}

using ApiNames = std::map<std::pair<ApiDomain, uint32_t>, StringId>;

void printBatch(const EventBatch& b, const StringTable& strings, bool api, ApiNames& api_names) {
  for (const auto& f : b.api_functions) api_names[{f.domain, f.cbid}] = f.name_id;
  for (const auto& d : b.devices) printDevice("batch", d);
  for (const auto& l : b.links) printLink("batch", l);
  for (const auto& k : b.kernels) {
    std::printf("kernel start_ns=%llu end_ns=%llu dur_ns=%llu device=%u stream=%u correlation=%u grid=%u,%u,%u "
                "block=%u,%u,%u name=%s\n",
                static_cast<unsigned long long>(k.start_ns), static_cast<unsigned long long>(k.end_ns),
                static_cast<unsigned long long>(duration(k.start_ns, k.end_ns)), k.device, k.stream,
                k.correlation_id, k.grid_x, k.grid_y, k.grid_z, k.block_x, k.block_y, k.block_z,
                std::string(strings.get(k.name_id)).c_str());
  }
  for (const auto& m : b.memcpys) {
    std::printf("memcpy kind=%s src=%s dst=%s bytes=%llu start_ns=%llu end_ns=%llu dur_ns=%llu device=%u stream=%u "
                "async=%d\n",
                copyKindName(m.copy_kind), memoryKindName(m.src_kind), memoryKindName(m.dst_kind),
                static_cast<unsigned long long>(m.bytes), static_cast<unsigned long long>(m.start_ns),
                static_cast<unsigned long long>(m.end_ns), static_cast<unsigned long long>(duration(m.start_ns, m.end_ns)),
                m.device, m.stream, m.is_async ? 1 : 0);
  }
  for (const auto& m : b.memsets) {
    std::printf("memset bytes=%llu value=%u memory=%s start_ns=%llu end_ns=%llu dur_ns=%llu device=%u stream=%u\n",
                static_cast<unsigned long long>(m.bytes), m.value, memoryKindName(m.memory_kind),
                static_cast<unsigned long long>(m.start_ns), static_cast<unsigned long long>(m.end_ns),
                static_cast<unsigned long long>(duration(m.start_ns, m.end_ns)), m.device, m.stream);
  }
  for (const auto& m : b.memory_events) {
    const char* op = m.operation == MemoryOperation::kAllocate  ? "allocate"
                     : m.operation == MemoryOperation::kRelease ? "release"
                                                                : "unknown";
    std::printf("memory op=%s kind=%s bytes=%llu device=%u stream=%u async=%d timestamp_ns=%llu\n", op,
                memoryKindName(m.memory_kind), static_cast<unsigned long long>(m.bytes), m.device, m.stream,
                m.is_async ? 1 : 0, static_cast<unsigned long long>(m.timestamp_ns));
  }
  for (const auto& n : b.nvtx_events) {
    const char* kind = n.kind == NvtxEventKind::kRange ? "range" : n.kind == NvtxEventKind::kMark ? "mark" : "unknown";
    std::printf("nvtx kind=%s start_ns=%llu end_ns=%llu dur_ns=%llu depth=%u thread=%llu domain=%s name=%s\n", kind,
                static_cast<unsigned long long>(n.start_ns), static_cast<unsigned long long>(n.end_ns),
                static_cast<unsigned long long>(duration(n.start_ns, n.end_ns)), n.depth,
                static_cast<unsigned long long>(n.thread_id), noSpaces(strings.get(n.domain_id)).c_str(),
                std::string(strings.get(n.name_id)).c_str());
    for (const auto& field : n.payload) {
      std::string type, value;
      switch (field.type) {
        case PayloadField::Type::kInt: type = "int", value = std::to_string(field.int_value); break;
        case PayloadField::Type::kUint: type = "uint", value = std::to_string(field.uint_value); break;
        case PayloadField::Type::kDouble: type = "double", value = std::to_string(field.double_value); break;
        case PayloadField::Type::kString: type = "string", value = noSpaces(strings.get(field.string_id)); break;
      }
      std::printf("nvtx_field schema=0x%llx type=%s value=%s name=%s\n",
                  static_cast<unsigned long long>(n.payload_schema), type.c_str(), value.c_str(),
                  std::string(strings.get(field.name_id)).c_str());
    }
  }
  for (const auto& s : b.synchronizations) {
    std::printf("sync kind=%s start_ns=%llu end_ns=%llu dur_ns=%llu device=%u stream=%u\n", syncKindName(s.kind),
                static_cast<unsigned long long>(s.start_ns), static_cast<unsigned long long>(s.end_ns),
                static_cast<unsigned long long>(duration(s.start_ns, s.end_ns)), s.device, s.stream);
  }
  for (const auto& s : b.streams)
    std::printf("stream id=%u device=%u priority=%d flags=%u\n", s.stream, s.device, s.priority, s.flags);
  for (const auto& r : b.resource_names) {
    std::printf("resource kind=%s id=%llu device=%u name=%s\n", resourceKindName(r.kind),
                static_cast<unsigned long long>(r.id), r.device, std::string(strings.get(r.name_id)).c_str());
  }
  for (const auto& o : b.overheads) {
    std::printf("overhead kind=%u start_ns=%llu end_ns=%llu dur_ns=%llu\n", o.kind,
                static_cast<unsigned long long>(o.start_ns), static_cast<unsigned long long>(o.end_ns),
                static_cast<unsigned long long>(duration(o.start_ns, o.end_ns)));
  }
  for (const auto& c : b.nccl_communicators) {
    std::printf("nccl_comm hash=0x%016llx rank=%d nranks=%d nnodes=%d global_rank=%d device=%u init_ns=%llu "
                "version=%u name=%s\n",
                static_cast<unsigned long long>(c.comm_hash), c.comm_rank, c.nranks, c.nnodes, c.global_rank, c.device,
                static_cast<unsigned long long>(c.init_ns), c.profiler_version, c.name.c_str());
  }
  for (const auto& o : b.nccl_operations) {
    std::printf("nccl_op kind=%s func=%s seq=%llu bytes=%llu count=%llu datatype=%s algo=%s proto=%s channels=%u "
                "warps=%u root=%d peer=%d enqueue_ns=%llu enqueue_end_ns=%llu gpu_start=%llu gpu_end=%llu "
                "gpu_dur_ns=%llu gpu_clock_error_ns=%llu kernel_correlation=%u device=%u op_id=%llu comm=0x%016llx\n",
                ncclKindName(o.kind), noSpaces(strings.get(o.func_id)).c_str(), static_cast<unsigned long long>(o.seq),
                static_cast<unsigned long long>(o.bytes), static_cast<unsigned long long>(o.count),
                noSpaces(strings.get(o.datatype_id)).c_str(), noSpaces(strings.get(o.algorithm_id)).c_str(),
                noSpaces(strings.get(o.protocol_id)).c_str(), o.channels, o.warps, o.root, o.peer,
                static_cast<unsigned long long>(o.enqueue_ns), static_cast<unsigned long long>(o.enqueue_end_ns),
                static_cast<unsigned long long>(o.gpu_start_ns), static_cast<unsigned long long>(o.gpu_end_ns),
                static_cast<unsigned long long>(duration(o.gpu_start_ns, o.gpu_end_ns)),
                static_cast<unsigned long long>(o.gpu_clock_error_ns), o.kernel_correlation_id, o.device,
                static_cast<unsigned long long>(o.operation_id), static_cast<unsigned long long>(o.comm_hash));
  }
  for (const auto& t : b.net_transfers) {
    std::printf("net_transfer dir=%s peer=%d channel=%u bytes=%llu steps=%u start_ns=%llu end_ns=%llu dur_ns=%llu "
                "wait_gpu_ns=%llu wait_peer_ns=%llu wait_network_ns=%llu op_id=%llu comm=0x%016llx\n",
                t.is_send ? "send" : "recv", t.peer, t.channel, static_cast<unsigned long long>(t.bytes), t.steps,
                static_cast<unsigned long long>(t.start_ns), static_cast<unsigned long long>(t.end_ns),
                static_cast<unsigned long long>(duration(t.start_ns, t.end_ns)),
                static_cast<unsigned long long>(t.wait_gpu_ns), static_cast<unsigned long long>(t.wait_peer_ns),
                static_cast<unsigned long long>(t.wait_network_ns), static_cast<unsigned long long>(t.operation_id),
                static_cast<unsigned long long>(t.comm_hash));
  }
  if (api) {
    for (const auto& a : b.api_calls) {
      auto name = api_names.find({a.domain, a.cbid});
      std::printf("api domain=%s cbid=%u start_ns=%llu end_ns=%llu dur_ns=%llu thread=%llu correlation=%u return=%u "
                  "name=%s\n",
                  apiDomainName(a.domain), a.cbid, static_cast<unsigned long long>(a.start_ns),
                  static_cast<unsigned long long>(a.end_ns),
                  static_cast<unsigned long long>(duration(a.start_ns, a.end_ns)),
                  static_cast<unsigned long long>(a.thread_id), a.correlation_id, a.return_code,
                  name == api_names.end() ? "" : std::string(strings.get(name->second)).c_str());
    }
  }
}

int dumpFile(const std::string& path, bool api) {
  std::printf("file path=%s\n", path.c_str());
  try {
    TraceReader reader(path);
    const FileHeader& h = reader.header();
    std::printf("header pid=%u rank=%d world_size=%d run_id=%s tool_version=%s cupti_api=%u driver=%u devices=%zu "
                "links=%zu nics=%zu nccl=%s nccl_capture=%s\n",
                h.pid, h.rank, h.world_size, noSpaces(h.run_id).c_str(), noSpaces(h.tool_version).c_str(),
                h.cupti_api_version, h.cuda_driver_version, h.devices.size(), h.links.size(), h.nics.size(),
                noSpaces(h.nccl_version).c_str(), ncclCaptureSourceName(h.nccl_capture_source));
    for (const auto& d : h.devices) printDevice("header", d);
    for (const auto& l : h.links) printLink("header", l);
    CategoryCounts read{};
    EventBatch batch;
    ApiNames api_names;
    while (reader.next(batch)) {
      countRecords(batch, read);
      printBatch(batch, reader.strings(), api, api_names);
    }
    std::map<uint32_t, CategoryCount> trailer_counts;
    if (reader.trailer()) {
      for (const auto& c : reader.trailer()->counts) trailer_counts[static_cast<uint32_t>(c.category)] = c;
    }
    for (uint32_t c = 1; c < kCategoryCount; ++c) {
      auto found = trailer_counts.find(c);
      if (read[c] == 0 && found == trailer_counts.end()) continue;
      std::printf("count category=%s read=%llu written=%llu dropped=%llu\n", categoryName(static_cast<Category>(c)),
                  static_cast<unsigned long long>(read[c]),
                  static_cast<unsigned long long>(found == trailer_counts.end() ? 0 : found->second.written),
                  static_cast<unsigned long long>(found == trailer_counts.end() ? 0 : found->second.dropped));
    }
    if (reader.trailer()) {
      std::printf("trailer end=%s detail=%s\n", noSpaces(captureEndName(reader.trailer()->end)).c_str(),
                  reader.trailer()->end_detail.c_str());
      for (const auto& w : reader.trailer()->warnings) std::printf("warning capture: %s\n", w.c_str());
    } else {
      std::printf("trailer end=none detail=\n");
    }
    for (const auto& w : reader.warnings()) std::printf("warning read: %s\n", w.c_str());
  } catch (const FormatError& e) {
    std::fprintf(stderr, "trace_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool api = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--api") {
      api = true;
      continue;
    }
    if (arg == "-h" || arg == "--help") {
      std::printf("usage: trace_dump [--api] PATH...  (a directory means its *.gpuxray files)\n");
      return 0;
    }
    std::error_code error;
    if (fs::is_directory(arg, error)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(arg, error)) {
        if (entry.path().extension() == ".gpuxray") found.push_back(entry.path().string());
      }
      std::sort(found.begin(), found.end());
      if (found.empty()) std::fprintf(stderr, "trace_dump: no .gpuxray files in %s\n", arg.c_str());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: trace_dump [--api] PATH...\n");
    return 2;
  }
  int status = 0;
  for (const auto& file : files) status |= dumpFile(file, api);
  return status;
}
