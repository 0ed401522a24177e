#include "ops/index_access.h"

#include <algorithm>

#include "kernels/backend.h"
#include "kernels/index_geometry.h"
#include "ops/op_utils.h"

namespace minidl {
namespace ops {
namespace {

std::vector<kernels::IndexOperand> operands(const Tensor& data, const std::vector<IndexArg>& indices) {
  std::vector<kernels::IndexOperand> r;
  for (const IndexArg& ix : indices) {
    r.push_back({ix.index.data_ptr<std::int64_t>(), ix.strides, data.stride(ix.dim), data.size(ix.dim)});
  }
  return r;
}

/// "[1, 0]" for flat position j of a tensor of `shape` ("" for a 0-d one).
std::string position(std::int64_t j, const Shape& shape) {
  if (shape.empty()) return "";
  std::vector<std::int64_t> c(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    c[d] = j % shape[d];
    j /= shape[d];
  }
  std::string s = "[";
  for (std::size_t d = 0; d < c.size(); ++d) s += (d ? ", " : "") + std::to_string(c[d]);
  return s + "]";
}

/// The IndexError for a fault the kernel reported: the value's first position is found again on the host (the
/// error path alone pays for that).
[[noreturn]] void throw_fault(const kernels::IndexFault& fault, const Tensor& data,
                              const std::vector<IndexArg>& indices, bool wrap, const char* op) {
  const IndexArg& ix = indices[static_cast<std::size_t>(fault.index)];
  const std::int64_t n = data.size(ix.dim), lo = wrap ? -n : 0;
  const std::vector<std::int64_t> values = ix.index.cpu().contiguous().to_vector<std::int64_t>();
  std::int64_t j = 0, value = fault.value;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < lo || values[i] >= n) {
      j = static_cast<std::int64_t>(i);
      value = values[i];
      break;
    }
  }
  throw IndexError(detail::str(op, ": ", ix.name, position(j, ix.index.sizes()), " = ", value,
                               " is out of range for dimension ", ix.dim, " of size ", n, " (expected a value in [", lo,
                               ", ", n, "); self has shape ", shape_str(data.sizes()), ")"));
}

/// The backend kernel of `device` called with `args` (the kernels here return a value, which MINIDL_ON_BACKEND
/// does not pass on).
template <class Cpu, class Gpu>
kernels::IndexFault on_backend(Device device, Cpu&& on_cpu, Gpu&& on_gpu) {
  if (device.is_cuda()) {
#if MINIDL_CUDA_ENABLED
    const gpu::DeviceGuard guard(device.index());
    return on_gpu();
#else
    (void)on_gpu;
    detail::throw_cuda_not_built();
#endif
  }
  return on_cpu();
}

}  // namespace

Tensor index_gather(const Tensor& data, const Shape& shape, const Shape& data_strides,
                    const std::vector<IndexArg>& indices, bool wrap_negative, const char* op) {
  Tensor out = empty_as(shape, data);
  const kernels::IndexGeometry g =
      kernels::index_geometry(shape, data_strides, out.strides(), operands(data, indices), wrap_negative, op);
  const kernels::IndexFault fault = on_backend(
      data.device(), [&] { return cpu::index_gather(g, data, out); },
      [&] {
#if MINIDL_CUDA_ENABLED
        return gpu::index_gather(g, data, out);
#else
        return kernels::IndexFault{};
#endif
      });
  if (fault.any()) throw_fault(fault, data, indices, wrap_negative, op);
  return out;
}

void index_scatter(const Tensor& data, const Shape& shape, const Shape& data_strides, const Tensor& values,
                   const Shape& values_strides, const std::vector<IndexArg>& indices, bool wrap_negative,
                   bool accumulate, const char* op) {
  const kernels::IndexGeometry g =
      kernels::index_geometry(shape, data_strides, values_strides, operands(data, indices), wrap_negative, op);
  Tensor target = data;
  const kernels::IndexFault fault = on_backend(
      data.device(), [&] { return cpu::index_scatter(g, values, target, accumulate); },
      [&] {
#if MINIDL_CUDA_ENABLED
        return gpu::index_scatter(g, values, target, accumulate);
#else
        return kernels::IndexFault{};
#endif
      });
  if (fault.any()) throw_fault(fault, data, indices, wrap_negative, op);
}

Shape strides_without(const Tensor& t, std::int64_t dim) {
  Shape s = t.strides();
  s[static_cast<std::size_t>(dim)] = 0;
  return s;
}

void check_no_internal_overlap(const Tensor& t, const char* op, const char* arg) {
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < t.sizes().size(); ++i) {
    if (t.sizes()[i] == 0) return;
    if (t.sizes()[i] > 1) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return t.strides()[x] < t.strides()[y]; });
  std::int64_t span = 0;
  for (const std::size_t i : order) {
    MINIDL_CHECK(t.strides()[i] > span, ValueError, op, ": '", arg, "' (shape ", shape_str(t.sizes()), ", strides ",
                 shape_str(t.strides()),
                 ") has elements that share memory (an expanded view); an in-place write to "
                 "it is not supported: clone() it first");
    span += (t.sizes()[i] - 1) * t.strides()[i];
  }
}

Tensor index_operand(const Tensor& index, Device device, bool int32_ok, const char* op, const char* arg) {
  check_defined(index, op, arg);
  MINIDL_CHECK(index.dtype() == kInt64 || (int32_ok && index.dtype() == kInt32), TypeError, op, ": expected '", arg,
               "' of dtype int64", int32_ok ? " or int32" : "", ", found ", index.dtype());
  MINIDL_CHECK(index.device() == device, TypeError, op, ": expected '", arg, "' on the device of 'self' (", device,
               "), found ", index.device());
  return index.dtype() == kInt64 ? index.detach() : index.detach().to(kInt64);
}

}  // namespace ops
}  // namespace minidl
