// cuDNN's RNN API behind nn::RNN / LSTM / GRU on the GPU (declared in cuda/rnn_cudnn.h). Descriptors are host
// objects built per call (cheap, and nothing to keep in step with the module); what must persist is kept here: the
// dropout generator's states per device (cuDNN's own, initialised once, then only restored into each call's
// descriptor, which launches nothing).
#include "cuda/rnn_cudnn.h"

#include <cudnn.h>

#include <map>
#include <mutex>

#include "cuda/context.h"
#include "cuda/cudnn_tensor.h"
#include "minidl/factories.h"

namespace minidl {
namespace gpu {
namespace {

using i64 = std::int64_t;
constexpr const char* kOp = "cuDNN RNN";

cudnnRNNMode_t cell_mode(kernels::RnnMode m) {
  switch (m) {
    case kernels::RnnMode::Tanh:
      return CUDNN_RNN_TANH;
    case kernels::RnnMode::Relu:
      return CUDNN_RNN_RELU;
    case kernels::RnnMode::LSTM:
      return CUDNN_LSTM;
    default:
      return CUDNN_GRU;
  }
}

cudnnDataType_t data_type(const CudnnRnnDesc& d) { return d.double_precision ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT; }
i64 element_bytes(const CudnnRnnDesc& d) { return d.double_precision ? 8 : 4; }
i64 directions(const CudnnRnnDesc& d) { return d.bidirectional ? 2 : 1; }

/// The dropout generator of the current device: cuDNN's states, filled once by cudnnSetDropoutDescriptor (a kernel
/// on the stream) from a seed drawn from minidl's default generator, as PyTorch seeds its own. Later calls restore
/// them into a fresh descriptor; the RNN kernels advance them in place. Never freed: they live as long as the
/// process's cuDNN handles.
struct DropoutStates {
  void* states = nullptr;
  std::size_t bytes = 0;
  unsigned long long seed = 0;
};

const DropoutStates& dropout_states() {
  static std::mutex mutex;
  static auto* per_device = new std::map<int, DropoutStates>();
  const std::lock_guard<std::mutex> lock(mutex);
  DropoutStates& s = (*per_device)[current_device()];
  if (s.states == nullptr) {
    MINIDL_CUDNN_CHECK(cudnnDropoutGetStatesSize(cudnn(), &s.bytes));
    s.seed = static_cast<unsigned long long>(
        randint(0, std::int64_t{1} << 62, {1}, TensorOptions(kInt64)).item<std::int64_t>());
    s.states = device_alloc(s.bytes);
    cudnnDropoutDescriptor_t init = nullptr;
    MINIDL_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&init));
    const cudnnStatus_t st = cudnnSetDropoutDescriptor(init, cudnn(), 0.5f, s.states, s.bytes, s.seed);
    cudnnDestroyDropoutDescriptor(init);
    MINIDL_CUDNN_CHECK(st);
  }
  return s;
}

/// The RNN descriptor of `d` with its dropout descriptor (no generator states when there is no dropout).
class RnnDescriptor {
 public:
  explicit RnnDescriptor(const CudnnRnnDesc& d) {
    MINIDL_CUDNN_CHECK(cudnnCreateDropoutDescriptor(&dropout_));
    MINIDL_CUDNN_CHECK(cudnnCreateRNNDescriptor(&rnn_));
    if (d.dropout > 0.0) {
      const DropoutStates& s = dropout_states();
      MINIDL_CUDNN_CHECK(
          cudnnRestoreDropoutDescriptor(dropout_, cudnn(), static_cast<float>(d.dropout), s.states, s.bytes, s.seed));
    } else {
      MINIDL_CUDNN_CHECK(cudnnSetDropoutDescriptor(dropout_, cudnn(), 0.0f, nullptr, 0, 0));
    }
    const cudnnMathType_t math = d.double_precision ? CUDNN_DEFAULT_MATH
                                 : d.allow_tf32     ? CUDNN_DEFAULT_MATH
                                                    : CUDNN_FMA_MATH;
    MINIDL_CUDNN_CHECK(cudnnSetRNNDescriptor_v8(
        rnn_, CUDNN_RNN_ALGO_STANDARD, cell_mode(d.mode), d.bias ? CUDNN_RNN_DOUBLE_BIAS : CUDNN_RNN_NO_BIAS,
        d.bidirectional ? CUDNN_BIDIRECTIONAL : CUDNN_UNIDIRECTIONAL, CUDNN_LINEAR_INPUT, data_type(d), data_type(d),
        math, cudnn_dim(d.input_size, kOp, "input_size"), cudnn_dim(d.hidden_size, kOp, "hidden_size"),
        cudnn_dim(d.hidden_size, kOp, "hidden_size"), cudnn_dim(d.num_layers, kOp, "num_layers"), dropout_,
        CUDNN_RNN_PADDED_IO_DISABLED));
  }
  ~RnnDescriptor() {
    cudnnDestroyRNNDescriptor(rnn_);
    cudnnDestroyDropoutDescriptor(dropout_);
  }
  RnnDescriptor(const RnnDescriptor&) = delete;
  RnnDescriptor& operator=(const RnnDescriptor&) = delete;
  cudnnRNNDescriptor_t get() const { return rnn_; }

 private:
  cudnnDropoutDescriptor_t dropout_ = nullptr;
  cudnnRNNDescriptor_t rnn_ = nullptr;
};

/// Owns a cudnnRNNDataDescriptor_t: T steps of B full-length sequences of `width` values, sequence-major, packed.
class RnnData {
 public:
  RnnData(const CudnnRnnDesc& d, const CudnnRnnBatch& b, i64 width) {
    MINIDL_CUDNN_CHECK(cudnnCreateRNNDataDescriptor(&desc_));
    const int T = cudnn_dim(b.T, kOp, "sequence length"), B = cudnn_dim(b.B, kOp, "batch size");
    const std::vector<int> lengths(static_cast<std::size_t>(B), T);
    MINIDL_CUDNN_CHECK(cudnnSetRNNDataDescriptor(desc_, data_type(d), CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_PACKED, T, B,
                                                 cudnn_dim(width, kOp, "feature size"), lengths.data(), nullptr));
  }
  ~RnnData() { cudnnDestroyRNNDataDescriptor(desc_); }
  RnnData(const RnnData&) = delete;
  RnnData& operator=(const RnnData&) = delete;
  cudnnRNNDataDescriptor_t get() const { return desc_; }

 private:
  cudnnRNNDataDescriptor_t desc_ = nullptr;
};

/// Everything one call describes: the network, x, y and the (layers * directions, B, hidden) states.
struct CallDescriptors {
  RnnDescriptor rnn;
  RnnData x, y;
  TensorDescriptor h;
  CallDescriptors(const CudnnRnnDesc& d, const CudnnRnnBatch& b)
      : rnn(d), x(d, b, d.input_size), y(d, b, directions(d) * d.hidden_size) {
    const int dims[3] = {cudnn_dim(d.num_layers * directions(d), kOp, "layers * directions"),
                         cudnn_dim(b.B, kOp, "batch size"), cudnn_dim(d.hidden_size, kOp, "hidden_size")};
    const int strides[3] = {dims[1] * dims[2], dims[2], 1};
    MINIDL_CUDNN_CHECK(cudnnSetTensorNdDescriptor(h.get(), data_type(d), 3, dims, strides));
  }
};

/// The work and reserve space sizes of a call in `mode`.
std::pair<std::size_t, std::size_t> space_sizes(const CallDescriptors& c, cudnnForwardMode_t mode) {
  std::size_t work = 0, reserve = 0;
  MINIDL_CUDNN_CHECK(cudnnGetRNNTempSpaceSizes(cudnn(), c.rnn.get(), mode, c.x.get(), &work, &reserve));
  return {work, reserve};
}

void check_reserve(std::size_t given, std::size_t needed) {
  MINIDL_CHECK(given >= needed, ValueError, kOp, ": internal error, a reserve space of ", given, " bytes where ",
               needed, " are needed");
}

/// Elements of the tensor cuDNN described in `t`.
i64 described_numel(const TensorDescriptor& t) {
  cudnnDataType_t type;
  int nb = 0, dims[8] = {}, strides[8] = {};
  MINIDL_CUDNN_CHECK(cudnnGetTensorNdDescriptor(t.get(), 8, &type, &nb, dims, strides));
  i64 n = 1;
  for (int i = 0; i < nb; ++i) n *= dims[i];
  return n;
}

}  // namespace

std::optional<CudnnRnnWeightLayout> cudnn_rnn_weight_layout(const CudnnRnnDesc& desc) {
  CudnnRnnDesc d = desc;
  d.dropout = 0.0;
  d.allow_tf32 = false;
  const RnnDescriptor rnn(d);
  std::size_t space = 0;
  MINIDL_CUDNN_CHECK(cudnnGetRNNWeightSpaceSize(cudnn(), rnn.get(), &space));
  const i64 esize = element_bytes(d);
  if (space == 0 || space % static_cast<std::size_t>(esize) != 0) return std::nullopt;
  // cudnnGetRNNWeightParams returns addresses inside a given weight space; a scratch block stands in for it.
  const Workspace scratch(space, "the cuDNN RNN weight layout query");
  const char* base = scratch.as<char>();
  const int gates = kernels::rnn_gates(d.mode);
  const i64 H = d.hidden_size, D = directions(d);
  CudnnRnnWeightLayout layout;
  layout.numel = static_cast<i64>(space) / esize;
  TensorDescriptor m, b;
  for (i64 layer = 0; layer < d.num_layers; ++layer) {
    for (i64 dir = 0; dir < D; ++dir) {
      const int pseudo = static_cast<int>(layer * D + dir);
      const i64 in = layer == 0 ? d.input_size : D * H;
      // Linear layers 0 .. gates-1 multiply the input, gates .. 2*gates-1 the recurrent state, in PyTorch's gate
      // order; each of PyTorch's four parameters is one block only if its gates' matrices (biases) follow each
      // other without gaps.
      i64 start[4] = {-1, -1, -1, -1};
      for (int id = 0; id < 2 * gates; ++id) {
        void* m_addr = nullptr;
        void* b_addr = nullptr;
        MINIDL_CUDNN_CHECK(
            cudnnGetRNNWeightParams(cudnn(), rnn.get(), pseudo, space, base, id, m.get(), &m_addr, b.get(), &b_addr));
        const int side = id < gates ? 0 : 1, gate = id % gates;
        const i64 cols = side == 0 ? in : H;
        if (m_addr == nullptr || described_numel(m) != H * cols) return std::nullopt;
        const i64 m_off = (static_cast<const char*>(m_addr) - base) / esize;
        if (gate == 0) start[side] = m_off;
        if (m_off != start[side] + gate * H * cols) return std::nullopt;
        if (!d.bias) continue;
        if (b_addr == nullptr || described_numel(b) != H) return std::nullopt;
        const i64 b_off = (static_cast<const char*>(b_addr) - base) / esize;
        if (gate == 0) start[2 + side] = b_off;
        if (b_off != start[2 + side] + gate * H) return std::nullopt;
      }
      layout.offsets.insert(layout.offsets.end(), start, start + 4);
    }
  }
  return layout;
}

std::size_t cudnn_rnn_reserve_bytes(const CudnnRnnDesc& d, const CudnnRnnBatch& b, bool training) {
  if (!training) return 0;
  const CallDescriptors c(d, b);
  return space_sizes(c, CUDNN_FWD_MODE_TRAINING).second;
}

void cudnn_rnn_forward(const CudnnRnnDesc& d, const CudnnRnnBatch& b, bool training, const void* x, const void* hx,
                       const void* cx, const void* w, std::size_t w_bytes, void* y, void* hy, void* cy, void* reserve,
                       std::size_t reserve_bytes) {
  const CallDescriptors c(d, b);
  const cudnnForwardMode_t mode = training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE;
  const auto [work_bytes, reserve_needed] = space_sizes(c, mode);
  if (training) check_reserve(reserve_bytes, reserve_needed);
  const Workspace work(work_bytes, "a cuDNN RNN forward workspace");
  MINIDL_CUDNN_CHECK(cudnnRNNForward(cudnn(), c.rnn.get(), mode, b.seq_lengths, c.x.get(), x, c.y.get(), y, c.h.get(),
                                     hx, hy, c.h.get(), cx, cy, w_bytes, w, work_bytes, work.get(),
                                     training ? reserve_bytes : 0, training ? reserve : nullptr));
}

void cudnn_rnn_backward_data(const CudnnRnnDesc& d, const CudnnRnnBatch& b, const void* y, const void* dy, void* dx,
                             const void* hx, const void* dhy, void* dhx, const void* cx, const void* dcy, void* dcx,
                             const void* w, std::size_t w_bytes, void* reserve, std::size_t reserve_bytes) {
  const CallDescriptors c(d, b);
  const auto [work_bytes, reserve_needed] = space_sizes(c, CUDNN_FWD_MODE_TRAINING);
  check_reserve(reserve_bytes, reserve_needed);
  const Workspace work(work_bytes, "a cuDNN RNN backward workspace");
  MINIDL_CUDNN_CHECK(cudnnRNNBackwardData_v8(cudnn(), c.rnn.get(), b.seq_lengths, c.y.get(), y, dy, c.x.get(), dx,
                                             c.h.get(), hx, dhy, dhx, c.h.get(), cx, dcy, dcx, w_bytes, w, work_bytes,
                                             work.get(), reserve_bytes, reserve));
}

void cudnn_rnn_backward_weights(const CudnnRnnDesc& d, const CudnnRnnBatch& b, const void* x, const void* hx,
                                const void* y, void* dw, std::size_t w_bytes, void* reserve,
                                std::size_t reserve_bytes) {
  const CallDescriptors c(d, b);
  const auto [work_bytes, reserve_needed] = space_sizes(c, CUDNN_FWD_MODE_TRAINING);
  check_reserve(reserve_bytes, reserve_needed);
  const Workspace work(work_bytes, "a cuDNN RNN weight-gradient workspace");
  MINIDL_CUDNN_CHECK(cudnnRNNBackwardWeights_v8(cudnn(), c.rnn.get(), CUDNN_WGRAD_MODE_ADD, b.seq_lengths, c.x.get(), x,
                                                c.h.get(), hx, c.y.get(), y, w_bytes, dw, work_bytes, work.get(),
                                                reserve_bytes, reserve));
}

}  // namespace gpu
}  // namespace minidl
