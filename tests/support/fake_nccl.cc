// A stand-in for libnccl.so.2 that only tells its version (NCCL 2.21.5), for the test of
// loadedNcclVersion(): loaded privately (RTLD_LOCAL), as PyTorch's wheels load NCCL.

extern "C" __attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  if (version == nullptr) return 4;  // ncclInvalidArgument
  *version = 22105;
  return 0;
}
