// `gpuxray run [-o DIR] [options] -- COMMAND [ARGS...]`: runs a command with the injection library
// set up to capture it. The command and every process it starts (torchrun's ranks, for example)
// inherit the environment that tells the CUDA driver and NVTX to load libgpuxray_inject.so, which
// writes one trace file per process into DIR. gpuxray waits for the command, passes on the signals
// a job is stopped with, and ends as the command ended: same exit code, or killed by the same signal.

#include <errno.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "analyzer/cli/capture_checks.h"
#include "analyzer/cli/commands.h"
#include "analyzer/cli/run_environment.h"
#include "analyzer/errors.h"
#include "proto/file_layout.h"

namespace gpuxray::cli {
namespace {

namespace fs = std::filesystem;

// The signals a job is stopped or poked with; gpuxray passes them on to the command.
constexpr std::array<int, 6> kForwardedSignals = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
// As shells report a command they could not run.
constexpr int kCannotExecute = 126;
constexpr int kCommandNotFound = 127;

[[noreturn]] void throwErrno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

std::string newRunId() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  return generateRunId(host.data(), local, static_cast<long>(getpid()));
}

struct OutputDir {
  fs::path path;  // absolute
  bool created = false;
};

OutputDir prepareOutputDir(const std::optional<std::string>& given, const std::string& run_id) {
  fs::path path = fs::absolute(given ? fs::path(*given) : fs::path(defaultOutputDirName(run_id)));
  std::error_code error;
  bool created = fs::create_directories(path, error);
  if (error || !fs::is_directory(path)) {
    throw InputError(fmt::format("cannot create the output directory {}: {}", path.string(),
                                 error ? error.message() : "a file of that name is in the way"));
  }
  return {fs::weakly_canonical(path), created};
}

size_t countTraceFiles(const fs::path& dir) {
  size_t count = 0;
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code ignored;
    if (it->path().extension() == format::kTraceFileExtension && it->is_regular_file(ignored)) ++count;
  }
  return count;
}

void printSummary(const fs::path& dir) {
  size_t files = countTraceFiles(dir);
  if (files == 0) {
    fmt::print(stderr, "gpuxray: no trace files in {} (did the command use CUDA?)\n", dir.string());
  } else {
    fmt::print(stderr, "gpuxray: {} trace file{} in {}\n", files, files == 1 ? "" : "s", dir.string());
  }
}

// --- Signals ------------------------------------------------------------------------------------

volatile std::sig_atomic_t g_child_pid = 0;

// Runs in signal context: only async-signal-safe calls. A SIGINT or SIGQUIT that the terminal
// generated (Ctrl-C, Ctrl-\) went to the whole foreground process group, the command included, so
// it is not sent a second time.
void forwardSignal(int signal_number, siginfo_t* info, void* /*context*/) {
  bool from_terminal = info != nullptr && info->si_code == SI_KERNEL;
  if ((signal_number == SIGINT || signal_number == SIGQUIT) && from_terminal) return;
  int saved_errno = errno;
  pid_t child = g_child_pid;
  if (child > 0) kill(child, signal_number);
  errno = saved_errno;
}

// Passes kForwardedSignals on to the child while it runs. Constructed before the fork: the signals
// stay blocked until start(), so one that arrives early is delivered then, not lost. Signals that
// were ignored when gpuxray started (nohup, `&` in a script) stay ignored, and the command inherits
// that as it would without gpuxray.
class SignalForwarder {
 public:
  SignalForwarder() {
    sigset_t forwarded;
    sigemptyset(&forwarded);
    for (int signal_number : kForwardedSignals) sigaddset(&forwarded, signal_number);
    sigprocmask(SIG_BLOCK, &forwarded, &original_mask_);
  }
  ~SignalForwarder() { stop(); }
  SignalForwarder(const SignalForwarder&) = delete;
  SignalForwarder& operator=(const SignalForwarder&) = delete;

  // The mask to restore in the child before exec.
  const sigset_t& originalMask() const { return original_mask_; }

  void start(pid_t child) {
    g_child_pid = child;
    struct sigaction forward {};
    forward.sa_sigaction = forwardSignal;
    forward.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&forward.sa_mask);
    for (size_t i = 0; i < kForwardedSignals.size(); ++i) {
      sigaction(kForwardedSignals[i], nullptr, &previous_[i]);
      installed_[i] = previous_[i].sa_handler != SIG_IGN && sigaction(kForwardedSignals[i], &forward, nullptr) == 0;
    }
    sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
  }

  // Once the child has exited: signals still pending reach the handler with no child to send them
  // to, then the previous actions come back.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, nullptr);
    g_child_pid = 0;
    sigprocmask(SIG_SETMASK, &original_mask_, nullptr);
    for (size_t i = 0; i < kForwardedSignals.size(); ++i) {
      if (installed_[i]) sigaction(kForwardedSignals[i], &previous_[i], nullptr);
    }
  }

 private:
  sigset_t original_mask_{};
  std::array<struct sigaction, kForwardedSignals.size()> previous_{};
  std::array<bool, kForwardedSignals.size()> installed_{};
  bool stopped_ = false;
};

// Ends gpuxray by `signal_number`, as the command ended, so that a shell or launcher above sees the same
// death. Returns only when that signal does not kill (it is one whose default is to be ignored).
void dieBySignal(int signal_number) {
  std::fflush(stdout);
  // The command already left its core dump, if any; gpuxray's own would only confuse.
  struct rlimit no_core {};
  setrlimit(RLIMIT_CORE, &no_core);
  std::signal(signal_number, SIG_DFL);
  sigset_t just_this;
  sigemptyset(&just_this);
  sigaddset(&just_this, signal_number);
  sigprocmask(SIG_UNBLOCK, &just_this, nullptr);
  raise(signal_number);
}

// --- The child ----------------------------------------------------------------------------------

struct Child {
  pid_t pid = -1;
  int exec_errno = 0;  // why exec failed; 0 when the command runs
};

// Forks and runs `command` with `environment`, inheriting stdin, stdout and stderr. A close-on-exec
// pipe carries exec's errno back when the command cannot run. Between fork and exec the child only
// makes async-signal-safe calls.
Child spawn(const std::vector<std::string>& command, const Environment& environment, SignalForwarder& forwarder) {
  std::vector<char*> argv;
  for (const auto& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& entry : environment) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);

  std::array<int, 2> error_pipe{};
  if (pipe2(error_pipe.data(), O_CLOEXEC) != 0) throwErrno("cannot create a pipe");
  pid_t pid = fork();
  if (pid < 0) {
    int fork_errno = errno;
    close(error_pipe[0]);
    close(error_pipe[1]);
    errno = fork_errno;
    throwErrno("cannot start a process");
  }
  if (pid == 0) {
    close(error_pipe[0]);
    sigprocmask(SIG_SETMASK, &forwarder.originalMask(), nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    int exec_errno = errno;
    ssize_t ignored = write(error_pipe[1], &exec_errno, sizeof exec_errno);
    static_cast<void>(ignored);
    _exit(kCommandNotFound);
  }
  close(error_pipe[1]);
  forwarder.start(pid);

  Child child{pid, 0};
  int exec_errno = 0;
  ssize_t n;
  while ((n = read(error_pipe[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  close(error_pipe[0]);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) child.exec_errno = exec_errno;
  return child;
}

// Waits until the child exits (through any number of forwarded signals), stops forwarding before
// reaping it, so that no signal can go to a reused pid, and returns its wait status.
int waitForChild(pid_t pid, SignalForwarder& forwarder) {
  siginfo_t info{};
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0) {
    if (errno != EINTR) throwErrno("cannot wait for the command");
  }
  forwarder.stop();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throwErrno("cannot wait for the command");
  }
  return status;
}

// --- The subcommand -----------------------------------------------------------------------------

ExitCode runRun(const RunOptions& options) {
  CaptureSettings capture = checkCaptureOptions(options);
  if (options.command.empty())
    throw UsageError("run needs a command to run after --, as in: gpuxray run -o DIR -- python train.py");

  Environment environment = processEnvironment();
  RunSetup setup;
  setup.injection_library = findInjectionLibrary(environment);
  setup.run_id = chooseRunId(environment, newRunId());
  OutputDir output = prepareOutputDir(options.output_dir, setup.run_id);
  setup.output_dir = output.path.string();
  setup.capture = capture;
  ChildEnvironment child_environment = buildChildEnvironment(setup, environment);
  for (const auto& warning : child_environment.warnings) fmt::print(stderr, "gpuxray: warning: {}\n", warning);
  if (lookupVariable(environment, "GPUXRAY_RUN_CHECKS").value_or("1") != "0") {
    // `gpuxray doctor`'s checks on the command's environment; problems only, and the command runs anyway.
    for (const auto& check : runCaptureChecks(setup.injection_library, child_environment.variables, setup.output_dir)) {
      if (check.status == format::DoctorStatus::kProblem)
        fmt::print(stderr, "gpuxray: problem: {}: {}; fix: {}\n", check.name, check.detail, check.fix);
    }
  }

  // A SIGCHLD ignored by whoever started gpuxray would make the kernel reap the child unseen.
  std::signal(SIGCHLD, SIG_DFL);
  SignalForwarder forwarder;
  Child child = spawn(options.command, child_environment.variables, forwarder);
  int status = waitForChild(child.pid, forwarder);

  if (child.exec_errno != 0) {
    std::error_code ignored;
    if (output.created && fs::is_empty(output.path, ignored)) fs::remove(output.path, ignored);
    fmt::print(stderr, "gpuxray: error: cannot run '{}': {}\n", options.command.front(),
               std::strerror(child.exec_errno));
    bool not_found = child.exec_errno == ENOENT || child.exec_errno == ENOTDIR;
    return static_cast<ExitCode>(not_found ? kCommandNotFound : kCannotExecute);
  }
  printSummary(output.path);
  if (WIFSIGNALED(status)) {
    dieBySignal(WTERMSIG(status));
    return static_cast<ExitCode>(128 + WTERMSIG(status));
  }
  return static_cast<ExitCode>(WEXITSTATUS(status));
}

}  // namespace

CommandAction addRunCommand(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand("run", "Run a command and capture its GPU activity into trace files");
  command
      ->add_option("-o,--output", options->output_dir,
                   "Directory for the trace files, created if missing (default: ./gpuxray-<run id>)")
      ->type_name("DIR");
  command
      ->add_option("--capture", options->capture,
                   "What to record: a comma list of all, kernel, memcpy, memset, memory, api, nvtx, sync, "
                   "overhead; -NAME leaves one out, as in all,-memory (default: all)")
      ->type_name("LIST");
  command
      ->add_option("--buffer-limit-mb", options->buffer_limit_mb,
                   "Memory per process for records not yet written, in MiB (default: 64)")
      ->type_name("N");
  command
      ->add_option("--flush-interval-ms", options->flush_interval_ms,
                   "How often records are written to the trace file, in ms (default: 1000)")
      ->type_name("N");
  command->add_flag("--metrics", options->metrics, "Also sample GPU performance metrics");
  command->add_option("--metric-interval-us", options->metric_interval_us, "Metric sampling interval, in µs")
      ->type_name("N");
  command
      ->add_option("--kernel-metrics", options->kernel_metrics,
                   "Measure the first launches of kernels whose name matches REGEX with CUPTI's range profiler "
                   "(achieved occupancy, DRAM, L2, L1 bytes, ...; each measured launch is replayed, see "
                   "docs/kernel-metrics.md): --kernel-metrics=REGEX; without REGEX, the 5 kernels with the most "
                   "time in the first 2 s")
      ->expected(0, 1)
      ->type_name("REGEX");
  command
      ->add_option("--kernel-metrics-count", options->kernel_metrics_count,
                   "Launches measured per matching kernel (default: 3)")
      ->type_name("N");
  command
      ->add_option("--kernel-metrics-from", options->kernel_metrics_from,
                   "Measure the kernels that took the most time in an earlier run's report (analyze --format json)")
      ->type_name("REPORT");
  command->add_option("--log-level", options->log_level, "What the capture prints: quiet, warn, info or debug")
      ->type_name("LEVEL");
  command->add_option("--delay", options->delay, "Start recording this long after CUDA starts (30s, 500ms, 2m)")
      ->type_name("DURATION");
  command
      ->add_option("--duration", options->duration,
                   "Record for this long (after --delay); with --capture-range or --steps, at most this long per "
                   "window")
      ->type_name("DURATION");
  command
      ->add_option("--capture-range", options->capture_range,
                   "Record only between cudaProfilerStart and cudaProfilerStop (cudaProfilerApi, every range), or "
                   "while an NVTX push/pop range of that name is open (nvtx:NAME[@DOMAIN], the first one)")
      ->type_name("KIND");
  command->add_option("--capture-range-count", options->capture_range_count, "How many ranges to record (N or all)")
      ->type_name("N");
  command
      ->add_option("--steps", options->steps,
                   "Record training steps A to B, as NVTX ranges ProfilerStep#N (or --step-marker) number them")
      ->type_name("A-B");
  command
      ->add_option("--step-marker", options->step_marker,
                   "A regular expression for step ranges' names; its first group, if any, is the step number")
      ->type_name("REGEX");
  command
      ->add_option("--max-size-mb", options->max_size_mb,
                   "The most one trace file holds, in MiB: the capture stops there (the trailer says so)")
      ->type_name("N");
  command->add_flag("--ring", options->ring,
                    "With --max-size-mb: keep the most recent N MiB instead, writing over the oldest chunks");
  command->add_option("command", options->command, "The command to run and its arguments, after --")
      ->type_name("COMMAND");
  command->positionals_at_end();
  command->footer(
      "Every process of the command writes one file. The processes share a run id: GPUXRAY_RUN_ID if it is\n"
      "set, else a new one. To give one run id to gpuxray run on several nodes (srun gpuxray run ...),\n"
      "export GPUXRAY_RUN_ID=<id> before launching.");
  return [options] { return runRun(*options); };
}

}  // namespace gpuxray::cli
