// einsum (minidl/linalg.h), composed of views, sums and matmul, as PyTorch's does it:
//   1. parse the equation and give every subscript (and each dim "..." covers) a position: the output's first,
//      then the summed ones;
//   2. align each operand to all positions: its diagonal where a subscript repeats (a strided view), size 1 where
//      it lacks a subscript, permuted into position order;
//   3. sum each summed position an operand holds alone, then contract the operands left to right, each pair as one
//      matmul over the positions both hold and no later operand needs (or as a broadcast product when there are
//      none), the positions only one of the pair holds becoming the product's rows or columns;
//   4. drop the summed positions (now of size 1).
// Every step is a differentiable op, so einsum needs no backward rule of its own.
#include <algorithm>
#include <array>
#include <cctype>
#include <numeric>
#include <string>
#include <vector>

#include "autocast/policy.h"
#include "minidl/linalg.h"
#include "ops/op_utils.h"

namespace minidl {
namespace {

using i64 = std::int64_t;

constexpr int kLetters = 26;
constexpr int kLabels = 2 * kLetters;  // A-Z, then a-z: the implicit output's order
constexpr int kEllipsis = kLabels;

int label_of(char c) { return std::isupper(static_cast<unsigned char>(c)) ? c - 'A' : c - 'a' + kLetters; }
char char_of(int label) { return static_cast<char>(label < kLetters ? 'A' + label : 'a' + label - kLetters); }

/// The subscripts of one side of the equation: labels and kEllipsis, in order; `ops` splits them at commas.
std::vector<std::vector<int>> parse_side(const std::string& side, bool allow_commas) {
  std::vector<std::vector<int>> ops(1);
  for (std::size_t i = 0; i < side.size(); ++i) {
    const char c = side[i];
    if (c == ' ') continue;
    if (c == ',' && allow_commas) {
      ops.emplace_back();
    } else if (c == '.') {
      MINIDL_CHECK(side.compare(i, 3, "...") == 0, ValueError, "einsum: found '.' in the equation at position ", i,
                   " that is not part of an ellipsis (\"...\")");
      MINIDL_CHECK(std::count(ops.back().begin(), ops.back().end(), kEllipsis) == 0, ValueError,
                   "einsum: at most one ellipsis per operand", allow_commas ? "" : " and for the output");
      ops.back().push_back(kEllipsis);
      i += 2;
    } else {
      MINIDL_CHECK(std::isalpha(static_cast<unsigned char>(c)), ValueError,
                   "einsum: subscripts must be letters (A-Z, a-z), found '", c, "'");
      ops.back().push_back(label_of(c));
    }
  }
  return ops;
}

/// a's dims `dims` summed, keeping them as size-1 dims.
Tensor sum_keep(const Tensor& a, const std::vector<i64>& dims) {
  if (dims.empty()) return a;
  const Tensor s = sum(a, dims, true);
  return s.dtype() == a.dtype() ? s : s.to(a.dtype());  // integer sums come back as int64
}

/// (a * b) summed over `sum_dims`, kept as size-1 dims; a and b have one dim per position, size 1 where absent.
Tensor contract(Tensor a, Tensor b, const std::vector<bool>& summed) {
  const std::size_t nd = summed.size();
  std::vector<i64> a_alone, b_alone, batch, rows, cols, inner, rest;
  for (std::size_t d = 0; d < nd; ++d) {
    const bool in_a = a.size(static_cast<i64>(d)) > 1, in_b = b.size(static_cast<i64>(d)) > 1;
    const auto di = static_cast<i64>(d);
    if (summed[d]) {
      if (in_a && in_b) inner.push_back(di);
      if (in_a && !in_b) a_alone.push_back(di);
      if (in_b && !in_a) b_alone.push_back(di);
      if (!(in_a && in_b)) rest.push_back(di);
    } else if (in_a && in_b) {
      batch.push_back(di);
    } else if (in_a) {
      rows.push_back(di);
    } else if (in_b) {
      cols.push_back(di);
    } else {
      rest.push_back(di);
    }
  }
  a = sum_keep(a, a_alone);
  b = sum_keep(b, b_alone);
  if (inner.empty()) return mul(a, b);
  const auto sizes = [](const Tensor& t, const std::vector<i64>& dims) {
    Shape s;
    for (i64 d : dims) s.push_back(t.size(d));
    return s;
  };
  const auto concat = [](std::initializer_list<const std::vector<i64>*> parts) {
    std::vector<i64> r;
    for (const auto* p : parts) r.insert(r.end(), p->begin(), p->end());
    return r;
  };
  const Shape batch_sizes = sizes(a, batch), row_sizes = sizes(a, rows), col_sizes = sizes(b, cols);
  const i64 m = shape_numel(row_sizes), k = shape_numel(sizes(a, inner)), n = shape_numel(col_sizes);
  Shape left_shape = batch_sizes, right_shape = batch_sizes;
  left_shape.insert(left_shape.end(), {m, k});
  right_shape.insert(right_shape.end(), {k, n});
  // The row and column groups become single dims (a view where the permuted strides allow).
  const Tensor left = a.permute(concat({&batch, &rows, &inner, &cols, &rest})).reshape(left_shape);
  const Tensor right = b.permute(concat({&batch, &inner, &cols, &rows, &rest})).reshape(right_shape);
  Shape out_shape = batch_sizes;
  out_shape.insert(out_shape.end(), row_sizes.begin(), row_sizes.end());
  out_shape.insert(out_shape.end(), col_sizes.begin(), col_sizes.end());
  out_shape.insert(out_shape.end(), inner.size() + rest.size(), 1);
  const std::vector<i64> order = concat({&batch, &rows, &cols, &inner, &rest});
  std::vector<i64> inverse(nd);
  for (std::size_t i = 0; i < nd; ++i) inverse[static_cast<std::size_t>(order[i])] = static_cast<i64>(i);
  return matmul(left, right).reshape(out_shape).permute(inverse);
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors) {
  MINIDL_AUTOCAST(einsum, equation, tensors);
  MINIDL_CHECK(!tensors.empty(), ValueError, "einsum: expected at least one operand");
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    ops::check_defined(tensors[i], "einsum", "tensors");
    if (i > 0) ops::check_same(tensors[0], tensors[i], "einsum");
  }
  const std::size_t arrow = equation.find("->");
  const std::vector<std::vector<int>> terms = parse_side(equation.substr(0, arrow), true);
  MINIDL_CHECK(terms.size() == tensors.size(), ValueError, "einsum: the equation \"", equation, "\" names ",
               terms.size(), " operands but ", tensors.size(), " were given");

  std::array<int, kLabels> count{};
  std::size_t ell_dims = 0;  // the most dims any "..." covers
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const bool has_ell = std::count(terms[i].begin(), terms[i].end(), kEllipsis) > 0;
    const std::size_t labels = terms[i].size() - (has_ell ? 1 : 0);
    const auto nd = static_cast<std::size_t>(tensors[i].dim());
    MINIDL_CHECK(has_ell ? labels <= nd : labels == nd, ValueError, "einsum: operand ", i, " has ", nd, " dims (shape ",
                 shape_str(tensors[i].sizes()), ") but its subscripts name ", labels,
                 has_ell ? " (more than it has)" : " and it has no ellipsis");
    if (has_ell) ell_dims = std::max(ell_dims, nd - labels);
    for (int l : terms[i]) {
      if (l != kEllipsis) ++count[static_cast<std::size_t>(l)];
    }
  }

  // Positions: the output's dims first, then the summed ones.
  std::array<i64, kLabels> position;
  position.fill(-1);
  i64 ell_position = -1, next = 0;
  if (arrow != std::string::npos) {
    const std::vector<std::vector<int>> out = parse_side(equation.substr(arrow + 2), false);
    for (int l : out[0]) {
      if (l == kEllipsis) {
        ell_position = next;
        next += static_cast<i64>(ell_dims);
        continue;
      }
      const auto li = static_cast<std::size_t>(l);
      MINIDL_CHECK(position[li] == -1, ValueError, "einsum: output subscript ", char_of(l), " appears more than once");
      MINIDL_CHECK(count[li] > 0, ValueError, "einsum: output subscript ", char_of(l),
                   " does not appear in any operand's subscripts");
      position[li] = next++;
    }
  } else {  // implicit: "..." and then the subscripts that appear once, in order
    ell_position = next;
    next += static_cast<i64>(ell_dims);
    for (std::size_t l = 0; l < kLabels; ++l) {
      if (count[l] == 1) position[l] = next++;
    }
  }
  const i64 out_dims = next;
  if (ell_position == -1) {
    ell_position = next;
    next += static_cast<i64>(ell_dims);
  }
  for (std::size_t l = 0; l < kLabels; ++l) {
    if (count[l] > 0 && position[l] == -1) position[l] = next++;
  }
  const auto positions = static_cast<std::size_t>(next);

  // Align every operand to the positions; sizes must agree or be 1.
  Shape size_at(positions, 1);
  std::vector<Tensor> ops;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    Tensor op = tensors[i];
    std::vector<i64> perm(positions, -1);
    i64 dim = 0;
    const std::size_t labels = terms[i].size() - (std::count(terms[i].begin(), terms[i].end(), kEllipsis) ? 1 : 0);
    const auto claim = [&](std::size_t p, const std::string& what) {
      const i64 s = op.size(dim);
      MINIDL_CHECK(s == 1 || size_at[p] == 1 || size_at[p] == s, ValueError, "einsum: ", what, " has size ", s,
                   " in operand ", i, " (shape ", shape_str(tensors[i].sizes()), ") but ", size_at[p],
                   " elsewhere; sizes must match or be 1");
      if (s != 1) size_at[p] = s;
      perm[p] = dim++;
    };
    for (int l : terms[i]) {
      if (l == kEllipsis) {
        const std::size_t covered = static_cast<std::size_t>(tensors[i].dim()) - labels;
        for (std::size_t j = ell_dims - covered; j < ell_dims; ++j) {
          claim(static_cast<std::size_t>(ell_position) + j, "a dim covered by \"...\"");
        }
        continue;
      }
      const auto p = static_cast<std::size_t>(position[static_cast<std::size_t>(l)]);
      if (perm[p] == -1) {
        claim(p, std::string("subscript ") + char_of(l));
        continue;
      }
      // A repeated subscript: the diagonal of the two dims, at the first one's place.
      const i64 first = perm[p];
      MINIDL_CHECK(op.size(dim) == op.size(first), ValueError, "einsum: subscript ", char_of(l),
                   " is repeated in operand ", i, " but the sizes differ (", op.size(first), " and ", op.size(dim),
                   ")");
      if (op.requires_grad()) op = op.contiguous();  // as_strided's gradient needs its input's own layout
      Shape sizes = op.sizes(), strides = op.strides();
      strides[static_cast<std::size_t>(first)] += strides[static_cast<std::size_t>(dim)];
      sizes.erase(sizes.begin() + dim);
      strides.erase(strides.begin() + dim);
      op = op.as_strided(sizes, strides, op.storage_offset());
      if (op.size(first) != 1) size_at[p] = op.size(first);
    }
    for (i64& d : perm) {
      if (d == -1) {
        op = op.unsqueeze(dim);
        d = dim++;
      }
    }
    ops.push_back(op.permute(perm));
  }

  // A summed position is summed as soon as no operand still to come holds it with more than one element.
  const auto holds = [](const Tensor& t, std::size_t p) { return t.size(static_cast<i64>(p)) > 1; };
  const auto held_after = [&](std::size_t first, std::size_t p, std::size_t skip) {
    for (std::size_t j = first; j < ops.size(); ++j) {
      if (j != skip && holds(ops[j], p)) return true;
    }
    return false;
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    std::vector<i64> alone;
    for (std::size_t p = static_cast<std::size_t>(out_dims); p < positions; ++p) {
      if (holds(ops[i], p) && !held_after(0, p, i)) alone.push_back(static_cast<i64>(p));
    }
    ops[i] = sum_keep(ops[i], alone);
  }
  Tensor result = ops[0];
  for (std::size_t i = 1; i < ops.size(); ++i) {
    std::vector<bool> summed(positions, false);
    for (std::size_t p = static_cast<std::size_t>(out_dims); p < positions; ++p) {
      summed[p] = !held_after(i + 1, p, ops.size());
    }
    result = contract(result, ops[i], summed);
  }
  Shape out_shape(result.sizes().begin(), result.sizes().begin() + out_dims);
  return result.reshape(out_shape);
}

}  // namespace minidl
