#include "minidl/data/dataset.h"

namespace minidl::data {

// Out of line so the vtable has one home.
Dataset::~Dataset() = default;

}  // namespace minidl::data
