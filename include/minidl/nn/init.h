#pragma once
// Parameter initialisation (torch::nn::init). All functions fill `tensor` in place, without recording
// gradients, from the tensor's device generator.
#include <cstdint>
#include <utility>

#include "minidl/tensor.h"

namespace minidl {
namespace nn {
namespace init {

enum class FanMode { FanIn, FanOut };
enum class Nonlinearity { Linear, Sigmoid, Tanh, ReLU, LeakyReLU };

/// (fan_in, fan_out) of a weight of shape (out, in, *kernel).
std::pair<std::int64_t, std::int64_t> calculate_fan_in_and_fan_out(const Tensor& tensor);
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

Tensor uniform_(Tensor tensor, double low = 0.0, double high = 1.0);
Tensor normal_(Tensor tensor, double mean = 0.0, double std = 1.0);
Tensor constant_(Tensor tensor, double value);
Tensor zeros_(Tensor tensor);
Tensor ones_(Tensor tensor);
Tensor kaiming_uniform_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                        Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
Tensor kaiming_normal_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::FanIn,
                       Nonlinearity nonlinearity = Nonlinearity::LeakyReLU);
Tensor xavier_uniform_(Tensor tensor, double gain = 1.0);
Tensor xavier_normal_(Tensor tensor, double gain = 1.0);

}  // namespace init
}  // namespace nn
}  // namespace minidl
