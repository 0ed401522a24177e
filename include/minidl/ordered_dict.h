#pragma once
// LibTorch's OrderedDict (torch/ordered_dict.h): items in insertion order, looked up by key. What
// Module::named_parameters(), named_buffers() and named_children() return. Each item has key() and value(), and
// also the public members `first` and `second`, so `for (const auto& [name, p] : m->named_parameters())` and
// `item.first` work as for a vector of pairs.
#include <cstddef>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "minidl/errors.h"

namespace minidl {

template <class Key, class Value>
class OrderedDict {
 public:
  class Item {
   public:
    Item(Key key, Value value) : first(std::move(key)), second(std::move(value)) {}
    const Key& key() const { return first; }
    Value& value() { return second; }
    const Value& value() const { return second; }
    Value& operator*() { return second; }
    const Value& operator*() const { return second; }
    Value* operator->() { return &second; }
    const Value* operator->() const { return &second; }

    Key first;
    Value second;
  };
  using iterator = typename std::vector<Item>::iterator;
  using const_iterator = typename std::vector<Item>::const_iterator;

  /// `key_description` names the keys in errors ("Key", "Parameter", ...), as LibTorch's.
  explicit OrderedDict(std::string key_description = "Key") : key_description_(std::move(key_description)) {}
  OrderedDict(std::initializer_list<Item> items) : OrderedDict() {
    for (const Item& i : items) insert(i.first, i.second);
  }

  /// Adds a new item; a key already present is a ValueError.
  Value& insert(Key key, Value value) {
    MINIDL_CHECK(index_.count(key) == 0, ValueError, key_description_, " '", key, "' already defined");
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().second;
  }
  /// Inserts or replaces the value of `key`.
  Value& update(Key key, Value value) {
    if (Value* v = find(key)) return *v = std::move(value);
    return insert(std::move(key), std::move(value));
  }

  /// The value of `key`, or null.
  Value* find(const Key& key) {
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  const Value* find(const Key& key) const {
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  bool contains(const Key& key) const { return find(key) != nullptr; }

  /// The value of `key`; an absent key is an IndexError naming it.
  Value& operator[](const Key& key) { return *checked(key); }
  const Value& operator[](const Key& key) const { return *const_cast<OrderedDict*>(this)->checked(key); }
  /// The item at position i (in insertion order); out of range is an IndexError.
  Item& operator[](std::size_t i) { return at_index(i); }
  const Item& operator[](std::size_t i) const { return const_cast<OrderedDict*>(this)->at_index(i); }

  Item& front() { return at_index(0); }
  Item& back() { return at_index(items_.empty() ? 0 : items_.size() - 1); }
  std::size_t size() const { return items_.size(); }
  bool is_empty() const { return items_.empty(); }
  bool empty() const { return items_.empty(); }
  void clear() {
    items_.clear();
    index_.clear();
  }
  void reserve(std::size_t n) {
    items_.reserve(n);
    index_.reserve(n);
  }

  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }

  const std::vector<Item>& items() const { return items_; }
  std::vector<Key> keys() const {
    std::vector<Key> out;
    out.reserve(items_.size());
    for (const Item& i : items_) out.push_back(i.first);
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    out.reserve(items_.size());
    for (const Item& i : items_) out.push_back(i.second);
    return out;
  }
  /// The items as (key, value) pairs.
  std::vector<std::pair<Key, Value>> pairs() const {
    std::vector<std::pair<Key, Value>> out;
    out.reserve(items_.size());
    for (const Item& i : items_) out.emplace_back(i.first, i.second);
    return out;
  }

  const std::string& key_description() const { return key_description_; }

 private:
  Value* checked(const Key& key) {
    Value* v = find(key);
    MINIDL_CHECK(v != nullptr, IndexError, key_description_, " '", key, "' is not defined");
    return v;
  }
  Item& at_index(std::size_t i) {
    MINIDL_CHECK(i < items_.size(), IndexError, "OrderedDict: index ", i, " is out of range for ", items_.size(),
                 " items");
    return items_[i];
  }

  std::string key_description_;
  std::vector<Item> items_;
  std::unordered_map<Key, std::size_t> index_;
};

}  // namespace minidl
