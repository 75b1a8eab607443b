// Loads the injection library the way the CUDA driver does (dlopen, then InitializeInjection) and
// exits: what happens inside a real job's cuInit, minus the GPU.
//
//   initialize_injection_probe LIBRARY [CALLS]

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  auto initialize = reinterpret_cast<int (*)()>(dlsym(library, "InitializeInjection"));
  if (initialize == nullptr) return 4;
  int calls = argc > 2 ? std::atoi(argv[2]) : 1;
  for (int i = 0; i < calls; ++i) {
    if (initialize() != 1) return 5;
  }
  return 0;
}
