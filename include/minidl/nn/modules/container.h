#pragma once
// LibTorch's module containers: ModuleList (submodules "0", "1", ... in order, no forward of its own),
// ModuleDict (submodules by name, in insertion order) and Identity.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "minidl/nn/module.h"

namespace minidl {
namespace nn {

/// A list of submodules, registered as "0", "1", ...; iterate it or index it, and call each one's forward.
class ModuleListImpl : public Module {
 public:
  using Iterator = std::vector<std::shared_ptr<Module>>::iterator;
  using ConstIterator = std::vector<std::shared_ptr<Module>>::const_iterator;

  ModuleListImpl() : Module("ModuleList") {}
  template <class... Ms>
  explicit ModuleListImpl(Ms&&... modules) : Module("ModuleList") {
    (push_back(std::forward<Ms>(modules)), ...);
  }

  void push_back(std::shared_ptr<Module> module);
  template <class Impl>
  void push_back(const ModuleHolder<Impl>& holder) {
    push_back(std::static_pointer_cast<Module>(holder.ptr()));
  }
  /// Appends every module of `container` (another ModuleList, or a vector of modules or holders).
  template <class Container>
  void extend(const Container& container) {
    for (const auto& m : container) push_back(m);
  }
  /// Inserts `module` at `index` (0 <= index <= size()); the later ones move up by one, names included.
  void insert(std::size_t index, std::shared_ptr<Module> module);
  template <class Impl>
  void insert(std::size_t index, const ModuleHolder<Impl>& holder) {
    insert(index, std::static_pointer_cast<Module>(holder.ptr()));
  }

  std::size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.empty(); }
  /// The module at `index`; out of range is an IndexError.
  const std::shared_ptr<Module>& operator[](std::size_t index) const { return ptr(index); }
  const std::shared_ptr<Module>& ptr(std::size_t index) const;
  /// The module at `index` as T (its Impl type); another type is a TypeError.
  template <class T>
  std::shared_ptr<T> ptr(std::size_t index) const {
    auto p = std::dynamic_pointer_cast<T>(ptr(index));
    MINIDL_CHECK(p != nullptr, TypeError, "ModuleList: the module at index ", index, " (", ptr(index)->name(),
                 ") is not of the requested type");
    return p;
  }
  template <class T>
  T& at(std::size_t index) const {
    return *ptr<T>(index);
  }

  Iterator begin() { return modules_.begin(); }
  Iterator end() { return modules_.end(); }
  ConstIterator begin() const { return modules_.begin(); }
  ConstIterator end() const { return modules_.end(); }

  void pretty_print(std::ostream& os) const override { os << "ModuleList"; }

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};
MINIDL_MODULE(ModuleList);

/// Submodules by name, in insertion order (LibTorch's ModuleDict).
class ModuleDictImpl : public Module {
 public:
  ModuleDictImpl() : Module("ModuleDict") {}
  explicit ModuleDictImpl(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules);
  explicit ModuleDictImpl(const OrderedDict<std::string, std::shared_ptr<Module>>& modules);

  /// Adds `module` under `key`, or replaces the module already there.
  void update(const std::string& key, std::shared_ptr<Module> module);
  template <class Impl>
  void update(const std::string& key, const ModuleHolder<Impl>& holder) {
    update(key, std::static_pointer_cast<Module>(holder.ptr()));
  }
  void update(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules) {
    for (const auto& [k, m] : modules) update(k, m);
  }
  /// Adds `module` under a new key (a key already present is a ValueError).
  std::shared_ptr<Module> insert(const std::string& key, std::shared_ptr<Module> module);
  template <class Impl>
  std::shared_ptr<Module> insert(const std::string& key, const ModuleHolder<Impl>& holder) {
    return insert(key, std::static_pointer_cast<Module>(holder.ptr()));
  }

  std::size_t size() const { return modules_.size(); }
  bool is_empty() const { return modules_.is_empty(); }
  bool contains(const std::string& key) const { return modules_.contains(key); }
  /// The module under `key`; an absent key is an IndexError naming it.
  const std::shared_ptr<Module>& operator[](const std::string& key) const { return modules_[key]; }
  template <class T>
  std::shared_ptr<T> ptr(const std::string& key) const {
    auto p = std::dynamic_pointer_cast<T>(modules_[key]);
    MINIDL_CHECK(p != nullptr, TypeError, "ModuleDict: the module '", key, "' (", modules_[key]->name(),
                 ") is not of the requested type");
    return p;
  }
  template <class T>
  T& at(const std::string& key) const {
    return *ptr<T>(key);
  }
  std::vector<std::string> keys() const { return modules_.keys(); }
  std::vector<std::shared_ptr<Module>> values() const { return modules_.values(); }
  const std::vector<OrderedDict<std::string, std::shared_ptr<Module>>::Item>& items() const { return modules_.items(); }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

  void pretty_print(std::ostream& os) const override { os << "ModuleDict"; }

 private:
  OrderedDict<std::string, std::shared_ptr<Module>> modules_{"Module"};
};
MINIDL_MODULE(ModuleDict);

/// Returns its input (a placeholder, e.g. for a layer switched off by an option).
class IdentityImpl : public Module {
 public:
  IdentityImpl() : Module("Identity") {}
  Tensor forward(const Tensor& input) override { return input; }
};
MINIDL_MODULE(Identity);

}  // namespace nn
}  // namespace minidl
