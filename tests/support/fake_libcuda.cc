// A stand-in libcuda.so.1 for `gpuxray doctor`'s driver and GPU checks, playing a driver for CUDA
// 13.0 with two H100s. FAKE_CUDA_MODE (read at each call) plays the machines without one:
// "stub" answers cuInit as the toolkit's stub library does, "no-device" as a driver without a
// visible GPU, "old" reports a CUDA 12.4 driver.

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kNotInitialized = 3;
constexpr int kStubLibrary = 34;
constexpr int kNoDevice = 100;
constexpr int kDevices = 2;
// CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, _MINOR and _MULTIPROCESSOR_COUNT.
constexpr int kComputeMajor = 75;
constexpr int kComputeMinor = 76;
constexpr int kMultiprocessors = 16;

std::string_view mode() {
  const char* value = std::getenv("FAKE_CUDA_MODE");
  return value != nullptr ? value : "";
}

bool g_initialized = false;

}  // namespace

#define FAKE_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_CUDA_EXPORT int cuInit(unsigned int) {
  if (mode() == "stub") return kStubLibrary;
  if (mode() == "no-device") return kNoDevice;
  g_initialized = true;
  return kSuccess;
}

FAKE_CUDA_EXPORT int cuDriverGetVersion(int* version) {
  *version = mode() == "old" ? 12040 : 13000;
  return kSuccess;
}

FAKE_CUDA_EXPORT int cuGetErrorName(int error, const char** name) {
  switch (error) {
    case kStubLibrary:
      *name = "CUDA_ERROR_STUB_LIBRARY";
      return kSuccess;
    case kNoDevice:
      *name = "CUDA_ERROR_NO_DEVICE";
      return kSuccess;
    case kNotInitialized:
      *name = "CUDA_ERROR_NOT_INITIALIZED";
      return kSuccess;
    default:
      return kInvalidValue;
  }
}

FAKE_CUDA_EXPORT int cuDeviceGetCount(int* count) {
  if (!g_initialized) return kNotInitialized;
  *count = kDevices;
  return kSuccess;
}

FAKE_CUDA_EXPORT int cuDeviceGet(int* device, int ordinal) {
  if (ordinal < 0 || ordinal >= kDevices) return kInvalidValue;
  *device = ordinal;
  return kSuccess;
}

FAKE_CUDA_EXPORT int cuDeviceGetName(char* name, int length, int) {
  std::strncpy(name, "NVIDIA H100 80GB HBM3", static_cast<size_t>(length));
  return kSuccess;
}

FAKE_CUDA_EXPORT int cuDeviceGetAttribute(int* value, int attribute, int) {
  switch (attribute) {
    case kComputeMajor:
      *value = 9;
      return kSuccess;
    case kComputeMinor:
      *value = 0;
      return kSuccess;
    case kMultiprocessors:
      *value = 132;
      return kSuccess;
    default:
      *value = 0;
      return kSuccess;
  }
}
