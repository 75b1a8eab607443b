#include "inject/device_query.h"

#include <dlfcn.h>

#include "inject/symbol_binding.h"

namespace gpuxray::inject {

DriverApi loadedDriverApi() {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  // The handle stays open: libcuda is loaded for the life of the process anyway.
  return library != nullptr ? driverApiOf(library) : DriverApi{};
}

DriverApi driverApiOf(void* library) {
  DriverApi driver;
  // A missing function stays null and its query is skipped.
  std::string missing;
  auto bind = [&](const char* symbol, auto& slot) { bindSymbol(library, symbol, slot, missing); };
  bind("cuDeviceGetCount", driver.deviceGetCount);
  bind("cuDeviceGet", driver.deviceGet);
  bind("cuDeviceGetAttribute", driver.deviceGetAttribute);
  bind("cuDeviceGetName", driver.deviceGetName);
  bind("cuDeviceGetUuid_v2", driver.deviceGetUuid);
  bind("cuDeviceTotalMem_v2", driver.deviceTotalMem);
  bind("cuDeviceGetPCIBusId", driver.deviceGetPCIBusId);
  bind("cuDriverGetVersion", driver.driverGetVersion);
  bind("cuCtxGetDevice", driver.ctxGetDevice);
  return driver;
}

uint32_t currentDevice(const DriverApi& driver) {
  CUdevice device = 0;
  if (driver.ctxGetDevice == nullptr || driver.ctxGetDevice(&device) != CUDA_SUCCESS || device < 0) return 0;
  return static_cast<uint32_t>(device);
}

std::vector<format::DeviceProperties> queryDevices(const DriverApi& driver) {
  std::vector<format::DeviceProperties> devices;
  int count = 0;
  if (driver.deviceGetCount == nullptr || driver.deviceGet == nullptr || driver.deviceGetAttribute == nullptr ||
      driver.deviceGetCount(&count) != CUDA_SUCCESS)
    return devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    if (driver.deviceGet(&device, ordinal) != CUDA_SUCCESS) continue;
    auto attribute = [&](CUdevice_attribute which) -> uint32_t {
      int value = 0;
      return driver.deviceGetAttribute(&value, which, device) == CUDA_SUCCESS && value > 0
                 ? static_cast<uint32_t>(value)
                 : 0u;
    };
    format::DeviceProperties d;
    d.device_id = static_cast<uint32_t>(ordinal);
    char text[256] = {};
    if (driver.deviceGetName != nullptr && driver.deviceGetName(text, sizeof text - 1, device) == CUDA_SUCCESS)
      d.name = text;
    CUuuid uuid{};
    if (driver.deviceGetUuid != nullptr && driver.deviceGetUuid(&uuid, device) == CUDA_SUCCESS)
      d.uuid.assign(uuid.bytes, sizeof uuid.bytes);
    char bus_id[64] = {};
    if (driver.deviceGetPCIBusId != nullptr && driver.deviceGetPCIBusId(bus_id, sizeof bus_id - 1, device) == CUDA_SUCCESS)
      d.pci_bus_id = bus_id;
    size_t memory = 0;
    if (driver.deviceTotalMem != nullptr && driver.deviceTotalMem(&memory, device) == CUDA_SUCCESS) d.memory_bytes = memory;
    d.compute_major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    d.compute_minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    d.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    d.max_threads_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    d.warp_size = attribute(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    d.max_warps_per_sm = d.warp_size > 0 ? d.max_threads_per_sm / d.warp_size : 0;
    d.max_blocks_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
    d.registers_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    d.registers_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    d.shared_memory_per_sm = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    d.shared_memory_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    d.shared_memory_per_block_optin = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    d.reserved_shared_memory_per_block = attribute(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
    d.core_clock_khz = attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    d.memory_clock_khz = attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    d.memory_bus_width_bits = attribute(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    d.l2_cache_bytes = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    d.max_threads_per_block = attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    d.numa_node = attribute(CU_DEVICE_ATTRIBUTE_NUMA_ID);
    d.max_registers_per_thread = 255;
    // Double data rate: two transfers per memory clock over the whole bus.
    d.memory_bandwidth_bytes_per_s =
        static_cast<uint64_t>(d.memory_clock_khz) * 1000u * 2u * d.memory_bus_width_bits / 8u;
    devices.push_back(std::move(d));
  }
  return devices;
}

}  // namespace gpuxray::inject
