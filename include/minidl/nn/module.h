#pragma once
// nn::Module: a node of the model tree that owns named parameters, buffers and submodules, as in LibTorch.
// Parameters are registered once; their Tensor handles stay valid when the module moves between devices
// (to() swaps the storage underneath), so optimizers can be built before or after to().
#include <memory>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "minidl/ordered_dict.h"
#include "minidl/tensor.h"

namespace minidl {
namespace nn {

template <class Impl>
class ModuleHolder;

class Module : public std::enable_shared_from_this<Module> {
 public:
  /// `name` is what printing shows; without one, the class's own name (name()).
  explicit Module(std::string name = {}) : name_(std::move(name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Single-tensor forward (what Sequential calls). Modules with other signatures define their own.
  virtual Tensor forward(const Tensor& input);

  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor tensor);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  /// LibTorch's holder form: `conv1(register_module("conv1", nn::Conv2d(...)))` or `register_module("fc", fc);`.
  template <class Holder, class = std::enable_if_t<
                              std::is_base_of_v<ModuleHolder<typename Holder::element_type>, Holder>>>
  Holder register_module(const std::string& name, Holder holder) {
    add_child(name, holder.ptr());
    return holder;
  }

  /// Replaces the submodule registered as `name` (which must exist) and returns the new one, as LibTorch's.
  std::shared_ptr<Module> replace_module(const std::string& name, std::shared_ptr<Module> module);
  /// Removes the submodule `name` (which must exist).
  void unregister_module(const std::string& name);

  std::vector<Tensor> parameters(bool recurse = true) const;
  /// LibTorch's OrderedDict: items with key() and value() (also .first/.second), keys(), values(), find, [key].
  OrderedDict<std::string, Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<std::string, Tensor> named_buffers(bool recurse = true) const;
  OrderedDict<std::string, std::shared_ptr<Module>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  /// Moves (or converts) every parameter and buffer in place.
  virtual void to(Device device);
  virtual void to(DType dtype);
  void zero_grad(bool set_to_none = true);

  /// The name given to the constructor, or else this object's class name without its namespaces and a trailing
  /// "Impl" (a `struct NetImpl : nn::Module` of MINIDL_MODULE(Net) is "Net"), as LibTorch prints modules.
  std::string name() const;
  /// One line describing this module's configuration, e.g. "Linear(in_features=4, out_features=2, bias=true)".
  virtual void pretty_print(std::ostream& os) const { os << name(); }

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  void collect(const std::string& prefix, bool recurse, bool params, OrderedDict<std::string, Tensor>& out) const;

  std::string name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> parameters_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

/// Prints the module tree with each module's configuration.
std::ostream& operator<<(std::ostream& os, const Module& m);

/// LibTorch's ModuleHolder: `nn::Linear fc(4, 2); fc->forward(x); fc(x);` — a shared handle to an Impl module.
template <class Impl>
class ModuleHolder {
 public:
  using element_type = Impl;
  /// Constructs the Impl from the arguments (not used for copies of a holder).
  template <class... Args, class = std::enable_if_t<!(sizeof...(Args) == 1 &&
                                                      (std::is_base_of_v<ModuleHolder, std::decay_t<Args>> && ...))>>
  explicit ModuleHolder(Args&&... args) : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {
    static_assert(std::is_base_of_v<Module, Impl>,
                  "MINIDL_MODULE(Name) needs a class NameImpl derived from minidl::nn::Module, defined before it");
  }
  ModuleHolder(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  /// An empty holder (`nn::Conv2d conv{nullptr};`), assigned a module later; using it before is a ValueError.
  ModuleHolder(std::nullptr_t) {}
  bool is_empty() const noexcept { return impl_ == nullptr; }
  explicit operator bool() const noexcept { return !is_empty(); }
  Impl* operator->() const { return get(); }
  Impl& operator*() const { return *get(); }
  Impl* get() const {
    MINIDL_CHECK(impl_ != nullptr, ValueError, "ModuleHolder: accessing an empty holder (constructed from nullptr); "
                 "assign a module to it first");
    return impl_.get();
  }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  operator std::shared_ptr<Module>() const { return impl_; }
  /// Indexes the module (ModuleList, ModuleDict, Sequential), as LibTorch's holder.
  template <class Arg>
  decltype(auto) operator[](Arg&& arg) const {
    return (*get())[std::forward<Arg>(arg)];
  }
  template <class... Args>
  auto operator()(Args&&... args) const {
    return get()->forward(std::forward<Args>(args)...);
  }

 private:
  std::shared_ptr<Impl> impl_;
};

/// Prints the holder's module tree (`std::cout << model`), as for the module itself.
template <class Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& holder) {
  return os << static_cast<const Module&>(*holder);
}

}  // namespace nn
}  // namespace minidl

/// Declares `Name` as a ModuleHolder of `NameImpl`, like TORCH_MODULE.
#define MINIDL_MODULE(Name)                                 \
  class Name : public ::minidl::nn::ModuleHolder<Name##Impl> { \
   public:                                                  \
    using ::minidl::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
  }
