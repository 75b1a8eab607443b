// `gpuxray info PATH...`: what each trace file holds (header, event counts, drops, damage) and
// whether the files form one run; for PyTorch-profiler traces, what the importer read from them; for
// digests (`gpuxray digest`), who made them, of which trace and with which options, and what they keep.

#include <fmt/core.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/analysis/digest_file.h"
#include "analyzer/analysis/occupancy.h"
#include "analyzer/cli/commands.h"
#include "analyzer/errors.h"
#include "analyzer/load/kineto_importer.h"
#include "analyzer/load/run_files.h"
#include "analyzer/report/json_writer.h"
#include "analyzer/report/units.h"
#include "proto/trace_reader.h"

namespace gpuxray::cli {
namespace {

using format::Category;
using format::kCategoryCount;

struct InfoOptions {
  std::vector<std::string> paths;
  std::string output_format = "text";
  bool allow_mixed_runs = false;
};

struct FileInfo {
  std::string path;
  format::Preamble version;
  format::FileHeader header;
  format::CategoryCounts read{};
  std::optional<format::Trailer> trailer;
  format::ReadStats stats;
  std::vector<std::string> warnings;
};

FileInfo readFileInfo(const std::string& path) {
  format::TraceReader reader(path);
  FileInfo info{path, reader.version(), reader.header(), {}, {}, {}, {}};
  format::EventBatch batch;
  while (reader.next(batch)) format::countRecords(batch, info.read);
  info.trailer = reader.trailer();
  info.stats = reader.stats();
  info.warnings = reader.warnings();
  if (!info.trailer) {
    info.warnings.push_back(path + ": no trailer: the capture did not finish cleanly, so drop counts are unknown");
  } else {
    for (const auto& count : info.trailer->counts) {
      auto index = static_cast<uint32_t>(count.category);
      if (index < kCategoryCount && count.written != info.read[index]) {
        info.warnings.push_back(fmt::format("{}: the trailer counts {} {} records written but {} were read", path,
                                            count.written, format::categoryName(count.category), info.read[index]));
      }
    }
  }
  if (info.stats.unresolved_references > 0) {
    info.warnings.push_back(fmt::format("{}: {} kernels refer to a launch configuration lost with a damaged chunk",
                                        path, info.stats.unresolved_references));
  }
  return info;
}

uint64_t droppedOf(const FileInfo& info, uint32_t category) {
  if (!info.trailer) return 0;
  for (const auto& count : info.trailer->counts) {
    if (static_cast<uint32_t>(count.category) == category) return count.dropped;
  }
  return 0;
}

std::string rankText(const format::FileHeader& h) {
  if (h.rank < 0) return "unknown";
  std::string text = fmt::format("{} of {}", h.rank, h.world_size);
  if (h.local_rank >= 0) text += fmt::format(" (local {} of {})", h.local_rank, h.local_world_size);
  if (!h.rank_source.empty()) text += fmt::format(", from {}", h.rank_source);
  return text;
}

std::string deviceText(const format::DeviceProperties& d) {
  std::string text = fmt::format("GPU {}: {}", d.device_id, d.name.empty() ? "(unnamed)" : d.name);
  if (d.compute_major > 0) {
    // HIP reports the gfx generation as major.minor (9.0 for MI250's gfx90a, 9.4 for MI300X's gfx942).
    text += analysis::isAmdDevice(d) ? fmt::format(", gfx {}.{}", d.compute_major, d.compute_minor)
                                     : fmt::format(", sm_{}{}", d.compute_major, d.compute_minor);
  }
  if (d.sm_count > 0) text += fmt::format(", {} {}", d.sm_count, analysis::multiprocessorsName(&d));
  if (d.memory_bytes > 0) text += ", " + report::formatBytes(d.memory_bytes);
  if (d.memory_bandwidth_bytes_per_s > 0)
    text += ", " + report::formatBandwidth(static_cast<double>(d.memory_bandwidth_bytes_per_s));
  if (!d.pci_bus_id.empty()) text += ", " + d.pci_bus_id;
  return text;
}

std::string topologyText(const format::FileHeader& h) {
  size_t nvlink = 0, pcie = 0, network = 0;
  for (const auto& link : h.links) {
    nvlink += link.kind == format::LinkKind::kNvLink;
    pcie += link.kind == format::LinkKind::kPcie;
    network += link.kind == format::LinkKind::kNetwork;
  }
  std::string text = fmt::format("{} NVLink, {} PCIe, {} network links", nvlink, pcie, network);
  for (size_t i = 0; i < h.nics.size(); ++i) {
    const auto& nic = h.nics[i];
    text += fmt::format("{}{} {}", i == 0 ? "; NICs: " : ", ", nic.name,
                        report::formatBandwidth(static_cast<double>(nic.bandwidth_bytes_per_s)));
  }
  return text;
}

// A PyTorch-profiler trace, as the importer read it.
struct KinetoInfo {
  std::string path;
  model::RankTrace rank;
  load::KinetoImportStats stats;
  std::vector<std::string> warnings;
};

KinetoInfo readKinetoInfo(const std::string& path) {
  KinetoInfo info;
  info.path = path;
  info.rank = load::importKinetoTrace(path, info.warnings, &info.stats);
  if (info.rank.rank < 0)
    info.warnings.push_back(path + ": no rank in the trace (no distributedInfo): analyze picks one");
  return info;
}

// What the model got from the trace, by kind.
std::vector<std::pair<std::string, uint64_t>> importedCounts(const model::RankTrace& rank) {
  uint64_t kernels = 0, copies = 0, syncs = 0;
  for (const auto& a : rank.activities) {
    switch (a.kind) {
      case model::ActivityKind::kCompute:
      case model::ActivityKind::kCommunication:
        ++kernels;
        break;
      case model::ActivityKind::kMemcpy:
      case model::ActivityKind::kMemset:
        ++copies;
        break;
      case model::ActivityKind::kSync:
      case model::ActivityKind::kHostOp:
        ++syncs;
        break;
    }
  }
  return {{"kernels", kernels},
          {"copies_and_memsets", copies},
          {"synchronizations_and_host_ops", syncs},
          {"launches", rank.host_calls.size()},
          {"ranges", rank.nvtx.size()},
          {"nccl_operations", rank.nccl_ops.size()},
          {"communicators", rank.communicators.size()},
          {"memory_events", rank.memory.size()}};
}

void printKineto(const KinetoInfo& info) {
  const auto& h = info.rank.header;
  const auto& s = info.stats;
  fmt::print("{}\n", info.path);
  fmt::print("  format    {}, {} of JSON{}\n", h.tool_version, report::formatBytes(s.json_bytes),
             s.file_bytes != s.json_bytes ? fmt::format(", {} compressed", report::formatBytes(s.file_bytes)) : "");
  fmt::print("  run       {} (from the {})\n", h.run_id, h.run_id_source);
  fmt::print("  rank      {}\n", h.rank < 0 ? std::string("unknown (no distributedInfo)") : rankText(h));
  if (!h.nccl_version.empty()) fmt::print("  nccl      {}\n", h.nccl_version);
  for (const auto& device : h.devices) fmt::print("  device    {}\n", deviceText(device));
  std::string events;
  for (size_t c = 0; c < s.by_category.size(); ++c) {
    if (s.by_category[c] == 0) continue;
    events += fmt::format("{}{} {}", events.empty() ? "" : ", ",
                          load::kinetoCategoryName(static_cast<load::KinetoCategory>(c)),
                          report::formatCount(s.by_category[c]));
  }
  fmt::print("  events    {} ({})\n", report::formatCount(s.events), events.empty() ? "none" : events);
  std::string imported;
  for (const auto& [name, count] : importedCounts(info.rank)) {
    if (count > 0) imported += fmt::format("{}{} {}", imported.empty() ? "" : ", ", name, report::formatCount(count));
  }
  fmt::print("  imported  {}\n", imported.empty() ? "nothing" : imported);
  for (const auto& warning : info.warnings) fmt::print("  warning: {}\n", warning);
}

void writeKinetoJson(report::JsonWriter& json, const KinetoInfo& info) {
  const auto& h = info.rank.header;
  json.beginObject()
      .field("path", info.path)
      .field("format", "pytorch-profiler")
      .field("tool_version", h.tool_version)
      .field("run_id", h.run_id)
      .field("run_id_source", h.run_id_source)
      .field("rank", h.rank)
      .field("world_size", h.world_size)
      .field("rank_source", h.rank_source)
      .field("nccl_version", h.nccl_version)
      .field("file_bytes", info.stats.file_bytes)
      .field("json_bytes", info.stats.json_bytes)
      .field("truncated", info.stats.truncated)
      .field("malformed_events", info.stats.malformed)
      .field("events_missing_fields", info.stats.missing_fields);
  json.key("events").beginObject();
  for (size_t c = 0; c < info.stats.by_category.size(); ++c)
    json.field(load::kinetoCategoryName(static_cast<load::KinetoCategory>(c)), info.stats.by_category[c]);
  json.endObject();
  json.key("imported").beginObject();
  for (const auto& [name, count] : importedCounts(info.rank)) json.field(name, count);
  json.endObject();
  json.key("warnings").beginArray();
  for (const auto& warning : info.warnings) json.value(warning);
  json.endArray();
  json.endObject();
}

struct DigestInfo {
  std::string path;
  uintmax_t file_bytes = 0;
  analysis::DigestFile digest;
};

DigestInfo readDigestInfo(const std::string& path) {
  std::error_code error;
  uintmax_t bytes = std::filesystem::file_size(path, error);
  return {path, error ? 0 : bytes, analysis::readDigestFile(path)};
}

void printDigest(const DigestInfo& info) {
  const auto& h = info.digest.header;
  const auto& d = info.digest.digest;
  const auto& trace = info.digest.skeleton;
  fmt::print("{}\n", info.path);
  fmt::print("  digest    format {}, made by gpuxray {}; {}\n", h.format_version, h.gpuxray_version,
             report::formatBytes(info.file_bytes));
  fmt::print("  of        {}{}\n", h.source_path,
             h.source_absolute_path == h.source_path ? "" : fmt::format(" ({})", h.source_absolute_path));
  fmt::print("  run       {}\n", h.run_id.empty() ? "(none)" : h.run_id);
  fmt::print("  rank      {}\n", rankText(trace.header));
  fmt::print("  options   {}\n", h.options.empty() ? "(defaults)" : h.options);
  fmt::print(
      "  keeps     {} records read, {} steps, {} distinct kernel launches, {} NCCL operations, {} communicators\n",
      report::formatCount(trace.records_read), d.windows.size(), report::formatCount(d.kernels.launches.size()),
      report::formatCount(trace.nccl_ops.size()), trace.communicators.size());
  if (d.gpu_span.length() > 0)
    fmt::print("  gpu time  {} from first to last activity\n", report::formatDuration(d.gpu_span.length()));
}

void writeDigestJson(report::JsonWriter& json, const DigestInfo& info) {
  const auto& h = info.digest.header;
  const auto& d = info.digest.digest;
  const auto& trace = info.digest.skeleton;
  json.beginObject()
      .field("path", info.path)
      .field("kind", "digest")
      .field("digest_format_version", h.format_version)
      .field("gpuxray_version", h.gpuxray_version)
      .field("source_path", h.source_path)
      .field("source_absolute_path", h.source_absolute_path)
      .field("run_id", h.run_id)
      .field("rank", h.rank)
      .field("world_size", h.world_size)
      .field("options", h.options)
      .field("file_bytes", static_cast<uint64_t>(info.file_bytes))
      .field("records_read", trace.records_read)
      .field("steps", static_cast<uint64_t>(d.windows.size()))
      .field("distinct_kernel_launches", static_cast<uint64_t>(d.kernels.launches.size()))
      .field("nccl_operations", static_cast<uint64_t>(trace.nccl_ops.size()))
      .field("communicators", static_cast<uint64_t>(trace.communicators.size()));
  json.key("gpu_span_ns");
  if (d.gpu_span.length() > 0) {
    json.value(d.gpu_span.length());
  } else {
    json.null();
  }
  json.endObject();
}

void printText(const std::vector<FileInfo>& files) {
  for (const FileInfo& info : files) {
    const auto& h = info.header;
    fmt::print("{}\n", info.path);
    fmt::print("  format    {}.{}, written by gpuxray {}{}; {} in {} chunks\n", info.version.major, info.version.minor,
               h.tool_version.empty() ? "?" : h.tool_version, h.simulated ? " (simulated)" : "",
               report::formatBytes(info.stats.file_bytes), info.stats.chunks);
    fmt::print("  run       {}{}\n", h.run_id.empty() ? "(none)" : h.run_id,
               h.run_id_source.empty() ? "" : fmt::format(" (from {})", h.run_id_source));
    fmt::print("  rank      {}\n", rankText(h));
    fmt::print("  host      {}, pid {}\n", h.hostname.empty() ? "?" : h.hostname, h.pid);
    if (!h.command_line.empty()) {
      std::string command;
      for (const auto& arg : h.command_line) command += (command.empty() ? "" : " ") + arg;
      fmt::print("  command   {}\n", command);
    }
    if (h.start_time_ns > 0) {
      fmt::print("  started   {}, clock {}\n", report::formatTimestamp(h.start_time_ns),
                 h.time_base.empty() ? "?" : h.time_base);
    }
    for (const auto& device : h.devices) fmt::print("  device    {}\n", deviceText(device));
    if (!h.nccl_version.empty() || h.nccl_capture_source != format::NcclCaptureSource::kUnknown) {
      fmt::print("  nccl      {}captured through {}\n", h.nccl_version.empty() ? "" : h.nccl_version + ", ",
                 format::ncclCaptureSourceName(h.nccl_capture_source));
    }
    if (!h.links.empty() || !h.nics.empty()) fmt::print("  topology  {}\n", topologyText(h));
    if (info.trailer) {
      fmt::print("  ended     {}{}\n", format::captureEndName(info.trailer->end),
                 info.trailer->end_detail.empty() ? "" : " (" + info.trailer->end_detail + ")");
    } else {
      fmt::print("  ended     unknown (no trailer)\n");
    }
    std::string events;
    std::string drops;
    for (uint32_t c = 0; c < kCategoryCount; ++c) {
      auto name = format::categoryName(static_cast<Category>(c));
      if (info.read[c] > 0)
        events += fmt::format("{}{} {}", events.empty() ? "" : ", ", name, report::formatCount(info.read[c]));
      if (uint64_t dropped = droppedOf(info, c))
        drops += fmt::format("{}{} {}", drops.empty() ? "" : ", ", name, report::formatCount(dropped));
    }
    fmt::print("  events    {}\n", events.empty() ? "none" : events);
    if (!drops.empty()) fmt::print("  dropped   {}\n", drops);
    if (info.trailer) {
      for (const auto& warning : info.trailer->warnings) fmt::print("  capture warning: {}\n", warning);
    }
    for (const auto& warning : info.warnings) fmt::print("  warning: {}\n", warning);
  }
}

void writeJson(const std::vector<FileInfo>& files, const std::vector<KinetoInfo>& kineto,
               const std::vector<DigestInfo>& digests, const load::RunProblems& run,
               const std::vector<std::string>& errors) {
  std::string out;
  report::JsonWriter json(out);
  json.beginObject().field("schema", "gpuxray.info").field("schema_version", 1).key("files").beginArray();
  for (const KinetoInfo& info : kineto) writeKinetoJson(json, info);
  for (const DigestInfo& info : digests) writeDigestJson(json, info);
  for (const FileInfo& info : files) {
    const auto& h = info.header;
    json.beginObject()
        .field("path", info.path)
        .field("format_version", fmt::format("{}.{}", info.version.major, info.version.minor))
        .field("tool_version", h.tool_version)
        .field("run_id", h.run_id)
        .field("run_id_source", h.run_id_source)
        .field("rank", h.rank)
        .field("local_rank", h.local_rank)
        .field("world_size", h.world_size)
        .field("local_world_size", h.local_world_size)
        .field("rank_source", h.rank_source)
        .field("hostname", h.hostname)
        .field("pid", h.pid)
        .field("start_time_ns", h.start_time_ns)
        .field("time_base", h.time_base)
        .field("simulated", h.simulated)
        .field("nccl_version", h.nccl_version)
        .field("nccl_capture_source", format::ncclCaptureSourceName(h.nccl_capture_source));
    json.key("command_line").beginArray();
    for (const auto& arg : h.command_line) json.value(arg);
    json.endArray();
    json.key("devices").beginArray();
    for (const auto& d : h.devices) {
      json.beginObject()
          .field("device_id", d.device_id)
          .field("name", d.name)
          .field("compute_capability", fmt::format("{}.{}", d.compute_major, d.compute_minor))
          .field("sm_count", d.sm_count)
          .field("memory_bytes", d.memory_bytes)
          .field("memory_bandwidth_bytes_per_s", d.memory_bandwidth_bytes_per_s)
          .field("pci_bus_id", d.pci_bus_id)
          .endObject();
    }
    json.endArray();
    json.field("links", static_cast<uint64_t>(h.links.size())).field("nics", static_cast<uint64_t>(h.nics.size()));
    json.field("file_bytes", info.stats.file_bytes).field("chunks", info.stats.chunks);
    json.field("damaged_chunks", info.stats.damaged_chunks).field("bytes_skipped", info.stats.bytes_skipped);
    json.key("torn_at");
    if (info.stats.torn_at) {
      json.value(*info.stats.torn_at);
    } else {
      json.null();
    }
    json.key("events").beginObject();
    for (uint32_t c = 1; c < kCategoryCount; ++c)
      json.field(format::categoryName(static_cast<Category>(c)), info.read[c]);
    json.endObject();
    json.key("dropped").beginObject();
    for (uint32_t c = 0; c < kCategoryCount; ++c)
      json.field(format::categoryName(static_cast<Category>(c)), droppedOf(info, c));
    json.endObject();
    json.field("capture_end", info.trailer ? format::captureEndName(info.trailer->end) : "unknown");
    json.field("capture_end_detail", info.trailer ? info.trailer->end_detail : "");
    json.key("warnings").beginArray();
    if (info.trailer) {
      for (const auto& warning : info.trailer->warnings) json.value(warning);
    }
    for (const auto& warning : info.warnings) json.value(warning);
    json.endArray();
    json.endObject();
  }
  json.endArray();
  json.key("run_warnings").beginArray();
  for (const auto& warning : run.warnings) json.value(warning);
  json.endArray();
  json.key("errors").beginArray();
  for (const auto& error : errors) json.value(error);
  json.endArray();
  json.endObject();
  fmt::print("{}", out);
}

ExitCode runInfo(const InfoOptions& options) {
  if (options.output_format != "text" && options.output_format != "json")
    throw UsageError(fmt::format("--format must be text or json, not '{}'", options.output_format));
  load::TraceFileSet inputs = load::discoverTraceFiles(options.paths);

  std::vector<FileInfo> files;
  std::vector<KinetoInfo> kineto;
  std::vector<DigestInfo> digests;
  std::vector<std::string> errors;
  for (const auto& path : inputs.files) {
    try {
      if (analysis::isDigestFileName(path)) {
        digests.push_back(readDigestInfo(path));
      } else if (load::traceFileFormat(path) == model::SourceFormat::kKineto) {
        kineto.push_back(readKinetoInfo(path));
      } else {
        files.push_back(readFileInfo(path));
      }
    } catch (const format::FormatError& e) {
      errors.push_back(e.what());
    } catch (const InputError& e) {
      errors.push_back(e.what());
    }
  }
  std::vector<load::RankedFile> ranked;
  for (const auto& info : files) ranked.push_back({info.path, &info.header});
  // PyTorch-profiler traces without a rank get one when analyzed; they are not checked here.
  for (const auto& info : kineto) {
    if (info.rank.rank >= 0) ranked.push_back({info.path, &info.rank.header});
  }
  for (const auto& info : digests) ranked.push_back({info.path, &info.digest.skeleton.header});
  load::RunProblems run = load::checkRunMembership(ranked, options.allow_mixed_runs, inputs.from_directory);
  run.warnings.insert(run.warnings.begin(), inputs.warnings.begin(), inputs.warnings.end());
  errors.insert(errors.end(), run.errors.begin(), run.errors.end());

  if (options.output_format == "json") {
    writeJson(files, kineto, digests, run, errors);
  } else {
    for (const KinetoInfo& info : kineto) printKineto(info);
    for (const DigestInfo& info : digests) printDigest(info);
    printText(files);
    for (const auto& warning : run.warnings) fmt::print(stderr, "gpuxray: warning: {}\n", warning);
    for (const auto& error : errors) fmt::print(stderr, "gpuxray: error: {}\n", error);
  }
  return errors.empty() ? ExitCode::kOk : ExitCode::kBadInput;
}

}  // namespace

CommandAction addInfoCommand(CLI::App& app) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* command = app.add_subcommand("info",
                                         "Show what trace files hold: header, event counts, drops, damage (gpuxray or "
                                         "PyTorch-profiler traces, and digests)");
  command->add_option("paths", options->paths, "Trace files or directories of them")->required();
  command->add_option("--format", options->output_format, "text (default) or json");
  command->add_flag("--allow-mixed", options->allow_mixed_runs, "Accept files from different runs together");
  return [options] { return runInfo(*options); };
}

}  // namespace gpuxray::cli
