#include "inject/capture_session.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "gpuxray/version.h"
#include "inject/api_selection.h"
#include "inject/clock_anchor.h"
#include <generated_nvtx_meta.h>
#include "proto/capture_windows.h"
#include "proto/file_layout.h"
#include "proto/ring_file_sink.h"

namespace gpuxray::inject {
namespace {

std::atomic<CaptureSession*> g_active{nullptr};

// No exception may cross into CUPTI: one that escapes a callback is counted, and from then on the
// capture takes no more buffers (CUPTI drops and counts their records) and follows no more calls.
void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  CaptureSession* session = g_active.load(std::memory_order_acquire);
  if (session == nullptr || session->callbacksFailed()) return;
  try {
    session->onBufferRequested(buffer, size, max_records);
  } catch (...) {
    *buffer = nullptr;
    *size = 0;
    session->noteCallbackFailure();
  }
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid_bytes) {
  CaptureSession* session = g_active.load(std::memory_order_acquire);
  if (session == nullptr) return;
  try {
    session->onBufferCompleted(context, stream, buffer, valid_bytes);
  } catch (...) {
    session->noteCallbackFailure();
  }
}

// The subscription claims CUPTI (one subscriber per process); callbacks are enabled only for the
// calls that open and close capture windows.
void CUPTIAPI apiCallback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  CaptureSession* session = g_active.load(std::memory_order_acquire);
  if (session == nullptr || session->callbacksFailed()) return;
  try {
    session->onApiCallback(domain, cbid, data);
  } catch (...) {
    session->noteCallbackFailure();
  }
}

// NVTX calls that move a window following NVTX ranges or steps.
constexpr CUpti_CallbackId kWindowNvtxCalls[] = {
    CUPTI_CBID_NVTX_nvtxRangePushA,       CUPTI_CBID_NVTX_nvtxRangePushEx,       CUPTI_CBID_NVTX_nvtxRangePop,
    CUPTI_CBID_NVTX_nvtxDomainRangePushEx, CUPTI_CBID_NVTX_nvtxDomainRangePop,   CUPTI_CBID_NVTX_nvtxDomainCreateA,
    CUPTI_CBID_NVTX_nvtxRangeStartA,      CUPTI_CBID_NVTX_nvtxRangeStartEx,      CUPTI_CBID_NVTX_nvtxRangeEnd,
    CUPTI_CBID_NVTX_nvtxDomainRangeStartEx, CUPTI_CBID_NVTX_nvtxDomainRangeEnd};

bool isLaunchCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  const auto& launches = kernelLaunchCallbacks();
  return std::any_of(launches.begin(), launches.end(),
                     [&](const LaunchCallback& l) { return l.domain == domain && l.cbid == cbid; });
}

// The id an nvtxRangeStart* call returned (CUPTI's callback sees the call's return value).
uint64_t startedRangeId(const CUpti_NvtxData* call) {
  return call->functionReturnValue != nullptr ? *static_cast<const nvtxRangeId_t*>(call->functionReturnValue) : 0;
}

// The message of NVTX event attributes, when it is an ASCII string.
const char* asciiMessage(const nvtxEventAttributes_t* attributes) {
  if (attributes == nullptr || attributes->messageType != NVTX_MESSAGE_TYPE_ASCII) return nullptr;
  return attributes->message.ascii;
}

// A window's kinds are switched off once it has been closed this long (a window that opens again
// soon keeps them, and late records of the closed one still arrive).
constexpr uint64_t kWindowKindsLingerNs = 200'000'000;
// A timed window's kinds are switched on this long before it opens (the capture thread wakes every
// 50 ms); records before the opening itself are then left out by time.
constexpr uint64_t kWindowKindsLeadNs = 120'000'000;

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
  windows_ = std::make_unique<CaptureWindows>(config_.window, captureNow());
  windowed_ = !config_.window.wholeRun();
  windows_->countStepsByCollectives([this] { return captureNow(); });

  std::string failure;
  cupti_active_ = claimCupti(failure);
  if (!cupti_active_) {
    log(failure);
    capture_warnings_.push_back(failure);
  }
  chooseNcclCapture();
  buffers_ = std::make_unique<ActivityBuffers>(config_.buffer_limit_bytes, kActivityBufferBytes, kReadyActivityBuffers);
  if (!openTraceFile()) {
    if (cupti_active_) deps_.cupti.unsubscribe(subscriber_);
    return false;
  }
  nccl_ = std::make_unique<NcclProfiler>([this] { return captureNow(); }, identity_.rank,
                                         [driver = deps_.driver] { return currentDevice(driver); });
  if (cupti_active_) {
    g_active.store(this, std::memory_order_release);
    // Our buffers come zeroed (ActivityBuffers): CUPTI need not clear each one on the application's
    // thread. A CUPTI without this attribute refuses it and clears them itself.
    uint8_t zeroed = 1;
    size_t zeroed_size = sizeof zeroed;
    deps_.cupti.activitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zeroed_size, &zeroed);
    CUptiResult registered = deps_.cupti.activityRegisterCallbacks(bufferRequested, bufferCompleted);
    if (registered == CUPTI_SUCCESS) {
      enableActivities();
      enableWindowCallbacks();
      startNvtxRecorder();
      if (!config_.kernel_metrics.empty() || config_.kernel_metrics_auto) startKernelMetrics();
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
  writeLiveMarker();
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
  CUptiResult result = deps_.cupti.subscribe(&subscriber_, apiCallback, nullptr);
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
  for (auto kind : kAlwaysEnabled) enable(kind, false);
  const bool kernel_metrics = !config_.kernel_metrics.empty() || config_.kernel_metrics_auto;
  for (auto kind : kTopologyKinds) {
    if (kind == CUPTI_ACTIVITY_KIND_PCIE && kernel_metrics) {
      // CUPTI's PCIe records come through its legacy profiling interface, after which its range
      // profiler refuses to start (CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED; H200, CUDA 13.0).
      capture_warnings_.push_back(
          "PCIe topology not recorded: CUPTI cannot record it and measure kernels (--kernel-metrics) in one process");
      continue;
    }
    enable(kind, true);
  }
  if (config_.categories.api) selectApiCalls();
  if (windows_->isOpen()) switchWindowKindsOn();
}

void CaptureSession::enableWindowCallbacks() {
  auto follow = [&](CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    CUptiResult result = deps_.cupti.enableCallback(1, subscriber_, domain, cbid);
    if (result != CUPTI_SUCCESS) {
      std::string why = "CUPTI refused the callback the capture windows follow (domain " +
                        std::to_string(static_cast<int>(domain)) + ", call " + std::to_string(cbid) +
                        "): " + deps_.cupti.describe(result) + "; those windows will not open";
      log(why);
      capture_warnings_.push_back(why);
    }
  };
  if (windows_->followsProfilerApi()) {
    follow(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000);
    follow(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000);
    follow(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart);
    follow(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop);
  }
  if (windows_->followsNvtx()) {
    for (CUpti_CallbackId cbid : kWindowNvtxCalls) follow(CUPTI_CB_DOMAIN_NVTX, cbid);
  }
}

void CaptureSession::onApiCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (abandoned_ || !running_ || data == nullptr) return;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    const auto* call = static_cast<const CUpti_CallbackData*>(data);
    if (kernel_metrics_ != nullptr && isLaunchCallback(domain, cbid)) {
      kernel_metrics_->onLaunch(*call, !windowed_ || windows_->isOpen());
      return;
    }
    bool start = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? cbid == CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000
                                                       : cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart;
    // A window opens as the start call returns and closes as the stop call is entered, so neither
    // call is inside; the runtime's call makes the driver's, which then changes nothing.
    if (start && call->callbackSite == CUPTI_API_EXIT) {
      windows_->profilerStart(captureNow());
    } else if (!start && call->callbackSite == CUPTI_API_ENTER) {
      windows_->profilerStop(captureNow());
    }
  } else if (domain == CUPTI_CB_DOMAIN_NVTX) {
    const auto* call = static_cast<const CUpti_NvtxData*>(data);
    // nvtxRangePop takes no arguments: its parameters may be absent.
    const void* params = call->functionParams;
    switch (cbid) {
      case CUPTI_CBID_NVTX_nvtxRangePushA:
        if (params != nullptr)
          windows_->rangePush(nullptr, static_cast<const nvtxRangePushA_params*>(params)->message, captureNow());
        break;
      case CUPTI_CBID_NVTX_nvtxRangePushEx:
        if (params != nullptr) {
          windows_->rangePush(nullptr, asciiMessage(static_cast<const nvtxRangePushEx_params*>(params)->eventAttrib),
                              captureNow());
        }
        break;
      case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
        if (const auto* push = static_cast<const nvtxDomainRangePushEx_params*>(params); push != nullptr)
          windows_->rangePush(push->domain, asciiMessage(push->core.eventAttrib), captureNow());
        break;
      case CUPTI_CBID_NVTX_nvtxRangePop: windows_->rangePop(nullptr, captureNow()); break;
      case CUPTI_CBID_NVTX_nvtxDomainRangePop:
        if (params != nullptr)
          windows_->rangePop(static_cast<const nvtxDomainRangePop_params*>(params)->domain, captureNow());
        break;
      case CUPTI_CBID_NVTX_nvtxRangeStartA:
        if (params != nullptr) {
          windows_->rangeStart(nullptr, static_cast<const nvtxRangeStartA_params*>(params)->message,
                               startedRangeId(call), captureNow());
        }
        break;
      case CUPTI_CBID_NVTX_nvtxRangeStartEx:
        if (params != nullptr) {
          windows_->rangeStart(nullptr, asciiMessage(static_cast<const nvtxRangeStartEx_params*>(params)->eventAttrib),
                               startedRangeId(call), captureNow());
        }
        break;
      case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx:
        if (const auto* start = static_cast<const nvtxDomainRangeStartEx_params*>(params); start != nullptr)
          windows_->rangeStart(start->domain, asciiMessage(start->core.eventAttrib), startedRangeId(call), captureNow());
        break;
      case CUPTI_CBID_NVTX_nvtxRangeEnd:
        if (params != nullptr) windows_->rangeEnd(nullptr, static_cast<const nvtxRangeEnd_params*>(params)->id, captureNow());
        break;
      case CUPTI_CBID_NVTX_nvtxDomainRangeEnd:
        if (const auto* end = static_cast<const nvtxDomainRangeEnd_params*>(params); end != nullptr)
          windows_->rangeEnd(end->domain, end->core.id, captureNow());
        break;
      case CUPTI_CBID_NVTX_nvtxDomainCreateA:
        if (params != nullptr && call->functionReturnValue != nullptr) {
          windows_->domainCreated(static_cast<const nvtxDomainCreateA_params*>(params)->name,
                                  *static_cast<const nvtxDomainHandle_t*>(call->functionReturnValue));
        }
        break;
      default: break;
    }
  }
  if (windows_->isOpen()) switchWindowKindsOn();
}

namespace {

// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half of it.
bool writeFileAtomically(const std::string& path, const std::string& text) {
  std::string temporary = path + ".tmp";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return written && ::rename(temporary.c_str(), path.c_str()) == 0;
}

std::string readSmallFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char text[256];
  ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  return n > 0 ? std::string(text, static_cast<size_t>(n)) : std::string();
}

}  // namespace

void CaptureSession::writeLiveMarker() {
  writeFileAtomically(config_.output_dir + "/" + format::liveMarkerName(identity_.pid),
                      "rank=" + std::to_string(identity_.rank) + "\nhost=" + identity_.hostname + "\ntrace=" +
                          trace_path_ + "\n");
}

void CaptureSession::removeLiveMarker() {
  ::unlink((config_.output_dir + "/" + format::liveMarkerName(identity_.pid)).c_str());
}

void CaptureSession::pollTrigger() {
  std::string request = config_.output_dir + "/" + format::triggerRequestName(identity_.pid);
  if (::access(request.c_str(), F_OK) != 0) return;
  std::string text = readSmallFile(request);
  ::unlink(request.c_str());
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  uint64_t duration_ns = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), duration_ns);
  std::string who = "rank " + std::to_string(identity_.rank) + " (pid " + std::to_string(identity_.pid) + ", " +
                    identity_.hostname + ")";
  std::string answer;
  if (error != std::errc() || end != text.data() + text.size() || duration_ns == 0) {
    answer = who + ": the request '" + text + "' is not a duration in ns; nothing changed";
  } else if (!windowed_) {
    answer = who + ": already capturing the whole run (no window plan); nothing changed";
  } else if (size_limit_reached_ || !cupti_active_) {
    answer = who + ": " + (cupti_active_ ? "the file reached its size bound" : "GPU capture is off") +
             "; nothing changed";
  } else if (triggerWindow(duration_ns)) {
    answer = who + ": capture window open for " + std::to_string(duration_ns / 1'000'000) + " ms";
  } else {
    answer = who + ": a window of the plan is open until it ends by itself; nothing changed";
  }
  writeFileAtomically(config_.output_dir + "/" + format::triggerAckName(identity_.pid), answer + "\n");
  if (config_.log_level >= LogLevel::kInfo) deps_.log(answer);
}

bool CaptureSession::triggerWindow(uint64_t duration_ns) {
  if (windows_ == nullptr || !windows_->trigger(captureNow(), duration_ns)) return false;
  switchWindowKindsOn();
  return true;
}

void CaptureSession::switchWindowKindsOn() {
  if (!cupti_active_ || window_kinds_on_.exchange(true)) return;
  setWindowKinds(true);
}

// Another thread may open a window meanwhile: it finds the kinds still marked on and leaves them,
// so they are switched on again here.
void CaptureSession::switchWindowKindsOff() {
  if (!cupti_active_ || !window_kinds_on_.exchange(false)) return;
  setWindowKinds(false);
  if (windows_->isOpen()) switchWindowKindsOn();
}

void CaptureSession::setWindowKinds(bool on) {
  for (const auto& entry : kActivityKinds) {
    if (!(config_.categories.*entry.category)) continue;
    for (auto kind : entry.kinds) {
      CUptiResult result = on ? deps_.cupti.activityEnable(kind) : deps_.cupti.activityDisable(kind);
      if (result != CUPTI_SUCCESS && on && !windowed_) {
        capture_warnings_.push_back("activity kind " + std::to_string(static_cast<int>(kind)) +
                                    " not enabled: " + deps_.cupti.describe(result));
      }
    }
  }
  if (!config_.categories.api) return;
  if (on) {
    CUptiResult result = deps_.cupti.activityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (result != CUPTI_SUCCESS && !windowed_)
      capture_warnings_.push_back("runtime API records not enabled: " + deps_.cupti.describe(result));
    if (deps_.cupti.activityEnableRuntimeApi != nullptr) {
      for (uint32_t cbid : runtime_calls_off_) deps_.cupti.activityEnableRuntimeApi(cbid, 0);
    }
  } else {
    deps_.cupti.activityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
  }
  if (deps_.cupti.activityEnableDriverApi != nullptr) {
    for (uint32_t cbid : driver_calls_on_) deps_.cupti.activityEnableDriverApi(cbid, on ? 1 : 0);
  }
}

// On the capture thread, each turn: timed edges, the kinds, and the windows that closed.
void CaptureSession::followWindows() {
  if (!windowed_) return;
  uint64_t now = captureNow();
  windows_->tick(now);
  if (windows_->isOpen() || windows_->nextTimedEdge() <= now + kWindowKindsLeadNs) {
    switchWindowKindsOn();
    windows_closed_since_ns_ = 0;
  } else if (window_kinds_on_.load()) {
    if (windows_closed_since_ns_ == 0) windows_closed_since_ns_ = now;
    if (now - windows_closed_since_ns_ >= kWindowKindsLingerNs) {
      // What CUPTI still holds of the closed window comes out first.
      deps_.cupti.activityFlushAll(0);
      processFilledBuffers();
      switchWindowKindsOff();
      windows_closed_since_ns_ = 0;
    }
  }
}

bool CaptureSession::insideWindows(const CUpti_Activity& record) {
  if (record.kind == CUPTI_ACTIVITY_KIND_MARKER) {
    const auto& marker = reinterpret_cast<const CUpti_ActivityMarker2&>(record);
    if (marker.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) return ranges_inside_windows_.erase(marker.id) > 0;
    bool inside = windows_->contains(marker.timestamp);
    if (inside && (marker.flags & CUPTI_ACTIVITY_FLAG_MARKER_START)) ranges_inside_windows_.insert(marker.id);
    return inside;
  }
  std::optional<uint64_t> time = activityTime(record);
  return !time || windows_->contains(*time);
}

format::NvtxEventRecord CaptureSession::ownRange(uint64_t start_ns, uint64_t end_ns, uint64_t thread_id,
                                                 uint32_t depth) {
  format::NvtxEventRecord event;
  event.kind = format::NvtxEventKind::kRange;
  event.start_ns = start_ns;
  // Never ended (end 0): written as CUPTI's unmatched ranges are, ending where it starts.
  event.end_ns = end_ns != 0 ? end_ns : start_ns;
  if (end_ns == 0) ++own_ranges_unended_;
  event.thread_id = thread_id;
  event.depth = depth;
  return event;
}

void CaptureSession::startNvtxRecorder() {
  NvtxRecorderHooks hooks;
  hooks.clock = [this] { return captureNow(); };
  hooks.record = config_.categories.nvtx;
  if (windows_->followsNvtx()) {
    hooks.on_push = [this](const char* name, uint64_t now) {
      if (abandoned_ || !running_) return;
      windows_->rangePush(nullptr, name, now, /*recorded=*/true);
      if (windows_->isOpen()) switchWindowKindsOn();
    };
    hooks.on_pop = [this](uint64_t now) {
      if (abandoned_ || !running_) return;
      windows_->rangePop(nullptr, now);
    };
  }
  nvtx_recorder_ = std::make_unique<NvtxRecorder>(std::move(hooks));
  nvtx_recorder_->activate();
}

void CaptureSession::writeRecordedRanges(bool final) {
  if (nvtx_recorder_ == nullptr) return;
  if (final) nvtx_recorder_->deactivate();
  std::vector<RecordedRange> ranges = nvtx_recorder_->collect(final);
  if (ranges.empty()) return;
  if (windowed_) windows_->snapshot();
  for (RecordedRange& range : ranges) {
    if (windowed_ && !windows_->contains(range.start_ns)) {
      ++records_outside_windows_;
      continue;
    }
    format::NvtxEventRecord event = ownRange(range.start_ns, range.end_ns, range.thread_id, range.depth);
    event.name_id = writer_->intern(range.name);
    event.category = range.category;
    event.color = range.color;
    if (range.has_payload) event.payload.push_back(range.payload);
    writer_->add(event);
  }
}

void CaptureSession::writeClosedWindows(bool final) {
  if (!windowed_) return;
  for (const auto& window : windows_->takeClosed()) writer_->add(window);
  for (const OpeningRange& range : windows_->takeOpeningRanges(final)) {
    format::NvtxEventRecord event = ownRange(range.start_ns, range.end_ns, range.thread_id, range.depth);
    event.domain_id = range.domain.empty() ? 0 : writer_->intern(range.domain);
    event.name_id = writer_->intern(range.name);
    writer_->add(event);
  }
}

// The RUNTIME kind enables every runtime call; the hot queries are then switched off one by one.
// Driver calls are switched on one by one, without the DRIVER kind (which would enable all).
// This picks them; setWindowKinds() switches them.
void CaptureSession::selectApiCalls() {
  if (deps_.cupti.activityEnableRuntimeApi == nullptr || deps_.cupti.activityEnableDriverApi == nullptr) {
    capture_warnings_.push_back("this libcupti (CUPTI API " + std::to_string(deps_.cupti_api_version) +
                                ") cannot switch single API calls: every runtime call is recorded, no driver call");
  }
  for (uint32_t cbid = 1; cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++cbid) {
    const char* name = nullptr;
    if (deps_.cupti.getCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &name) == CUPTI_SUCCESS && name != nullptr &&
        !isTracedRuntimeApi(name))
      runtime_calls_off_.push_back(cbid);
  }
  for (uint32_t cbid = 1; cbid < CUPTI_DRIVER_TRACE_CBID_SIZE; ++cbid) {
    const char* name = nullptr;
    if (deps_.cupti.getCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &name) == CUPTI_SUCCESS && name != nullptr &&
        isTracedDriverApi(name))
      driver_calls_on_.push_back(cbid);
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
  header.capture_window_plan = config_.window.describe();
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
    std::unique_ptr<format::ByteSink> sink;
    format::WriterOptions writer_options;
    if (config_.ring) {
      // Slots of a sixteenth of the file (256 KiB to 4 MiB), batches of a quarter slot: a chunk
      // always fits its slot.
      auto slot = static_cast<uint32_t>(std::clamp<uint64_t>(config_.max_file_bytes / 16, 256u << 10, 4u << 20));
      writer_options.max_batch_bytes = slot / 4;
      auto ring = std::make_unique<format::RingFileSink>(path, config_.max_file_bytes, slot);
      if (ring->openErrno() == EEXIST) continue;
      if (!ring->ok()) {
        log(ring->error() + "; no trace written");
        return false;
      }
      ring_ = ring.get();
      sink = std::move(ring);
    } else {
      auto file = std::make_unique<format::FileSink>(path, format::FileSink::Mode::kCreateNew);
      if (!file->ok()) {
        if (file->openErrno() == EEXIST) continue;
        log(file->error() + "; no trace written");
        return false;
      }
      // Small chunks keep a bounded file close to its bound.
      if (config_.max_file_bytes > 0)
        writer_options.max_batch_bytes = std::clamp<size_t>(config_.max_file_bytes / 16, 64u << 10, 4u << 20);
      sink = std::move(file);
    }
    trace_path_ = path;
    writer_ = std::make_unique<format::TraceWriter>(std::move(sink), writer_options);
    if (!writer_->writeHeader(makeHeader())) {
      log(writer_->error() + "; no trace written");
      return false;
    }
    auto api_name = [this](CUpti_CallbackDomain domain, uint32_t cbid) {
      const char* name = nullptr;
      return deps_.cupti.getCallbackName(domain, cbid, &name) == CUPTI_SUCCESS ? name : nullptr;
    };
    // CUDA 13.0 leaves device names, overhead details, NVTX extended payloads and payload schema
    // descriptions to the client to free (older versions less: cupti_layouts.h).
    TranslatorOptions options;
    options.free_cupti_allocations = true;
    options.layouts = deps_.cupti_layouts;
    options.on_kernel = [this](const format::KernelRecord& kernel, const char* name) {
      if (isNcclKernelName(name)) {
        nccl_clock_.addKernel(kernel.device, kernel.start_ns, kernel.end_ns, kernel.correlation_id);
      } else if (kernel_metrics_ != nullptr) {
        kernel_metrics_->noteKernel(name, kernel.start_ns, kernel.end_ns);
      }
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
  std::vector<ActivityBuffers::Filled> filled_buffers = buffers_->takeFilled();
  if (windowed_ && !filled_buffers.empty()) windows_->snapshot();
  for (const auto& filled : filled_buffers) {
    CUpti_Activity* record = nullptr;
    while (deps_.cupti.activityGetNextRecord(filled.buffer, filled.valid_bytes, &record) == CUPTI_SUCCESS) {
      if (windowed_ && !insideWindows(*record)) {
        ++records_outside_windows_;
        continue;
      }
      translator_->translate(*record);
    }
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

void CaptureSession::startKernelMetrics() {
  if (deps_.kernel_profiler.enable == nullptr) {
    std::string why = "kernel metrics are off: this libcupti lacks the range profiler API (CUDA 12.6 or later has it)";
    log(why);
    capture_warnings_.push_back(why);
    return;
  }
  std::optional<std::regex> match;
  if (!config_.kernel_metrics.empty()) match = std::regex(config_.kernel_metrics);
  kernel_metrics_ =
      std::make_unique<KernelMetricCollector>(deps_.kernel_profiler, std::move(match), config_.kernel_metrics_count);
  for (const auto& launch : kernelLaunchCallbacks()) {
    if (CUptiResult result = deps_.cupti.enableCallback(1, subscriber_, launch.domain, launch.cbid);
        result != CUPTI_SUCCESS) {
      std::string why = "CUPTI refused a launch callback kernel metrics need (domain " +
                        std::to_string(static_cast<int>(launch.domain)) + ", call " + std::to_string(launch.cbid) +
                        "): " + deps_.cupti.describe(result) + "; launches made through it are not measured";
      log(why);
      capture_warnings_.push_back(why);
    }
  }
}

void CaptureSession::writeKernelMetrics() {
  if (kernel_metrics_ == nullptr) return;
  std::vector<format::KernelMetricsRecord> measured;
  kernel_metrics_->takeMeasured(measured);
  for (const auto& record : measured) writer_->add(record);
  for (const auto& line : kernel_metrics_->takeWarnings()) {
    log(line);
    capture_warnings_.push_back(line);
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
  writeKernelMetrics();
  writeNcclRecords(/*final=*/false);
  writeRecordedRanges(/*final=*/false);
  writeClosedWindows(/*final=*/false);
  writer_->add(takeClockAnchor([this] { return captureNow(); }));
  if (config_.ring) {
    // The devices are written again with every flush so that the ring never loses them.
    for (uint32_t id : devices_written_) {
      if (auto it = translator_->devices().find(id); it != translator_->devices().end()) writer_->add(it->second);
    }
    for (const auto& device : driver_devices_) writer_->add(device);
  }
  if (!writer_->flush() && !writer_->failed()) return;
  if (writer_->failed()) {
    log(writer_->error() + "; capture stopped");
    stop_requested_ = true;
    return;
  }
  if (config_.max_file_bytes > 0 && !config_.ring && writer_->bytesWritten() >= config_.max_file_bytes) {
    size_limit_reached_ = true;
    std::string why = "the trace file reached its " + std::to_string(config_.max_file_bytes >> 20) +
                      " MiB bound (GPUXRAY_MAX_SIZE_MB); capture stopped";
    log(why);
    {
      std::lock_guard<std::mutex> end_lock(end_mutex_);
      end_ = format::CaptureEnd::kLimitReached;
      end_detail_ = why;
    }
    // Nothing more is recorded: the window (and NCCL's events) close, CUPTI's kinds go off.
    windows_->finish(captureNow());
    windowed_ = true;
    switchWindowKindsOff();
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
    pollTrigger();
    followWindows();
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
  if (windowed_) {
    windows_->tick(captureNow());
    windows_->finish(captureNow());
  }
  if (cupti_active_) deps_.cupti.activityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  processFilledBuffers();
  collectMetricSamples();
  if (kernel_metrics_ != nullptr) kernel_metrics_->finish();
  writeKernelMetrics();
  if (kernel_metrics_ != nullptr && config_.log_level >= LogLevel::kInfo)
    deps_.log(std::to_string(kernel_metrics_->profiledLaunches()) + " kernel launches profiled (replayed)");
  nccl_->finalizeAll();
  writeNcclRecords(/*final=*/true);
  writeRecordedRanges(/*final=*/true);
  writeClosedWindows(/*final=*/true);
  if (windowed_ && config_.log_level >= LogLevel::kInfo) {
    deps_.log(std::to_string(windows_->opened()) + " capture windows; " + std::to_string(records_outside_windows_) +
              " CUPTI records outside them left out");
  }
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
  removeLiveMarker();
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
    // Launches the range profiler replayed come untimed; their time is in their kernel metrics.
    uint64_t replayed = kernel_metrics_ != nullptr ? kernel_metrics_->profiledLaunches() : 0;
    if (stats.untimed_kernels > replayed)
      trailer.warnings.push_back(std::to_string(stats.untimed_kernels - replayed) + " kernels without GPU times from CUPTI");
    if (stats.unknown_kind > 0)
      trailer.warnings.push_back(std::to_string(stats.unknown_kind) + " CUPTI records of kinds gpuxray does not read");
    uint64_t unmatched = stats.unmatched_nvtx + own_ranges_unended_ +
                         (nvtx_recorder_ != nullptr ? nvtx_recorder_->unmatchedPops() : 0);
    if (unmatched > 0) trailer.warnings.push_back(std::to_string(unmatched) + " NVTX ranges without a start or an end");
    if (nvtx_recorder_ != nullptr && nvtx_recorder_->dropped() > 0) {
      trailer.warnings.push_back(std::to_string(nvtx_recorder_->dropped()) + " NVTX ranges dropped: over " +
                                 std::to_string(NvtxRecorder::kMaxPendingPerThread) +
                                 " ended on one thread within one flush interval");
    }
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
  if (uint64_t failed = callback_failures_.load(); failed > 0) {
    trailer.warnings.push_back(std::to_string(failed) +
                               " CUPTI callbacks failed with an exception; after the first, CUPTI's records were "
                               "no longer taken (dropped by CUPTI) and no capture window followed API calls");
  }
  if (uint64_t late = buffers_after_stop_.load(); late > 0)
    trailer.warnings.push_back(std::to_string(late) + " CUPTI buffers arrived after the capture ended");
  if (ring_ != nullptr && ring_->overwrittenChunks() > 0) {
    trailer.warnings.push_back("the " + std::to_string(config_.max_file_bytes >> 20) + " MiB ring (GPUXRAY_RING) wrote over " +
                               std::to_string(ring_->overwrittenChunks()) + " older chunks (" +
                               std::to_string(ring_->overwrittenBytes() >> 10) + " KiB): the file holds the last part of the capture");
  }
  if (writer_ != nullptr && writer_->lost() > 0)
    trailer.warnings.push_back(std::to_string(writer_->lost()) + " records lost to a write error");
  return trailer;
}

void CaptureSession::stop(format::CaptureEnd end, const std::string& detail, int timeout_ms) {
  std::lock_guard<std::mutex> lock(stop_mutex_);
  if (stopped_ || abandoned_ || !thread_.joinable() || ::getpid() != pid_) return;
  stopped_ = true;
  {
    // A capture stopped by its size bound ended there, whatever stops the process later.
    std::lock_guard<std::mutex> end_lock(end_mutex_);
    if (end_ != format::CaptureEnd::kLimitReached) {
      end_ = end;
      end_detail_ = detail;
    }
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
  if (nvtx_recorder_ != nullptr) nvtx_recorder_->deactivate();
}

}  // namespace gpuxray::inject
