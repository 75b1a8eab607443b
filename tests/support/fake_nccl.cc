// A stand-in for libnccl.so.2 that only tells its version (NCCL 2.21.5 unless FAKE_NCCL_VERSION
// says otherwise), for the test of loadedNcclVersion(): loaded privately (RTLD_LOCAL), as PyTorch's
// wheels load NCCL; and for `gpuxray doctor`'s NCCL check.

#ifndef FAKE_NCCL_VERSION
#define FAKE_NCCL_VERSION 22105
#endif

extern "C" __attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  if (version == nullptr) return 4;  // ncclInvalidArgument
  *version = FAKE_NCCL_VERSION;
  return 0;
}
