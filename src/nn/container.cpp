// ModuleList and ModuleDict: the containers keep their own ordered handles and register each module as a child,
// so parameters, printing, train()/eval() and to() reach them as any submodule.
#include "minidl/nn/modules/container.h"

namespace minidl {
namespace nn {

void ModuleListImpl::push_back(std::shared_ptr<Module> module) {
  MINIDL_CHECK(module != nullptr, ValueError, "ModuleList.push_back: module is null (an empty holder?)");
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

void ModuleListImpl::insert(std::size_t index, std::shared_ptr<Module> module) {
  MINIDL_CHECK(module != nullptr, ValueError, "ModuleList.insert: module is null (an empty holder?)");
  MINIDL_CHECK(index <= modules_.size(), IndexError, "ModuleList.insert: index ", index, " is out of range for ",
               modules_.size(), " modules");
  for (std::size_t i = 0; i < modules_.size(); ++i) unregister_module(std::to_string(i));
  modules_.insert(modules_.begin() + static_cast<std::ptrdiff_t>(index), std::move(module));
  for (std::size_t i = 0; i < modules_.size(); ++i) register_module(std::to_string(i), modules_[i]);
}

const std::shared_ptr<Module>& ModuleListImpl::ptr(std::size_t index) const {
  MINIDL_CHECK(index < modules_.size(), IndexError, "ModuleList: index ", index, " is out of range for ",
               modules_.size(), " modules");
  return modules_[index];
}

ModuleDictImpl::ModuleDictImpl(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules)
    : ModuleDictImpl() {
  for (const auto& [k, m] : modules) insert(k, m);
}

ModuleDictImpl::ModuleDictImpl(const OrderedDict<std::string, std::shared_ptr<Module>>& modules) : ModuleDictImpl() {
  for (const auto& [k, m] : modules) insert(k, m);
}

std::shared_ptr<Module> ModuleDictImpl::insert(const std::string& key, std::shared_ptr<Module> module) {
  MINIDL_CHECK(module != nullptr, ValueError, "ModuleDict.insert(\"", key, "\"): module is null (an empty holder?)");
  MINIDL_CHECK(!modules_.contains(key), ValueError, "ModuleDict.insert: a module named \"", key,
               "\" already exists (update() replaces it)");
  register_module(key, module);
  return modules_.insert(key, std::move(module));
}

void ModuleDictImpl::update(const std::string& key, std::shared_ptr<Module> module) {
  if (!modules_.contains(key)) {
    insert(key, std::move(module));
    return;
  }
  MINIDL_CHECK(module != nullptr, ValueError, "ModuleDict.update(\"", key, "\"): module is null (an empty holder?)");
  replace_module(key, module);
  modules_[key] = std::move(module);
}

}  // namespace nn
}  // namespace minidl
