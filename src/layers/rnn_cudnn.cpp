// The cuDNN op of the recurrent layers (layers/rnn_cudnn.h): checks, the buffers of one call from the caching
// allocator (output, reserve space, the flat weight gradient), the per-shape device array of sequence lengths, and
// the backward rule. Nothing here reads back from the GPU, so forward and backward can be captured.
#include "minidl/config.h"

#if MINIDL_CUDA_ENABLED
#include "layers/rnn_cudnn.h"

#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "cuda/device_guard.h"
#include "layers/layer_utils.h"
#include "minidl/autograd.h"
#include "minidl/factories.h"

namespace minidl {
namespace layers {
namespace {

using i64 = std::int64_t;

i64 directions(const gpu::CudnnRnnDesc& d) { return d.bidirectional ? 2 : 1; }

/// The device array of B sequence lengths T that cuDNN's calls read, one per (device, T, B), made once by a fill
/// kernel (so also inside a capture) and kept for the process: cuDNN may read it after a call returns, and a
/// captured graph replays with its address.
const int* seq_lengths(Device device, i64 T, i64 B) {
  static std::mutex mutex;
  static auto* cache = new std::map<std::tuple<int, i64, i64>, Tensor>();
  const std::lock_guard<std::mutex> lock(mutex);
  Tensor& t = (*cache)[{device.index(), T, B}];
  if (!t.defined()) t = full({B}, T, TensorOptions(kInt32).device(device));
  return t.data_ptr<int>();
}

}  // namespace

const gpu::CudnnRnnWeightLayout* cudnn_rnn_layout(const gpu::CudnnRnnDesc& d, Device device) {
  using Key = std::tuple<int, int, bool, i64, i64, i64, bool, bool>;
  static std::mutex mutex;
  static auto* cache = new std::map<Key, std::optional<gpu::CudnnRnnWeightLayout>>();
  const Key key{device.index(),     static_cast<int>(d.mode),
                d.double_precision, d.input_size,
                d.hidden_size,      d.num_layers,
                d.bidirectional,    d.bias};
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache->find(key);
  if (it == cache->end()) {
    const gpu::DeviceGuard guard(device.index());
    it = cache->emplace(key, gpu::cudnn_rnn_weight_layout(d)).first;
  }
  return it->second ? &*it->second : nullptr;
}

Tensor rnn_cudnn(const gpu::CudnnRnnDesc& desc, const Tensor& x, const Tensor& h0, const Tensor& c0,
                 const Tensor& weights, const std::vector<Tensor>& params, const std::vector<i64>& offsets,
                 bool training, const char* name) {
  const bool lstm = desc.mode == kernels::RnnMode::LSTM;
  const i64 T = x.size(0), B = x.size(1), H = desc.hidden_size, D = directions(desc), L = desc.num_layers;
  const Shape state{L * D, B, H};
  MINIDL_CHECK(x.is_contiguous() && x.dim() == 3 && x.size(2) == desc.input_size && T > 0 && B > 0, ValueError, name,
               ": internal error, cuDNN RNN input of shape ", shape_str(x.sizes()));
  for (const Tensor& s : {h0, c0}) {
    MINIDL_CHECK(!s.defined() || (s.is_contiguous() && s.sizes() == state), ValueError, name,
                 ": internal error, cuDNN RNN state of shape ", shape_str(s.sizes()), ", expected ", shape_str(state));
  }
  MINIDL_CHECK(params.size() == offsets.size() && weights.is_contiguous(), ValueError, name,
               ": internal error, cuDNN RNN weights");
  gpu::CudnnRnnDesc d = desc;
  if (!training) d.dropout = 0.0;
  const gpu::DeviceGuard guard(x.device().index());
  const gpu::CudnnRnnBatch batch{T, B, seq_lengths(x.device(), T, B)};
  const i64 ny = T * B * D * H, ns = L * D * B * H;
  const std::size_t w_bytes = static_cast<std::size_t>(weights.numel()) * element_size(weights.dtype());

  bool params_need_grad = false;
  for (const Tensor& p : params) params_need_grad = params_need_grad || p.requires_grad();
  const bool records =
      autograd::grad_mode_enabled() && (params_need_grad || x.requires_grad() || (h0.defined() && h0.requires_grad()) ||
                                        (c0.defined() && c0.requires_grad()));
  // cuDNN's training mode (with its reserve space) when a backward may follow or dropout applies (a train() forward
  // under NoGradGuard drops out too, as PyTorch's and the own kernels' do); otherwise its inference mode.
  const bool train_mode = records || d.dropout > 0.0;
  const std::size_t reserve_bytes = gpu::cudnn_rnn_reserve_bytes(d, batch, train_mode);
  const Tensor reserve =
      train_mode ? empty({static_cast<i64>(reserve_bytes)}, TensorOptions(kUInt8).device(x.device())) : Tensor();
  Tensor out = ops::empty_as({ny + (lstm ? 2 : 1) * ns}, x);
  char* o = static_cast<char*>(out.data_ptr());
  const std::size_t esize = element_size(x.dtype());
  gpu::cudnn_rnn_forward(d, batch, train_mode, x.data_ptr(), h0.defined() ? h0.data_ptr() : nullptr,
                         c0.defined() ? c0.data_ptr() : nullptr, weights.data_ptr(), w_bytes, o, o + ny * esize,
                         lstm ? o + (ny + ns) * esize : nullptr, train_mode ? reserve.data_ptr() : nullptr,
                         reserve_bytes);
  if (!records) return out;

  const autograd::SavedTensor saved_x(x, name), saved_h0(h0, name), saved_c0(c0, name), saved_out(out, name),
      saved_w(weights, name);
  std::vector<Shape> shapes;
  for (const Tensor& p : params) shapes.push_back(p.sizes());
  std::vector<Tensor> inputs{x, h0, c0};
  inputs.insert(inputs.end(), params.begin(), params.end());
  return autograd::record(out, std::string(name) + "CudnnBackward", inputs, [=](const Tensor& g) {
    const Tensor xs = saved_x.get(), hs = saved_h0.get(), cs = saved_c0.get(), ys = saved_out.get(), w = saved_w.get();
    const gpu::DeviceGuard device(g.device().index());
    const char* gy = static_cast<const char*>(g.data_ptr());
    Tensor dx = ops::empty_as(xs.sizes(), g);
    const Tensor dh0 = hs.defined() ? ops::empty_as(state, g) : Tensor();
    const Tensor dc0 = cs.defined() ? ops::empty_as(state, g) : Tensor();
    gpu::cudnn_rnn_backward_data(d, batch, ys.data_ptr(), gy, dx.data_ptr(), hs.defined() ? hs.data_ptr() : nullptr,
                                 gy + ny * esize, dh0.defined() ? dh0.data_ptr() : nullptr,
                                 cs.defined() ? cs.data_ptr() : nullptr, lstm ? gy + (ny + ns) * esize : nullptr,
                                 dc0.defined() ? dc0.data_ptr() : nullptr, w.data_ptr(), w_bytes, reserve.data_ptr(),
                                 reserve_bytes);
    std::vector<Tensor> grads{dx, dh0, dc0};
    if (params_need_grad) {
      // cuDNN adds into the flat gradient; each parameter's gradient is its block of it (a view: the engine's
      // AccumulateGrad copies it into the parameter's own .grad, or adds it there).
      const Tensor dw = zeros({w.numel()}, TensorOptions(w.dtype()).device(w.device()));
      gpu::cudnn_rnn_backward_weights(d, batch, xs.data_ptr(), hs.defined() ? hs.data_ptr() : nullptr, ys.data_ptr(),
                                      dw.data_ptr(), w_bytes, reserve.data_ptr(), reserve_bytes);
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        i64 n = 1;
        for (i64 s : shapes[i]) n *= s;
        grads.push_back(dw.narrow(0, offsets[i], n).view(shapes[i]));
      }
    } else {
      grads.resize(grads.size() + shapes.size());
    }
    return grads;
  });
}

}  // namespace layers
}  // namespace minidl
#endif  // MINIDL_CUDA_ENABLED
