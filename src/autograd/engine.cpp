// The backward pass: find every node reachable from the roots, count how many consumers each has, then run
// nodes once all their consumers have delivered their gradient (Kahn's algorithm; among ready nodes the most
// recently created goes first, which keeps peak memory close to the forward pass's).
#include <algorithm>
#include <atomic>
#include <functional>
#include <queue>
#include <unordered_map>

#include "autocast/policy.h"
#include "autograd/anomaly.h"
#include "autograd/node.h"
#include "minidl/ops.h"

namespace minidl {
namespace autograd {

namespace {
struct ByNewest {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr() < b->sequence_nr(); }
};

void accumulate(std::unordered_map<Node*, Tensor>& buffer, Node* node, const Tensor& g) {
  auto it = buffer.find(node);
  if (it == buffer.end()) {
    buffer.emplace(node, g);
  } else {
    it->second = add(it->second, g);
  }
}
}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  MINIDL_CHECK(roots.size() == grads.size(), ValueError, "backward: ", roots.size(), " tensors but ", grads.size(),
               " gradients");
  NoGradGuard no_grad;  // the backward closures themselves are not recorded
  // Backward rules compute in the dtypes their forward chose: autocast is off here, as on PyTorch's engine threads.
  const autocast::policy::Suspend no_autocast;
  std::unordered_map<Node*, Tensor> buffer;
  std::vector<std::shared_ptr<Node>> keep_alive;
  for (std::size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    MINIDL_CHECK(r.requires_grad(), AutogradError,
                 "backward: element ", i, " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grads[i];
    if (!g.defined()) {
      MINIDL_CHECK(r.numel() == 1, AutogradError, "backward: grad can be implicitly created only for tensors with one "
                   "element; this one has shape ", shape_str(r.sizes()), " (pass a gradient of that shape)");
      g = ones_like(r);
    }
    MINIDL_CHECK(g.sizes() == r.sizes() && g.dtype() == r.dtype() && g.device() == r.device(), ValueError,
                 "backward: gradient has shape ", shape_str(g.sizes()), ", ", g.dtype(), " on ", g.device(),
                 "; expected shape ", shape_str(r.sizes()), ", ", r.dtype(), " on ", r.device());
    auto node = r.grad_fn() ? r.grad_fn() : grad_accumulator(r);
    keep_alive.push_back(node);
    accumulate(buffer, node.get(), g);
  }

  // Dependency counts: how many edges point at each node from nodes reachable from the roots.
  std::unordered_map<Node*, int> pending;
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (auto& n : keep_alive) {
    if (!seen[n.get()]) {
      seen[n.get()] = true;
      stack.push_back(n.get());
    }
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const auto& next : n->next_functions()) {
      if (!next) continue;
      ++pending[next.get()];
      if (!seen[next.get()]) {
        seen[next.get()] = true;
        stack.push_back(next.get());
      }
    }
  }

  std::priority_queue<Node*, std::vector<Node*>, ByNewest> ready;
  // A node whose consumers are all done runs if it received a gradient; one that received none (every path
  // to it carried none) is passed over, and its own children are released from waiting on it.
  std::function<void(Node*)> became_ready = [&](Node* n) {
    if (buffer.count(n)) {
      ready.push(n);
      return;
    }
    for (const auto& next : n->next_functions()) {
      if (next && --pending[next.get()] == 0) became_ready(next.get());
    }
  };
  for (auto& n : keep_alive) {
    if (pending[n.get()] == 0) {
      pending[n.get()] = -1;  // queued once even if listed as a root twice
      became_ready(n.get());
    }
  }
  while (!ready.empty()) {
    Node* n = ready.top();
    ready.pop();
    auto it = buffer.find(n);
    Tensor g = std::move(it->second);
    buffer.erase(it);
    std::vector<Tensor> input_grads = n->apply(g);
    if (detect_anomaly()) anomaly::check_backward(*n, g, input_grads);
    g = Tensor();
    const auto& next = n->next_functions();
    for (std::size_t i = 0; i < next.size(); ++i) {
      Node* child = next[i].get();
      if (!child) continue;
      if (i < input_grads.size() && input_grads[i].defined()) accumulate(buffer, child, input_grads[i]);
      if (--pending[child] == 0) became_ready(child);
    }
    if (!retain_graph) n->release();
  }
}

}  // namespace autograd

bool Tensor::requires_grad() const {
  const TensorImpl* i = unsafe_impl();
  return i && (i->requires_grad || i->grad_fn != nullptr);
}

Tensor& Tensor::requires_grad_(bool r) {
  MINIDL_CHECK(defined(), ValueError, "requires_grad_: called on an undefined tensor");
  MINIDL_CHECK(is_leaf(), AutogradError, "requires_grad_: you can only change requires_grad flags of leaf tensors "
               "(this one was produced by ", grad_fn()->name(), "); use detach() first");
  MINIDL_CHECK(!r || minidl::is_floating_point(dtype()), TypeError,
               "requires_grad_: only floating tensors can require gradients, this one is ", dtype());
  unsafe_impl()->requires_grad = r;
  return *this;
}

Tensor Tensor::grad() const { return defined() ? unsafe_impl()->grad : Tensor(); }

Tensor& Tensor::mutable_grad() const {
  MINIDL_CHECK(defined(), ValueError, "mutable_grad: called on an undefined tensor");
  return unsafe_impl()->grad;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  autograd::backward({*this}, {gradient}, retain_graph);
}

Tensor Tensor::detach() const {
  MINIDL_CHECK(defined(), ValueError, "detach: called on an undefined tensor");
  const TensorImpl* i = unsafe_impl();
  return Tensor(std::make_shared<TensorImpl>(i->storage, i->byte_offset, i->shape, i->strides, i->dtype));
}

std::uint64_t Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  static std::atomic<std::uint64_t> next_handle{1};
  MINIDL_CHECK(defined(), ValueError, "register_post_accumulate_grad_hook: called on an undefined tensor");
  MINIDL_CHECK(is_leaf() && requires_grad(), AutogradError, "register_post_accumulate_grad_hook: only leaf tensors "
               "that require grad accumulate gradients (this one ", is_leaf() ? "does not require grad" :
               "was produced by " + grad_fn()->name(), ")");
  MINIDL_CHECK(hook != nullptr, ValueError, "register_post_accumulate_grad_hook: the hook is empty");
  const std::uint64_t handle = next_handle.fetch_add(1);
  unsafe_impl()->post_accumulate_grad_hooks.emplace_back(handle, std::move(hook));
  return handle;
}

void Tensor::remove_post_accumulate_grad_hook(std::uint64_t handle) const {
  if (!defined()) return;
  auto& hooks = unsafe_impl()->post_accumulate_grad_hooks;
  hooks.erase(std::remove_if(hooks.begin(), hooks.end(), [&](const auto& h) { return h.first == handle; }),
              hooks.end());
}

bool Tensor::is_leaf() const { return defined() && unsafe_impl()->grad_fn == nullptr; }

std::shared_ptr<autograd::Node> Tensor::grad_fn() const { return defined() ? unsafe_impl()->grad_fn : nullptr; }

}  // namespace minidl
