# Install rules shared by every package, and CPack's settings. `cpack -G DEB` in the build directory builds
# dwdeconv-rewrite_<version>-1_<arch>.deb, whose Depends dpkg-shlibdeps (Debian package dpkg-dev) derives from
# the shared libraries the binary links: libonnx, libprotobuf, libxnnpack, libpthreadpool, libspdlog, libfmt, ...
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs FILES_MATCHING PATTERN "*.md")

set(DWDECONV_PACKAGE_MAINTAINER "dwdeconv-rewrite maintainers <maintainers@users.noreply.a-seed-8d2ff7ae.example>"
    CACHE STRING "Maintainer field of the .deb")

set(CPACK_VERBATIM_VARIABLES ON)  # write the values below into CPackConfig.cmake as they are
set(CPACK_PACKAGE_NAME ${PROJECT_NAME})
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${DWDECONV_PACKAGE_MAINTAINER})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "rewrite depthwise ConvTranspose nodes in ONNX models for XNNPACK")
# The .deb's long description: one paragraph, lines under 80 columns (dpkg indents each by one space).
string(JOIN "\n" CPACK_PACKAGE_DESCRIPTION
  "Replaces each clean xs depthwise ConvTranspose in an ONNX model with s*s"
  "stride-1 depthwise Convs, a Concat and a DepthToSpace, which XNNPACK-based"
  "runtimes (ExecuTorch, TFLite's XNNPACK delegate, ONNX Runtime's XNNPACK"
  "execution provider) run much faster. It verifies the result on XNNPACK and"
  "gates CI with --check.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)  # the RelWithDebInfo binary is mostly debug info
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # <name>_<version>-<release>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
