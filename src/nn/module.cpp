#include "minidl/nn/module.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <typeinfo>

#if defined(__GNUG__)
#include <cxxabi.h>
#endif

#include "core/tensor_impl.h"

namespace minidl {
namespace nn {
namespace {

void check_name(const std::string& name, const std::string& owner, const char* what) {
  MINIDL_CHECK(!name.empty() && name.find('.') == std::string::npos, ValueError, owner, ".register_", what,
               ": name must be non-empty and contain no '.', found \"", name, "\"");
}

/// Replaces t's data with `moved` in place, so every handle to t sees the new device/dtype.
void swap_storage(const Tensor& t, const Tensor& moved) {
  TensorImpl* impl = t.unsafe_impl();
  const TensorImpl* src = moved.unsafe_impl();
  impl->storage = src->storage;
  impl->byte_offset = src->byte_offset;
  impl->strides = src->strides;
  impl->contiguous = src->contiguous;
  impl->dtype = src->dtype;
}

/// The class name of `m` without namespaces, template arguments kept (e.g. "NetImpl", "Block<2>").
std::string class_name(const Module& m) {
  std::string name = typeid(m).name();
#if defined(__GNUG__)
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                                         std::free);
  if (status == 0 && demangled) name = demangled.get();
#endif
  // The last "::" outside template arguments starts the unqualified name.
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] == '<') ++depth;
    if (name[i] == '>') --depth;
    if (depth == 0 && name.compare(i, 2, "::") == 0) start = i + 2;
  }
  return name.substr(start);
}

}  // namespace

std::string Module::name() const {
  if (!name_.empty()) return name_;
  std::string n = class_name(*this);
  constexpr const char kSuffix[] = "Impl";
  const std::size_t len = sizeof kSuffix - 1;
  if (n.size() > len && n.compare(n.size() - len, len, kSuffix) == 0) n.erase(n.size() - len);
  return n;
}

Tensor Module::forward(const Tensor&) {
  throw ValueError(this->name() + ": this module has no single-tensor forward(); call its own forward overload");
}

Tensor& Module::register_parameter(const std::string& name, Tensor tensor, bool requires_grad) {
  check_name(name, this->name(), "parameter");
  for (const auto& p : parameters_) {
    MINIDL_CHECK(p.first != name, ValueError, this->name(),
                 ".register_parameter: a parameter named \"", name, "\" already exists");
  }
  MINIDL_CHECK(tensor.defined(), ValueError, this->name(), ".register_parameter(\"", name, "\"): tensor is undefined");
  if (requires_grad) tensor.requires_grad_(true);
  parameters_.emplace_back(name, tensor);
  return parameters_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor) {
  check_name(name, this->name(), "buffer");
  for (const auto& b : buffers_) {
    MINIDL_CHECK(b.first != name, ValueError, this->name(),
                 ".register_buffer: a buffer named \"", name, "\" already exists");
  }
  buffers_.emplace_back(name, tensor);
  return buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_name(name, this->name(), "module");
  MINIDL_CHECK(module != nullptr, ValueError, this->name(), ".register_module(\"", name, "\"): module is null");
  for (const auto& c : children_) {
    MINIDL_CHECK(c.first != name, ValueError, this->name(),
                 ".register_module: a submodule named \"", name, "\" already exists");
  }
  children_.emplace_back(name, std::move(module));
}

std::shared_ptr<Module> Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  MINIDL_CHECK(module != nullptr, ValueError, this->name(), ".replace_module(\"", name, "\"): module is null");
  for (auto& c : children_) {
    if (c.first == name) return c.second = std::move(module);
  }
  throw IndexError(
      ::minidl::detail::str(this->name(), ".replace_module: no submodule named \"", name, "\""));
}

void Module::unregister_module(const std::string& name) {
  const auto it = std::find_if(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; });
  MINIDL_CHECK(it != children_.end(), IndexError, this->name(), ".unregister_module: no submodule named \"", name,
               "\"");
  children_.erase(it);
}

void Module::collect(const std::string& prefix, bool recurse, bool params,
                     OrderedDict<std::string, Tensor>& out) const {
  for (const auto& [n, t] : params ? parameters_ : buffers_) {
    if (t.defined()) out.insert(prefix + n, t);
  }
  if (!recurse) return;
  for (const auto& [n, c] : children_) c->collect(prefix + n + ".", true, params, out);
}

OrderedDict<std::string, Tensor> Module::named_parameters(bool recurse) const {
  OrderedDict<std::string, Tensor> out("Parameter");
  collect("", recurse, true, out);
  return out;
}

OrderedDict<std::string, Tensor> Module::named_buffers(bool recurse) const {
  OrderedDict<std::string, Tensor> out("Buffer");
  collect("", recurse, false, out);
  return out;
}

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_children() const {
  OrderedDict<std::string, std::shared_ptr<Module>> out("Submodule");
  for (const auto& [n, c] : children_) out.insert(n, c);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& c : children_) out.push_back(c.second);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& p : named_parameters(recurse)) out.push_back(p.second);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& b : named_buffers(recurse)) out.push_back(b.second);
  return out;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& c : children_) c.second->train(on);
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto& [n, t] : named_parameters()) {
    swap_storage(t, t.detach().to(device));
    if (t.grad().defined()) t.mutable_grad() = t.grad().to(device);
  }
  for (auto& [n, t] : named_buffers()) swap_storage(t, t.to(device));
}

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  for (auto& [n, t] : named_parameters()) {
    if (!is_floating_point(t.dtype())) continue;
    swap_storage(t, t.detach().to(dtype));
    if (t.grad().defined()) t.mutable_grad() = t.grad().to(dtype);
  }
  for (auto& [n, t] : named_buffers()) {
    if (is_floating_point(t.dtype())) swap_storage(t, t.to(dtype));
  }
}

void Module::zero_grad(bool set_to_none) {
  for (auto& p : parameters()) {
    if (!p.grad().defined()) continue;
    if (set_to_none) {
      p.mutable_grad() = Tensor();
    } else {
      NoGradGuard g;
      p.mutable_grad().zero_();
    }
  }
}

std::ostream& operator<<(std::ostream& os, const Module& m) {
  std::function<void(const Module&, int)> rec = [&](const Module& mod, int depth) {
    mod.pretty_print(os);
    const auto children = mod.named_children();
    if (children.empty()) return;
    os << "(\n";
    for (const auto& [n, c] : children) {
      os << std::string(static_cast<std::size_t>(depth + 1) * 2, ' ') << "(" << n << "): ";
      rec(*c, depth + 1);
      os << "\n";
    }
    os << std::string(static_cast<std::size_t>(depth) * 2, ' ') << ")";
  };
  rec(m, 0);
  return os;
}

}  // namespace nn
}  // namespace minidl
