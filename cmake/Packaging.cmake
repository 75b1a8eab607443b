# Installing and the release packages (scripts/package.sh): a .deb and a relocatable .tar.gz with
# the same tree — bin/gpuxray, lib/gpuxray/libgpuxray_inject.so (where `run` looks, ../lib/gpuxray
# from the binary), share/doc/gpuxray (README, ARCHITECTURE, docs/, the examples' sources).
#
# GPUXRAY_PORTABLE (top-level option) links for other distributions of the same architecture, needing only glibc from
# the machine (glibc 2.36 or newer: the build's, Debian 12's, bounds the symbol versions):
# - libgpuxray_inject.so, loaded into jobs that bring their own libstdc++, links libstdc++, libgcc
#   and libzstd statically (their symbols stay hidden by the version script and --exclude-libs);
# - gpuxray's libraries (libstdc++, libgcc_s, protobuf, fmt, yaml-cpp, simdjson, zstd, zlib) are
#   copied into lib/gpuxray/runtime and found through an RPATH relative to the binary ($ORIGIN),
#   which the loader searches before LD_LIBRARY_PATH and the system, so older or absent system
#   copies do not matter. (Debian ships no static fmt or simdjson, so gpuxray cannot be static.)
include(GNUInstallDirs)
set(gpuxray_library_dir lib/gpuxray)
set(gpuxray_runtime_dir ${gpuxray_library_dir}/runtime)

install(TARGETS gpuxray RUNTIME DESTINATION bin)
if(GPUXRAY_CAPTURE)
  install(TARGETS gpuxray_inject LIBRARY DESTINATION ${gpuxray_library_dir})
endif()
install(FILES README.md ARCHITECTURE.md DESTINATION share/doc/gpuxray)
install(DIRECTORY docs/ DESTINATION share/doc/gpuxray/docs)
install(DIRECTORY examples/ DESTINATION share/doc/gpuxray/examples)

if(GPUXRAY_PORTABLE)
  set_target_properties(gpuxray PROPERTIES INSTALL_RPATH "$ORIGIN/../${gpuxray_runtime_dir}")
  # DT_RPATH, not DT_RUNPATH: searched before LD_LIBRARY_PATH, and for the libraries' own dependencies.
  target_link_options(gpuxray PRIVATE -Wl,--disable-new-dtags)
  if(GPUXRAY_CAPTURE)
    target_link_options(gpuxray_inject PRIVATE -static-libstdc++ -static-libgcc)
  endif()
  install(CODE "
    file(GET_RUNTIME_DEPENDENCIES EXECUTABLES \"$<TARGET_FILE:gpuxray>\"
         RESOLVED_DEPENDENCIES_VAR gpuxray_dependencies
         UNRESOLVED_DEPENDENCIES_VAR gpuxray_unresolved
         POST_EXCLUDE_REGEXES \"/(libc|libm|libdl|libpthread|librt|libresolv|ld-linux[^/]*)\\\\.so[^/]*$\")
    if(gpuxray_unresolved)
      message(FATAL_ERROR \"gpuxray needs libraries that cannot be found: \${gpuxray_unresolved}\")
    endif()
    file(INSTALL \${gpuxray_dependencies} DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${gpuxray_runtime_dir}\"
         FOLLOW_SYMLINK_CHAIN)")
endif()

set(CPACK_PACKAGE_NAME gpuxray)
set(CPACK_PACKAGE_VENDOR gpuxray)
set(CPACK_PACKAGE_CONTACT "gpuxray developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_STRIP_FILES ON)
set(CPACK_SYSTEM_NAME linux-${CMAKE_SYSTEM_PROCESSOR})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# Everything but glibc is inside the package. GCC 12's libstdc++ and unwinder (linked into the library,
# bundled for gpuxray) take arc4random and _dl_find_object, so glibc 2.36, Debian 12's, is the least;
# scripts/check_package.sh checks every ELF file of the package against it.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6 (>= 2.36)")
set(CPACK_PROJECT_CONFIG_FILE ${PROJECT_SOURCE_DIR}/cmake/CPackPerGenerator.cmake)
include(CPack)
