// NCCL collectives for gpuxray to capture: a communicator (one rank by default) runs a loop of
// AllReduce, AllGather, ReduceScatter and Broadcast over a few sizes, plus a Send/Recv pair per
// size, and says what it did, so that scripts/gpu-check.sh can compare the trace's NCCL operations
// (NCCL's profiler-plugin events) with the program's own account.
//
// One rank (the default): ncclCommInitAll on device 0. NCCL runs the collectives of a one-rank
// communicator as local copies (ncclLaunchOneRank) without planning a kernel, and so without any
// profiler-plugin event (NCCL 2.28; see enqueue.cc, taskAppend). The Send/Recv pair to itself does
// go through NCCL's planner and kernel, and is seen by the plugin.
//
// Several ranks (--ranks N): the program starts N copies of itself (--rank R), each a fresh process
// with RANK, WORLD_SIZE, LOCAL_RANK and NCCL_COMM_ID=127.0.0.1:<free port> set (rank 0 runs NCCL's
// bootstrap root there), and waits for them. With as many GPUs as ranks, rank R uses device R. With
// fewer, the ranks share device 0: each sets its own NCCL_HOSTID, so that NCCL takes them for
// different hosts (it refuses two ranks on one GPU of one host) and connects them through its socket
// transport over the loopback interface (NCCL_NET=Socket, NCCL_SOCKET_IFNAME=lo, unless set). That
// is a test set-up, not a way to run NCCL: it exists so that one GPU can show collectives through
// the profiler plugin (and network transfers).
//
// Each iteration issues, for each size: the collectives in the order given, then (unless --p2p 0)
// a group of one ncclSend to the next rank and one ncclRecv from the previous one (itself, on one
// rank). Warm-up iterations (not timed) come first; the timed loop is bracketed by CUDA events on
// the stream, and also timed on the host up to its final synchronize.
//
// Sizes are the bytes of the larger buffer of each call: AllReduce and Broadcast move SIZE bytes
// of float; AllGather gathers SIZE/N bytes from each rank into SIZE; ReduceScatter reduces SIZE into
// SIZE/N per rank; Send/Recv move SIZE bytes. Each size is rounded down to a multiple of 4*N.
//
// Prints machine-readable lines (key=value); with --ranks N > 1, every rank prints its own with a
// "rankR." prefix (rank0.loop_seconds=...), and the parent prints nccl_ranks= and rank_exit=:
//   nccl_version=22809  nccl_version_string=2.28.9  nranks=  rank=  cuda_device=  shared_gpu=0|1
//   sizes=1024,...  iterations=  warmup=
//   nccl_calls func=AllReduce count=N      (one line per function NCCL names: AllReduce, AllGather,
//                                           ReduceScatter, Broadcast, Send, Recv)
//   nccl_collectives_launched=N  nccl_p2p_launched=N (sends + receives)
//   nccl_ops_launched=N (collectives + sends + receives: every NCCL operation call, warm-up included)
//   loop_seconds=S (CUDA events)  loop_wall_seconds=S (host)  ops_per_second=
//
// Usage: nccl_collectives [--iters N] [--warmup N] [--sizes 1K,64K,1M,16M,64M]
//                         [--colls AllReduce,AllGather,ReduceScatter,Broadcast] [--p2p 0|1]
//                         [--ranks N] [--timeout S]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

std::string g_prefix;  // "rankR." with several ranks: the output lines' prefix
std::string g_who;     // "rank R: " with several ranks: the error messages'

#define CK(call)                                                                                          \
  do {                                                                                                    \
    cudaError_t err_ = (call);                                                                            \
    if (err_ != cudaSuccess) {                                                                            \
      std::fprintf(stderr, "nccl_collectives: %s%s failed: %s (%s:%d)\n", g_who.c_str(), #call,           \
                   cudaGetErrorString(err_), __FILE__, __LINE__);                                         \
      std::exit(1);                                                                                       \
    }                                                                                                     \
  } while (0)

#define NK(call)                                                                                          \
  do {                                                                                                    \
    ncclResult_t res_ = (call);                                                                           \
    if (res_ != ncclSuccess) {                                                                            \
      std::fprintf(stderr, "nccl_collectives: %s%s failed: %s (%s:%d)\n", g_who.c_str(), #call,           \
                   ncclGetErrorString(res_), __FILE__, __LINE__);                                         \
      std::exit(1);                                                                                       \
    }                                                                                                     \
  } while (0)

// A key=value line, with the rank prefix when there are several ranks; flushed at once, so that
// the ranks' lines, written to one file, stay whole.
void emit(const char* format, ...) {
  char line[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  std::printf("%s%s\n", g_prefix.c_str(), line);
  std::fflush(stdout);
}

struct Options {
  int iters = 20;
  int warmup = 2;
  std::vector<size_t> sizes = {1u << 10, 64u << 10, 1u << 20, 16u << 20, 64u << 20};
  std::vector<std::string> colls = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast"};
  bool p2p = true;
  int ranks = 1;
  int rank = -1;  // set for the processes the parent starts
  int timeout_s = 300;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "nccl_collectives: %s\nusage: nccl_collectives [--iters N] [--warmup N] [--sizes 1K,64K,1M,16M,64M] "
               "[--colls AllReduce,AllGather,ReduceScatter,Broadcast] [--p2p 0|1] [--ranks N] [--timeout S]\n",
               why.c_str());
  std::exit(2);
}

long parseInteger(const std::string& text, long minimum, long maximum, const std::string& what) {
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < minimum || value > maximum) usage("bad value for " + what + ": " + text);
  return value;
}

// "64K", "16M", "1G", "4096".
size_t parseSize(const std::string& text) {
  char* end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) usage("bad size '" + text + "'");
  std::string suffix(end);
  if (suffix == "K" || suffix == "k") value <<= 10;
  else if (suffix == "M" || suffix == "m") value <<= 20;
  else if (suffix == "G" || suffix == "g") value <<= 30;
  else if (!suffix.empty()) usage("bad size '" + text + "'");
  if (value == 0 || value > (4ull << 30)) usage("size out of range: " + text);
  return static_cast<size_t>(value);
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") usage("runs NCCL collectives on one communicator");
    if (i + 1 >= argc) usage("missing value for " + a);
    std::string v = argv[++i];
    if (a == "--iters") o.iters = static_cast<int>(parseInteger(v, 0, 1000000, a));
    else if (a == "--warmup") o.warmup = static_cast<int>(parseInteger(v, 0, 1000000, a));
    else if (a == "--p2p") o.p2p = parseInteger(v, 0, 1, a) == 1;
    else if (a == "--ranks") o.ranks = static_cast<int>(parseInteger(v, 1, 64, a));
    else if (a == "--rank") o.rank = static_cast<int>(parseInteger(v, 0, 63, a));
    else if (a == "--timeout") o.timeout_s = static_cast<int>(parseInteger(v, 1, 86400, a));
    else if (a == "--sizes") {
      o.sizes.clear();
      for (const auto& s : splitList(v)) o.sizes.push_back(parseSize(s));
      if (o.sizes.empty()) usage("no sizes");
    } else if (a == "--colls") {
      o.colls = splitList(v);
      for (const auto& c : o.colls) {
        if (c != "AllReduce" && c != "AllGather" && c != "ReduceScatter" && c != "Broadcast")
          usage("unknown collective '" + c + "'");
      }
    } else {
      usage("unknown option " + a);
    }
  }
  if (o.rank >= o.ranks) usage("--rank must be below --ranks");
  return o;
}

// A TCP port on 127.0.0.1 that is free now (the kernel's pick), for NCCL's bootstrap root.
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

// The parent of --ranks N: starts the ranks, waits for them, and stops the others when one fails
// (a rank whose peer died would wait in NCCL for ever).
int runRanks(const Options& o, int argc, char** argv) {
  int port = freePort();
  if (port <= 0) {
    std::fprintf(stderr, "nccl_collectives: no free TCP port on 127.0.0.1: %s\n", std::strerror(errno));
    return 1;
  }
  std::string comm_id = "127.0.0.1:" + std::to_string(port);
  setenv("NCCL_COMM_ID", comm_id.c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(o.ranks).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(o.ranks).c_str(), 1);
  std::fflush(stdout);

  std::vector<pid_t> children(o.ranks, -1);
  for (int r = 0; r < o.ranks; ++r) {
    setenv("RANK", std::to_string(r).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
    std::vector<std::string> args(argv, argv + argc);
    args.push_back("--rank");
    args.push_back(std::to_string(r));
    std::vector<char*> child_argv;
    for (auto& arg : args) child_argv.push_back(arg.data());
    child_argv.push_back(nullptr);
    pid_t pid = -1;
    int error = posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, child_argv.data(), environ);
    if (error != 0) {
      std::fprintf(stderr, "nccl_collectives: starting rank %d failed: %s\n", r, std::strerror(error));
      for (pid_t child : children) {
        if (child > 0) ::kill(child, SIGTERM);
      }
      break;
    }
    children[r] = pid;
  }

  std::vector<int> status(o.ranks, -1);
  int running = 0;
  for (pid_t child : children) running += child > 0 ? 1 : 0;
  auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point failed_at{};
  bool failed = running < o.ranks;
  bool killed = false;
  while (running > 0) {
    int wstatus = 0;
    pid_t done = ::waitpid(-1, &wstatus, WNOHANG);
    if (done > 0) {
      for (int r = 0; r < o.ranks; ++r) {
        if (children[r] != done) continue;
        status[r] = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
        --running;
        if (status[r] != 0 && !failed) {
          failed = true;
          failed_at = std::chrono::steady_clock::now();
        }
      }
      continue;
    }
    if (done < 0 && errno != EINTR) break;
    auto now = std::chrono::steady_clock::now();
    bool timed_out = now - start > std::chrono::seconds(o.timeout_s);
    bool peer_failed = failed && now - failed_at > std::chrono::seconds(15);
    if (!killed && (timed_out || peer_failed)) {
      std::fprintf(stderr, "nccl_collectives: %s; stopping the other ranks\n",
                   timed_out ? "time limit reached" : "a rank failed");
      for (int r = 0; r < o.ranks; ++r) {
        if (children[r] > 0 && status[r] < 0) ::kill(children[r], SIGTERM);
      }
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::string exits;
  bool all_ok = true;
  for (int r = 0; r < o.ranks; ++r) {
    exits += (r ? "," : "") + std::to_string(status[r]);
    all_ok = all_ok && status[r] == 0;
  }
  std::printf("nccl_ranks=%d\nnccl_comm_id=%s\nrank_exit=%s\n", o.ranks, comm_id.c_str(), exits.c_str());
  return all_ok ? 0 : 1;
}

int runRank(const Options& o) {
  const int nranks = o.ranks;
  const int rank = o.rank < 0 ? 0 : o.rank;
  if (nranks > 1) {
    g_prefix = "rank" + std::to_string(rank) + ".";
    g_who = "rank " + std::to_string(rank) + ": ";
  }

  std::vector<size_t> sizes;
  const size_t unit = 4 * static_cast<size_t>(nranks);
  size_t largest = 0;
  for (size_t s : o.sizes) {
    size_t rounded = s / unit * unit;
    if (rounded == 0) usage("size " + std::to_string(s) + " is below 4 bytes per rank");
    sizes.push_back(rounded);
    if (rounded > largest) largest = rounded;
  }

  int device_count = 0;
  CK(cudaGetDeviceCount(&device_count));
  const bool shared_gpu = nranks > 1 && device_count < nranks;
  const int device = shared_gpu ? 0 : rank;
  if (shared_gpu) {
    // NCCL reads these at its first call, below.
    std::string host_id = "gpuxray-nccl-example-" + std::to_string(getppid()) + "-rank" + std::to_string(rank);
    setenv("NCCL_HOSTID", host_id.c_str(), 1);
    setenv("NCCL_NET", "Socket", 0);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    setenv("NCCL_IB_DISABLE", "1", 0);
    setenv("NCCL_P2P_DISABLE", "1", 0);
    setenv("NCCL_SHM_DISABLE", "1", 0);
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    setenv("NCCL_MNNVL_ENABLE", "0", 0);
  }
  CK(cudaSetDevice(device));
  CK(cudaFree(nullptr));

  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* send = nullptr;
  void* recv = nullptr;
  CK(cudaMalloc(&send, largest));
  CK(cudaMalloc(&recv, largest));
  CK(cudaMemset(send, 0, largest));
  CK(cudaMemset(recv, 0, largest));

  ncclComm_t comm = nullptr;
  if (nranks == 1) {
    NK(ncclCommInitAll(&comm, 1, &device));
  } else {
    ncclUniqueId id;
    NK(ncclGetUniqueId(&id));  // from NCCL_COMM_ID: the same on every rank
    NK(ncclCommInitRank(&comm, nranks, id, rank));
  }
  int version = 0;
  NK(ncclGetVersion(&version));

  std::map<std::string, uint64_t> calls;
  uint64_t collectives = 0;
  uint64_t p2p = 0;
  const int next = (rank + 1) % nranks;
  const int previous = (rank + nranks - 1) % nranks;
  auto iteration = [&] {
    for (size_t bytes : sizes) {
      const size_t floats = bytes / sizeof(float);
      for (const auto& c : o.colls) {
        if (c == "AllReduce") {
          NK(ncclAllReduce(send, recv, floats, ncclFloat, ncclSum, comm, stream));
        } else if (c == "AllGather") {
          NK(ncclAllGather(send, recv, floats / nranks, ncclFloat, comm, stream));
        } else if (c == "ReduceScatter") {
          NK(ncclReduceScatter(send, recv, floats / nranks, ncclFloat, ncclSum, comm, stream));
        } else {
          NK(ncclBroadcast(send, recv, floats, ncclFloat, 0, comm, stream));
        }
        ++calls[c];
        ++collectives;
      }
      if (o.p2p) {
        NK(ncclGroupStart());
        NK(ncclSend(send, floats, ncclFloat, next, comm, stream));
        NK(ncclRecv(recv, floats, ncclFloat, previous, comm, stream));
        NK(ncclGroupEnd());
        ++calls["Send"];
        ++calls["Recv"];
        p2p += 2;
      }
    }
  };

  for (int i = 0; i < o.warmup; ++i) iteration();
  CK(cudaStreamSynchronize(stream));

  cudaEvent_t begin, end;
  CK(cudaEventCreate(&begin));
  CK(cudaEventCreate(&end));
  auto wall_start = std::chrono::steady_clock::now();
  CK(cudaEventRecord(begin, stream));
  for (int i = 0; i < o.iters; ++i) iteration();
  CK(cudaEventRecord(end, stream));
  CK(cudaEventSynchronize(end));
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  float event_ms = 0;
  CK(cudaEventElapsedTime(&event_ms, begin, end));
  ncclResult_t async_error = ncclSuccess;
  NK(ncclCommGetAsyncError(comm, &async_error));
  if (async_error != ncclSuccess) {
    std::fprintf(stderr, "nccl_collectives: %sasynchronous NCCL error: %s\n", g_who.c_str(),
                 ncclGetErrorString(async_error));
    return 1;
  }

  std::string size_list;
  for (size_t s : sizes) size_list += (size_list.empty() ? "" : ",") + std::to_string(s);
  emit("nccl_version=%d", version);
  emit("nccl_version_string=%d.%d.%d", version / 10000, version / 100 % 100, version % 100);
  emit("nranks=%d", nranks);
  emit("rank=%d", rank);
  emit("cuda_device=%d", device);
  emit("shared_gpu=%d", shared_gpu ? 1 : 0);
  emit("sizes=%s", size_list.c_str());
  emit("iterations=%d", o.iters);
  emit("warmup=%d", o.warmup);
  for (const auto& [func, count] : calls) emit("nccl_calls func=%s count=%llu", func.c_str(), static_cast<unsigned long long>(count));
  emit("nccl_collectives_launched=%llu", static_cast<unsigned long long>(collectives));
  emit("nccl_p2p_launched=%llu", static_cast<unsigned long long>(p2p));
  emit("nccl_ops_launched=%llu", static_cast<unsigned long long>(collectives + p2p));
  emit("loop_seconds=%.6f", event_ms / 1e3);
  emit("loop_wall_seconds=%.6f", wall);
  const int all_iterations = o.iters + o.warmup;
  const double timed_ops =
      all_iterations > 0 ? static_cast<double>(collectives + p2p) * o.iters / all_iterations : 0.0;
  emit("ops_per_second=%.1f", wall > 0 ? timed_ops / wall : 0.0);

  // Finalize first: NCCL then tells the profiler plugin the communicator is done.
  NK(ncclCommFinalize(comm));
  NK(ncclCommDestroy(comm));
  CK(cudaEventDestroy(begin));
  CK(cudaEventDestroy(end));
  CK(cudaFree(send));
  CK(cudaFree(recv));
  CK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parseOptions(argc, argv);
  if (o.ranks > 1 && o.rank < 0) return runRanks(o, argc, argv);
  return runRank(o);
}
