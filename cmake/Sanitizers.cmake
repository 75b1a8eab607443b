# GPUXRAY_SANITIZE=ON builds all code, tests included, with ASan and UBSan; CI runs the tests so.
if(GPUXRAY_SANITIZE)
  set(sanitizer_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_compile_options(${sanitizer_flags})
  add_link_options(${sanitizer_flags})
endif()
