# Read by cpack once per generator: the .deb installs under /usr, the tarball is relative to its
# top folder (gpuxray-VERSION-linux-ARCH/bin/gpuxray, ...), so it can be unpacked anywhere.
if(CPACK_GENERATOR STREQUAL "DEB")
  set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
else()
  set(CPACK_PACKAGING_INSTALL_PREFIX "")
endif()
