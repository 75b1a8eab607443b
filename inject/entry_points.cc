// What the loaders of the injection library call, and the process-wide plumbing around the one
// capture: exit, fork and termination signals. These are the library's only exported symbols.
//
// Loading: CUDA_INJECTION64_PATH makes the driver call InitializeInjection() inside cuInit, and
// NCCL_PROFILER_PLUGIN makes NCCL (2.23 and later) look up the newest ncclProfiler_vN it knows
// (v1-v6 are exported) at its first communicator, which starts the capture if CUDA has not. Under LD_PRELOAD, the constructor points those variables (and
// NVTX_INJECTION64_PATH) at this library when they are unset, so the same happens, and processes
// that never initialize CUDA or NCCL (compilers, data-loader workers, nvidia-smi) never start a
// capture, print nothing and leave no file.

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "inject/capture_config.h"
#include "inject/capture_session.h"
#include "inject/cupti_api.h"
#include "inject/device_query.h"
#include "inject/doctor.h"
#include "inject/metric_sampler.h"
#include "inject/nccl_capture_source.h"
#include "inject/nccl_plugin.h"
#include "inject/nvtx_recorder.h"

#define GPUXRAY_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpuxray::inject {
namespace {

const char* fromEnvironment(const char* name) { return std::getenv(name); }

// The library's own absolute path.
std::string libraryPath() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&libraryPath), &info) == 0 || info.dli_fname == nullptr) return {};
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) != nullptr ? resolved : info.dli_fname;
}

// Loaded once, by whichever entry point comes first (NVTX may initialize before CUDA).
struct CuptiLibrary {
  std::once_flag once;
  bool loaded = false;
  LoadedCupti cupti;
  std::string error;
};

CuptiLibrary& cuptiLibrary() {
  static CuptiLibrary library;
  std::call_once(library.once, [] { library.loaded = loadCupti(fromEnvironment, library.cupti, library.error); });
  return library;
}

// Owned here for the rest of the process: CUPTI may still call the buffer callbacks during its own
// teardown, after ours, so the session is never destroyed while the process runs.
CaptureSession* g_session = nullptr;

constexpr int kStopSignals[] = {SIGTERM, SIGINT};
struct sigaction g_previous[NSIG];

// Asks the capture thread to finish the file, then lets the signal do what it did before: a
// program's own handler runs as usual; under the default action, the file is finished first
// (at most a few seconds) and the signal is raised again.
void onStopSignal(int signal, siginfo_t* info, void* context) {
  int saved_errno = errno;
  if (g_session != nullptr) g_session->requestStopFromSignal(signal);
  const struct sigaction& previous = g_previous[signal];
  if (previous.sa_flags & SA_SIGINFO) {
    if (previous.sa_sigaction != nullptr) previous.sa_sigaction(signal, info, context);
  } else if (previous.sa_handler == SIG_DFL) {
    if (g_session != nullptr) g_session->waitUntilFinished(3000);
    sigaction(signal, &previous, nullptr);
    raise(signal);
  } else if (previous.sa_handler != SIG_IGN && previous.sa_handler != nullptr) {
    previous.sa_handler(signal);
  }
  errno = saved_errno;
}

void installSignalHandlers() {
  for (int signal : kStopSignals) {
    struct sigaction current {};
    if (sigaction(signal, nullptr, &current) != 0 || (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN))
      continue;
    g_previous[signal] = current;
    struct sigaction ours {};
    ours.sa_sigaction = onStopSignal;
    ours.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    sigaction(signal, &ours, nullptr);
  }
}

void stopAtExit() {
  if (g_session != nullptr) g_session->stop(format::CaptureEnd::kProcessExit, "exit");
}

void abandonInChild() {
  if (g_session != nullptr) g_session->abandonAfterFork();
}

// Set in a gpuxray command that loaded the library to run its checks: the driver's cuInit there
// calls InitializeInjection (the library's constructor pointed CUDA_INJECTION64_PATH at itself),
// and that process is not one to capture.
std::atomic<bool> g_checks_only{false};

void startCapture() {
  if (g_checks_only) return;
  CaptureConfig config = readCaptureConfig(fromEnvironment);
  CuptiLibrary& library = cuptiLibrary();
  if (!library.loaded) {
    if (config.log_level != LogLevel::kQuiet) {
      std::string line = "gpuxray: " + library.error + "; no GPU activity captured\n";
      ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
      (void)ignored;
    }
    return;
  }
  CaptureDependencies dependencies;
  dependencies.cupti = library.cupti.api;
  dependencies.cupti_path = library.cupti.path;
  dependencies.cupti_api_version = library.cupti.api_version;
  dependencies.cupti_layouts = library.cupti.layouts;
  dependencies.driver = loadedDriverApi();
  if (config.metrics) {
    std::string missing = bindPmSamplingApi(library.cupti.handle, dependencies.pm_sampling);
    if (!missing.empty()) dependencies.pm_sampling = PmSamplingApi{};
  }
  if (!config.kernel_metrics.empty() || config.kernel_metrics_auto) {
    std::string missing = bindKernelProfilerApi(library.cupti.handle, dependencies.kernel_profiler);
    if (!missing.empty()) dependencies.kernel_profiler = KernelProfilerApi{};
  }
  dependencies.environment = fromEnvironment;
  dependencies.library_path = libraryPath();
  dependencies.nccl_version = loadedNcclVersion();
  auto* session = new CaptureSession(std::move(dependencies), std::move(config));
  g_session = session;
  if (!session->start()) return;
  setNcclProfiler(session->ncclProfiler());
  std::atexit(stopAtExit);
  pthread_atfork(nullptr, nullptr, abandonInChild);
  installSignalHandlers();
}

// The driver, NCCL's first communicator or both may start the capture; it starts once. Nothing
// may throw into the driver or NCCL: a failure to start leaves the program running uncaptured.
std::once_flag g_capture_once;
void startCaptureOnce() {
  std::call_once(g_capture_once, startCapture);
}

void reportStartFailure() {
  static constexpr char kLine[] = "gpuxray: the capture could not start; the program runs uncaptured\n";
  ssize_t ignored = ::write(STDERR_FILENO, kLine, sizeof kLine - 1);
  (void)ignored;
}

void startCaptureGuarded() {
  try {
    startCaptureOnce();
  } catch (...) {
    reportStartFailure();
  }
}

__attribute__((constructor)) void pointLoadersAtThisLibrary() {
  setNcclCaptureStarter(startCaptureGuarded);
  std::string self = libraryPath();
  if (self.empty()) return;
  setenv("CUDA_INJECTION64_PATH", self.c_str(), /*overwrite=*/0);
  setenv("NVTX_INJECTION64_PATH", self.c_str(), /*overwrite=*/0);
  setenv("NCCL_PROFILER_PLUGIN", self.c_str(), /*overwrite=*/0);
}

}  // namespace
}  // namespace gpuxray::inject

// Called by the CUDA driver during cuInit, and by NCCL's first communicator. Safe to call more than
// once.
GPUXRAY_EXPORT int InitializeInjection(void) {
  try {
    gpuxray::inject::startCaptureOnce();
  } catch (...) {
    gpuxray::inject::reportStartFailure();
  }
  return 1;
}

// `gpuxray doctor` and `gpuxray run`: the capture's checks against `environment` (the job's
// "NAME=value" entries, null-terminated) and `output_dir` (null or empty: the job's
// GPUXRAY_OUTPUT_DIR), as proto/doctor_report.h encodes them, in memory the caller frees with free().
// Never starts a capture in the calling process.
GPUXRAY_EXPORT char* gpuxray_doctor_report_v1(const char* const* environment, const char* output_dir) {
  gpuxray::inject::g_checks_only = true;
  std::map<std::string, std::string, std::less<>> variables;
  for (const char* const* entry = environment; entry != nullptr && *entry != nullptr; ++entry) {
    const char* equals = std::strchr(*entry, '=');
    if (equals != nullptr) variables.emplace(std::string(*entry, equals), equals + 1);
  }
  auto lookup = [&variables](const char* name) -> const char* {
    auto found = variables.find(name);
    return found != variables.end() ? found->second.c_str() : nullptr;
  };
  auto inputs = gpuxray::inject::machineDoctorInputs(lookup, gpuxray::inject::libraryPath(),
                                                     output_dir != nullptr ? output_dir : "");
  std::string report = gpuxray::format::encodeDoctorReport(gpuxray::inject::runDoctorChecks(inputs));
  char* copy = static_cast<char*>(std::malloc(report.size() + 1));
  if (copy != nullptr) std::memcpy(copy, report.c_str(), report.size() + 1);
  return copy;
}

// NCCL's profiler-plugin tables: NCCL looks up the newest it knows (2.29+ v6, 2.28 v5, 2.27 v4,
// 2.26 v3, 2.24-2.25 v2, 2.23 v1).
GPUXRAY_EXPORT const gpuxray::inject::nccl_abi::ProfilerV6 ncclProfiler_v6 = gpuxray::inject::profilerV6Table();
GPUXRAY_EXPORT const gpuxray::inject::nccl_abi::ProfilerV5 ncclProfiler_v5 = gpuxray::inject::profilerV5Table();
GPUXRAY_EXPORT const gpuxray::inject::nccl_abi::ProfilerV4 ncclProfiler_v4 = gpuxray::inject::profilerV4Table();
GPUXRAY_EXPORT const gpuxray::inject::nccl_abi::ProfilerV3 ncclProfiler_v3 = gpuxray::inject::profilerV3Table();
GPUXRAY_EXPORT const gpuxray::inject::nccl_abi::ProfilerV2 ncclProfiler_v2 = gpuxray::inject::profilerV2Table();
GPUXRAY_EXPORT const gpuxray::inject::nccl_abi::ProfilerV1 ncclProfiler_v1 = gpuxray::inject::profilerV1Table();

// Called by each NVTX client library (libtorch, libnccl) at its first NVTX call: CUPTI's own NVTX
// support records the ranges, so these forward to libcupti; then the default domain's pushes and
// pops go to gpuxray's own recorder (inject/nvtx_recorder.h), which costs a fraction of CUPTI's.
GPUXRAY_EXPORT int InitializeInjectionNvtx2(const void* get_export_table) {
  try {
    auto& library = gpuxray::inject::cuptiLibrary();
    if (!library.loaded) return 0;
    int initialized = library.cupti.api.nvtxInitialize2(get_export_table);
    if (initialized != 0 && gpuxray::inject::readCaptureConfig(gpuxray::inject::fromEnvironment).nvtx_recorder)
      gpuxray::inject::NvtxRecorder::install(get_export_table);
    return initialized;
  } catch (...) {
    return 0;  // NVTX then stays off for that client
  }
}

GPUXRAY_EXPORT int InitializeInjectionNvtxExtension(const void* get_export_table) {
  try {
    auto& library = gpuxray::inject::cuptiLibrary();
    // A libcupti without the payload extension (not confirmed for CUDA 12.x): NVTX payloads unrecorded.
    bool usable = library.loaded && library.cupti.api.nvtxExtensionInitialize != nullptr;
    return usable ? library.cupti.api.nvtxExtensionInitialize(get_export_table) : 0;
  } catch (...) {
    return 0;
  }
}
