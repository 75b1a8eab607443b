#include "inject/doctor.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>

#include "inject/capture_config.h"
#include "inject/cupti_api.h"
#include "inject/device_query.h"
#include "inject/nccl_capture_source.h"
#include "inject/nccl_plugin.h"

namespace gpuxray::inject {
namespace {

namespace fs = std::filesystem;
using format::DoctorCheck;
using format::DoctorStatus;

// The driver's CUDA version that a CUPTI needs (cuDriverGetVersion's code): one of the same CUDA
// major version, 13.0 unless a CUDA 12 libcupti was found.
int driverForCupti(uint32_t cupti_api_version) {
  return cupti_api_version != 0 && cupti_api_version < 130000 ? 12000 : 13000;
}
// Less free space than this in the output directory is a warning: a rank writes tens of MB a minute.
constexpr uint64_t kLowFreeBytes = 1ull << 30;
constexpr int kCudaErrorStubLibrary = 34;
constexpr int kCudaErrorNoDevice = 100;
// CAP_SYS_ADMIN's bit in /proc/self/status's CapEff.
constexpr int kCapSysAdminBit = 21;

DoctorCheck ok(std::string name, std::string detail) {
  return {std::move(name), DoctorStatus::kOk, std::move(detail), ""};
}
DoctorCheck warning(std::string name, std::string detail, std::string fix) {
  return {std::move(name), DoctorStatus::kWarning, std::move(detail), std::move(fix)};
}
DoctorCheck problem(std::string name, std::string detail, std::string fix) {
  return {std::move(name), DoctorStatus::kProblem, std::move(detail), std::move(fix)};
}

std::string variable(const DoctorInputs& inputs, const char* name) {
  const char* value = inputs.environment(name);
  return value != nullptr ? value : "";
}

std::string fileName(std::string_view path) {
  return std::string(path.substr(path.find_last_of('/') + 1));
}

// The path the loader took a dlopen'ed library from.
std::string loadedPath(void* library, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr && *map->l_name)
    return map->l_name;
  return fallback;
}

std::string versionText(int cuda_version) {
  return std::to_string(cuda_version / 1000) + "." + std::to_string(cuda_version % 1000 / 10);
}

std::optional<std::string> firstLine(const std::string& path) {
  std::ifstream file(path);
  std::string line;
  if (!file || !std::getline(file, line)) return std::nullopt;
  return line;
}

void checkSettings(const CaptureConfig& config, std::vector<DoctorCheck>& checks) {
  if (config.warnings.empty()) {
    checks.push_back(ok("settings", "the GPUXRAY_* variables are understood"));
    return;
  }
  for (const auto& line : config.warnings)
    checks.push_back(warning("settings", line, "fix the variable's value (README, \"Without the wrapper\")"));
}

// Returns the accepted libcupti's API version, 0 when none.
uint32_t checkCupti(const DoctorInputs& inputs, std::vector<DoctorCheck>& checks) {
  LoadedCupti cupti;
  std::string error;
  if (!loadCupti(inputs.environment, cupti, error)) {
    checks.push_back(problem("cupti", error,
                             "install the CUPTI of CUDA 13.0 or of CUDA 12.4-12.9 (the toolkit's lib64, or the "
                             "nvidia/cu13/lib or nvidia/cuda_cupti/lib folder of a PyTorch environment) and point "
                             "GPUXRAY_CUPTI_PATH at its libcupti.so.13 or libcupti.so.12"));
    return 0;
  }
  checks.push_back(ok("cupti", cupti.path + ": CUPTI API " + std::to_string(cupti.api_version) + ", accepted (" +
                                   cupti.layouts.toolkit + "'s record layouts)"));
  return cupti.api_version;
}

void checkDriver(const DoctorInputs& inputs, uint32_t cupti_api_version, std::vector<DoctorCheck>& checks) {
  const int needed = driverForCupti(cupti_api_version);
  const std::string no_gpu_fix = "capture needs a machine with an NVIDIA GPU and its driver: run on a GPU node";
  void* library = dlopen(inputs.driver_library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    checks.push_back(problem("driver",
                             "no " + fileName(inputs.driver_library) +
                                 " (the NVIDIA driver's library): " + (why != nullptr ? why : "not found"),
                             no_gpu_fix + " (nvidia-smi shows whether the driver is installed)"));
    checks.push_back(problem("gpus", "not known without a driver", no_gpu_fix));
    return;
  }
  std::string path = loadedPath(library, inputs.driver_library);
  DriverApi driver = driverApiOf(library);
  using Init = CUresult (*)(unsigned int);
  using ErrorName = CUresult (*)(CUresult, const char**);
  auto init = reinterpret_cast<Init>(dlsym(library, "cuInit"));
  auto error_name = reinterpret_cast<ErrorName>(dlsym(library, "cuGetErrorName"));
  auto describe = [&](CUresult result) {
    const char* name = nullptr;
    std::string text = error_name != nullptr && error_name(result, &name) == CUDA_SUCCESS && name != nullptr
                           ? std::string(name)
                           : "CUDA error";
    return text + " (" + std::to_string(static_cast<int>(result)) + ")";
  };

  std::string kernel_module;
  if (auto line = firstLine(inputs.nvidia_version)) kernel_module = "; kernel module: " + *line;
  int version = 0;
  if (driver.driverGetVersion == nullptr || driver.driverGetVersion(&version) != CUDA_SUCCESS) {
    checks.push_back(problem("driver", path + " does not tell its CUDA version (cuDriverGetVersion)" + kernel_module,
                             "reinstall the NVIDIA driver"));
  } else if (version < needed) {
    checks.push_back(problem("driver",
                             path + ": cuDriverGetVersion " + std::to_string(version) + " (CUDA " +
                                 versionText(version) + "), older than the CUDA " + versionText(needed) +
                                 " that this gpuxray's CUPTI needs" + kernel_module,
                             "update the NVIDIA driver to one for CUDA " + versionText(needed) + " or newer"));
  } else {
    checks.push_back(ok("driver", path + ": cuDriverGetVersion " + std::to_string(version) + " (CUDA " +
                                      versionText(version) + ")" + kernel_module));
  }

  CUresult initialized = init != nullptr ? init(0) : CUDA_ERROR_NOT_INITIALIZED;
  if (initialized != CUDA_SUCCESS) {
    std::string detail = "cuInit failed: " + describe(initialized);
    std::string fix = no_gpu_fix;
    if (static_cast<int>(initialized) == kCudaErrorStubLibrary) {
      detail += ": " + path + " is the CUDA toolkit's stub, not a driver";
    } else if (static_cast<int>(initialized) == kCudaErrorNoDevice) {
      std::string visible = variable(inputs, "CUDA_VISIBLE_DEVICES");
      detail += ": no GPU visible" + (visible.empty() ? "" : " (CUDA_VISIBLE_DEVICES=" + visible + ")");
      fix = "check CUDA_VISIBLE_DEVICES and the job's GPU allocation; nvidia-smi lists the GPUs";
    }
    checks.push_back(problem("gpus", detail, fix));
    return;
  }
  std::vector<format::DeviceProperties> devices = queryDevices(driver);
  if (devices.empty()) {
    checks.push_back(problem("gpus", "the driver lists no GPU", no_gpu_fix));
    return;
  }
  std::string list = std::to_string(devices.size()) + (devices.size() == 1 ? " GPU: " : " GPUs: ");
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    list += (i ? "; " : "") + std::to_string(d.device_id) + " " + (d.name.empty() ? "(no name)" : d.name) + " sm_" +
            std::to_string(d.compute_major) + std::to_string(d.compute_minor);
  }
  checks.push_back(ok("gpus", list));
}

void checkNccl(const DoctorInputs& inputs, const CaptureConfig& config, bool cupti_usable,
               std::vector<DoctorCheck>& checks) {
  void* library = dlopen(inputs.nccl_library.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (library == nullptr) {
    checks.push_back(warning("nccl",
                             "no " + fileName(inputs.nccl_library) +
                                 " on this library path; a job that brings its own (PyTorch's nvidia-nccl wheel) "
                                 "is not checked here",
                             "run gpuxray doctor with the job's LD_LIBRARY_PATH to check its NCCL"));
    return;
  }
  std::string path = loadedPath(library, inputs.nccl_library);
  using GetVersion = int (*)(int*);
  auto get_version = reinterpret_cast<GetVersion>(dlsym(library, "ncclGetVersion"));
  int version = 0;
  if (get_version == nullptr || get_version(&version) != 0 || version <= 0) {
    checks.push_back(
        warning("nccl", path + " does not tell its version (ncclGetVersion)", "check that it is NCCL's library"));
    return;
  }
  std::string plugin = variable(inputs, "NCCL_PROFILER_PLUGIN");
  std::string nvtx = variable(inputs, "NVTX_INJECTION64_PATH");
  std::string nvtx_disable = variable(inputs, "NCCL_NVTX_DISABLE");
  NcclCaptureInputs choice_inputs;
  choice_inputs.profiler_plugin = plugin.empty() ? nullptr : plugin.c_str();
  choice_inputs.nvtx_injection = nvtx.empty() ? nullptr : nvtx.c_str();
  choice_inputs.nccl_nvtx_disable = nvtx_disable.empty() ? nullptr : nvtx_disable.c_str();
  choice_inputs.library_path = inputs.library_path;
  choice_inputs.nccl_version = version;
  choice_inputs.nvtx_configured = config.categories.nvtx;
  choice_inputs.cupti_active = cupti_usable;
  NcclCaptureChoice choice = chooseNcclCaptureSource(choice_inputs);

  std::string found = path + ": NCCL " + ncclVersionText(version);
  std::string table = ncclProfilerTableFor(version);
  found += table.empty() ? " (no profiler plugin ABI)" : ", takes the plugin's " + table;
  std::string fix = !plugin.empty() && plugin != inputs.library_path
                        ? "unset NCCL_PROFILER_PLUGIN (gpuxray run and the preloaded library point it at gpuxray)"
                        : "use NCCL " + ncclVersionText(kOldestNcclForPlugin) +
                              " or newer for the algorithm, protocol and channels of each operation";
  switch (choice.source) {
    case format::NcclCaptureSource::kProfilerPlugin:
      checks.push_back(ok("nccl", found + "; operations captured through gpuxray's profiler plugin"));
      break;
    case format::NcclCaptureSource::kNvtx:
      checks.push_back(warning("nccl", found + "; " + choice.note, fix));
      break;
    default:
      checks.push_back(problem("nccl", found + "; " + choice.note, fix));
      break;
  }
}

void checkPmSampling(const DoctorInputs& inputs, const CaptureConfig& config, std::vector<DoctorCheck>& checks) {
  std::ifstream params(inputs.nvidia_params);
  std::optional<int> admin_only;
  for (std::string line; params && std::getline(params, line);) {
    constexpr std::string_view kKey = "RmProfilingAdminOnly:";
    if (line.starts_with(kKey)) admin_only = std::atoi(line.c_str() + kKey.size());
  }
  std::string needed = config.metrics ? "GPUXRAY_METRICS=1 asks for it" : "needed only with --metrics";
  if (!params.is_open() && !admin_only) {
    checks.push_back(warning("pm-sampling",
                             "not known: no " + inputs.nvidia_params + " (no NVIDIA kernel module loaded); " + needed,
                             "check on a GPU node"));
    return;
  }
  if (!admin_only) {
    checks.push_back(warning("pm-sampling", inputs.nvidia_params + " has no RmProfilingAdminOnly line; " + needed,
                             "check CUPTI's error in the trace file's trailer after a run with --metrics"));
    return;
  }
  if (*admin_only == 0) {
    checks.push_back(ok("pm-sampling", "GPU performance counters are open to every user (RmProfilingAdminOnly: 0)"));
  } else if (inputs.profiling_admin) {
    checks.push_back(ok("pm-sampling",
                        "GPU performance counters are restricted to administrators "
                        "(RmProfilingAdminOnly: 1), and this user is one"));
  } else {
    std::string detail =
        "GPU performance counters are restricted to administrators (RmProfilingAdminOnly: 1) and "
        "this user is not root: metric sampling will be refused; " +
        needed;
    std::string fix = "run as root, or load the nvidia module with NVreg_RestrictProfilingToAdminUsers=0";
    checks.push_back(config.metrics ? problem("pm-sampling", detail, fix) : warning("pm-sampling", detail, fix));
  }
}

bool isOurs(const DoctorInputs& inputs, const std::string& path) {
  std::error_code error;
  return path == inputs.library_path ||
         (!inputs.library_path.empty() && fs::equivalent(path, inputs.library_path, error) && !error);
}

void checkOtherTools(const DoctorInputs& inputs, std::vector<DoctorCheck>& checks) {
  size_t before = checks.size();
  std::string injection = variable(inputs, "CUDA_INJECTION64_PATH");
  if (!injection.empty() && !isOurs(inputs, injection)) {
    checks.push_back(problem("other-tools",
                             "CUDA_INJECTION64_PATH=" + injection +
                                 " loads another tool into CUDA (as Nsight "
                                 "Systems and Nsight Compute do), and CUPTI takes one client per process",
                             "unset it, or use gpuxray run (which replaces it)"));
  }
  std::string preload = variable(inputs, "LD_PRELOAD");
  for (size_t start = 0; start < preload.size();) {
    size_t end = preload.find_first_of(": ", start);
    if (end == std::string::npos) end = preload.size();
    std::string entry = preload.substr(start, end - start);
    start = end + 1;
    std::string file = fileName(entry);
    bool profiler = file.find("cupti") != std::string::npos || file.find("ToolsInjection") != std::string::npos ||
                    file.find("nsys") != std::string::npos;
    if (!entry.empty() && profiler && !isOurs(inputs, entry)) {
      checks.push_back(problem("other-tools", "LD_PRELOAD loads " + entry + ", a profiler that would hold CUPTI",
                               "remove it from LD_PRELOAD while capturing with gpuxray"));
    }
  }
  std::string nvtx = variable(inputs, "NVTX_INJECTION64_PATH");
  if (!nvtx.empty() && !isOurs(inputs, nvtx) && fileName(nvtx).rfind("libcupti.so", 0) != 0) {
    checks.push_back(warning("other-tools", "NVTX_INJECTION64_PATH=" + nvtx + " sends NVTX ranges to another tool",
                             "unset it, or use gpuxray run (which replaces it)"));
  }
  if (checks.size() == before)
    checks.push_back(ok("other-tools",
                        "no other CUPTI client named by CUDA_INJECTION64_PATH, NVTX_INJECTION64_PATH or LD_PRELOAD (a "
                        "profiler the job starts itself, such as torch.profiler, cannot be seen beforehand)"));
}

std::string filesystemName(long type) {
  static const std::map<long, std::string> kNames = {
      {0xEF53, "ext4"},        {0x58465342, "xfs"},  {0x9123683E, "btrfs"},  {0x01021994, "tmpfs"},
      {0x794C7630, "overlay"}, {0x6969, "nfs"},      {0x0BD00BD0, "lustre"}, {0x47504653, "gpfs"},
      {0x19830326, "beegfs"},  {0xFF534D42, "cifs"}, {0xFE534D42, "smb2"},   {0x65735546, "fuse"},
      {0x013111A8, "ibrix"},   {0x5346414F, "afs"},  {0xAAD7AAEA, "panfs"},  {0x6B414653, "afs"}};
  auto found = kNames.find(type);
  return found != kNames.end() ? found->second : "";
}

bool isNodeLocal(const std::string& filesystem) {
  return filesystem == "ext4" || filesystem == "xfs" || filesystem == "btrfs" || filesystem == "tmpfs" ||
         filesystem == "overlay";
}

std::string bytesText(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

// How many nodes the launcher says the job spans; 0 when it does not say.
int nodesOfJob(const DoctorInputs& inputs, const ProcessIdentity& identity) {
  for (const char* name : {"SLURM_NNODES", "SLURM_JOB_NUM_NODES", "GROUP_WORLD_SIZE", "OMPI_MCA_orte_num_nodes"}) {
    if (int nodes = std::atoi(variable(inputs, name).c_str()); nodes > 0) return nodes;
  }
  if (identity.world_size > 0 && identity.local_world_size > 0)
    return (identity.world_size + identity.local_world_size - 1) / identity.local_world_size;
  return 0;
}

void checkOutputDirectory(const DoctorInputs& inputs, const CaptureConfig& config, const ProcessIdentity& identity,
                          std::vector<DoctorCheck>& checks) {
  fs::path dir = fs::absolute(inputs.output_dir.empty() ? fs::path(config.output_dir) : fs::path(inputs.output_dir));
  fs::path existing = dir;
  std::error_code error;
  while (!fs::exists(existing, error) && existing.has_parent_path() && existing != existing.parent_path())
    existing = existing.parent_path();
  const std::string name = "output-directory";
  if (!fs::is_directory(existing, error)) {
    checks.push_back(problem(name, dir.string() + ": " + existing.string() + " is not a directory",
                             "choose another directory (-o DIR or GPUXRAY_OUTPUT_DIR)"));
    return;
  }
  if (access(existing.c_str(), W_OK | X_OK) != 0) {
    checks.push_back(problem(
        name, dir.string() + ": " + existing.string() + " is not writable by this user (" + std::strerror(errno) + ")",
        "choose a writable directory (-o DIR or GPUXRAY_OUTPUT_DIR)"));
    return;
  }
  std::string where = dir.string() + (existing == dir ? "" : " (created at start, in " + existing.string() + ")");
  struct statvfs space {};
  struct statfs kind {};
  std::string filesystem;
  if (statfs(existing.c_str(), &kind) == 0) filesystem = filesystemName(static_cast<long>(kind.f_type));
  std::string detail = where + ": writable";
  if (statvfs(existing.c_str(), &space) == 0) {
    uint64_t free_bytes = static_cast<uint64_t>(space.f_bavail) * space.f_frsize;
    detail += ", " + bytesText(free_bytes) + " free";
    if (!filesystem.empty()) detail += " on " + filesystem;
    if (free_bytes < kLowFreeBytes) {
      checks.push_back(warning(name, detail + ": little room for trace files (tens of MB per rank and minute)",
                               "free space, or choose another directory"));
      return;
    }
  }
  int nodes = nodesOfJob(inputs, identity);
  if (nodes > 1 && isNodeLocal(filesystem)) {
    checks.push_back(warning(name,
                             detail + ", a node-local filesystem, and the launcher's variables say the job spans " +
                                 std::to_string(nodes) + " nodes: each node keeps its own ranks' files",
                             "use a directory on a shared filesystem, or gather the files before gpuxray analyze"));
    return;
  }
  checks.push_back(ok(name, detail));
}

void checkLauncher(const DoctorInputs& inputs, const ProcessIdentity& identity, std::vector<DoctorCheck>& checks) {
  if (identity.rank_source.empty()) {
    checks.push_back(ok("launcher",
                        "no launcher's rank variables (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, "
                        "PMIX_RANK): files are named HOST-PID.gpuxray"));
    return;
  }
  std::string detail = "rank " + std::to_string(identity.rank) + " (from " + identity.rank_source + ")";
  if (identity.world_size > 0) detail += " of " + std::to_string(identity.world_size);
  if (identity.local_rank >= 0) detail += ", local rank " + std::to_string(identity.local_rank);
  if (identity.local_world_size > 0) detail += " of " + std::to_string(identity.local_world_size);
  detail += "; run id from " + identity.run_id_source;
  if (identity.world_size > 0 && identity.rank >= identity.world_size) {
    checks.push_back(problem("launcher", detail + ": the rank is not below the world size",
                             "check the launcher's variables, or set GPUXRAY_RANK and GPUXRAY_WORLD_SIZE"));
  } else if (identity.world_size > 1 && identity.run_id_source == "generated") {
    checks.push_back(warning("launcher", detail + ": each process would make up its own run id",
                             "export GPUXRAY_RUN_ID=<id> before launching (gpuxray run does it for its command)"));
  } else {
    checks.push_back(ok("launcher", detail));
  }
  (void)inputs;
}

bool profilingAdmin() {
  if (geteuid() == 0) return true;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.starts_with("CapEff:")) return (std::stoull(line.substr(7), nullptr, 16) >> kCapSysAdminBit) & 1u;
  }
  return false;
}

}  // namespace

std::string ncclProfilerTableFor(int version) {
  if (version >= 22900) return "ncclProfiler_v6";
  if (version >= 22800) return "ncclProfiler_v5";
  if (version >= 22700) return "ncclProfiler_v4";
  if (version >= 22600) return "ncclProfiler_v3";
  if (version >= 22400) return "ncclProfiler_v2";
  if (version >= kOldestNcclForPlugin) return "ncclProfiler_v1";
  return "";
}

DoctorInputs machineDoctorInputs(EnvironmentLookup environment, std::string library_path, std::string output_dir) {
  DoctorInputs inputs;
  inputs.environment = std::move(environment);
  inputs.library_path = std::move(library_path);
  inputs.output_dir = std::move(output_dir);
  inputs.profiling_admin = profilingAdmin();
  return inputs;
}

std::vector<DoctorCheck> runDoctorChecks(const DoctorInputs& inputs) {
  std::vector<DoctorCheck> checks;
  CaptureConfig config = readCaptureConfig(inputs.environment);
  ProcessIdentity identity = detectProcessIdentity(inputs.environment);
  checkSettings(config, checks);
  uint32_t cupti_api_version = checkCupti(inputs, checks);
  bool cupti_usable = cupti_api_version != 0;
  checkDriver(inputs, cupti_api_version, checks);
  checkNccl(inputs, config, cupti_usable, checks);
  checkPmSampling(inputs, config, checks);
  checkOtherTools(inputs, checks);
  checkOutputDirectory(inputs, config, identity, checks);
  checkLauncher(inputs, identity, checks);
  return checks;
}

}  // namespace gpuxray::inject
