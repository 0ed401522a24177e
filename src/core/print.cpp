// Printing tensors and shapes.
//
// A tensor prints as PyTorch's Python repr lays out its values, followed by LibTorch's type line:
//
//   [[ 0.1250, -1.5000],
//    [ 2.0000,  3.2500]]
//   [ CPUFloatType{2,2} ]
//
// Why both: LibTorch's own layout (aligned columns, "(1,.,.) =" blocks for each matrix of a 3-D tensor) prints every
// element, so a large tensor floods the terminal, and it shows no nesting; Python's layout is the one PyTorch users
// read and paste. The type line is the one LibTorch users know from their programs' output. The rules are
// torch/_tensor_str.py's with its default print options (precision 4, threshold 1000, edgeitems 3, linewidth 80):
// one format for every element shown, chosen from the finite nonzero ones (integers as "3." in a floating tensor,
// scientific notation when the largest is over 1e8 or over 1000 times the smallest, or the smallest below 1e-4),
// padded to one width; more than 1000 elements print only the first and last three along each dim, with "...".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/dispatch_types.h"
#include "minidl/tensor.h"

namespace minidl {
namespace {

constexpr std::int64_t kThreshold = 1000;  // elements beyond which a tensor is summarised
constexpr std::int64_t kEdgeItems = 3;     // elements shown at each end of a summarised dim
constexpr std::int64_t kLineWidth = 80;
constexpr int kPrecision = 4;

/// v with `precision` digits after the point, in fixed ('f') or scientific ('e') notation, as Python's format().
std::string number(double v, int precision, char notation) {
  if (std::isnan(v)) return "nan";  // printf may write "-nan"; Python never does
  char buf[64];
  std::snprintf(buf, sizeof(buf), notation == 'e' ? "%.*e" : "%.*f", precision, v);
  return buf;
}

/// The elements a print shows, in print order, as element offsets into the tensor's data.
class Walk {
 public:
  Walk(const Tensor& t, bool summarize) : sizes_(t.sizes()), strides_(t.strides()), summarize_(summarize) {
    visit(0, 0);
  }
  const std::vector<std::int64_t>& offsets() const { return offsets_; }
  /// The indices of dim `d` shown: all, or the first and last kEdgeItems (the gap between them is printed as "...").
  static std::vector<std::int64_t> shown(std::int64_t size, bool summarize) {
    std::vector<std::int64_t> r;
    for (std::int64_t i = 0; i < size; ++i) {
      if (summarize && size > 2 * kEdgeItems && i == kEdgeItems) i = size - kEdgeItems;
      r.push_back(i);
    }
    return r;
  }

 private:
  void visit(std::size_t d, std::int64_t offset) {
    if (d == sizes_.size()) {
      offsets_.push_back(offset);
      return;
    }
    for (std::int64_t i : shown(sizes_[d], summarize_)) visit(d + 1, offset + i * strides_[d]);
  }
  const Shape& sizes_;
  const Shape& strides_;
  bool summarize_;
  std::vector<std::int64_t> offsets_;
};

/// One element's text in the format every shown element shares (torch/_tensor_str.py's _Formatter).
class Formatter {
 public:
  Formatter(DType dtype, const std::vector<double>& floats, const std::vector<std::int64_t>& ints)
      : floating_(is_floating_point(dtype)), boolean_(dtype == kBool) {
    if (!floating_) {
      for (std::int64_t v : ints) width_ = std::max(width_, integral(v).size());
      return;
    }
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    bool any = false;
    for (double v : floats) {
      if (!std::isfinite(v) || v == 0) continue;
      any = true;
      lo = std::min(lo, std::fabs(v));
      hi = std::max(hi, std::fabs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (!any) return;
    sci_ = hi / lo > 1000.0 || hi > 1.0e8 || (!int_mode_ && lo < 1.0e-4);
    for (double v : floats) {
      if (std::isfinite(v) && v != 0) width_ = std::max(width_, text(v).size());
    }
  }

  std::size_t width() const { return width_; }
  /// The element (f for a floating tensor, i otherwise), padded on the left to the common width.
  std::string format(double f, std::int64_t i) const {
    const std::string s = floating_ ? text(f) : integral(i);
    return std::string(width_ > s.size() ? width_ - s.size() : 0, ' ') + s;
  }

 private:
  std::string text(double v) const {
    if (sci_) return number(v, kPrecision, 'e');
    if (int_mode_) return number(v, 0, 'f') + (std::isfinite(v) ? "." : "");
    return number(v, kPrecision, 'f');
  }
  std::string integral(std::int64_t v) const { return boolean_ ? (v ? "true" : "false") : std::to_string(v); }
  bool floating_, boolean_;
  bool int_mode_ = true, sci_ = false;
  std::size_t width_ = 1;
};

/// The nested-bracket text of the shown elements (torch/_tensor_str.py's _tensor_str_with_formatter).
class Layout {
 public:
  Layout(const Shape& sizes, bool summarize, std::size_t width, std::vector<std::string> elements)
      : sizes_(sizes), summarize_(summarize), width_(width), elements_(std::move(elements)) {}
  std::string str() {
    next_ = 0;
    return sizes_.empty() ? elements_.at(0) : block(0, 0);
  }

 private:
  std::string block(std::size_t d, std::int64_t indent) {
    const std::int64_t size = sizes_[d];
    const bool gap = summarize_ && size > 2 * kEdgeItems;
    std::vector<std::string> parts;
    for (std::int64_t i : Walk::shown(size, summarize_)) {
      if (gap && i == size - kEdgeItems) parts.emplace_back(d + 1 == sizes_.size() ? " ..." : "...");
      parts.push_back(d + 1 == sizes_.size() ? elements_[next_++] : block(d + 1, indent + 1));
    }
    std::string out = "[";
    if (d + 1 == sizes_.size()) {  // a row, wrapped at the line width
      const std::int64_t element_length = static_cast<std::int64_t>(width_) + 2;
      const std::size_t per_line =
          static_cast<std::size_t>(std::max<std::int64_t>(1, (kLineWidth - indent) / element_length));
      for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0) out += i % per_line == 0 ? ",\n" + std::string(static_cast<std::size_t>(indent) + 1, ' ') : ", ";
        out += parts[i];
      }
    } else {
      const std::string sep =
          "," + std::string(sizes_.size() - d - 1, '\n') + std::string(static_cast<std::size_t>(indent) + 1, ' ');
      for (std::size_t i = 0; i < parts.size(); ++i) out += (i > 0 ? sep : "") + parts[i];
    }
    return out + "]";
  }

  const Shape& sizes_;
  bool summarize_;
  std::size_t width_;
  std::vector<std::string> elements_;
  std::size_t next_ = 0;
};

/// LibTorch's name of a dtype in its type names (CPUFloatType, CUDALongType, ...).
const char* scalar_type_name(DType dt) {
  switch (dt) {
    case kFloat32:
      return "Float";
    case kFloat64:
      return "Double";
    case kBFloat16:
      return "BFloat16";
    case kFloat16:
      return "Half";
    case kInt64:
      return "Long";
    case kInt32:
      return "Int";
    case kUInt8:
      return "Byte";
    case kBool:
      return "Bool";
  }
  return "?";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << shape_str(s); }

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "[ Tensor (undefined) ]";
  const Tensor c = t.detach().cpu();
  const bool summarize = c.numel() > kThreshold;
  std::string body = "[]";
  if (c.numel() > 0) {
    // Integers (int64 beyond 2^53 included) and bools are read exactly; floating values are exact in double.
    const Walk walk(c, summarize);
    std::vector<double> floats;
    std::vector<std::int64_t> ints;
    kernels::dispatch_all(c.dtype(), "print", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* data = c.data_ptr<T>();
      for (std::int64_t off : walk.offsets()) {
        if constexpr (std::is_same_v<T, double>) {
          floats.push_back(data[off]);
        } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
          floats.push_back(static_cast<float>(data[off]));
        } else {
          ints.push_back(static_cast<std::int64_t>(data[off]));
        }
      }
    });
    const Formatter fmt(c.dtype(), floats, ints);
    std::vector<std::string> elements;
    for (std::size_t i = 0; i < walk.offsets().size(); ++i) {
      elements.push_back(fmt.format(floats.empty() ? 0.0 : floats[i], ints.empty() ? 0 : ints[i]));
    }
    body = Layout(c.sizes(), summarize, fmt.width(), std::move(elements)).str();
  }
  os << body << "\n[ " << (t.is_cuda() ? "CUDA" : "CPU") << scalar_type_name(t.dtype()) << "Type{";
  for (std::size_t i = 0; i < c.sizes().size(); ++i) os << (i ? "," : "") << c.sizes()[i];
  return os << "} ]";
}

}  // namespace minidl
