#pragma once
// Recurrent layers with LibTorch's names, options and forward signatures (torch/nn/modules/rnn.h): nn::RNN,
// nn::LSTM, nn::GRU over whole sequences (num_layers, bidirectional, batch_first, inter-layer dropout) and the
// single-step nn::RNNCell, nn::LSTMCell, nn::GRUCell. Parameters carry PyTorch's names (weight_ih_l0,
// weight_hh_l0, bias_ih_l0, bias_hh_l0, ..._reverse; the cells' weight_ih, ...) and gate order (LSTM i, f, g, o;
// GRU r, z, n), so state dicts move between the two. On the GPU the sequence layers run through cuDNN, their
// parameters views of its flat weights (flatten_parameters). Not supported: LSTM's proj_size, PackedSequence input.
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "minidl/arg.h"
#include "minidl/enum.h"
#include "minidl/nn/functional.h"
#include "minidl/nn/module.h"

namespace minidl {
namespace nn {

using RNNNonlinearity = std::variant<enumtype::kTanh, enumtype::kReLU>;

/// What the three sequence layers share (LibTorch's detail::RNNOptionsBase); `mode` is set by the layer.
struct RNNOptionsBase {
  RNNOptionsBase(std::int64_t input_size, std::int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(std::int64_t, input_size);
  MINIDL_ARG(std::int64_t, hidden_size);
  MINIDL_ARG(std::int64_t, num_layers) = 1;
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(bool, batch_first) = false;
  MINIDL_ARG(double, dropout) = 0.0;
  MINIDL_ARG(bool, bidirectional) = false;
};

struct RNNOptions {
  RNNOptions(std::int64_t input_size, std::int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(std::int64_t, input_size);
  MINIDL_ARG(std::int64_t, hidden_size);
  MINIDL_ARG(std::int64_t, num_layers) = 1;
  MINIDL_ARG(RNNNonlinearity, nonlinearity) = kTanh;
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(bool, batch_first) = false;
  MINIDL_ARG(double, dropout) = 0.0;
  MINIDL_ARG(bool, bidirectional) = false;
};

struct LSTMOptions {
  LSTMOptions(std::int64_t input_size, std::int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(std::int64_t, input_size);
  MINIDL_ARG(std::int64_t, hidden_size);
  MINIDL_ARG(std::int64_t, num_layers) = 1;
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(bool, batch_first) = false;
  MINIDL_ARG(double, dropout) = 0.0;
  MINIDL_ARG(bool, bidirectional) = false;
};

struct GRUOptions {
  GRUOptions(std::int64_t input_size, std::int64_t hidden_size) : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(std::int64_t, input_size);
  MINIDL_ARG(std::int64_t, hidden_size);
  MINIDL_ARG(std::int64_t, num_layers) = 1;
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(bool, batch_first) = false;
  MINIDL_ARG(double, dropout) = 0.0;
  MINIDL_ARG(bool, bidirectional) = false;
};

struct RNNCellOptions {
  RNNCellOptions(std::int64_t input_size, std::int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(std::int64_t, input_size);
  MINIDL_ARG(std::int64_t, hidden_size);
  MINIDL_ARG(bool, bias) = true;
  MINIDL_ARG(RNNNonlinearity, nonlinearity) = kTanh;
};

struct LSTMCellOptions {
  LSTMCellOptions(std::int64_t input_size, std::int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(std::int64_t, input_size);
  MINIDL_ARG(std::int64_t, hidden_size);
  MINIDL_ARG(bool, bias) = true;
};

struct GRUCellOptions {
  GRUCellOptions(std::int64_t input_size, std::int64_t hidden_size)
      : input_size_(input_size), hidden_size_(hidden_size) {}
  MINIDL_ARG(std::int64_t, input_size);
  MINIDL_ARG(std::int64_t, hidden_size);
  MINIDL_ARG(bool, bias) = true;
};

namespace detail {
/// Which recurrence a layer runs (kernels::RnnMode's values).
enum class RNNMode { Tanh, Relu, LSTM, GRU };

/// The sequence layers' shared body: the parameters of every layer and direction, and the forward over
/// (T, B, input) or (B, T, input) or unbatched (T, input) input.
class RNNImplBase : public Module {
 public:
  RNNImplBase(std::string name, RNNMode mode, const RNNOptionsBase& options);
  /// U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) for every weight and bias, as PyTorch.
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  /// The parameters in PyTorch's order: per layer and direction weight_ih, weight_hh, bias_ih, bias_hh.
  std::vector<Tensor> all_weights() const;
  /// On the GPU with cuDNN's path on (cuda::cudnn_rnn_enabled(), float32/float64): makes the parameters views of
  /// one flat buffer laid out as cuDNN's weight space, their values kept, as PyTorch's flatten_parameters(); the
  /// Tensor handles stay the same (an optimizer built before keeps working). Elsewhere it releases that buffer.
  /// to() calls it, and a forward on the GPU calls it when the parameters are no longer those views (after a
  /// parent module's to(), or a parameter given new storage); inside a CUDA-graph capture that is an error.
  void flatten_parameters();
  void to(Device device) override;
  void to(DType dtype) override;
  RNNOptionsBase options_base;

 protected:
  /// Runs every layer; returns (output, h_n, c_n), c_n only for LSTM. hx, cx may be undefined (zeros).
  std::tuple<Tensor, Tensor, Tensor> run(const Tensor& input, const Tensor& hx, const Tensor& cx);
  RNNMode mode_;
  /// Per layer and direction: weight_ih, weight_hh, bias_ih, bias_hh (the biases undefined without bias).
  std::vector<std::vector<Tensor>> flat_;

 private:
  /// Whether every parameter is still its block of flat_weights_.
  bool weights_are_flat() const;
  /// Whether x (T, B, input_size) runs through cuDNN (re-flattening the parameters if they are no longer views).
  bool cudnn_route(const Tensor& x);
  /// The own kernels' layers, x (T, B, input_size); returns (output (T, B, D * hidden), h_n, c_n).
  std::tuple<Tensor, Tensor, Tensor> run_own(const Tensor& x, const Tensor& h0, const Tensor& c0);
  /// The whole network through cuDNN, as run_own.
  std::tuple<Tensor, Tensor, Tensor> run_cudnn(const Tensor& x, const Tensor& h0, const Tensor& c0);
  /// cuDNN's flat weight space that the parameters view (undefined off the cuDNN path), and per layer and
  /// direction the element offsets of weight_ih, weight_hh, bias_ih, bias_hh in it (-1 without bias).
  Tensor flat_weights_;
  std::vector<std::int64_t> flat_offsets_;
};

/// The cells' shared body.
class RNNCellImplBase : public Module {
 public:
  RNNCellImplBase(std::string name, RNNMode mode, std::int64_t input_size, std::int64_t hidden_size, bool bias);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;

 protected:
  /// One step of input (B, input) or (input); returns (h', c'), c' only for LSTM.
  std::tuple<Tensor, Tensor> step(const Tensor& input, const Tensor& hx, const Tensor& cx);
  RNNMode mode_;
  std::int64_t input_size_, hidden_size_;
  bool bias_;
};
}  // namespace detail

/// Elman RNN: h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh).
class RNNImpl : public detail::RNNImplBase {
 public:
  RNNImpl(std::int64_t input_size, std::int64_t hidden_size) : RNNImpl(RNNOptions(input_size, hidden_size)) {}
  explicit RNNImpl(const RNNOptions& options);
  /// input (T, B, input_size) (batch_first: (B, T, input_size)) or (T, input_size); hx (layers * directions, B,
  /// hidden) or (layers * directions, hidden), zeros when undefined. Returns (output, h_n).
  std::tuple<Tensor, Tensor> forward(const Tensor& input, Tensor hx = {});
  RNNOptions options;
};
MINIDL_MODULE(RNN);

class LSTMImpl : public detail::RNNImplBase {
 public:
  LSTMImpl(std::int64_t input_size, std::int64_t hidden_size) : LSTMImpl(LSTMOptions(input_size, hidden_size)) {}
  explicit LSTMImpl(const LSTMOptions& options);
  /// As RNN, with hx = (h_0, c_0); returns (output, (h_n, c_n)).
  std::tuple<Tensor, std::tuple<Tensor, Tensor>> forward(const Tensor& input,
                                                         std::optional<std::tuple<Tensor, Tensor>> hx = {});
  LSTMOptions options;
};
MINIDL_MODULE(LSTM);

class GRUImpl : public detail::RNNImplBase {
 public:
  GRUImpl(std::int64_t input_size, std::int64_t hidden_size) : GRUImpl(GRUOptions(input_size, hidden_size)) {}
  explicit GRUImpl(const GRUOptions& options);
  std::tuple<Tensor, Tensor> forward(const Tensor& input, Tensor hx = {});
  GRUOptions options;
};
MINIDL_MODULE(GRU);

class RNNCellImpl : public detail::RNNCellImplBase {
 public:
  RNNCellImpl(std::int64_t input_size, std::int64_t hidden_size)
      : RNNCellImpl(RNNCellOptions(input_size, hidden_size)) {}
  explicit RNNCellImpl(const RNNCellOptions& options);
  /// input (B, input_size) or (input_size); hx (B, hidden) or (hidden), zeros when undefined. Returns h'.
  Tensor forward(const Tensor& input, Tensor hx = {});
  RNNCellOptions options;
};
MINIDL_MODULE(RNNCell);

class LSTMCellImpl : public detail::RNNCellImplBase {
 public:
  LSTMCellImpl(std::int64_t input_size, std::int64_t hidden_size)
      : LSTMCellImpl(LSTMCellOptions(input_size, hidden_size)) {}
  explicit LSTMCellImpl(const LSTMCellOptions& options);
  /// Returns (h', c').
  std::tuple<Tensor, Tensor> forward(const Tensor& input, std::optional<std::tuple<Tensor, Tensor>> hx = {});
  LSTMCellOptions options;
};
MINIDL_MODULE(LSTMCell);

class GRUCellImpl : public detail::RNNCellImplBase {
 public:
  GRUCellImpl(std::int64_t input_size, std::int64_t hidden_size)
      : GRUCellImpl(GRUCellOptions(input_size, hidden_size)) {}
  explicit GRUCellImpl(const GRUCellOptions& options);
  Tensor forward(const Tensor& input, Tensor hx = {});
  GRUCellOptions options;
};
MINIDL_MODULE(GRUCell);

}  // namespace nn

namespace cuda {
/// Whether nn::RNN / LSTM / GRU on the GPU run through cuDNN's RNN API (on by default; off under the environment
/// variable MINIDL_RNN_CUDNN=0), else through minidl's own recurrence kernels, as on the CPU. Process-wide; read
/// at each forward. float32 on cuDNN's path follows allow_tf32_conv() (cuDNN's TF32 switch, as PyTorch's
/// torch.backends.cudnn.allow_tf32), the own kernels allow_tf32_matmul().
void set_cudnn_rnn_enabled(bool enabled);
bool cudnn_rnn_enabled();
}  // namespace cuda
}  // namespace minidl

