// Bad arguments to public entry points: each is rejected with the documented exception type (exactly), and the
// message names the op, the argument, and the expected and found values.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "minidl/data/idx.h"
#include "test_util.h"

using namespace minidl;
using minidl::testing::random_tensor;
namespace F = minidl::nn::functional;

namespace {

Tensor rf(const Shape& s) { return random_tensor(s, kFloat32); }
Tensor ri(const Shape& s, std::int64_t hi = 10) {
  return uniform(s, 0.0, static_cast<double>(hi), kFloat64).to(kInt64);
}

}  // namespace

TEST(BadInput, ElementwiseOps) {
  const Tensor a = rf({2, 3});
  // Mixed dtypes promote (result_type); what PyTorch rejects stays an error.
  EXPECT_ERROR(TypeError, sub(ri({2, 3}).to(kBool), ri({2, 3}).to(kBool)), "sub", "bool");
  EXPECT_ERROR(TypeError, neg(ri({2, 3}).to(kBool)), "neg", "bool");
  EXPECT_ERROR(ValueError, mul(a, rf({4})), "mul", "cannot be broadcast", "[2, 3]", "[4]");
  EXPECT_ERROR(TypeError, leaky_relu(ri({3})), "leaky_relu", "expected a floating tensor", "int64");
  EXPECT_ERROR(ValueError, relu(Tensor()), "relu", "'self'", "undefined");
  EXPECT_ERROR(ValueError, add(a, Tensor()), "add", "'other'", "undefined");
}

TEST(BadInput, MatmulAndShapes) {
  EXPECT_ERROR(ValueError, matmul(rf({}), rf({3, 2})), "matmul", "at least 1 dimension", "[]");
  EXPECT_ERROR(ValueError, matmul(rf({2, 3}), rf({4, 2})), "matmul", "cannot be multiplied", "2x3", "4x2");
  EXPECT_ERROR(ValueError, matmul(rf({2, 2, 3}), rf({5, 3, 2})), "matmul", "batch dimensions", "[2, 2, 3]",
               "[5, 3, 2]");
  EXPECT_ERROR(TypeError, matmul(ri({2, 2}).to(kBool), ri({2, 2}).to(kBool)), "matmul", "bool");
  const Tensor a = rf({2, 3});
  EXPECT_ERROR(ValueError, a.reshape({-2, 3}), "reshape", "invalid size -2");
  EXPECT_ERROR(ValueError, a.reshape({-1, -1}), "reshape", "only one dimension can be inferred");
  EXPECT_ERROR(ValueError, a.reshape({4, 2}), "reshape", "[4, 2]", "size 6");
  EXPECT_ERROR(ValueError, a.reshape({-1, 4}), "reshape", "[-1, 4]", "size 6");
  EXPECT_ERROR(IndexError, a.transpose(0, 2), "transpose", "dimension out of range", "2");
  EXPECT_ERROR(IndexError, a.unsqueeze(4), "unsqueeze", "4");
  EXPECT_ERROR(ValueError, rf({2, 3, 4}).flatten(2, 1), "flatten", "start_dim (2)", "end_dim (1)");
  EXPECT_ERROR(IndexError, a.size(2), "size", "[-2, 1]", "2");
  EXPECT_ERROR(IndexError, a.size(-3), "size", "-3");
  EXPECT_ERROR(IndexError, rf({}).size(0), "size", "0-d tensor", "dimension 0");
}

TEST(BadInput, Reductions) {
  const Tensor a = rf({2, 3});
  EXPECT_ERROR(TypeError, ri({2, 3}).mean(), "mean", "int64");
  EXPECT_ERROR(IndexError, a.sum({5}), "sum", "dimension out of range", "5");
  EXPECT_ERROR(IndexError, a.mean({-3}), "mean", "-3");
  EXPECT_ERROR(ValueError, a.sum({1, -1}), "sum", "appears twice");
  EXPECT_ERROR(ValueError, std::get<0>(rf({2, 0}).max(1)), "max", "empty dimension", "[2, 0]");
  EXPECT_ERROR(ValueError, rf({0, 3}).amax({0}), "amax", "empty dimension", "[0, 3]");
  EXPECT_ERROR(TypeError, softmax(ri({2, 3}), 1), "softmax", "int64");
  EXPECT_ERROR(IndexError, log_softmax(a, 2), "log_softmax", "2");
  EXPECT_ERROR(ValueError, sum_to(a, {4}), "sum_to", "[2, 3]", "[4]");
}

TEST(BadInput, FactoriesAndConversions) {
  EXPECT_ERROR(ValueError, empty({2, -1}), "[2, -1]", "non-negative", "-1");
  EXPECT_ERROR(ValueError, zeros({std::int64_t{1} << 40, std::int64_t{1} << 40}), "overflows 64 bits");
  EXPECT_ERROR(ValueError, arange(0.0, 5.0, 0.0), "arange", "step must be nonzero");
  EXPECT_ERROR(ValueError, arange(5.0, 0.0, 1.0), "arange", "runs against the step");
  EXPECT_ERROR(ValueError, arange(0.0, std::numeric_limits<double>::infinity(), 1.0), "arange", "finite", "inf");
  EXPECT_ERROR(ValueError, arange(0.0, 1.0, std::nan("")), "arange", "finite", "nan");
  EXPECT_ERROR(ValueError, arange(0.0, 1e300, 1.0), "arange", "more than a tensor can hold");
  EXPECT_ERROR(ValueError, uniform({3}, 1.0, 0.0), "uniform", "low <= high", "low=1", "high=0");
  EXPECT_ERROR(ValueError, uniform({3}, 0.0, std::numeric_limits<double>::infinity()), "uniform", "finite", "inf");
  EXPECT_ERROR(ValueError, from_vector<float>({1, 2, 3}, {2, 2}), "from_vector", "3 values", "[2, 2]");
  EXPECT_ERROR(ValueError, rf({2}).item<float>(), "item", "2 elements");
  EXPECT_ERROR(TypeError, rf({2}).to_vector<double>(), "to_vector", "float32");
  EXPECT_ERROR(TypeError, ri({2}).data_ptr<float>(), "data_ptr", "int64");
  EXPECT_ERROR(ValueError, Device("gpu:0"), "gpu:0");
  EXPECT_ERROR(ValueError, Tensor().requires_grad_(), "requires_grad_", "undefined");
  if (!cuda::is_available()) {
#if MINIDL_CUDA_ENABLED
    // A CUDA build on a machine without a usable driver/GPU: the runtime's own reason, as a CudaError.
    EXPECT_ERROR(CudaError, rf({2}).cuda(), "CUDA error");
#else
    EXPECT_ERROR(TypeError, rf({2}).cuda(), "no CUDA backend");
#endif
  }
}

TEST(BadInput, InPlaceAndAutograd) {
  Tensor a = rf({2, 3});
  EXPECT_ERROR(ValueError, a.add_(rf({3, 3})), "add_", "[3, 3]", "[2, 3]");
  EXPECT_ERROR(TypeError, ri({2, 3}).add_(a), "add_", "float32", "int64");
  EXPECT_ERROR(ValueError, a.copy_(rf({7})), "copy_", "7 elements", "6");
  EXPECT_ERROR(TypeError, ri({2}).requires_grad_(), "requires_grad_", "int64");
  Tensor leaf = random_tensor({3}, kFloat32, true);
  EXPECT_ERROR(AutogradError, leaf.mul_(2.0), "mul_", "leaf tensor that requires grad");
  EXPECT_ERROR(AutogradError, (leaf * 2.0).backward(), "implicitly created", "[3]");
  EXPECT_ERROR(AutogradError, rf({1}).backward(), "does not require grad");
  EXPECT_ERROR(ValueError, (leaf * 2.0).backward(rf({4})), "backward", "[4]", "[3]");
}

TEST(BadInput, IndexSelect) {
  const Tensor a = rf({4, 3});
  EXPECT_ERROR(TypeError, index_select(a, 0, rf({2})), "index_select", "'index'", "int64", "float32");
  EXPECT_ERROR(ValueError, index_select(a, 0, ri({2, 2}, 4)), "index_select", "at most one dimension", "[2, 2]");
  // A 0-d self is one element along dim 0, as in PyTorch.
  EXPECT_ERROR(IndexError, index_select(rf({}), 0, from_vector<std::int64_t>({1}, {1})), "index_select", "index[0] = 1",
               "size 1");
  EXPECT_ERROR(IndexError, index_select(a, 0, from_vector<std::int64_t>({1, 7}, {2})), "index_select", "index[1] = 7",
               "size 4");
  EXPECT_ERROR(IndexError, index_select(a, 1, from_vector<std::int64_t>({-1}, {1})), "index[0] = -1", "size 3");
  EXPECT_ERROR(IndexError, index_select(a, 2, ri({1}, 3)), "index_select", "dimension out of range", "2");
}

TEST(BadInput, Layers) {
  const Tensor x = rf({2, 3, 8, 8}), w = rf({4, 3, 3, 3});
  EXPECT_ERROR(TypeError, F::linear(ri({2, 5}), ri({4, 5})), "linear", "int64");
  EXPECT_ERROR(ValueError, F::linear(rf({2, 5}), rf({4, 6})), "linear", "5 features", "expects 6");
  EXPECT_ERROR(ValueError, F::linear(rf({2, 5}), rf({4, 5}), rf({5})), "linear", "bias", "[4]", "[5]");
  EXPECT_ERROR(ValueError, F::conv2d(rf({3, 8, 8}), w), "conv2d", "(N, C, H, W)", "[3, 8, 8]");
  EXPECT_ERROR(ValueError, F::conv2d(rf({2, 2, 8, 8}), w), "conv2d", "3 input channels", "has 2");
  EXPECT_ERROR(ValueError, F::conv2d(x, w, Tensor(), 0), "conv2d", "stride must be positive", "0");
  EXPECT_ERROR(ValueError, F::conv2d(x, w, Tensor(), 1, -1), "conv2d", "padding must be >= 0", "-1");
  EXPECT_ERROR(ValueError, F::conv2d(x, w, Tensor(), 1, 0, 0), "conv2d", "dilation must be positive");
  EXPECT_ERROR(ValueError, F::conv2d(rf({2, 3, 2, 2}), w), "conv2d", "kernel 3x3", "larger than the padded input 2x2");
  EXPECT_ERROR(ValueError, F::conv2d(rf({0, 3, 8, 8}), w), "conv2d", "batch size must be positive", "0");
  EXPECT_ERROR(ValueError, F::conv2d(x, w, rf({3})), "conv2d", "bias", "[4]", "[3]");
  EXPECT_ERROR(TypeError, F::conv2d(x.to(kFloat64), w), "conv2d", "float64", "float32");
  EXPECT_ERROR(ValueError, F::max_pool2d(x, 0), "max_pool2d", "kernel_size must be positive", "0");
  EXPECT_ERROR(ValueError, F::max_pool2d(x, 2, 2, 2), "max_pool2d", "padding", "at most half of kernel_size");
  EXPECT_ERROR(ValueError, F::max_pool2d(rf({2, 8, 8}), 2), "max_pool2d", "(N, C, H, W)", "[2, 8, 8]");
  EXPECT_ERROR(TypeError, F::avg_pool2d(ri({1, 1, 4, 4}), 2), "avg_pool2d", "int64");
  EXPECT_ERROR(TypeError, F::adaptive_avg_pool2d(ri({1, 1, 4, 4}), 1), "adaptive_avg_pool2d", "int64");
  EXPECT_ERROR(ValueError, F::adaptive_avg_pool2d(x, 3), "adaptive_avg_pool2d", "3x3", "8x8");
  const Tensor mean = rf({3}), var = rand({3}) + 0.5;
  EXPECT_ERROR(ValueError, F::batch_norm(x, mean, var, Tensor(), Tensor(), true, 0.1, -1e-5), "batch_norm", "eps",
               "-1e-05");
  EXPECT_ERROR(ValueError, F::batch_norm(x, mean, var, Tensor(), Tensor(), true, 1.5), "batch_norm", "momentum",
               "1.5");
  EXPECT_ERROR(ValueError, F::batch_norm(x, rf({4}), var), "batch_norm", "[3]", "[4]");
  EXPECT_ERROR(ValueError, F::batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false), "batch_norm",
               "running_mean");
  EXPECT_ERROR(ValueError, F::batch_norm(rf({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true), "batch_norm",
               "more than one value per channel", "[1, 3]");
  EXPECT_ERROR(ValueError, F::dropout(x, 1.5), "dropout", "[0, 1]", "1.5");
  EXPECT_ERROR(ValueError, F::dropout(x, std::nan("")), "dropout", "nan");
  EXPECT_ERROR(ValueError, F::dropout2d(rf({2, 3}), 0.5), "dropout2d", "[2, 3]");
  EXPECT_ERROR(TypeError, F::dropout(ri({4}), 0.5), "dropout", "int64");
}

TEST(BadInput, Losses) {
  const Tensor logits = rf({3, 10});
  EXPECT_ERROR(TypeError, F::cross_entropy(logits, rf({3})), "cross_entropy", "target", "int64", "float32");
  EXPECT_ERROR(IndexError, F::cross_entropy(logits, from_vector<std::int64_t>({1, 10, 2}, {3})), "cross_entropy",
               "target[1] = 10", "10 classes");
  EXPECT_ERROR(IndexError, F::cross_entropy(logits, from_vector<std::int64_t>({-1, 0, 2}, {3})), "target[0] = -1");
  EXPECT_ERROR(ValueError, F::cross_entropy(logits, ri({4})), "cross_entropy", "[3]", "[4]");
  EXPECT_ERROR(ValueError, F::cross_entropy(rf({10}), ri({1})), "cross_entropy", "(N, C)", "[10]");
  EXPECT_ERROR(TypeError, F::cross_entropy(ri({3, 10}), ri({3})), "cross_entropy", "int64");
  EXPECT_ERROR(ValueError, F::cross_entropy(logits, ri({3}), nn::Reduction::Mean, -0.1), "label_smoothing", "-0.1");
  EXPECT_ERROR(IndexError, F::nll_loss(logits, from_vector<std::int64_t>({0, 0, 11}, {3})), "target[2] = 11");
  EXPECT_ERROR(ValueError, F::mse_loss(rf({3}), rf({4})), "mse_loss", "[3]", "[4]");
  EXPECT_ERROR(TypeError, F::mse_loss(ri({3}), ri({3})), "mse_loss", "int64");
}

TEST(BadInput, ModulesAndInit) {
  EXPECT_ERROR(ValueError, nn::Linear(0, 3), "Linear", "in_features", "0");
  EXPECT_ERROR(ValueError, nn::Linear(4, -3), "Linear", "out_features", "-3");
  EXPECT_ERROR(ValueError, nn::Conv2d(1, 4, 0), "Conv2d", "kernel_size must be positive", "(0, 0)");
  EXPECT_ERROR(ValueError, nn::Conv2d(nn::Conv2dOptions(1, 4, {3, -1})), "Conv2d", "kernel_size", "(3, -1)");
  EXPECT_ERROR(ValueError, nn::Conv2d(nn::Conv2dOptions(3, 4, 3).groups(2)), "Conv2d", "groups (2)");
  EXPECT_ERROR(ValueError, nn::BatchNorm2d(0), "BatchNorm2d", "num_features", "0");
  nn::BatchNorm2d bn(3);
  EXPECT_ERROR(ValueError, bn(rf({2, 3})), "BatchNorm2d", "4", "[2, 3]");
  EXPECT_ERROR(ValueError, bn(rf({2, 5, 4, 4})), "BatchNorm2d", "3 channels", "[2, 5, 4, 4]");
  EXPECT_ERROR(ValueError, nn::Dropout(-0.1), "Dropout", "-0.1");
  nn::Linear fc(5, 2);
  EXPECT_ERROR(ValueError, fc(rf({2, 4})), "linear", "4 features", "expects 5");
  EXPECT_ERROR(ValueError, nn::init::normal_(rf({3}), 0.0, -1.0), "init::normal_", "std=-1");
  EXPECT_ERROR(ValueError, nn::init::uniform_(rf({3}), 1.0, std::nan("")), "uniform", "nan");
  EXPECT_ERROR(TypeError, nn::init::uniform_(ri({3})), "init::uniform_", "int64");
  EXPECT_ERROR(ValueError, nn::init::kaiming_uniform_(rf({3})), "fewer than 2 dimensions", "[3]");
  EXPECT_ERROR(ValueError, nn::init::kaiming_normal_(rf({3, 0})), "zero fan", "[3, 0]");
}

TEST(BadInput, OptimizersAndData) {
  const Tensor p = random_tensor({3}, kFloat32, true);
  EXPECT_ERROR(ValueError, optim::SGD({p}, -0.1), "SGD", "lr", "-0.1");
  EXPECT_ERROR(ValueError, optim::SGD({p}, optim::SGDOptions(0.1).momentum(std::nan(""))), "SGD", "momentum", "nan");
  EXPECT_ERROR(ValueError, optim::Adam({p}, optim::AdamOptions(1e-3).betas({0.9, 1.0})), "Adam", "betas[1]", "1");
  EXPECT_ERROR(TypeError, optim::SGD({ri({3})}, 0.1), "optimizer", "parameter 0", "int64");
  EXPECT_ERROR(ValueError, optim::SGD({p, p}, 0.1), "optimizer", "parameter 1");
  EXPECT_ERROR(ValueError, optim::SGD(std::vector<Tensor>{}, 0.1), "optimizer", "empty parameter list");
  optim::SGD sgd({p}, 0.1);
  EXPECT_ERROR(ValueError, sgd.set_lr(-1.0), "set_lr", "-1");
  EXPECT_ERROR(ValueError, optim::StepLR(sgd, 0), "StepLR", "step_size", "0");
  EXPECT_ERROR(ValueError, data::DataLoader(nullptr), "DataLoader", "null");
  EXPECT_ERROR(ValueError, set_num_threads(0), "set_num_threads", "0");
  EXPECT_ERROR(ValueError, data::parse_idx_labels({0, 0, 8, 1, 0, 0, 0, 1, 3}, "labels", 0), "num_classes", "0");
  EXPECT_ERROR(ValueError, data::Normalization::from_name("imagenet"), "imagenet");
}
