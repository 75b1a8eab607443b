// Device properties from the CUDA driver: everything occupancy, waves and bandwidth need,
// including what CUPTI's DEVICE record lacks (opt-in and reserved shared memory per block).
#pragma once

#include <cuda.h>

#include <vector>

#include "proto/records.h"

namespace gpuxray::inject {

// The driver functions used, as pointers: the real ones come from the libcuda the process already
// loaded; tests pass fakes.
struct DriverApi {
  CUresult (*deviceGetCount)(int* count) = nullptr;
  CUresult (*deviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*deviceGetAttribute)(int* value, CUdevice_attribute attribute, CUdevice device) = nullptr;
  CUresult (*deviceGetName)(char* name, int length, CUdevice device) = nullptr;
  CUresult (*deviceGetUuid)(CUuuid* uuid, CUdevice device) = nullptr;
  CUresult (*deviceTotalMem)(size_t* bytes, CUdevice device) = nullptr;
  CUresult (*deviceGetPCIBusId)(char* bus_id, int length, CUdevice device) = nullptr;
  CUresult (*driverGetVersion)(int* version) = nullptr;
  CUresult (*ctxGetDevice)(CUdevice* device) = nullptr;
};

// The device of the calling thread's current context, 0 when there is none.
uint32_t currentDevice(const DriverApi& driver);

// The driver of this process, if it has loaded libcuda; all pointers null otherwise.
DriverApi loadedDriverApi();
// The driver functions of an opened libcuda (`gpuxray doctor` opens one itself).
DriverApi driverApiOf(void* library);

// Every visible device; empty if the driver answers nothing (no GPU, not initialized).
std::vector<format::DeviceProperties> queryDevices(const DriverApi& driver);

}  // namespace gpuxray::inject
