# GPUXRAY_SANITIZE=ON builds all C and C++ code, tests included, with ASan and UBSan; CI runs the
# tests so. (CUDA sources are left alone: nvcc does not take these flags.)
if(GPUXRAY_SANITIZE)
  set(sanitizer_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${sanitizer_flags}>")
  add_link_options(${sanitizer_flags})
  # -O1, as the sanitizers' authors advise: reports stay exact and the build is a quarter shorter.
  foreach(language C CXX)
    string(REPLACE "-O2" "-O1" CMAKE_${language}_FLAGS_RELWITHDEBINFO "${CMAKE_${language}_FLAGS_RELWITHDEBINFO}")
  endforeach()
endif()
