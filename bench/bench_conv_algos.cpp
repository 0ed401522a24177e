// Which cuDNN algorithms exist for the example CNN's convolutions, and how fast each is: cuDNN's own search
// (cudnnFind*AlgorithmEx, which runs every algorithm on real buffers) for the forward pass and both backward
// passes, in NCHW and NHWC layout, with FMA-only and tensor-op (TF32) math. It answers "would another layout or
// math mode make the convolutions faster?" before any of minidl's code is changed for it. Prints one line per
// candidate that ran, fastest first.
#include <cudnn.h>
#include <minidl/minidl.h>
#include <minidl/run_main.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace {

void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: %s\n", what, cudnnGetErrorString(s));
    std::exit(1);
  }
}
void check(cudaError_t s, const char* what) {
  if (s != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(s));
    std::exit(1);
  }
}

struct Conv {
  const char* name;
  int c, h, w, k;  // input channels and size, output channels; 3x3, stride 1, no padding
};

struct Result {
  int algo;
  float ms;
  std::size_t bytes;
  cudnnMathType_t math;
};

template <class Perf> std::vector<Result> successful(const Perf* r, int n) {
  std::vector<Result> out;
  for (int i = 0; i < n; ++i) {
    if (r[i].status == CUDNN_STATUS_SUCCESS) out.push_back({static_cast<int>(r[i].algo), r[i].time, r[i].memory, r[i].mathType});
  }
  return out;
}

void print(const char* conv, int batch, const char* layout, const char* math, const char* pass,
           const std::vector<Result>& results) {
  for (const Result& r : results) {
    std::printf("%-5s b%-4d %-4s %-8s %-15s algo %d  %8.1f us  workspace %8.2f MB  %s\n", conv, batch, layout, math,
                pass, r.algo, 1000.0 * r.ms, static_cast<double>(r.bytes) / (1 << 20),
                r.math == CUDNN_TENSOR_OP_MATH ? "tensor-op" : r.math == CUDNN_FMA_MATH ? "fma" : "default");
  }
}

}  // namespace

/// main's body; main runs it under minidl::run_main.
int run_program() {
  if (!minidl::cuda::is_available()) {
    std::printf("bench_conv_algos: skipped, no usable CUDA device\n");
    return 0;
  }
  cudnnHandle_t h;
  check(cudnnCreate(&h), "cudnnCreate");
  const std::size_t ws_bytes = std::size_t{512} << 20;
  void* ws = nullptr;
  check(cudaMalloc(&ws, ws_bytes), "cudaMalloc workspace");
  const Conv convs[] = {{"conv1", 1, 28, 28, 32}, {"conv2", 32, 26, 26, 64}};
  for (const Conv& cv : convs) {
    for (int n : {64, 256}) {
      const int p = cv.h - 2, q = cv.w - 2;
      minidl::manual_seed(0);
      const minidl::Device dev("cuda");
      minidl::Tensor x = minidl::randn({n * cv.c * cv.h * cv.w}, dev), w = minidl::randn({cv.k * cv.c * 9}, dev);
      minidl::Tensor y = minidl::randn({n * cv.k * p * q}, dev), dx = minidl::randn({n * cv.c * cv.h * cv.w}, dev);
      minidl::Tensor dw = minidl::randn({cv.k * cv.c * 9}, dev);
      for (cudnnTensorFormat_t format : {CUDNN_TENSOR_NCHW, CUDNN_TENSOR_NHWC}) {
        for (cudnnMathType_t math : {CUDNN_FMA_MATH, CUDNN_TENSOR_OP_MATH}) {
          const char* layout = format == CUDNN_TENSOR_NCHW ? "NCHW" : "NHWC";
          const char* math_name = math == CUDNN_FMA_MATH ? "fma" : "tf32";
          cudnnTensorDescriptor_t xd, yd;
          cudnnFilterDescriptor_t wd;
          cudnnConvolutionDescriptor_t cd;
          check(cudnnCreateTensorDescriptor(&xd), "desc");
          check(cudnnCreateTensorDescriptor(&yd), "desc");
          check(cudnnCreateFilterDescriptor(&wd), "desc");
          check(cudnnCreateConvolutionDescriptor(&cd), "desc");
          check(cudnnSetTensor4dDescriptor(xd, format, CUDNN_DATA_FLOAT, n, cv.c, cv.h, cv.w), "x desc");
          check(cudnnSetTensor4dDescriptor(yd, format, CUDNN_DATA_FLOAT, n, cv.k, p, q), "y desc");
          check(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, format, cv.k, cv.c, 3, 3), "w desc");
          check(cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT), "conv");
          check(cudnnSetConvolutionMathType(cd, math), "math");
          int got = 0;
          cudnnConvolutionFwdAlgoPerf_t fr[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
          check(cudnnFindConvolutionForwardAlgorithmEx(h, xd, x.data_ptr<float>(), wd, w.data_ptr<float>(), cd, yd,
                                                       y.data_ptr<float>(), CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fr,
                                                       ws, ws_bytes),
                "find forward");
          print(cv.name, n, layout, math_name, "forward", successful(fr, got));
          if (cv.c > 1) {  // the first layer's input gradient is never needed
            cudnnConvolutionBwdDataAlgoPerf_t dr[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
            check(cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, w.data_ptr<float>(), yd, y.data_ptr<float>(), cd,
                                                              xd, dx.data_ptr<float>(),
                                                              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, dr, ws,
                                                              ws_bytes),
                  "find backward data");
            print(cv.name, n, layout, math_name, "backward-data", successful(dr, got));
          }
          cudnnConvolutionBwdFilterAlgoPerf_t wr[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
          check(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xd, x.data_ptr<float>(), yd, y.data_ptr<float>(), cd,
                                                              wd, dw.data_ptr<float>(),
                                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, wr, ws,
                                                              ws_bytes),
                "find backward filter");
          print(cv.name, n, layout, math_name, "backward-weight", successful(wr, got));
          cudnnDestroyTensorDescriptor(xd);
          cudnnDestroyTensorDescriptor(yd);
          cudnnDestroyFilterDescriptor(wd);
          cudnnDestroyConvolutionDescriptor(cd);
        }
      }
    }
  }
  check(cudaFree(ws), "cudaFree");
  cudnnDestroy(h);
  return 0;
}

int main() {
  return minidl::run_main("bench_conv_algos", [&] { return run_program(); });
}
