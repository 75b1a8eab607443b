// One capture per process. It claims CUPTI, enables the activity kinds the configuration asks for,
// and runs a background thread that turns CUPTI's buffers into the trace file:
//
//   CUPTI callbacks ──► ActivityBuffers (bounded) ──► background thread: translate, write, flush
//
// The application's threads only ever take or return a buffer under a short lock. The background
// thread flushes CUPTI and the file every flush interval, so a killed process loses at most about
// one interval. stop() (at exit, or on SIGTERM/SIGINT) forces a last flush and writes the trailer.
// Whatever fails is logged on one line and written into the file; the job itself is never stopped.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>

#include "inject/activity_buffers.h"
#include "inject/activity_translator.h"
#include "inject/capture_config.h"
#include "inject/capture_window.h"
#include "inject/cupti_api.h"
#include "inject/device_query.h"
#include "inject/kernel_metric_collector.h"
#include "inject/metric_sampler.h"
#include "inject/nccl_capture_source.h"
#include "inject/nccl_clock_mapping.h"
#include "inject/nccl_profiler.h"
#include "inject/nvtx_recorder.h"
#include "inject/process_identity.h"
#include "proto/ring_file_sink.h"
#include "proto/trace_writer.h"

namespace gpuxray::inject {

struct CaptureDependencies {
  CuptiApi cupti;
  std::string cupti_path;
  uint32_t cupti_api_version = 0;
  // The record structs that libcupti delivers (CUDA 13.0's unless set).
  CuptiRecordLayouts cupti_layouts;
  DriverApi driver;
  // Bound only when metric sampling is asked for; a null function means it is unavailable.
  PmSamplingApi pm_sampling;
  // Bound only when kernel metrics are asked for; a null function means they are unavailable.
  KernelProfilerApi kernel_profiler;
  EnvironmentLookup environment;
  // The injection library's own path (to tell whether NCCL_PROFILER_PLUGIN names it).
  std::string library_path;
  // ncclGetVersion() of the NCCL loaded when the capture starts (loadedNcclVersion()); 0 if none.
  int nccl_version = 0;
  // Writes one line for the user (the session adds nothing; the default prefixes "gpuxray: ").
  std::function<void(const std::string&)> log;
};

class CaptureSession {
 public:
  CaptureSession(CaptureDependencies dependencies, CaptureConfig config);
  ~CaptureSession();
  CaptureSession(const CaptureSession&) = delete;
  CaptureSession& operator=(const CaptureSession&) = delete;

  // Opens the trace file, claims CUPTI and starts the background thread. When CUPTI cannot be
  // used, says why on one line and in the file, and goes on for what does not need it (NCCL's
  // operations). False when no file could be written.
  bool start();
  // Forces a last flush, writes the trailer and closes the file. Idempotent; waits at most
  // `timeout_ms` for the background thread.
  void stop(format::CaptureEnd end, const std::string& detail, int timeout_ms = 10000);
  // After fork() in the child: this process must never touch the parent's CUPTI state.
  void abandonAfterFork();
  // From a signal handler (async-signal-safe): asks the background thread to finish the file, the
  // capture ending by `signal`. Then waitUntilFinished() waits for it.
  void requestStopFromSignal(int signal);
  // Async-signal-safe; true once the file is complete.
  bool waitUntilFinished(int timeout_ms) const;

  // CUPTI's buffer callbacks land here (through the static trampolines in the .cc).
  void onBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records);
  void onBufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t valid_bytes);
  // CUPTI's API callbacks (enabled only for what the window plan follows: cudaProfilerStart/Stop,
  // NVTX pushes and pops) land here, on the application's threads.
  void onApiCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
  // An exception escaped one of the callbacks above (caught at the C boundary): counted for the
  // trailer, and the callbacks do nothing more.
  void noteCallbackFailure() noexcept { callback_failures_.fetch_add(1, std::memory_order_relaxed); }
  bool callbacksFailed() const noexcept { return callback_failures_.load(std::memory_order_relaxed) > 0; }
  // `gpuxray trigger`: opens a window for `duration_ns` from now.
  bool triggerWindow(uint64_t duration_ns);
  const CaptureWindows* windows() const { return windows_.get(); }

  const std::string& tracePath() const { return trace_path_; }
  bool cuptiActive() const { return cupti_active_; }
  // Receives NCCL's profiler-plugin calls for this capture.
  NcclProfiler* ncclProfiler() { return nccl_.get(); }
  const CaptureConfig& config() const { return config_; }

  // The session CUPTI's callbacks reach; set by start().
  static CaptureSession* active();

 private:
  bool claimCupti(std::string& failure);
  void enableActivities();
  void enableWindowCallbacks();
  void selectApiCalls();
  // The activity kinds that follow the windows: switched on when a window opens (from whichever
  // thread opens it) and off on the capture thread once it has been closed a while.
  void switchWindowKindsOn();
  void switchWindowKindsOff();
  void setWindowKinds(bool on);
  void followWindows();
  // Whether a CUPTI record belongs in the file: inside a window, or timeless (names, devices).
  bool insideWindows(const CUpti_Activity& record);
  // Closed windows, and the ranges that opened windows once they end (with `final`, also one that never did).
  void writeClosedWindows(bool final);
  // The default NVTX domain's ranges that NvtxRecorder finished (with `final`, also the open ones).
  void writeRecordedRanges(bool final);
  void startNvtxRecorder();
  // An NVTX range the capture writes itself (start, end: 0 if it never ended), counted if unended.
  format::NvtxEventRecord ownRange(uint64_t start_ns, uint64_t end_ns, uint64_t thread_id, uint32_t depth);
  // `gpuxray trigger` (proto/capture_windows.h): the live marker while capturing, and requests.
  void writeLiveMarker();
  void pollTrigger();
  void removeLiveMarker();
  bool openTraceFile();
  format::FileHeader makeHeader() const;
  void run();
  void processFilledBuffers();
  void writeNewDevices();
  void periodicFlush();
  void startMetricSampling();
  void collectMetricSamples();
  void startKernelMetrics();
  void writeKernelMetrics();
  void writeNcclRecords(bool final);
  void finishFile();
  format::Trailer makeTrailer() const;
  void chooseNcclCapture();
  void log(const std::string& line) const;
  uint64_t captureNow() const;

  CaptureDependencies deps_;
  CaptureConfig config_;
  ProcessIdentity identity_;
  uint64_t start_realtime_ns_ = 0;
  pid_t pid_ = 0;

  std::unique_ptr<ActivityBuffers> buffers_;
  std::unique_ptr<format::TraceWriter> writer_;
  // The writer's sink when the file is a ring (GPUXRAY_RING); not owned.
  const format::RingFileSink* ring_ = nullptr;
  bool size_limit_reached_ = false;
  std::unique_ptr<ActivityTranslator> translator_;
  std::unique_ptr<NcclProfiler> nccl_;
  std::unique_ptr<CaptureWindows> windows_;
  // The window plan limits the capture (records are then checked against the windows).
  std::atomic<bool> windowed_{false};
  std::atomic<bool> window_kinds_on_{false};
  uint64_t windows_closed_since_ns_ = 0;
  uint64_t records_outside_windows_ = 0;
  std::unique_ptr<NvtxRecorder> nvtx_recorder_;
  // NVTX ranges the capture wrote itself (a window's opening range, the recorder's) that had not
  // ended when the capture did.
  uint64_t own_ranges_unended_ = 0;
  // NVTX ranges whose START was inside a window: their END is kept wherever it falls.
  std::unordered_set<uint32_t> ranges_inside_windows_;
  // The runtime calls switched off and the driver calls switched on (selectApiCalls).
  std::vector<uint32_t> runtime_calls_off_;
  std::vector<uint32_t> driver_calls_on_;
  NcclClockMapper nccl_clock_;
  std::vector<CompletedNcclOperation> nccl_waiting_;
  bool cupti_active_ = false;
  NcclCaptureChoice nccl_capture_;
  std::string trace_path_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<std::string> capture_warnings_;
  std::set<uint32_t> devices_written_;
  std::vector<format::DeviceProperties> driver_devices_;
  bool devices_queried_ = false;
  std::vector<std::unique_ptr<MetricSampler>> samplers_;
  bool sampling_attempted_ = false;
  std::unique_ptr<KernelMetricCollector> kernel_metrics_;

  std::thread thread_;
  // Wakes the background thread (a byte per request); async-signal-safe to write.
  int wake_pipe_[2] = {-1, -1};
  // The background thread writes a byte here when the file is complete.
  int done_pipe_[2] = {-1, -1};
  std::atomic<bool> running_{false};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> abandoned_{false};
  std::atomic<uint64_t> cupti_dropped_{0};
  std::atomic<uint64_t> buffers_after_stop_{0};
  std::atomic<uint64_t> callback_failures_{0};
  std::atomic<int> stop_signal_{0};
  std::mutex stop_mutex_;
  bool stopped_ = false;
  // How the capture ended, as stop() was told; a signal (stop_signal_) takes precedence.
  mutable std::mutex end_mutex_;
  format::CaptureEnd end_ = format::CaptureEnd::kUnknown;
  std::string end_detail_;
};

}  // namespace gpuxray::inject
