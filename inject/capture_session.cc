#include "inject/capture_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "gpuxray/version.h"
#include "inject/api_selection.h"
#include "inject/clock_anchor.h"
#include "proto/file_layout.h"

namespace gpuxray::inject {
namespace {

std::atomic<CaptureSession*> g_active{nullptr};

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  if (CaptureSession* session = g_active.load(std::memory_order_acquire)) {
    session->onBufferRequested(buffer, size, max_records);
  } else {
    *buffer = nullptr;
    *size = 0;
  }
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid_bytes) {
  if (CaptureSession* session = g_active.load(std::memory_order_acquire)) {
    session->onBufferCompleted(context, stream, buffer, valid_bytes);
  }
}

// The subscription only claims CUPTI (one subscriber per process); no callback domain is enabled.
void CUPTIAPI ignoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

std::string signalName(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(signal);
  }
}

// Host names go into file names: keep what is safe in a path.
std::string sanitizedForFileName(const std::string& text) {
  std::string safe;
  for (char c : text) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                c == '_';
    safe += keep ? c : '_';
  }
  return safe.empty() || safe[0] == '.' ? "_" + safe : safe;
}

bool makeDirectories(const std::string& path) {
  std::string partial;
  size_t at = 0;
  while (at != std::string::npos) {
    at = path.find('/', at + 1);
    partial = path.substr(0, at);
    if (partial.empty()) continue;
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

// CUPTI activity kinds for each configured category.
struct KindsOfCategory {
  bool CaptureCategories::*category;
  std::initializer_list<CUpti_ActivityKind> kinds;
};

const KindsOfCategory kActivityKinds[] = {
    {&CaptureCategories::kernel, {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL}},
    {&CaptureCategories::memcpy, {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2}},
    {&CaptureCategories::memset, {CUPTI_ACTIVITY_KIND_MEMSET}},
    {&CaptureCategories::memory, {CUPTI_ACTIVITY_KIND_MEMORY2}},
    {&CaptureCategories::nvtx, {CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_MARKER_DATA}},
    {&CaptureCategories::sync, {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION}},
    {&CaptureCategories::overhead, {CUPTI_ACTIVITY_KIND_OVERHEAD}},
};

// Always on: they are few and give the analyzer its names, topology and correlations.
constexpr CUpti_ActivityKind kAlwaysEnabled[] = {CUPTI_ACTIVITY_KIND_NAME, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                                 CUPTI_ACTIVITY_KIND_CONTEXT, CUPTI_ACTIVITY_KIND_STREAM};
// NCCL kernel records are kept this long before the oldest operation still waiting to be mapped
// (a kernel starts after its operation was enqueued, so older ones cannot hold it).
constexpr uint64_t kNcclKernelRetentionNs = 1'000'000'000;
// Emitted at driver initialization; "enable and dump" also reports what already exists.
constexpr CUpti_ActivityKind kTopologyKinds[] = {CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_NVLINK,
                                                 CUPTI_ACTIVITY_KIND_PCIE};

}  // namespace

CaptureSession* CaptureSession::active() { return g_active.load(std::memory_order_acquire); }

CaptureSession::CaptureSession(CaptureDependencies dependencies, CaptureConfig config)
    : deps_(std::move(dependencies)), config_(std::move(config)) {
  if (!deps_.log) deps_.log = [](const std::string& line) {
    std::string text = "gpuxray: " + line + "\n";
    ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
    (void)ignored;
  };
}

CaptureSession::~CaptureSession() {
  if (thread_.joinable()) stop(format::CaptureEnd::kRequested, "capture object destroyed");
  if (thread_.joinable()) thread_.detach();
  CaptureSession* self = this;
  g_active.compare_exchange_strong(self, nullptr);
  for (int fd : {wake_pipe_[0], wake_pipe_[1], done_pipe_[0], done_pipe_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void CaptureSession::log(const std::string& line) const {
  if (config_.log_level != LogLevel::kQuiet) deps_.log(line);
}

uint64_t CaptureSession::captureNow() const {
  uint64_t now = 0;
  if (deps_.cupti.getTimestamp != nullptr && deps_.cupti.getTimestamp(&now) == CUPTI_SUCCESS) return now;
  return realtimeNs();
}

bool CaptureSession::start() {
  pid_ = ::getpid();
  start_realtime_ns_ = realtimeNs();
  identity_ = detectProcessIdentity(deps_.environment);
  for (const auto& warning : config_.warnings) log(warning);

  std::string failure;
  cupti_active_ = claimCupti(failure);
  if (!cupti_active_) {
    log(failure);
    capture_warnings_.push_back(failure);
  }
  chooseNcclCapture();
  buffers_ = std::make_unique<ActivityBuffers>(config_.buffer_limit_bytes, kActivityBufferBytes);
  if (!openTraceFile()) {
    if (cupti_active_) deps_.cupti.unsubscribe(subscriber_);
    return false;
  }
  nccl_ = std::make_unique<NcclProfiler>([this] { return captureNow(); }, identity_.rank,
                                         [driver = deps_.driver] { return currentDevice(driver); });
  if (cupti_active_) {
    g_active.store(this, std::memory_order_release);
    CUptiResult registered = deps_.cupti.activityRegisterCallbacks(bufferRequested, bufferCompleted);
    if (registered == CUPTI_SUCCESS) {
      enableActivities();
    } else {
      failure = "CUPTI refused the activity buffer callbacks: " + deps_.cupti.describe(registered) +
                "; no GPU activity captured";
      log(failure);
      capture_warnings_.push_back(failure);
      g_active.store(nullptr, std::memory_order_release);
      deps_.cupti.unsubscribe(subscriber_);
      cupti_active_ = false;
    }
  }
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0 || ::pipe2(done_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    log("cannot create the capture thread's pipes: " + std::string(std::strerror(errno)));
    return false;
  }
  running_ = true;
  thread_ = std::thread([this] { run(); });
  if (config_.log_level >= LogLevel::kInfo)
    deps_.log("capturing to " + trace_path_ + (cupti_active_ ? " with " + deps_.cupti_path : " (NCCL only)"));
  return true;
}

void CaptureSession::chooseNcclCapture() {
  NcclCaptureInputs inputs;
  inputs.profiler_plugin = deps_.environment("NCCL_PROFILER_PLUGIN");
  inputs.nvtx_injection = deps_.environment("NVTX_INJECTION64_PATH");
  inputs.nccl_nvtx_disable = deps_.environment("NCCL_NVTX_DISABLE");
  inputs.library_path = deps_.library_path;
  inputs.nccl_version = deps_.nccl_version;
  inputs.nvtx_configured = config_.categories.nvtx;
  inputs.cupti_active = cupti_active_;
  nccl_capture_ = chooseNcclCaptureSource(inputs);
  if (!nccl_capture_.note.empty()) {
    log(nccl_capture_.note);
    capture_warnings_.push_back(nccl_capture_.note);
  }
}

bool CaptureSession::claimCupti(std::string& failure) {
  CUptiResult result = deps_.cupti.subscribe(&subscriber_, ignoreCallback, nullptr);
  if (result == CUPTI_SUCCESS) return true;
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    failure = "CUPTI is already in use by another tool (Nsight Systems, Nsight Compute, torch.profiler, ...): " +
              deps_.cupti.describe(result) + "; no GPU activity captured";
  } else {
    failure = "CUPTI cannot start: " + deps_.cupti.describe(result) + " (is there a GPU and a working driver?); no GPU activity captured";
  }
  return false;
}

void CaptureSession::enableActivities() {
  auto enable = [&](CUpti_ActivityKind kind, bool dump) {
    CUptiResult result = dump ? deps_.cupti.activityEnableAndDump(kind) : deps_.cupti.activityEnable(kind);
    if (result != CUPTI_SUCCESS) {
      capture_warnings_.push_back("activity kind " + std::to_string(static_cast<int>(kind)) +
                                  " not enabled: " + deps_.cupti.describe(result));
    }
  };
  for (const auto& entry : kActivityKinds) {
    if (config_.categories.*entry.category) {
      for (auto kind : entry.kinds) enable(kind, false);
    }
  }
  for (auto kind : kAlwaysEnabled) enable(kind, false);
  for (auto kind : kTopologyKinds) enable(kind, true);
  if (config_.categories.api) selectApiCalls();
}

// The RUNTIME kind enables every runtime call; the hot queries are then switched off one by one.
// Driver calls are switched on one by one, without the DRIVER kind (which would enable all).
void CaptureSession::selectApiCalls() {
  CUptiResult result = deps_.cupti.activityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
  if (result != CUPTI_SUCCESS) {
    capture_warnings_.push_back("runtime API records not enabled: " + deps_.cupti.describe(result));
  }
  for (uint32_t cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
    const char* name = nullptr;
    if (deps_.cupti.getCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) == CUPTI_SUCCESS && name != nullptr &&
        !isTracedRuntimeApi(name))
      deps_.cupti.activityEnableRuntimeApi(cbid, 0);
  }
  for (uint32_t cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
    const char* name = nullptr;
    if (deps_.cupti.getCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name) == CUPTI_SUCCESS && name != nullptr &&
        isTracedDriverApi(name))
      deps_.cupti.activityEnableDriverApi(cbid, 1);
  }
}

format::FileHeader CaptureSession::makeHeader() const {
  format::FileHeader header;
  header.tool_version = kToolVersion;
  header.run_id = identity_.run_id;
  header.run_id_source = identity_.run_id_source;
  header.rank = identity_.rank;
  header.local_rank = identity_.local_rank;
  header.world_size = identity_.world_size;
  header.local_world_size = identity_.local_world_size;
  header.rank_source = identity_.rank_source;
  header.hostname = identity_.hostname;
  header.pid = identity_.pid;
  header.command_line = identity_.command_line;
  header.start_time_ns = start_realtime_ns_;
  header.time_base = "cupti";
  header.clock_anchors.push_back(takeClockAnchor([this] { return captureNow(); }));
  header.capture_config.activities = config_.activityNames();
  header.capture_config.buffer_bytes = kActivityBufferBytes;
  header.capture_config.max_buffer_memory_bytes = config_.buffer_limit_bytes;
  header.capture_config.flush_period_ms = config_.flush_interval_ms;
  header.capture_config.nvtx = config_.categories.nvtx;
  header.capture_config.nccl_profiler = nccl_capture_.source == format::NcclCaptureSource::kProfilerPlugin;
  header.capture_config.metric_sampling = config_.metrics;
  header.capture_config.metric_interval_us = config_.metric_interval_us;
  header.capture_config.options = config_.optionLines();
  header.capture_config.options.push_back("cupti=" + deps_.cupti_path);
  header.cupti_api_version = deps_.cupti_api_version;
  int driver_version = 0;
  if (deps_.driver.driverGetVersion != nullptr && deps_.driver.driverGetVersion(&driver_version) == CUDA_SUCCESS)
    header.cuda_driver_version = static_cast<uint32_t>(driver_version);
  header.nccl_version = ncclVersionText(deps_.nccl_version);
  header.nccl_capture_source = nccl_capture_.source;
  return header;
}

// One file per process, never overwriting: rank-00003.gpuxray, else rank-00003-<pid>.gpuxray.
bool CaptureSession::openTraceFile() {
  if (!makeDirectories(config_.output_dir)) {
    log("cannot create the output directory " + config_.output_dir + ": " + std::strerror(errno) +
        "; no trace written");
    return false;
  }
  std::string base = format::traceFileName(identity_.rank, sanitizedForFileName(identity_.hostname), identity_.pid);
  std::string stem = base.substr(0, base.size() - format::kTraceFileExtension.size());
  std::string pid = std::to_string(identity_.pid);
  for (const std::string& file_name : {base, stem + "-" + pid + std::string(format::kTraceFileExtension),
                                       stem + "-" + pid + "-" + std::to_string(start_realtime_ns_) +
                                           std::string(format::kTraceFileExtension)}) {
    std::string path = config_.output_dir + "/" + file_name;
    auto sink = std::make_unique<format::FileSink>(path, format::FileSink::Mode::kCreateNew);
    if (!sink->ok()) {
      if (sink->openErrno() == EEXIST) continue;
      log(sink->error() + "; no trace written");
      return false;
    }
    trace_path_ = path;
    writer_ = std::make_unique<format::TraceWriter>(std::move(sink));
    if (!writer_->writeHeader(makeHeader())) {
      log(writer_->error() + "; no trace written");
      return false;
    }
    auto api_name = [this](CUpti_CallbackDomain domain, uint32_t cbid) {
      const char* name = nullptr;
      return deps_.cupti.getCallbackName(domain, cbid, &name) == CUPTI_SUCCESS ? name : nullptr;
    };
    // CUDA 13.0 leaves device names, overhead details, NVTX extended payloads and payload schema
    // descriptions to the client to free.
    TranslatorOptions options;
    options.free_cupti_allocations = true;
    options.on_kernel = [this](const format::KernelRecord& kernel, const char* name) {
      if (isNcclKernelName(name)) nccl_clock_.addKernel(kernel.device, kernel.start_ns, kernel.end_ns, kernel.correlation_id);
    };
    translator_ = std::make_unique<ActivityTranslator>(*writer_, api_name, std::move(options),
                                                       cuptiPayloadTypeSource(deps_.cupti, true));
    return true;
  }
  log("every trace file name for this process already exists in " + config_.output_dir + "; no trace written");
  return false;
}

void CaptureSession::onBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;
  // The final forced flush still needs buffers, so they are refused only once the file is done.
  *buffer = !running_ || abandoned_ ? nullptr : buffers_->acquire();
  *size = *buffer != nullptr ? buffers_->bufferBytes() : 0;
}

void CaptureSession::onBufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t valid_bytes) {
  if (abandoned_) return;
  size_t dropped = 0;
  if (deps_.cupti.activityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0)
    cupti_dropped_.fetch_add(dropped, std::memory_order_relaxed);
  if (buffer == nullptr) return;
  if (!running_) {
    buffers_after_stop_.fetch_add(1, std::memory_order_relaxed);
    buffers_->release(buffer);
    return;
  }
  buffers_->complete(buffer, valid_bytes);
}

void CaptureSession::processFilledBuffers() {
  for (const auto& filled : buffers_->takeFilled()) {
    CUpti_Activity* record = nullptr;
    while (deps_.cupti.activityGetNextRecord(filled.buffer, filled.valid_bytes, &record) == CUPTI_SUCCESS)
      translator_->translate(*record);
    translator_->flushPending();
    buffers_->release(filled.buffer);
  }
  writeNewDevices();
}

// Devices as the driver describes them, completed by CUPTI's DEVICE records when they arrive.
void CaptureSession::writeNewDevices() {
  for (const auto& [id, from_cupti] : translator_->devices()) {
    if (devices_written_.contains(id)) continue;
    format::DeviceProperties device = from_cupti;
    for (const auto& from_driver : driver_devices_) {
      if (from_driver.device_id == id) {
        device = from_driver;
        if (device.memory_bandwidth_bytes_per_s == 0)
          device.memory_bandwidth_bytes_per_s = from_cupti.memory_bandwidth_bytes_per_s;
      }
    }
    writer_->add(device);
    devices_written_.insert(id);
  }
  if (devices_queried_) {
    for (const auto& device : driver_devices_) {
      if (devices_written_.insert(device.device_id).second) writer_->add(device);
    }
  }
}

void CaptureSession::startMetricSampling() {
  sampling_attempted_ = true;
  if (deps_.pm_sampling.enable == nullptr) {
    std::string why = "GPU metric sampling is off: this libcupti lacks the PM sampling API";
    log(why);
    capture_warnings_.push_back(why);
    return;
  }
  for (const auto& device : driver_devices_) {
    auto sampler = std::make_unique<MetricSampler>(deps_.pm_sampling, device.device_id, config_.metric_interval_us,
                                                   config_.flush_interval_ms);
    std::string error;
    if (sampler->start(error)) {
      samplers_.push_back(std::move(sampler));
    } else {
      log(error);
      capture_warnings_.push_back(error);
    }
  }
}

void CaptureSession::collectMetricSamples() {
  std::vector<MetricSample> samples;
  for (const auto& sampler : samplers_) {
    samples.clear();
    sampler->collect(samples);
    std::vector<format::StringId> metric_ids;
    for (const auto& name : sampler->metrics()) metric_ids.push_back(writer_->intern(name));
    for (const auto& sample : samples) {
      for (size_t i = 0; i < sample.values.size() && i < metric_ids.size(); ++i)
        writer_->add(format::MetricSampleRecord{sample.end_ns, sampler->device(), metric_ids[i], sample.values[i]});
    }
  }
}

// Operations wait one flush for the CUPTI records of their kernels, which put their GPU times on
// the capture clock (see NcclClockMapper); at the end nothing waits.
void CaptureSession::writeNcclRecords(bool final) {
  for (const auto& comm : nccl_->takeCommunicators()) writer_->add(comm);
  std::vector<CompletedNcclOperation> ready = std::move(nccl_waiting_);
  nccl_waiting_ = nccl_->takeCompleted();
  if (final) {
    std::move(nccl_waiting_.begin(), nccl_waiting_.end(), std::back_inserter(ready));
    nccl_waiting_.clear();
  }
  std::vector<NcclClockMapper::Operation> to_map;
  to_map.reserve(ready.size());
  for (auto& op : ready) to_map.push_back({&op.record, op.gpu_not_before_ns, op.max_clock_offset});
  nccl_clock_.map(to_map);
  for (auto& op : ready) {
    op.record.func_id = writer_->intern(op.func);
    op.record.datatype_id = writer_->intern(op.datatype);
    op.record.algorithm_id = writer_->intern(op.algorithm);
    op.record.protocol_id = writer_->intern(op.protocol);
    writer_->add(op.record);
  }
  uint64_t still_needed = captureNow();
  for (const auto& op : nccl_waiting_) still_needed = std::min(still_needed, op.record.enqueue_ns);
  nccl_clock_.forgetKernelsBefore(still_needed - std::min<uint64_t>(still_needed, kNcclKernelRetentionNs));
  for (const auto& transfer : nccl_->takeTransfers()) writer_->add(transfer);
}

void CaptureSession::periodicFlush() {
  if (!devices_queried_) {
    // The first flush comes an interval after cuInit, so the driver answers by now.
    driver_devices_ = queryDevices(deps_.driver);
    devices_queried_ = true;
  }
  if (config_.metrics && !sampling_attempted_ && cupti_active_) startMetricSampling();
  if (cupti_active_) deps_.cupti.activityFlushAll(0);
  processFilledBuffers();
  collectMetricSamples();
  writeNcclRecords(/*final=*/false);
  writer_->add(takeClockAnchor([this] { return captureNow(); }));
  if (!writer_->flush() && !writer_->failed()) return;
  if (writer_->failed()) {
    log(writer_->error() + "; capture stopped");
    stop_requested_ = true;
  }
}

void CaptureSession::run() {
  sigset_t blocked;
  sigemptyset(&blocked);
  for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD}) sigaddset(&blocked, signal);
  pthread_sigmask(SIG_BLOCK, &blocked, nullptr);

  using Clock = std::chrono::steady_clock;
  const auto interval = std::chrono::milliseconds(config_.flush_interval_ms);
  auto next_flush = Clock::now() + interval;
  while (!stop_requested_.load() && !writer_->failed()) {
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_flush - Clock::now()).count();
    pollfd wake{wake_pipe_[0], POLLIN, 0};
    ::poll(&wake, 1, static_cast<int>(std::clamp<int64_t>(wait, 0, 50)));
    char drain[64];
    while (::read(wake_pipe_[0], drain, sizeof drain) > 0) {
    }
    processFilledBuffers();
    if (Clock::now() >= next_flush) {
      periodicFlush();
      next_flush = Clock::now() + interval;
    }
  }
  finishFile();
}

void CaptureSession::finishFile() {
  if (!devices_queried_) {
    driver_devices_ = queryDevices(deps_.driver);
    devices_queried_ = true;
  }
  if (cupti_active_) deps_.cupti.activityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  processFilledBuffers();
  collectMetricSamples();
  nccl_->finalizeAll();
  writeNcclRecords(/*final=*/true);
  for (const auto& sampler : samplers_) {
    if (sampler->overflows() > 0 || sampler->failedDecodes() > 0) {
      capture_warnings_.push_back("GPU metric sampling on device " + std::to_string(sampler->device()) + ": " +
                                  std::to_string(sampler->overflows()) + " buffer overflows, " +
                                  std::to_string(sampler->failedDecodes()) + " failed decodes");
    }
    sampler->stop();
  }
  translator_->finish();
  running_ = false;
  writer_->add(takeClockAnchor([this] { return captureNow(); }));
  writer_->finish(makeTrailer());
  char done = 'd';
  ssize_t ignored = ::write(done_pipe_[1], &done, 1);
  (void)ignored;
}

format::Trailer CaptureSession::makeTrailer() const {
  format::Trailer trailer;
  int signal = stop_signal_.load();
  {
    std::lock_guard<std::mutex> end_lock(end_mutex_);
    trailer.end = signal != 0 ? format::CaptureEnd::kSignal : end_;
    trailer.end_detail = signal != 0 ? signalName(signal) : end_detail_;
  }
  trailer.end_time_ns = realtimeNs();
  trailer.warnings = capture_warnings_;
  uint64_t dropped = cupti_dropped_.load();
  if (dropped > 0) {
    // CUPTI does not say which kinds it dropped.
    trailer.counts.push_back({format::Category::kUnknown, 0, dropped});
    trailer.warnings.push_back("CUPTI dropped " + std::to_string(dropped) + " records for lack of buffer space");
  }
  if (buffers_ != nullptr && buffers_->refused() > 0) {
    trailer.warnings.push_back(std::to_string(buffers_->refused()) + " buffer requests refused at the " +
                               std::to_string(config_.buffer_limit_bytes >> 20) + " MiB limit (GPUXRAY_BUFFER_LIMIT_MB)");
  }
  if (translator_ != nullptr) {
    const auto& stats = translator_->stats();
    if (stats.incomplete > 0)
      trailer.warnings.push_back(std::to_string(stats.incomplete) + " activities had no end time (still running at the last flush)");
    if (stats.unknown_kind > 0)
      trailer.warnings.push_back(std::to_string(stats.unknown_kind) + " CUPTI records of kinds gpuxray does not read");
    if (stats.unmatched_nvtx > 0)
      trailer.warnings.push_back(std::to_string(stats.unmatched_nvtx) + " NVTX ranges without a start or an end");
    if (stats.nvtx_payloads.undecoded_payloads > 0) {
      trailer.warnings.push_back(std::to_string(stats.nvtx_payloads.undecoded_payloads) +
                                 " NVTX extended payloads kept undecoded (schema id only): CUPTI did not describe "
                                 "their schema, or it is one gpuxray does not read");
    }
    if (stats.nvtx_payloads.skipped_entries > 0) {
      trailer.warnings.push_back(std::to_string(stats.nvtx_payloads.skipped_entries) +
                                 " NVTX payload entries skipped (types gpuxray does not decode, or outside the payload)");
    }
  }
  if (nccl_ != nullptr) {
    NcclProfilerStats nccl = nccl_->stats();
    const NcclClockMappingStats& clock = nccl_clock_.stats();
    if (clock.unmapped > 0) {
      trailer.warnings.push_back(std::to_string(clock.unmapped) +
                                 " NCCL operations' GPU times could not be put on the trace clock (no NCCL kernel "
                                 "records, and their host bounds left the offset open on one side): flagged "
                                 "gpu_clock_unmapped, their GPU stamps kept as the GPU's timer gave them");
    }
    if (clock.outliers > 0) {
      trailer.warnings.push_back(std::to_string(clock.outliers) +
                                 " NCCL operations had host bounds that disagreed with the rest of their batch "
                                 "(outliers); they were mapped with the batch's offset");
    }
    if (nccl.dropped_events > 0) {
      trailer.counts.push_back({format::Category::kNcclOperation, 0, nccl.dropped_events});
      trailer.warnings.push_back(std::to_string(nccl.dropped_events) +
                                 " NCCL profiler events dropped (a communicator's event pool at its bound)");
    }
    if (nccl.unlinked_transfers > 0) {
      trailer.warnings.push_back(std::to_string(nccl.unlinked_transfers) +
                                 " NCCL network transfers not linked to a recorded operation");
    }
    if (nccl.expired_operations > 0) {
      trailer.warnings.push_back(std::to_string(nccl.expired_operations) +
                                 " NCCL operations written before all their kernel channels reported (none for " +
                                 std::to_string(NcclProfiler::kStuckOperationNs / 1'000'000'000) + " s)");
    }
    if (nccl.events_after_finalize > 0) {
      trailer.warnings.push_back(std::to_string(nccl.events_after_finalize) +
                                 " NCCL profiler events after their communicator's finalize, ignored");
    }
    if (nccl.internal_errors > 0) {
      trailer.warnings.push_back("NCCL profiler plugin turned off after an internal error (" +
                                 nccl.first_internal_error + "); NCCL ran on without it");
    }
  }
  if (uint64_t late = buffers_after_stop_.load(); late > 0)
    trailer.warnings.push_back(std::to_string(late) + " CUPTI buffers arrived after the capture ended");
  if (writer_ != nullptr && writer_->lost() > 0)
    trailer.warnings.push_back(std::to_string(writer_->lost()) + " records lost to a write error");
  return trailer;
}

void CaptureSession::stop(format::CaptureEnd end, const std::string& detail, int timeout_ms) {
  std::lock_guard<std::mutex> lock(stop_mutex_);
  if (stopped_ || abandoned_ || !thread_.joinable() || ::getpid() != pid_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> end_lock(end_mutex_);
    end_ = end;
    end_detail_ = detail;
  }
  stop_requested_ = true;
  char wake = 's';
  ssize_t ignored = ::write(wake_pipe_[1], &wake, 1);
  (void)ignored;
  if (waitUntilFinished(timeout_ms)) {
    thread_.join();
  } else {
    log("the trace file was not finished within " + std::to_string(timeout_ms) + " ms; it may lack its last records");
    thread_.detach();
  }
  if (cupti_active_) deps_.cupti.unsubscribe(subscriber_);
}

void CaptureSession::requestStopFromSignal(int signal) {
  if (abandoned_ || !running_ || ::getpid() != pid_) return;
  int none = 0;
  stop_signal_.compare_exchange_strong(none, signal);
  stop_requested_ = true;
  char wake = 's';
  ssize_t ignored = ::write(wake_pipe_[1], &wake, 1);
  (void)ignored;
}

bool CaptureSession::waitUntilFinished(int timeout_ms) const {
  if (done_pipe_[0] < 0) return false;
  pollfd done{done_pipe_[0], POLLIN, 0};
  int left = timeout_ms;
  while (true) {
    int ready = ::poll(&done, 1, left);
    if (ready > 0) return true;
    if (ready == 0 || errno != EINTR) return false;
  }
}

void CaptureSession::abandonAfterFork() {
  abandoned_ = true;
  running_ = false;
}

}  // namespace gpuxray::inject
