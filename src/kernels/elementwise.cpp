#include "kernels/elementwise.h"

namespace minidl {
namespace kernels {

const char* op_name(UnaryOp op) {
  static const char* const names[] = {"neg",  "exp",        "log", "sqrt", "abs",   "relu",
                                      "leaky_relu", "gelu", "sigmoid", "tanh", "add", "mul",
                                      "pow",  "sign",       "dropout", "logical_not"};
  return names[static_cast<int>(op)];
}

const char* op_name(BinaryOp op) {
  static const char* const names[] = {
      "expand", "add", "sub", "mul", "div", "pow", "maximum", "minimum", "floor_divide", "remainder", "eq", "ne",
      "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "add_relu", "relu_backward",
      "leaky_relu_backward", "sigmoid_backward", "tanh_backward", "gelu_backward"};
  return names[static_cast<int>(op)];
}

}  // namespace kernels
}  // namespace minidl
