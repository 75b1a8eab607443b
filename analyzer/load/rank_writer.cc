#include "analyzer/load/rank_writer.h"

#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "analyzer/errors.h"
#include "analyzer/load/run_loader.h"
#include "gpuxray/version.h"
#include "proto/trace_writer.h"

namespace gpuxray::load {
namespace {

// "Memcpy HtoD (Pinned -> Device)" -> kHtoD
format::CopyKind copyKindOf(std::string_view name) {
  struct Named {
    std::string_view text;
    format::CopyKind kind;
  };
  static constexpr Named kKinds[] = {{"HtoD", format::CopyKind::kHtoD}, {"DtoH", format::CopyKind::kDtoH},
                                     {"DtoD", format::CopyKind::kDtoD}, {"HtoH", format::CopyKind::kHtoH},
                                     {"PtoP", format::CopyKind::kPtoP}};
  for (const Named& k : kKinds) {
    if (name.find(k.text) != std::string_view::npos) return k.kind;
  }
  return format::CopyKind::kUnknown;
}

uint64_t unsignedTime(int64_t ns) { return ns > 0 ? static_cast<uint64_t>(ns) : 0; }

}  // namespace

WrittenFile writeRankTrace(const model::RankTrace& rank, const std::string& path, const std::string& converted_from) {
  auto sink = std::make_unique<format::FileSink>(path);
  if (!sink->ok()) throw InputError(fmt::format("{}: cannot create: {}", path, std::strerror(sink->openErrno())));
  format::TraceWriter writer(std::move(sink));
  format::FileHeader header = rank.header;
  header.rank = rank.rank;
  header.tool_version = fmt::format("gpuxray {} convert", kToolVersion);
  if (!converted_from.empty()) header.capture_config.options.push_back("converted from " + converted_from);
  writer.writeHeader(header);

  auto name = [&](uint32_t id) { return id == 0 ? format::StringId{0} : writer.intern(rank.name(id)); };
  for (const auto& c : rank.communicators) {
    writer.add(format::NcclCommunicatorRecord{c.comm_hash, c.name, c.comm_rank, c.nranks, c.nnodes, c.global_rank, c.device, 0, 0});
  }
  for (const auto& a : rank.activities) {
    const model::StreamKey& stream = rank.streams[a.stream];
    switch (a.kind) {
      case model::ActivityKind::kCompute:
      case model::ActivityKind::kCommunication: {
        format::KernelRecord k;
        if (a.detail < rank.launch_configs.size()) {
          const model::LaunchConfig& c = rank.launch_configs[a.detail];
          k.grid_x = c.grid_x, k.grid_y = c.grid_y, k.grid_z = c.grid_z;
          k.block_x = c.block_x, k.block_y = c.block_y, k.block_z = c.block_z;
          k.registers_per_thread = c.registers_per_thread;
          k.static_shared_memory = c.shared_memory_bytes;
          k.local_memory_per_thread = c.local_memory_per_thread;
        }
        k.start_ns = unsignedTime(a.start_ns);
        k.end_ns = unsignedTime(a.end_ns);
        k.device = stream.device;
        k.stream = stream.stream;
        k.correlation_id = a.correlation_id;
        k.name_id = name(a.name_id);
        writer.add(k);
        break;
      }
      case model::ActivityKind::kMemcpy: {
        format::MemcpyRecord m;
        m.start_ns = unsignedTime(a.start_ns);
        m.end_ns = unsignedTime(a.end_ns);
        m.device = stream.device;
        m.stream = stream.stream;
        m.correlation_id = a.correlation_id;
        m.copy_kind = copyKindOf(rank.name(a.name_id));
        m.bytes = a.detail;
        writer.add(m);
        break;
      }
      case model::ActivityKind::kMemset: {
        format::MemsetRecord m;
        m.start_ns = unsignedTime(a.start_ns);
        m.end_ns = unsignedTime(a.end_ns);
        m.device = stream.device;
        m.stream = stream.stream;
        m.correlation_id = a.correlation_id;
        m.bytes = a.detail;
        writer.add(m);
        break;
      }
      case model::ActivityKind::kSync: {
        format::SynchronizationRecord s;
        s.start_ns = unsignedTime(a.start_ns);
        s.end_ns = unsignedTime(a.end_ns);
        s.kind = synchronizationKindNamed(rank.name(a.name_id));
        s.device = stream.device;
        s.stream = stream.stream;
        s.correlation_id = a.correlation_id;
        writer.add(s);
        break;
      }
      case model::ActivityKind::kHostOp: {
        format::NvtxEventRecord n;
        n.kind = format::NvtxEventKind::kRange;
        n.start_ns = unsignedTime(a.start_ns);
        n.end_ns = unsignedTime(a.end_ns);
        n.domain_id = writer.intern(model::kCpuOpDomain);
        n.name_id = name(a.name_id);
        n.device = stream.device;
        format::PayloadField field;
        field.name_id = writer.intern("stream");
        field.type = format::PayloadField::Type::kUint;
        field.uint_value = stream.stream;
        n.payload.push_back(field);
        writer.add(n);
        break;
      }
    }
  }
  for (const auto& c : rank.host_calls) {
    format::ApiCallRecord call;
    call.start_ns = unsignedTime(c.start_ns);
    call.end_ns = unsignedTime(c.end_ns);
    call.correlation_id = c.correlation_id;
    call.thread_id = c.thread < rank.threads.size() ? rank.threads[c.thread] : 0;  // the op tree places launches by thread
    writer.add(call);
  }
  for (const auto& r : rank.nvtx) {
    format::NvtxEventRecord n;
    n.kind = format::NvtxEventKind::kRange;
    n.start_ns = unsignedTime(r.start_ns);
    n.end_ns = unsignedTime(r.end_ns);
    n.domain_id = name(r.domain_id);
    n.name_id = name(r.name_id);
    n.thread_id = r.thread_id;
    n.depth = r.depth;
    writer.add(n);
  }
  // cpu_ops as ranges of their domain, their inputs in an "inputs" payload field.
  const format::StringId cpu_op_domain = rank.host_ops.empty() ? 0 : writer.intern(model::kCpuOpDomain);
  const format::StringId inputs_field = rank.host_ops.empty() ? 0 : writer.intern("inputs");
  for (const auto& op : rank.host_ops) {
    format::NvtxEventRecord n;
    n.kind = format::NvtxEventKind::kRange;
    n.start_ns = unsignedTime(op.start_ns);
    n.end_ns = unsignedTime(op.end_ns);
    n.domain_id = cpu_op_domain;
    n.name_id = name(op.name_id);
    n.thread_id = op.thread_id;
    if (op.inputs_id != 0) {
      format::PayloadField field;
      field.name_id = inputs_field;
      field.type = format::PayloadField::Type::kString;
      field.string_id = name(op.inputs_id);
      n.payload.push_back(field);
    }
    writer.add(n);
  }
  for (const auto& m : rank.memory) {
    format::MemoryEventRecord e;
    e.timestamp_ns = unsignedTime(m.time_ns);
    e.operation = m.delta_bytes >= 0 ? format::MemoryOperation::kAllocate : format::MemoryOperation::kRelease;
    e.device = m.device;
    e.address = m.address;
    e.bytes = static_cast<uint64_t>(m.delta_bytes >= 0 ? m.delta_bytes : -m.delta_bytes);
    e.memory_kind = format::MemoryKind::kDevice;
    writer.add(e);
  }
  for (const auto& o : rank.nccl_ops) {
    format::NcclOperationRecord r;
    r.kind = o.kind;
    r.comm_hash = o.comm_hash;
    r.seq = o.seq;
    r.func_id = name(o.func_id);
    r.algorithm_id = name(o.algorithm_id);
    r.protocol_id = name(o.protocol_id);
    r.datatype_id = name(o.datatype_id);
    r.enqueue_ns = unsignedTime(o.enqueue_ns);
    r.gpu_start_ns = unsignedTime(o.gpu_start_ns);
    r.gpu_end_ns = unsignedTime(o.gpu_end_ns);
    r.bytes = o.bytes;
    r.count = o.count;
    r.root = o.root;
    r.peer = o.peer;
    r.channels = o.channels;
    r.device = o.device;
    r.operation_id = o.operation_id;
    r.gpu_clock_error_ns = o.gpu_clock_error_ns;
    writer.add(r);
  }
  for (const auto& t : rank.transfers) {
    writer.add(format::NetTransferRecord{t.operation_id, t.peer, t.channel, t.is_send, t.bytes, unsignedTime(t.start_ns),
                                         unsignedTime(t.end_ns), 0, t.wait_gpu_ns, t.wait_peer_ns, t.wait_network_ns,
                                         t.comm_hash});
  }
  format::Trailer trailer;
  trailer.end = format::CaptureEnd::kGenerated;
  trailer.end_detail = converted_from.empty() ? "converted" : "converted from " + converted_from;
  if (!writer.finish(trailer)) throw InputError(fmt::format("{}: cannot write: {}", path, writer.error()));
  WrittenFile written;
  written.bytes = writer.bytesWritten();
  for (uint32_t c = 0; c < format::kCategoryCount; ++c) written.records += writer.written(static_cast<format::Category>(c));
  return written;
}

}  // namespace gpuxray::load
