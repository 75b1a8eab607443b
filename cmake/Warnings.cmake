# Every project target links gpuxray_warnings; generated code does not. C++ only.
add_library(gpuxray_warnings INTERFACE)
target_compile_options(gpuxray_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
  -Wunused -Woverloaded-virtual -Wconversion -Wsign-conversion -Wdouble-promotion -Wformat=2
  -Wimplicit-fallthrough -Werror=return-type>)
