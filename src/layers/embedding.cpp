// Embedding and one_hot. The embedding's forward is one indexed gather of weight rows (ops/index_access.h: any
// index shape and strides, out-of-range indices reported as the IndexError naming the caller); its backward adds
// the gradient rows into a zero table with index_add, the padding row's gradient masked out first, so the
// gradient is itself differentiable.
#include "minidl/nn/modules/embedding.h"

#include "minidl/autograd.h"
#include "minidl/indexing.h"
#include "minidl/joining.h"
#include "minidl/nn/init.h"
#include "ops/index_access.h"
#include "ops/op_utils.h"

namespace minidl {
namespace nn {
namespace {

/// padding_idx within [-num, num), wrapped to [0, num).
std::optional<std::int64_t> wrapped_padding(std::optional<std::int64_t> padding_idx, std::int64_t num, const char* op) {
  if (!padding_idx) return padding_idx;
  const std::int64_t p = *padding_idx;
  MINIDL_CHECK(p >= -num && p < num, ValueError, op, ": padding_idx must be within [", -num, ", ", num,
               ") for num_embeddings = ", num, ", found ", p);
  return p < 0 ? p + num : p;
}

Tensor embedding_impl(const Tensor& input, const Tensor& weight, std::optional<std::int64_t> padding_idx,
                      const char* op) {
  ops::check_defined(input, op, "input");
  ops::check_defined(weight, op, "weight");
  ops::check_floating(weight, op);
  MINIDL_CHECK(weight.dim() == 2, ValueError, op, ": weight must be 2-d (num_embeddings, embedding_dim), found shape ",
               shape_str(weight.sizes()));
  const Tensor index = ops::index_operand(input, weight.device(), true, op, "input");
  const std::optional<std::int64_t> pad = wrapped_padding(padding_idx, weight.size(0), op);
  Shape shape = index.sizes();
  shape.push_back(weight.size(1));
  Shape data_strides(shape.size(), 0), index_strides = index.strides();
  data_strides.back() = weight.stride(1);
  index_strides.push_back(0);
  const Tensor out = ops::index_gather(weight, shape, data_strides, {{index, index_strides, 0, "input"}}, false, op);
  const autograd::SavedTensor saved(index, op);
  const Shape weight_shape = weight.sizes();
  return autograd::record(out, "EmbeddingBackward", {weight}, [saved, weight_shape, pad](const Tensor& g) {
    const Tensor ix = saved.get();
    Tensor rows = g.reshape({-1, weight_shape[1]});
    const Tensor flat = ix.reshape({-1});
    if (pad) rows = masked_fill(rows, flat.eq(*pad).unsqueeze(1), 0.0);
    Tensor dweight = zeros(weight_shape, TensorOptions(g.dtype()).device(g.device()));
    return std::vector<Tensor>{index_add(dweight, 0, flat, rows)};
  });
}

}  // namespace

namespace functional {

Tensor embedding(const Tensor& input, const Tensor& weight, const EmbeddingFuncOptions& options) {
  return embedding_impl(input, weight, options.padding_idx(), "embedding");
}

Tensor one_hot(const Tensor& tensor, std::int64_t num_classes) {
  ops::check_defined(tensor, "one_hot", "tensor");
  MINIDL_CHECK(tensor.dtype() == kInt64, TypeError, "one_hot: tensor must be int64 class indices, found ",
               tensor.dtype());
  MINIDL_CHECK(num_classes == -1 || num_classes >= 0, ValueError,
               "one_hot: num_classes must be -1 (inferred) or non-negative, found ", num_classes);
  if (num_classes == -1) {
    MINIDL_CHECK(tensor.numel() > 0, ValueError,
                 "one_hot: cannot infer the number of classes from an empty tensor (pass num_classes)");
    num_classes = tensor.max().item<std::int64_t>() + 1;  // a host read, as PyTorch's
  }
  if (!tensor.is_cuda() && tensor.numel() > 0) {
    const std::int64_t lo = tensor.min().item<std::int64_t>(), hi = tensor.max().item<std::int64_t>();
    MINIDL_CHECK(lo >= 0, ValueError, "one_hot: class values must be non-negative, found ", lo);
    MINIDL_CHECK(hi < num_classes, ValueError, "one_hot: class values must be smaller than num_classes (", num_classes,
                 "), found ", hi);
  }
  const Tensor classes = arange(num_classes, TensorOptions(kInt64).device(tensor.device()));
  return tensor.unsqueeze(-1).eq(classes).to(kInt64);
}

}  // namespace functional

EmbeddingImpl::EmbeddingImpl(EmbeddingOptions o) : Module("Embedding"), options(std::move(o)) {
  if (options._weight().defined()) {
    const Tensor& w = options._weight();
    MINIDL_CHECK(w.dim() == 2, ValueError, "Embedding: the weight must be 2-d (num_embeddings, embedding_dim), found ",
                 "shape ", shape_str(w.sizes()));
    MINIDL_CHECK(w.size(0) == options.num_embeddings() && w.size(1) == options.embedding_dim(), ValueError,
                 "Embedding: the weight's shape ", shape_str(w.sizes()), " differs from (num_embeddings, ",
                 "embedding_dim) = [", options.num_embeddings(), ", ", options.embedding_dim(), "]");
  }
  MINIDL_CHECK(options.num_embeddings() >= 0 && options.embedding_dim() >= 0, ValueError,
               "Embedding: num_embeddings and embedding_dim must be non-negative, found ", options.num_embeddings(),
               " and ", options.embedding_dim());
  options.padding_idx(wrapped_padding(options.padding_idx(), options.num_embeddings(), "Embedding"));
  if (options._weight().defined()) {
    weight = register_parameter("weight", options._weight().detach());
  } else {
    weight = register_parameter("weight", empty({options.num_embeddings(), options.embedding_dim()}));
    reset_parameters();
  }
}

void EmbeddingImpl::reset_parameters() {
  NoGradGuard no_grad;
  init::normal_(weight);
  if (options.padding_idx()) weight.select(0, *options.padding_idx()).fill_(0.0);
}

Tensor EmbeddingImpl::forward(const Tensor& input) {
  return embedding_impl(input, weight, options.padding_idx(), "Embedding");
}

void EmbeddingImpl::pretty_print(std::ostream& os) const {
  os << "Embedding(num_embeddings=" << options.num_embeddings() << ", embedding_dim=" << options.embedding_dim();
  if (options.padding_idx()) os << ", padding_idx=" << *options.padding_idx();
  os << ")";
}

Embedding Embedding::from_pretrained(const Tensor& embeddings, const EmbeddingFromPretrainedOptions& options) {
  MINIDL_CHECK(embeddings.defined() && embeddings.dim() == 2, ValueError,
               "Embedding::from_pretrained: embeddings must be a 2-d tensor, found ",
               embeddings.defined() ? shape_str(embeddings.sizes()) : std::string("an undefined tensor"));
  Embedding e(
      EmbeddingOptions(embeddings.size(0), embeddings.size(1))._weight(embeddings).padding_idx(options.padding_idx()));
  e->weight.requires_grad_(!options.freeze());
  return e;
}

}  // namespace nn
}  // namespace minidl
