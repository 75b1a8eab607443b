// CUDA (and HIP) graph capture: between cudaStreamBeginCapture and cudaStreamEndCapture a thread's
// launches are recorded into a graph, not run, so the GPU waits without the job being slow. The
// importer marks each capture as a range of this domain on the capturing thread; the time
// breakdown leaves the GPU's idle time inside captures out of the time it covers.
#pragma once

#include <string_view>

namespace gpuxray::model {

inline constexpr std::string_view kGraphCaptureDomain = "graph capture";

// cudaStreamBeginCapture, hipStreamBeginCapture_spt, ...
inline bool isBeginCapture(std::string_view api) {
  return api.find("StreamBeginCapture") != std::string_view::npos;
}
inline bool isEndCapture(std::string_view api) {
  return api.find("StreamEndCapture") != std::string_view::npos;
}
// cudaGraphLaunch, hipGraphLaunch: a replay; its kernels carry its correlation id.
inline bool isGraphLaunch(std::string_view api) {
  return api.find("GraphLaunch") != std::string_view::npos;
}

}  // namespace gpuxray::model
