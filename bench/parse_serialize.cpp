// The baseline for the tool's own cost: a bare protobuf parse plus serialize of a model file, nothing else.
//
//   dwdeconv-parse-serialize IN.onnx OUT.onnx
// Compare its wall time and peak RSS (/usr/bin/time -v) with dwdeconv-rewrite IN.onnx -o OUT.onnx.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/onnx_pb.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: dwdeconv-parse-serialize IN.onnx OUT.onnx\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  onnx::ModelProto model;
  {
    const int fd = ::open(argv[1], O_RDONLY);
    if (fd < 0) return 3;
    google::protobuf::io::FileInputStream file(fd);
    google::protobuf::io::CodedInputStream coded(&file);
    coded.SetTotalBytesLimit(INT_MAX);
    if (!model.ParseFromCodedStream(&coded)) return 3;
    ::close(fd);
  }
  const auto parsed = std::chrono::steady_clock::now();
  {
    const int fd = ::open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return 3;
    google::protobuf::io::FileOutputStream file(fd);
    if (!model.SerializeToZeroCopyStream(&file) || !file.Flush()) return 3;
    ::close(fd);
  }
  const auto done = std::chrono::steady_clock::now();
  std::printf("parse %.3f s, serialize+write %.3f s, total %.3f s\n", std::chrono::duration<double>(parsed - start).count(),
              std::chrono::duration<double>(done - parsed).count(), std::chrono::duration<double>(done - start).count());
  return 0;
}
