// nn::RNN, LSTM, GRU and their cells (minidl/nn/modules/rnn.h). On the GPU (cuda::cudnn_rnn_enabled()) the
// sequence layers run the whole network as one cuDNN op (layers/rnn_cudnn.h) over a flat weight space that the
// parameters view (flatten_parameters). Otherwise, per layer and direction, the input projection of the whole
// sequence as one matmul (functional::linear over (T, B, input)), then the recurrence op of layers/rnn.h;
// bidirectional layers concatenate the two directions' outputs along the features.
#include "minidl/nn/modules/rnn.h"

#include <atomic>
#include <cmath>

#include "autocast/policy.h"
#include "core/env_switch.h"
#include "core/tensor_impl.h"
#include "layers/rnn.h"
#include "minidl/config.h"
#include "minidl/cuda.h"
#include "minidl/joining.h"
#include "minidl/nn/init.h"
#include "ops/op_utils.h"
#if MINIDL_CUDA_ENABLED
#include "layers/rnn_cudnn.h"
#endif

namespace minidl {
namespace {
// Off by default until the cuDNN path passes its GPU tests (its first GPU run failed them; issue 24):
// MINIDL_RNN_CUDNN=1 or cuda::set_cudnn_rnn_enabled(true) turns it on.
std::atomic<bool> g_cudnn_rnn{env_switch("MINIDL_RNN_CUDNN", false)};
}  // namespace

void cuda::set_cudnn_rnn_enabled(bool enabled) { g_cudnn_rnn = enabled; }
bool cuda::cudnn_rnn_enabled() { return g_cudnn_rnn; }

}  // namespace minidl

namespace minidl {
namespace nn {
namespace F = functional;
namespace {

using i64 = std::int64_t;

kernels::RnnMode kernel_mode(detail::RNNMode m) {
  switch (m) {
    case detail::RNNMode::Tanh:
      return kernels::RnnMode::Tanh;
    case detail::RNNMode::Relu:
      return kernels::RnnMode::Relu;
    case detail::RNNMode::LSTM:
      return kernels::RnnMode::LSTM;
    default:
      return kernels::RnnMode::GRU;
  }
}

detail::RNNMode nonlinearity_mode(const RNNNonlinearity& n) {
  return std::holds_alternative<enumtype::kReLU>(n) ? detail::RNNMode::Relu : detail::RNNMode::Tanh;
}

const char* bool_str(bool b) { return b ? "true" : "false"; }

void check_sizes(const std::string& name, i64 input_size, i64 hidden_size) {
  MINIDL_CHECK(input_size > 0 && hidden_size > 0, ValueError, name,
               ": input_size and hidden_size must be positive, found ", input_size, " and ", hidden_size);
}

/// U(-1/sqrt(hidden), 1/sqrt(hidden)) for every parameter, PyTorch's reset_parameters of all recurrent modules.
void uniform_init(const std::vector<Tensor>& params, i64 hidden_size) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden_size));
  for (const Tensor& p : params) {
    if (p.defined()) init::uniform_(p, -bound, bound);
  }
}

/// A state argument: undefined, or of exactly `expected`'s shape, the input's dtype and device.
void check_state(const std::string& name, const char* what, const Tensor& s, const Shape& expected,
                 const Tensor& input) {
  if (!s.defined()) return;
  MINIDL_CHECK(s.sizes() == expected, ValueError, name, ": expected ", what, " of shape ", shape_str(expected),
               ", found ", shape_str(s.sizes()), " (input shape ", shape_str(input.sizes()), ")");
  ops::check_same(input, s, (name + " " + what).c_str());
}

#if MINIDL_CUDA_ENABLED
/// cuDNN's description of a layer with options `o` in `dtype` (dropout as configured; the op drops it outside
/// training).
gpu::CudnnRnnDesc cudnn_desc(detail::RNNMode mode, const RNNOptionsBase& o, DType dtype) {
  gpu::CudnnRnnDesc d;
  d.mode = kernel_mode(mode);
  d.double_precision = dtype == kFloat64;
  d.input_size = o.input_size();
  d.hidden_size = o.hidden_size();
  d.num_layers = o.num_layers();
  d.bidirectional = o.bidirectional();
  d.bias = o.bias();
  d.dropout = o.dropout();
  d.allow_tf32 = cuda::allow_tf32_conv();
  return d;
}

/// The cuDNN weight layout for parameters like `w` (on the GPU, float32 or float64, cuDNN's path on), or null.
const gpu::CudnnRnnWeightLayout* cudnn_layout(detail::RNNMode mode, const RNNOptionsBase& o, const Tensor& w) {
  if (!cuda::cudnn_rnn_enabled() || !w.device().is_cuda() || (w.dtype() != kFloat32 && w.dtype() != kFloat64)) {
    return nullptr;
  }
  return layers::cudnn_rnn_layout(cudnn_desc(mode, o, w.dtype()), w.device());
}

/// Gives `param` the data of `view` in place (storage, offset, strides), so every handle to it sees the new data.
void rebind(const Tensor& param, const Tensor& view) {
  TensorImpl* p = param.unsafe_impl();
  const TensorImpl* v = view.unsafe_impl();
  p->storage = v->storage;
  p->byte_offset = v->byte_offset;
  p->strides = v->strides;
  p->contiguous = v->contiguous;
  p->dtype = v->dtype;
}
#endif

RNNOptionsBase base_options(i64 in, i64 hidden, i64 layers, bool bias, bool batch_first, double dropout, bool bidir) {
  return RNNOptionsBase(in, hidden)
      .num_layers(layers)
      .bias(bias)
      .batch_first(batch_first)
      .dropout(dropout)
      .bidirectional(bidir);
}

}  // namespace

namespace detail {

RNNImplBase::RNNImplBase(std::string name, RNNMode mode, const RNNOptionsBase& o)
    : Module(std::move(name)), options_base(o), mode_(mode) {
  const std::string& n = this->name();
  check_sizes(n, o.input_size(), o.hidden_size());
  MINIDL_CHECK(o.num_layers() >= 1, ValueError, n, ": num_layers must be at least 1, found ", o.num_layers());
  MINIDL_CHECK(o.dropout() >= 0.0 && o.dropout() <= 1.0, ValueError, n, ": dropout must be in [0, 1], found ",
               o.dropout());
  const i64 H = o.hidden_size(), G = kernels::rnn_gates(kernel_mode(mode)) * H, D = o.bidirectional() ? 2 : 1;
  for (i64 l = 0; l < o.num_layers(); ++l) {
    for (i64 d = 0; d < D; ++d) {
      const std::string sfx = "_l" + std::to_string(l) + (d == 1 ? "_reverse" : "");
      const i64 in = l == 0 ? o.input_size() : H * D;
      std::vector<Tensor> w(4);
      w[0] = register_parameter("weight_ih" + sfx, empty({G, in}));
      w[1] = register_parameter("weight_hh" + sfx, empty({G, H}));
      if (o.bias()) {
        w[2] = register_parameter("bias_ih" + sfx, empty({G}));
        w[3] = register_parameter("bias_hh" + sfx, empty({G}));
      }
      flat_.push_back(std::move(w));
    }
  }
  reset_parameters();
}

void RNNImplBase::reset_parameters() { uniform_init(all_weights(), options_base.hidden_size()); }

std::vector<Tensor> RNNImplBase::all_weights() const {
  std::vector<Tensor> out;
  for (const auto& w : flat_) {
    for (const Tensor& t : w) {
      if (t.defined()) out.push_back(t);
    }
  }
  return out;
}

void RNNImplBase::flatten_parameters() {
  flat_weights_ = Tensor();
  flat_offsets_.clear();
#if MINIDL_CUDA_ENABLED
  const Tensor& first = flat_[0][0];
  for (const Tensor& w : all_weights()) {
    if (w.device() != first.device() || w.dtype() != first.dtype()) return;
  }
  const gpu::CudnnRnnWeightLayout* layout = cudnn_layout(mode_, options_base, first);
  if (layout == nullptr) return;
  MINIDL_CHECK(!cuda::is_capturing(), ValueError, name(),
               ": its parameters must be made views of cuDNN's flat weights (flatten_parameters()), which copies "
               "them, and that cannot be captured in a CUDA graph; run one forward, or call flatten_parameters(), "
               "before the capture");
  NoGradGuard no_grad;
  Tensor flat = zeros({layout->numel}, TensorOptions(first.dtype()).device(first.device()));
  for (std::size_t p = 0; p < flat_.size(); ++p) {
    for (std::size_t k = 0; k < 4; ++k) {
      const Tensor& w = flat_[p][k];
      if (!w.defined()) continue;
      Tensor block = flat.narrow(0, layout->offsets[4 * p + k], w.numel()).view(w.sizes());
      block.copy_(w.detach());
      rebind(w, block);
    }
  }
  flat_weights_ = flat;
  flat_offsets_ = layout->offsets;
#endif
}

bool RNNImplBase::weights_are_flat() const {
  if (!flat_weights_.defined()) return false;
  const TensorImpl* f = flat_weights_.unsafe_impl();
  const std::size_t esize = element_size(f->dtype);
  for (std::size_t p = 0; p < flat_.size(); ++p) {
    for (std::size_t k = 0; k < 4; ++k) {
      const Tensor& w = flat_[p][k];
      if (!w.defined()) continue;
      const TensorImpl* i = w.unsafe_impl();
      const std::size_t at = f->byte_offset + static_cast<std::size_t>(flat_offsets_[4 * p + k]) * esize;
      if (i->storage != f->storage || i->byte_offset != at || !i->contiguous || i->dtype != f->dtype) return false;
    }
  }
  return true;
}

void RNNImplBase::to(Device device) {
  Module::to(device);
  flatten_parameters();
}

void RNNImplBase::to(DType dtype) {
  Module::to(dtype);
  flatten_parameters();
}

std::tuple<Tensor, Tensor, Tensor> RNNImplBase::run_cudnn(const Tensor& x, const Tensor& h0, const Tensor& c0) {
#if MINIDL_CUDA_ENABLED
  const RNNOptionsBase& o = options_base;
  const i64 T = x.size(0), B = x.size(1), H = o.hidden_size(), D = o.bidirectional() ? 2 : 1, L = o.num_layers();
  std::vector<Tensor> params;
  std::vector<i64> offsets;
  for (std::size_t p = 0; p < flat_.size(); ++p) {
    for (std::size_t k = 0; k < 4; ++k) {
      if (!flat_[p][k].defined()) continue;
      params.push_back(flat_[p][k]);
      offsets.push_back(flat_offsets_[4 * p + k]);
    }
  }
  const std::string n = name();
  const Tensor all =
      layers::rnn_cudnn(cudnn_desc(mode_, o, x.dtype()), x.contiguous(), h0.defined() ? h0.contiguous() : h0,
                        c0.defined() ? c0.contiguous() : c0, flat_weights_, params, offsets, is_training(), n.c_str());
  const i64 ny = T * B * D * H, ns = L * D * B * H;
  const Shape state{L * D, B, H};
  return {all.narrow(0, 0, ny).view({T, B, D * H}), all.narrow(0, ny, ns).view(state),
          mode_ == RNNMode::LSTM ? all.narrow(0, ny + ns, ns).view(state) : Tensor()};
#else
  (void)x;
  (void)h0;
  (void)c0;
  throw ValueError(name() + ": internal error, the cuDNN path in a build without CUDA");
#endif
}

void RNNImplBase::pretty_print(std::ostream& os) const {
  const RNNOptionsBase& o = options_base;
  os << name() << "(input_size=" << o.input_size() << ", hidden_size=" << o.hidden_size()
     << ", num_layers=" << o.num_layers() << ", bias=" << bool_str(o.bias())
     << ", batch_first=" << bool_str(o.batch_first()) << ", dropout=" << o.dropout()
     << ", bidirectional=" << bool_str(o.bidirectional()) << ")";
}

std::tuple<Tensor, Tensor, Tensor> RNNImplBase::run(const Tensor& input, const Tensor& hx, const Tensor& cx) {
  const std::string n = name();
  const RNNOptionsBase& o = options_base;
  const bool lstm = mode_ == RNNMode::LSTM;
  MINIDL_CHECK(input.defined() && (input.dim() == 2 || input.dim() == 3), ValueError, n,
               ": expected input of 2 (unbatched) or 3 (batched) dimensions, found shape ",
               input.defined() ? shape_str(input.sizes()) : "undefined");
  MINIDL_CHECK(input.size(-1) == o.input_size(), ValueError, n, ": expected input.size(-1) to be input_size ",
               o.input_size(), ", found shape ", shape_str(input.sizes()));
  ops::check_same(input, flat_[0][0], (n + " input").c_str());
  const bool batched = input.dim() == 3;
  const Tensor x = !batched ? input.unsqueeze(1) : o.batch_first() ? input.transpose(0, 1) : input;
  const i64 T = x.size(0), B = x.size(1), H = o.hidden_size(), D = o.bidirectional() ? 2 : 1, L = o.num_layers();
  MINIDL_CHECK(T > 0, ValueError, n, ": expected a sequence of at least one step, found input shape ",
               shape_str(input.sizes()));
  const Shape state_shape = batched ? Shape{L * D, B, H} : Shape{L * D, H};
  check_state(n, lstm ? "h_0" : "hx", hx, state_shape, input);
  check_state(n, "c_0", cx, state_shape, input);
  const Tensor h0 = hx.defined() && !batched ? hx.unsqueeze(1) : hx;
  const Tensor c0 = cx.defined() && !batched ? cx.unsqueeze(1) : cx;

  Tensor y, h_n, c_n;
  if (cudnn_route(x)) {
    std::tie(y, h_n, c_n) = run_cudnn(x, h0, c0);
  } else {
    std::tie(y, h_n, c_n) = run_own(x, h0, c0);
  }
  if (!batched) {
    h_n = h_n.squeeze(1);
    if (lstm) c_n = c_n.squeeze(1);
  }
  return {!batched ? y.squeeze(1) : o.batch_first() ? y.transpose(0, 1) : y, h_n, c_n};
}

bool RNNImplBase::cudnn_route(const Tensor& x) {
#if MINIDL_CUDA_ENABLED
  // cuDNN takes no empty batch: the own kernels run that one.
  if (x.size(1) == 0 || cudnn_layout(mode_, options_base, flat_[0][0]) == nullptr) return false;
  if (!weights_are_flat()) flatten_parameters();
  return weights_are_flat();
#else
  (void)x;
  return false;
#endif
}

std::tuple<Tensor, Tensor, Tensor> RNNImplBase::run_own(const Tensor& x, const Tensor& h0, const Tensor& c0) {
  const std::string n = name();
  const RNNOptionsBase& o = options_base;
  const bool lstm = mode_ == RNNMode::LSTM;
  const i64 T = x.size(0), D = o.bidirectional() ? 2 : 1, L = o.num_layers();
  std::vector<Tensor> hn, cn;
  Tensor layer_in = x;
  for (i64 l = 0; l < L; ++l) {
    std::vector<Tensor> outs;
    for (i64 d = 0; d < D; ++d) {
      const std::vector<Tensor>& w = flat_[static_cast<std::size_t>(l * D + d)];
      const Tensor gx = F::linear(layer_in, w[0], w[2]).contiguous();  // every step's x W_ih^T + b_ih at once
      const bool reverse = d == 1;
      const Tensor z =
          layers::rnn_recurrence(kernel_mode(mode_), gx, w[1], w[3], h0.defined() ? h0.select(0, l * D + d) : Tensor(),
                                 c0.defined() ? c0.select(0, l * D + d) : Tensor(), reverse, n.c_str());
      const Tensor hs = z.select(0, 0);
      outs.push_back(hs.narrow(0, reverse ? 0 : 1, T));
      hn.push_back(hs.select(0, reverse ? 0 : T));
      if (lstm) cn.push_back(z.select(0, 1).select(0, reverse ? 0 : T));
    }
    layer_in = D == 2 ? cat(outs, 2) : outs[0];
    if (o.dropout() > 0.0 && is_training() && l + 1 < L) layer_in = F::dropout(layer_in, o.dropout(), true);
  }
  return {layer_in, stack(hn, 0), lstm ? stack(cn, 0) : Tensor()};
}

RNNCellImplBase::RNNCellImplBase(std::string name, RNNMode mode, i64 input_size, i64 hidden_size, bool bias)
    : Module(std::move(name)), mode_(mode), input_size_(input_size), hidden_size_(hidden_size), bias_(bias) {
  check_sizes(this->name(), input_size, hidden_size);
  const i64 G = kernels::rnn_gates(kernel_mode(mode)) * hidden_size;
  weight_ih = register_parameter("weight_ih", empty({G, input_size}));
  weight_hh = register_parameter("weight_hh", empty({G, hidden_size}));
  if (bias) {
    bias_ih = register_parameter("bias_ih", empty({G}));
    bias_hh = register_parameter("bias_hh", empty({G}));
  }
  reset_parameters();
}

void RNNCellImplBase::reset_parameters() { uniform_init({weight_ih, weight_hh, bias_ih, bias_hh}, hidden_size_); }

void RNNCellImplBase::pretty_print(std::ostream& os) const {
  os << name() << "(" << input_size_ << ", " << hidden_size_;
  if (!bias_) os << ", bias=false";
  if (mode_ == RNNMode::Relu) os << ", nonlinearity=kReLU";
  os << ")";
}

namespace {
/// One step of a cell (PyTorch's lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell): the cell's op, which autocast
/// lowers as a whole on CUDA.
std::tuple<Tensor, Tensor> rnn_cell(const std::string& n, RNNMode mode, i64 input_size, i64 hidden_size,
                                    const Tensor& input, const Tensor& hx, const Tensor& cx, const Tensor& w_ih,
                                    const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  MINIDL_AUTOCAST(rnn_cell, n, mode, input_size, hidden_size, input, hx, cx, w_ih, w_hh, b_ih, b_hh);
  const bool lstm = mode == RNNMode::LSTM;
  MINIDL_CHECK(input.defined() && (input.dim() == 1 || input.dim() == 2), ValueError, n,
               ": expected input of 1 (unbatched) or 2 (batched) dimensions, found shape ",
               input.defined() ? shape_str(input.sizes()) : "undefined");
  MINIDL_CHECK(input.size(-1) == input_size, ValueError, n, ": expected input.size(-1) to be input_size ", input_size,
               ", found shape ", shape_str(input.sizes()));
  ops::check_same(input, w_ih, (n + " input").c_str());
  const bool batched = input.dim() == 2;
  const Tensor x = batched ? input : input.unsqueeze(0);
  const Shape state_shape = batched ? Shape{x.size(0), hidden_size} : Shape{hidden_size};
  check_state(n, "hx", hx, state_shape, input);
  check_state(n, "cx", cx, state_shape, input);
  const Tensor h0 = hx.defined() && !batched ? hx.unsqueeze(0) : hx;
  const Tensor c0 = cx.defined() && !batched ? cx.unsqueeze(0) : cx;
  const Tensor gx = F::linear(x, w_ih, b_ih).contiguous().unsqueeze(0);
  const Tensor z = layers::rnn_recurrence(kernel_mode(mode), gx, w_hh, b_hh, h0, c0, false, n.c_str());
  Tensor h = z.select(0, 0).select(0, 1), c = lstm ? z.select(0, 1).select(0, 1) : Tensor();
  if (!batched) {
    h = h.squeeze(0);
    if (lstm) c = c.squeeze(0);
  }
  return {h, c};
}
}  // namespace

std::tuple<Tensor, Tensor> RNNCellImplBase::step(const Tensor& input, const Tensor& hx, const Tensor& cx) {
  return rnn_cell(name(), mode_, input_size_, hidden_size_, input, hx, cx, weight_ih, weight_hh, bias_ih, bias_hh);
}

}  // namespace detail

RNNImpl::RNNImpl(const RNNOptions& o)
    : RNNImplBase("RNN", nonlinearity_mode(o.nonlinearity()),
                  base_options(o.input_size(), o.hidden_size(), o.num_layers(), o.bias(), o.batch_first(), o.dropout(),
                               o.bidirectional())),
      options(o) {}
std::tuple<Tensor, Tensor> RNNImpl::forward(const Tensor& input, Tensor hx) {
  auto [out, h_n, c_n] = run(input, hx, Tensor());
  return {out, h_n};
}

LSTMImpl::LSTMImpl(const LSTMOptions& o)
    : RNNImplBase("LSTM", detail::RNNMode::LSTM,
                  base_options(o.input_size(), o.hidden_size(), o.num_layers(), o.bias(), o.batch_first(), o.dropout(),
                               o.bidirectional())),
      options(o) {}
std::tuple<Tensor, std::tuple<Tensor, Tensor>> LSTMImpl::forward(const Tensor& input,
                                                                 std::optional<std::tuple<Tensor, Tensor>> hx) {
  const Tensor h0 = hx ? std::get<0>(*hx) : Tensor(), c0 = hx ? std::get<1>(*hx) : Tensor();
  MINIDL_CHECK(h0.defined() == c0.defined(), ValueError, "LSTM: pass both h_0 and c_0, or neither");
  auto [out, h_n, c_n] = run(input, h0, c0);
  return {out, {h_n, c_n}};
}

GRUImpl::GRUImpl(const GRUOptions& o)
    : RNNImplBase("GRU", detail::RNNMode::GRU,
                  base_options(o.input_size(), o.hidden_size(), o.num_layers(), o.bias(), o.batch_first(), o.dropout(),
                               o.bidirectional())),
      options(o) {}
std::tuple<Tensor, Tensor> GRUImpl::forward(const Tensor& input, Tensor hx) {
  auto [out, h_n, c_n] = run(input, hx, Tensor());
  return {out, h_n};
}

RNNCellImpl::RNNCellImpl(const RNNCellOptions& o)
    : RNNCellImplBase("RNNCell", nonlinearity_mode(o.nonlinearity()), o.input_size(), o.hidden_size(), o.bias()),
      options(o) {}
Tensor RNNCellImpl::forward(const Tensor& input, Tensor hx) { return std::get<0>(step(input, hx, Tensor())); }

LSTMCellImpl::LSTMCellImpl(const LSTMCellOptions& o)
    : RNNCellImplBase("LSTMCell", detail::RNNMode::LSTM, o.input_size(), o.hidden_size(), o.bias()), options(o) {}
std::tuple<Tensor, Tensor> LSTMCellImpl::forward(const Tensor& input, std::optional<std::tuple<Tensor, Tensor>> hx) {
  const Tensor h0 = hx ? std::get<0>(*hx) : Tensor(), c0 = hx ? std::get<1>(*hx) : Tensor();
  MINIDL_CHECK(h0.defined() == c0.defined(), ValueError, "LSTMCell: pass both hx and cx, or neither");
  return step(input, h0, c0);
}

GRUCellImpl::GRUCellImpl(const GRUCellOptions& o)
    : RNNCellImplBase("GRUCell", detail::RNNMode::GRU, o.input_size(), o.hidden_size(), o.bias()), options(o) {}
Tensor GRUCellImpl::forward(const Tensor& input, Tensor hx) { return std::get<0>(step(input, hx, Tensor())); }

}  // namespace nn
}  // namespace minidl
