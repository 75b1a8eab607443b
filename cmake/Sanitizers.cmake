# GPUXRAY_SANITIZE=ON builds all C and C++ code, tests included, with ASan and UBSan; CI runs the
# tests so. (CUDA sources are left alone: nvcc does not take these flags.)
if(GPUXRAY_SANITIZE)
  set(sanitizer_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${sanitizer_flags}>")
  add_link_options(${sanitizer_flags})
  # -O1, as the sanitizers' authors advise: reports stay exact and the build is a quarter shorter. -g1:
  # the reports need only line tables, and full debug information costs a fifth of the compile time.
  foreach(language C CXX)
    string(REPLACE "-O2" "-O1" CMAKE_${language}_FLAGS_RELWITHDEBINFO "${CMAKE_${language}_FLAGS_RELWITHDEBINFO}")
    string(REPLACE "-g" "-g1" CMAKE_${language}_FLAGS_RELWITHDEBINFO "${CMAKE_${language}_FLAGS_RELWITHDEBINFO}")
  endforeach()
endif()

# Sources that are not ours to check (protoc's generated classes, Catch2's runner) compile without
# the sanitizers, which multiply their compile time by five; the code that calls them is still checked.
function(gpuxray_without_sanitizers)
  if(GPUXRAY_SANITIZE)
    set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS -fno-sanitize=all)
  endif()
endfunction()
