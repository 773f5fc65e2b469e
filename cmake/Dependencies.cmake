# Every dependency is a Debian bookworm package (docs/development.md, "Dependencies").
find_package(Protobuf REQUIRED)           # libprotobuf-dev, protobuf-compiler
find_package(ONNX REQUIRED)               # libonnx-dev: targets onnx, onnx_proto
find_package(CLI11 REQUIRED)              # libcli11-dev
find_package(spdlog REQUIRED)             # libspdlog-dev
find_package(nlohmann_json 3 REQUIRED)    # nlohmann-json3-dev (header-only): the report and the runtimes' protocol
find_package(Threads REQUIRED)

# libxnnpack-dev and libpthreadpool-dev ship no CMake config.
find_path(XNNPACK_INCLUDE_DIR xnnpack.h REQUIRED)
find_library(XNNPACK_LIBRARY XNNPACK REQUIRED)
find_library(PTHREADPOOL_LIBRARY pthreadpool REQUIRED)
add_library(dwdeconv_xnnpack INTERFACE)
target_include_directories(dwdeconv_xnnpack INTERFACE ${XNNPACK_INCLUDE_DIR})
target_link_libraries(dwdeconv_xnnpack INTERFACE ${XNNPACK_LIBRARY} ${PTHREADPOOL_LIBRARY} Threads::Threads)

if(DWDECONV_BUILD_TESTS)
  find_package(Catch2 2 REQUIRED)         # catch2 (v2)
  list(APPEND CMAKE_MODULE_PATH ${Catch2_DIR})  # for Catch.cmake (catch_discover_tests)
endif()
