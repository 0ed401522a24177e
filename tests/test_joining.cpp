// Joining, splitting and where (include/minidl/joining.h): every op in every dtype against a plain host
// reference (these ops only move elements, so every result must be exact), on contiguous, transposed, sliced,
// expanded and offset inputs; views where PyTorch gives views; float64 gradcheck of every differentiable op; the
// GPU against the CPU (the CUDA paths: cat's access widths and batches, where's flat, one-element and strided
// forms); PyTorch's results from tests/golden/joining_golden.json; and the typed errors of bad arguments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "golden_file.h"
#include "test_util.h"

using namespace minidl;
using json = nlohmann::json;
using minidl::testing::expect_close;
using minidl::testing::expect_error;
using minidl::testing::storage_view;

namespace {

const std::vector<DType> kAllDTypes = {kFloat32, kFloat64, kBFloat16, kHalf, kInt64, kInt32, kUInt8, kBool};

/// Fresh random values of any dtype, never all zeros: floating in [-4, 4), int64 / int32 in [-100, 100), uint8 in
/// [0, 200), bool about half true.
Tensor random_of(const Shape& s, DType dt) {
  if (dt == kBool) return gt(uniform(s, 0.0, 1.0, kFloat64), 0.5);
  if (dt == kUInt8) return uniform(s, 0.0, 200.0, kFloat64).to(kUInt8);
  if (is_integral(dt, false)) return uniform(s, -100.0, 100.0, kFloat64).to(dt);
  return uniform(s, -4.0, 4.0, kFloat32).to(dt);
}

std::string what_of(const std::string& op, DType dt, const Shape& s) {
  return op + " " + dtype_name(dt) + " " + shape_str(s);
}

/// Every element of `actual` equals `expected` exactly, and the dtypes and shapes agree.
void expect_equal(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what;
  EXPECT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.sizes(), expected.sizes()) << what;
  const std::vector<double> a = actual.detach().cpu().to(kFloat64).to_vector<double>();
  const std::vector<double> e = expected.detach().cpu().to(kFloat64).to_vector<double>();
  int failures = 0;
  for (std::size_t i = 0; i < a.size() && failures < 10; ++i) {
    if (a[i] != e[i]) {
      ADD_FAILURE() << what << ": element " << i << " is " << a[i] << ", expected " << e[i];
      ++failures;
    }
  }
}

/// expect_equal with `actual` evaluated before `expected`: an op whose kernel failed to write its output could
/// otherwise pass when its uninitialised output reuses memory the reference had just filled with the same values.
#define EXPECT_SAME(actual, expected, what)          \
  do {                                               \
    const Tensor actual_value_ = (actual);           \
    expect_equal(actual_value_, (expected), (what)); \
  } while (0)

// ---- a host reference: a tensor's values in row-major order with its shape --------------------------------------

struct Host {
  Shape shape;
  std::vector<double> v;
  explicit Host(const Tensor& t) : shape(t.sizes()), v(t.detach().cpu().to(kFloat64).to_vector<double>()) {}
  Host(Shape s, double fill) : shape(std::move(s)), v(static_cast<std::size_t>(shape_numel(shape)), fill) {}
  std::int64_t flat(const Shape& idx) const {
    std::int64_t f = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
    return f;
  }
  double& at(const Shape& idx) { return v[static_cast<std::size_t>(flat(idx))]; }
  double at(const Shape& idx) const { return v[static_cast<std::size_t>(flat(idx))]; }
  /// The element that index `idx` of a tensor broadcast from this one reads.
  double broadcast_at(const Shape& idx) const {
    Shape own(shape.size());
    const std::size_t lead = idx.size() - shape.size();
    for (std::size_t d = 0; d < shape.size(); ++d) own[d] = shape[d] == 1 ? 0 : idx[lead + d];
    return at(own);
  }
  Tensor tensor(DType dt) const { return from_vector(v, shape).to(dt); }
};

/// Calls f(idx) for every index of `shape` in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& f) {
  if (shape_numel(shape) == 0) return;
  Shape idx(shape.size(), 0);
  while (true) {
    f(idx);
    std::size_t d = shape.size();
    while (d > 0 && ++idx[d - 1] == shape[d - 1]) idx[--d] = 0;
    if (d == 0) return;
  }
}

/// The ways an input of `shape` can be laid out: contiguous, transposed (last two dims), sliced (every other
/// element of the last dim), expanded (from size 1 along the first dim), offset (starting one element into its
/// storage). `expected` is the contiguous tensor of the same values.
struct Layout {
  std::string name;
  std::function<Tensor(const Shape&, DType)> make;
};
std::vector<Layout> layouts() {
  return {
      {"contiguous", [](const Shape& s, DType dt) { return random_of(s, dt); }},
      {"transposed",
       [](const Shape& s, DType dt) {
         if (s.size() < 2) return random_of(s, dt);
         Shape t = s;
         std::swap(t[t.size() - 1], t[t.size() - 2]);
         return random_of(t, dt).transpose(-1, -2);
       }},
      {"sliced",
       [](const Shape& s, DType dt) {
         if (s.empty()) return random_of(s, dt);
         Shape w = s;
         w.back() *= 2;
         return random_of(w, dt).slice(-1, 1, INT64_MAX, 2);
       }},
      {"expanded",
       [](const Shape& s, DType dt) {
         if (s.empty()) return random_of(s, dt);
         Shape one = s;
         one[0] = 1;
         return random_of(one, dt).expand(s);
       }},
      {"offset",
       [](const Shape& s, DType dt) {
         const Tensor base = random_of({shape_numel(s) + 1}, dt);
         return storage_view(base, 1, s);
       }},
  };
}

// ---- host references of each op ---------------------------------------------------------------------------

Host ref_cat(const std::vector<Host>& in, std::int64_t d) {
  Shape shape = in[0].shape;
  shape[static_cast<std::size_t>(d)] = 0;
  for (const Host& h : in) shape[static_cast<std::size_t>(d)] += h.shape[static_cast<std::size_t>(d)];
  Host out(shape, 0);
  std::int64_t start = 0;
  for (const Host& h : in) {
    for_each_index(h.shape, [&](const Shape& idx) {
      Shape o = idx;
      o[static_cast<std::size_t>(d)] += start;
      out.at(o) = h.at(idx);
    });
    start += h.shape[static_cast<std::size_t>(d)];
  }
  return out;
}

Host ref_flip(const Host& x, const std::vector<std::int64_t>& dims) {
  Host out(x.shape, 0);
  for_each_index(x.shape, [&](const Shape& idx) {
    Shape src = idx;
    for (std::int64_t d : dims)
      src[static_cast<std::size_t>(d)] = x.shape[static_cast<std::size_t>(d)] - 1 - idx[static_cast<std::size_t>(d)];
    out.at(idx) = x.at(src);
  });
  return out;
}

Host ref_roll(const Host& x, const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& dims) {
  Host out(x.shape, 0);
  for_each_index(x.shape, [&](const Shape& idx) {
    Shape src = idx;
    for (std::size_t k = 0; k < dims.size(); ++k) {
      const auto d = static_cast<std::size_t>(dims[k]);
      const std::int64_t n = x.shape[d];
      src[d] = (((src[d] - shifts[k]) % n) + n) % n;
    }
    out.at(idx) = x.at(src);
  });
  return out;
}

Host ref_repeat(const Host& x, const std::vector<std::int64_t>& repeats) {
  Shape shape(repeats.size());
  const std::size_t lead = repeats.size() - x.shape.size();
  for (std::size_t i = 0; i < repeats.size(); ++i) shape[i] = repeats[i] * (i < lead ? 1 : x.shape[i - lead]);
  Host out(shape, 0);
  for_each_index(shape, [&](const Shape& idx) {
    Shape src(x.shape.size());
    for (std::size_t i = 0; i < src.size(); ++i) src[i] = idx[lead + i] % x.shape[i];
    out.at(idx) = x.at(src);
  });
  return out;
}

/// Slice j of dim d of the result is slice owner[j] of x.
Host ref_gather(const Host& x, std::int64_t d, const std::vector<std::int64_t>& owner) {
  Shape shape = x.shape;
  shape[static_cast<std::size_t>(d)] = static_cast<std::int64_t>(owner.size());
  Host out(shape, 0);
  for_each_index(shape, [&](const Shape& idx) {
    Shape src = idx;
    src[static_cast<std::size_t>(d)] = owner[static_cast<std::size_t>(idx[static_cast<std::size_t>(d)])];
    out.at(idx) = x.at(src);
  });
  return out;
}

Host ref_triangle(const Host& x, std::int64_t diagonal, bool upper) {
  Host out(x.shape, 0);
  for_each_index(x.shape, [&](const Shape& idx) {
    const std::int64_t i = idx[idx.size() - 2], j = idx[idx.size() - 1];
    const bool keep = upper ? j - i >= diagonal : j - i <= diagonal;
    out.at(idx) = keep ? x.at(idx) : 0.0;
  });
  return out;
}

Host ref_where(const Host& c, const Host& a, const Host& b, const Shape& shape) {
  Host out(shape, 0);
  for_each_index(shape, [&](const Shape& idx) {
    out.at(idx) = c.broadcast_at(idx) != 0 ? a.broadcast_at(idx) : b.broadcast_at(idx);
  });
  return out;
}

// ---- gradcheck -------------------------------------------------------------------------------------------

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor leaf(const Shape& s) { return random_of(s, kFloat64).requires_grad_(true); }

void check(const std::string& what, const Fn& fn, const std::vector<Tensor>& inputs) {
  try {
    EXPECT_TRUE(gradcheck(fn, inputs)) << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
  }
}

}  // namespace

// ---- forward values against the host reference, every dtype and layout ----------------------------------------

TEST(Joining, CatEveryDTypeAndLayout) {
  for (DType dt : kAllDTypes) {
    for (const Layout& l : layouts()) {
      for (std::int64_t d : {0, 1, 2}) {
        Shape sa{3, 4, 5}, sb{3, 4, 5}, sc{3, 4, 5};
        sb[static_cast<std::size_t>(d)] = 2;
        sc[static_cast<std::size_t>(d)] = 1;
        const Tensor a = l.make(sa, dt), b = random_of(sb, dt), c = l.make(sc, dt);
        const std::string what = what_of("cat " + l.name + " dim " + std::to_string(d), dt, sa);
        EXPECT_SAME(cat({a, b, c}, d), ref_cat({Host(a), Host(b), Host(c)}, d).tensor(dt), what);
        EXPECT_SAME(cat({a, b, c}, d - 3), ref_cat({Host(a), Host(b), Host(c)}, d).tensor(dt), what + " (negative)");
      }
    }
  }
}

TEST(Joining, CatPromotesAndSkipsLegacyEmptyTensors) {
  for (DType da : kAllDTypes) {
    for (DType db : kAllDTypes) {
      const Tensor a = random_of({2, 3}, da), b = random_of({2, 2}, db);
      const DType common = promote_types(da, db);
      const Tensor r = cat({a, b}, 1);
      EXPECT_EQ(r.dtype(), common) << da << " with " << db;
      EXPECT_SAME(r, ref_cat({Host(a.to(common)), Host(b.to(common))}, 1).tensor(common),
                  std::string("cat ") + dtype_name(da) + " with " + dtype_name(db));
    }
  }
  const Tensor a = random_of({2, 3}, kFloat32), e = empty({0}, kInt64), f = empty({0}, kFloat64);
  EXPECT_SAME(cat({e, a, e}, 1), a, "legacy empty tensors skipped");
  EXPECT_EQ(cat({a, f}, -1).dtype(), kFloat64) << "a skipped tensor still takes part in promotion";
  const Tensor all_empty = cat({e, f});
  EXPECT_EQ(all_empty.sizes(), Shape{0});
  EXPECT_EQ(all_empty.dtype(), kFloat64);
  const Tensor z = random_of({0, 3}, kFloat32);
  EXPECT_SAME(cat({z, a, z}), a, "cat of (0, 3) tensors along dim 0");
  const Tensor r = cat({a});
  EXPECT_SAME(r, a, "cat of one tensor");
  EXPECT_NE(r.data_ptr(), a.data_ptr()) << "cat returns a new tensor";
  EXPECT_EQ(concat({a, a}, 1).sizes(), (Shape{2, 6}));
  EXPECT_EQ(concatenate({a, a}, 0).sizes(), (Shape{4, 3}));
}

TEST(Joining, CatOfManyInputsAndOfEveryRowWidth) {
  // More inputs than one CUDA launch takes, with widths of 1 to 7 elements (every access width on the GPU).
  for (DType dt : {kFloat32, kHalf, kUInt8, kFloat64}) {
    std::vector<Tensor> parts;
    std::vector<Host> hosts;
    for (int k = 0; k < 130; ++k) {
      parts.push_back(random_of({3, 1 + k % 7}, dt));
      hosts.push_back(Host(parts.back()));
    }
    EXPECT_SAME(cat(parts, 1), ref_cat(hosts, 1).tensor(dt), what_of("cat of 130", dt, {3, 0}));
  }
}

TEST(Joining, StackEveryDType) {
  for (DType dt : kAllDTypes) {
    for (const Shape& s : {Shape{2, 3}, Shape{4}, Shape{}, Shape{0, 2}}) {
      const Tensor a = random_of(s, dt), b = random_of(s, dt), c = random_of(s, dt);
      for (std::int64_t d = -static_cast<std::int64_t>(s.size()) - 1; d <= static_cast<std::int64_t>(s.size()); ++d) {
        const Tensor r = stack({a, b, c}, d);
        const std::int64_t w = d < 0 ? d + static_cast<std::int64_t>(s.size()) + 1 : d;
        ASSERT_EQ(r.dim(), static_cast<std::int64_t>(s.size()) + 1);
        EXPECT_EQ(r.size(w), 3);
        const std::vector<Tensor> inputs{a, b, c};
        for (std::int64_t k = 0; k < 3; ++k) {
          EXPECT_SAME(r.select(w, k), inputs[static_cast<std::size_t>(k)],
                      what_of("stack dim " + std::to_string(d), dt, s));
        }
      }
    }
  }
  EXPECT_EQ(stack({random_of({2}, kInt32), random_of({2}, kFloat16)}).dtype(), kFloat16);
}

TEST(Joining, SplitChunkUnbindGiveViews) {
  for (DType dt : kAllDTypes) {
    const Tensor x = random_of({7, 4}, dt);
    const std::vector<Tensor> parts = x.split(3);
    ASSERT_EQ(parts.size(), 3u);
    std::int64_t start = 0;
    for (const Tensor& p : parts) {
      EXPECT_SAME(p, x.narrow(0, start, p.size(0)), what_of("split", dt, x.sizes()));
      EXPECT_EQ(p.data_ptr(), x.narrow(0, start, p.size(0)).data_ptr()) << "a piece is a view";
      start += p.size(0);
    }
    EXPECT_EQ(parts[2].size(0), 1);
    const std::vector<Tensor> sized = split(x, std::vector<std::int64_t>{1, 0, 3}, 1);
    ASSERT_EQ(sized.size(), 3u);
    EXPECT_SAME(sized[0], x.narrow(1, 0, 1), "split sizes 0");
    EXPECT_EQ(sized[1].sizes(), (Shape{7, 0}));
    EXPECT_SAME(sized[2], x.narrow(1, 1, 3), "split sizes 2");
    EXPECT_SAME(x.split_with_sizes({4, 3})[1], x.narrow(0, 4, 3), "split_with_sizes");
    const std::vector<Tensor> chunks = x.chunk(3, -1);  // size 4 in chunks of 2: only two
    ASSERT_EQ(chunks.size(), 2u);
    EXPECT_SAME(chunks[1], x.narrow(1, 2, 2), "chunk");
    EXPECT_EQ(chunk(x, 4).size(), 4u);  // 7 rows in chunks of 2
    const std::vector<Tensor> rows = x.unbind(1);
    ASSERT_EQ(rows.size(), 4u);
    for (std::int64_t i = 0; i < 4; ++i) EXPECT_SAME(rows[static_cast<std::size_t>(i)], x.select(1, i), "unbind");
  }
  // Writes through a piece reach the input.
  Tensor x = zeros({4, 2});
  x.chunk(2)[1].fill_(3.0);
  EXPECT_EQ(x.sum().item<float>(), 12.0f);
  // Empty dims: split gives one empty piece, chunk `chunks` of them.
  const Tensor e = zeros({0, 3});
  EXPECT_EQ(e.split(2).size(), 1u);
  EXPECT_EQ(e.split(0).size(), 1u);
  EXPECT_EQ(e.chunk(3).size(), 3u);
  EXPECT_EQ(zeros({3, 0}).unbind(1).size(), 0u);
}

TEST(Joining, FlipRollEveryDTypeAndLayout) {
  for (DType dt : kAllDTypes) {
    for (const Layout& l : layouts()) {
      const Tensor x = l.make({3, 4, 5}, dt);
      const std::string what = what_of(l.name, dt, x.sizes());
      EXPECT_SAME(x.flip({0, 2}), ref_flip(Host(x), {0, 2}).tensor(dt), "flip " + what);
      EXPECT_SAME(flip(x, {-1}), ref_flip(Host(x), {2}).tensor(dt), "flip(-1) " + what);
      EXPECT_SAME(flip(x, {}), x, "flip() " + what);
      EXPECT_SAME(x.roll({1, -7}, {0, 2}), ref_roll(Host(x), {1, -7}, {0, 2}).tensor(dt), "roll " + what);
      EXPECT_SAME(x.roll(2, 1), ref_roll(Host(x), {2}, {1}).tensor(dt), "roll(2, 1) " + what);
      EXPECT_SAME(roll(x, {1, 1}, {2, 2}), ref_roll(Host(x), {2}, {2}).tensor(dt), "roll twice " + what);
      // Without dims: the flattened tensor rolled.
      const Tensor flat = x.roll(13);
      EXPECT_SAME(flat.reshape({-1}), ref_roll(Host(x.reshape({-1})), {13}, {0}).tensor(dt), "roll(13) " + what);
      EXPECT_EQ(flat.sizes(), x.sizes());
    }
    const Tensor s = random_of({}, dt);
    EXPECT_SAME(s.flip({0}), s, "flip of a 0-d tensor");
    EXPECT_SAME(s.roll(3), s, "roll of a 0-d tensor");
    EXPECT_SAME(random_of({0, 3}, dt).roll(1, 0), zeros({0, 3}, dt), "roll of an empty tensor");
  }
}

TEST(Joining, RepeatAndRepeatInterleaveEveryDType) {
  for (DType dt : kAllDTypes) {
    for (const Layout& l : layouts()) {
      const Tensor x = l.make({2, 3}, dt);
      const std::string what = what_of(l.name, dt, x.sizes());
      EXPECT_SAME(x.repeat({2, 1, 3}), ref_repeat(Host(x), {2, 1, 3}).tensor(dt), "repeat " + what);
      EXPECT_SAME(x.repeat({1, 1}), x, "repeat ones " + what);
      EXPECT_NE(x.repeat({1, 1}).data_ptr(), x.data_ptr()) << "repeat copies";
      EXPECT_EQ(x.repeat({0, 2}).sizes(), (Shape{0, 6}));
      EXPECT_SAME(x.repeat_interleave(2, 1), ref_gather(Host(x), 1, {0, 0, 1, 1, 2, 2}).tensor(dt),
                  "repeat_interleave(2, 1) " + what);
      EXPECT_SAME(repeat_interleave(x, 2),
                  ref_gather(Host(x.reshape({-1})), 0, {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}).tensor(dt),
                  "repeat_interleave(2) " + what);
      const Tensor reps = from_vector(std::vector<std::int64_t>{2, 0, 1}, {3});
      EXPECT_SAME(x.repeat_interleave(reps, 1), ref_gather(Host(x), 1, {0, 0, 2}).tensor(dt),
                  "repeat_interleave(tensor, 1) " + what);
      EXPECT_SAME(x.repeat_interleave(from_vector(std::vector<std::int32_t>{3}, {1}), -2),
                  ref_gather(Host(x), 0, {0, 0, 0, 1, 1, 1}).tensor(dt), "repeat_interleave([3], 0) " + what);
    }
    const Tensor s = random_of({}, dt);
    EXPECT_SAME(s.repeat({3}), Host(s).tensor(dt).expand({3}).contiguous(), "repeat of a 0-d tensor");
    EXPECT_SAME(s.repeat_interleave(2), s.expand({2}).contiguous(), "repeat_interleave of a 0-d tensor");
  }
  EXPECT_SAME(repeat_interleave(from_vector(std::vector<std::int64_t>{2, 0, 1, 3}, {4})),
              from_vector(std::vector<std::int64_t>{0, 0, 2, 3, 3, 3}, {6}), "repeat_interleave(repeats)");
  EXPECT_EQ(repeat_interleave(random_of({2, 3}, kFloat32), 2, 1, 6).sizes(), (Shape{2, 6})) << "output_size";
}

TEST(Joining, TrilTriuEveryDTypeAndLayout) {
  for (DType dt : kAllDTypes) {
    for (const Layout& l : layouts()) {
      for (const Shape& s : {Shape{4, 6}, Shape{2, 5, 3}, Shape{3, 3}, Shape{0, 4}, Shape{2, 1, 1}}) {
        const Tensor x = l.make(s, dt);
        for (std::int64_t k : {-7, -2, -1, 0, 1, 3, 8}) {
          const std::string what = what_of(l.name + " diagonal " + std::to_string(k), dt, s);
          EXPECT_SAME(x.tril(k), ref_triangle(Host(x), k, false).tensor(dt), "tril " + what);
          EXPECT_SAME(triu(x, k), ref_triangle(Host(x), k, true).tensor(dt), "triu " + what);
        }
      }
    }
    Tensor y = random_of({3, 4}, dt);
    const Host before(y);
    y.tril_(1);
    EXPECT_SAME(y, ref_triangle(before, 1, false).tensor(dt), "tril_");
    y.triu_();
    EXPECT_SAME(y, ref_triangle(ref_triangle(before, 1, false), 0, true).tensor(dt), "triu_");
  }
}

TEST(Joining, WhereEveryDTypeBroadcastAndLayout) {
  for (DType dt : kAllDTypes) {
    for (const Layout& l : layouts()) {
      const Tensor c = l.make({3, 4}, kBool), a = l.make({3, 4}, dt), b = random_of({3, 4}, dt);
      const std::string what = what_of("where " + l.name, dt, {3, 4});
      EXPECT_SAME(where(c, a, b), ref_where(Host(c), Host(a), Host(b), {3, 4}).tensor(dt), what);
      EXPECT_SAME(a.where(c, b), ref_where(Host(c), Host(a), Host(b), {3, 4}).tensor(dt), what + " (method)");
    }
    // Every broadcast, one-element operands (0-d and [1, 1]) on either side.
    const std::vector<std::vector<Shape>> shapes{{{3, 1}, {1, 4}, {3, 4}},
                                                 {{4}, {3, 4}, {}},
                                                 {{3, 4}, {}, {1, 1}},
                                                 {{}, {3, 4}, {3, 4}},
                                                 {{2, 1, 4}, {3, 1}, {4}},
                                                 {{}, {}, {}},
                                                 {{0, 4}, {4}, {}},
                                                 {{3, 4}, {1}, {3, 4}},
                                                 // blocks of at least 1024 repeated along the leading dims (the rows
                                                 // form), of one period and (the strided form) of two
                                                 {{32, 64}, {3, 32, 64}, {}},
                                                 {{3, 32, 64}, {1, 32, 64}, {32, 64}},
                                                 {{7, 1029}, {1029}, {7, 1029}},
                                                 {{2, 3, 1024}, {3, 1024}, {1024}}};
    for (const auto& s : shapes) {
      const Tensor c = random_of(s[0], kBool), a = random_of(s[1], dt), b = random_of(s[2], dt);
      const Shape out = broadcast_shapes(broadcast_shapes(s[0], s[1], "test"), s[2], "test");
      EXPECT_SAME(where(c, a, b), ref_where(Host(c), Host(a), Host(b), out).tensor(dt),
                  what_of("where " + shape_str(s[0]) + shape_str(s[1]) + shape_str(s[2]), dt, out));
    }
  }
}

TEST(Joining, WherePromotesAndTakesScalars) {
  const Tensor c = random_of({2, 3}, kBool);
  for (DType da : kAllDTypes) {
    for (DType db : kAllDTypes) {
      const Tensor a = random_of({2, 3}, da), b = random_of({3}, db);
      const DType common = promote_types(da, db);
      EXPECT_SAME(where(c, a, b), ref_where(Host(c), Host(a.to(common)), Host(b.to(common)), {2, 3}).tensor(common),
                  std::string("where ") + dtype_name(da) + " with " + dtype_name(db));
      EXPECT_EQ(where(c, a, zeros({}, db)).dtype(), result_type(a, zeros({}, db)));
    }
    const Tensor a = random_of({2, 3}, da);
    EXPECT_EQ(where(c, a, 2.5).dtype(), result_type(a, 2.5)) << da;
    EXPECT_EQ(where(c, 3, a).dtype(), result_type(a, 3)) << da;
    EXPECT_SAME(where(c, a, 1),
                ref_where(Host(c), Host(a.to(result_type(a, 1))), Host({}, 1.0), {2, 3}).tensor(result_type(a, 1)),
                std::string("where(c, a, 1) ") + dtype_name(da));
  }
  EXPECT_EQ(where(c, 1, 2).dtype(), kInt64);
  EXPECT_EQ(where(c, 1.0, 2).dtype(), kFloat32);
  EXPECT_EQ(where(c, true, false).dtype(), kBool);
  EXPECT_SAME(where(c, 1.5, -2.0), ref_where(Host(c), Host({}, 1.5), Host({}, -2.0), {2, 3}).tensor(kFloat32),
              "where of two scalars");
  // A uint8 condition is taken as bool, as PyTorch still does.
  const Tensor a = random_of({2, 3}, kFloat32), b = random_of({2, 3}, kFloat32);
  EXPECT_SAME(where(c.to(kUInt8), a, b), where(c, a, b), "uint8 condition");
}

TEST(Joining, MaskedFillEveryDType) {
  for (DType dt : kAllDTypes) {
    for (const Layout& l : layouts()) {
      const Tensor x = l.make({3, 4}, dt), m = l.make({3, 4}, kBool);
      const std::string what = what_of("masked_fill " + l.name, dt, {3, 4});
      const Tensor r = x.masked_fill(m, 1);
      EXPECT_SAME(r, ref_where(Host(m), Host({}, 1.0), Host(x), {3, 4}).tensor(dt), what);
      EXPECT_SAME(masked_fill(x, m, full({}, 0.0, dt)), ref_where(Host(m), Host({}, 0.0), Host(x), {3, 4}).tensor(dt),
                  what + " (tensor value)");
      Tensor y = x.clone();
      y.masked_fill_(m, true);
      EXPECT_SAME(y, ref_where(Host(m), Host({}, 1.0), Host(x), {3, 4}).tensor(dt), what + " (in place)");
    }
    // Broadcast mask and self; in place through a transposed view.
    const Tensor x = random_of({4}, dt), m = random_of({3, 1}, kBool);
    EXPECT_SAME(x.masked_fill(m, 0), ref_where(Host(m), Host({}, 0.0), Host(x), {3, 4}).tensor(dt),
                what_of("masked_fill broadcast", dt, {3, 4}));
    Tensor base = random_of({4, 3}, dt);
    Tensor view = base.t();
    view.masked_fill_(random_of({4}, kBool).fill_(true), 0);
    EXPECT_SAME(base, zeros({4, 3}, dt), what_of("masked_fill_ through a view", dt, {3, 4}));
  }
  // The value converts to self's dtype as PyTorch's casts do.
  const Tensor m = from_vector(std::vector<bool>{true, false}, {2});
  EXPECT_SAME(from_vector(std::vector<std::int64_t>{5, 6}, {2}).masked_fill(m, 2.7),
              from_vector(std::vector<std::int64_t>{2, 6}, {2}), "float value into int64");
  EXPECT_SAME(from_vector(std::vector<std::uint8_t>{5, 6}, {2}).masked_fill(m, -1),
              from_vector(std::vector<std::uint8_t>{255, 6}, {2}), "-1 into uint8 wraps");
  EXPECT_SAME(from_vector(std::vector<float>{5, 6}, {2}).masked_fill(m, from_vector(std::vector<double>{-0.5}, {})),
              from_vector(std::vector<float>{-0.5f, 6}, {2}), "float64 value tensor into float32");
}

// ---- autograd ----------------------------------------------------------------------------------------------

TEST(JoiningGradcheck, CatAndStack) {
  for (std::int64_t d : {0, 1, -1}) {
    check("cat dim " + std::to_string(d),
          [d](const std::vector<Tensor>& in) {
            return cat({in[0], in[1], in[2]}, d);
          },
          {leaf({3, 2}), leaf({3, 2}), leaf({3, 2})});
  }
  check("cat of transposed, sliced, expanded",
        [](const std::vector<Tensor>& in) {
          return cat({in[0].t(), in[1].slice(1, 0, 4, 2), in[2].expand({3, 2}), in[0].t()}, 0);
        },
        {leaf({2, 3}), leaf({3, 4}), leaf({1, 2})});
  check("cat with a legacy empty tensor",
        [](const std::vector<Tensor>& in) {
          return cat({in[0], in[1], in[0]}, 1);
        },
        {leaf({2, 2}), leaf({0})});
  check("cat with one input not requiring grad",
        [](const std::vector<Tensor>& in) {
          return cat({in[0], ones({2, 2}, kFloat64)}, 1);
        },
        {leaf({2, 3})});
  for (std::int64_t d : {0, 1, 2, -1}) {
    check("stack dim " + std::to_string(d),
          [d](const std::vector<Tensor>& in) {
            return stack({in[0], in[1].t()}, d);
          },
          {leaf({2, 3}), leaf({3, 2})});
  }
}

TEST(JoiningGradcheck, SplitChunkUnbind) {
  // Pieces used in another order and with different weights, one of them twice, one not at all.
  check("split",
        [](const std::vector<Tensor>& in) {
          const auto p = in[0].split(2, 1);
          return cat({p[2] * 3.0, p[0], p[0] * -1.5}, 1);
        },
        {leaf({3, 5})});
  check("split of a transposed input",
        [](const std::vector<Tensor>& in) {
          const auto p = split(in[0].t(), std::vector<std::int64_t>{1, 3, 1}, 0);
          return stack({p[1].sum(), p[0].sum() * 2.0, p[2].sum()});
        },
        {leaf({3, 5})});
  check("chunk",
        [](const std::vector<Tensor>& in) {
          const auto p = in[0].chunk(3, 0);
          return p[1] * p[2];
        },
        {leaf({6, 2})});
  check("unbind",
        [](const std::vector<Tensor>& in) {
          const auto rows = in[0].unbind(0);
          Tensor acc = rows[0];
          for (std::size_t i = 1; i < rows.size(); ++i) acc = acc * 0.5 + rows[i] * static_cast<double>(i);
          return acc;
        },
        {leaf({7, 3})});
  check("unbind, one piece used", [](const std::vector<Tensor>& in) { return in[0].unbind(1)[2] * 2.0; },
        {leaf({2, 4})});
}

TEST(JoiningGradcheck, SplitGradientWithRetainGraph) {
  // Two backward passes through the same pieces give the gradient twice; unbind of a long dim stays linear.
  const Tensor x = leaf({200, 3});
  const auto rows = x.unbind(0);
  Tensor loss = rows[0].sum();
  for (std::size_t i = 1; i < rows.size(); ++i) loss = loss + rows[i].sum() * static_cast<double>(i);
  loss.backward(Tensor(), true);
  loss.backward();
  std::vector<double> expected;
  for (int i = 0; i < 200; ++i) expected.insert(expected.end(), 3, 2.0 * (i == 0 ? 1 : i));
  expect_close(x.grad(), from_vector(expected, {200, 3}), 0, 0, "unbind gradient, two passes");
}

TEST(JoiningGradcheck, GradientsComeBackInEachInputsDType) {
  // cat and where promote; each input's gradient is its slice (or masked part) of the output's, in its own dtype.
  const Tensor a = random_of({2, 3}, kFloat32).requires_grad_(true),
               b = random_of({1, 3}, kFloat64).requires_grad_(true);
  const Tensor out = cat({a, b}, 0);
  ASSERT_EQ(out.dtype(), kFloat64);
  const Tensor g = random_of({3, 3}, kFloat64);
  out.backward(g);
  EXPECT_SAME(a.grad(), g.narrow(0, 0, 2).to(kFloat32), "cat: float32 input's gradient");
  EXPECT_SAME(b.grad(), g.narrow(0, 2, 1), "cat: float64 input's gradient");
  const Tensor c = random_of({2, 3}, kBool), x = random_of({2, 3}, kHalf).requires_grad_(true);
  const Tensor y = random_of({3}, kFloat32).requires_grad_(true);
  const Tensor w = where(c, x, y);
  ASSERT_EQ(w.dtype(), kFloat32);
  const Tensor gw = random_of({2, 3}, kFloat32);
  w.backward(gw);
  EXPECT_SAME(x.grad(), where(c, gw, 0.0).to(kHalf), "where: float16 operand's gradient");
  expect_close(y.grad(), where(c, 0.0, gw).sum({0}), 1e-6, 1e-6, "where: broadcast float32 operand's gradient");
}

TEST(JoiningGradcheck, FlipRollRepeat) {
  check("flip", [](const std::vector<Tensor>& in) { return in[0].flip({0, 2}); }, {leaf({2, 3, 4})});
  check("flip of a transposed input", [](const std::vector<Tensor>& in) { return in[0].t().flip({1}); },
        {leaf({3, 4})});
  check("roll", [](const std::vector<Tensor>& in) { return in[0].roll({1, -3}, {0, 1}); }, {leaf({3, 4})});
  check("roll flattened, sliced input", [](const std::vector<Tensor>& in) { return in[0].slice(1, 1, 4).roll(5); },
        {leaf({3, 4})});
  check("repeat", [](const std::vector<Tensor>& in) { return in[0].repeat({2, 1, 3}); }, {leaf({2, 3})});
  check("repeat of an expanded input",
        [](const std::vector<Tensor>& in) {
          return in[0].expand({3, 2}).repeat({2, 2});
        },
        {leaf({1, 2})});
  check("repeat_interleave(int)", [](const std::vector<Tensor>& in) { return in[0].repeat_interleave(3, 0); },
        {leaf({2, 3})});
  check("repeat_interleave(int) flattened",
        [](const std::vector<Tensor>& in) { return in[0].t().repeat_interleave(2); }, {leaf({2, 3})});
  const Tensor reps = from_vector(std::vector<std::int64_t>{2, 0, 3}, {3});
  check("repeat_interleave(tensor)", [reps](const std::vector<Tensor>& in) { return in[0].repeat_interleave(reps, 1); },
        {leaf({2, 3})});
}

TEST(JoiningGradcheck, TrilTriu) {
  for (std::int64_t k : {-1, 0, 2}) {
    check("tril " + std::to_string(k), [k](const std::vector<Tensor>& in) { return in[0].tril(k); }, {leaf({3, 4})});
    check("triu " + std::to_string(k) + " of a transposed batch",
          [k](const std::vector<Tensor>& in) { return in[0].transpose(1, 2).triu(k); }, {leaf({2, 4, 3})});
  }
  check("tril_ of a non-leaf", [](const std::vector<Tensor>& in) { return (in[0] * 2.0).tril_(-1); }, {leaf({3, 3})});
}

TEST(JoiningGradcheck, WhereAndMaskedFill) {
  const Tensor c = random_of({3, 4}, kBool), m = random_of({4}, kBool);
  check("where", [c](const std::vector<Tensor>& in) { return where(c, in[0], in[1]); }, {leaf({3, 4}), leaf({3, 4})});
  check("where broadcast", [m](const std::vector<Tensor>& in) { return where(m, in[0], in[1]); },
        {leaf({3, 1}), leaf({})});
  check("where of transposed and expanded",
        [c](const std::vector<Tensor>& in) {
          return where(c, in[0].t(), in[1].expand({3, 4}));
        },
        {leaf({4, 3}), leaf({1, 4})});
  check("where with scalars", [c](const std::vector<Tensor>& in) { return where(c, in[0], 2.0) + where(c, -1, in[0]); },
        {leaf({3, 4})});
  check("masked_fill", [m](const std::vector<Tensor>& in) { return in[0].masked_fill(m, 0.5); }, {leaf({3, 4})});
  check("masked_fill broadcasting self", [c](const std::vector<Tensor>& in) { return in[0].masked_fill(c, -2.0); },
        {leaf({4})});
  check("masked_fill with a value tensor", [c](const std::vector<Tensor>& in) { return masked_fill(in[0], c, in[1]); },
        {leaf({3, 4}), leaf({})});
  check("masked_fill_ of a non-leaf",
        [m](const std::vector<Tensor>& in) { return (in[0] * 1.0).masked_fill_(m, in[1] * 3.0); },
        {leaf({3, 4}), leaf({})});
  const Tensor rows = random_of({3}, kBool);
  check("masked_fill_ through a view",
        [rows](const std::vector<Tensor>& in) {
          Tensor y = in[0] * 1.0;
          y.t().masked_fill_(rows, 7.0);
          return y;
        },
        {leaf({3, 4})});
}

// ---- CPU against GPU ---------------------------------------------------------------------------------------

namespace {
/// t on the GPU with the same geometry: its whole storage copied and viewed with t's sizes, strides and offset, so
/// that transposed, sliced, expanded and offset inputs reach the GPU kernels as such.
Tensor same_layout_on_gpu(const Tensor& t) {
  if (t.numel() == 0 || (t.is_contiguous() && t.storage_offset() == 0)) return t.cuda();
  const TensorImpl& impl = *t.unsafe_impl();
  const auto elements = static_cast<std::int64_t>(impl.storage->nbytes() / t.element_size());
  const Tensor storage(std::make_shared<TensorImpl>(impl.storage, 0, Shape{elements}, t.dtype()));
  return storage.cuda().as_strided(t.sizes(), t.strides(), t.storage_offset());
}

/// fn on CPU inputs and on the same inputs on the GPU: the same values exactly (these ops only move elements).
void expect_gpu_matches(const std::string& what, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                        const std::vector<Tensor>& cpu_inputs) {
  std::vector<Tensor> gpu_inputs;
  for (const Tensor& t : cpu_inputs) gpu_inputs.push_back(same_layout_on_gpu(t));
  const Tensor expected = fn(cpu_inputs), actual = fn(gpu_inputs);
  EXPECT_TRUE(actual.is_cuda()) << what;
  EXPECT_SAME(actual, expected, what + " (GPU vs CPU)");
}

/// A dtype that promotes to dt with dt (a cat of both is in dt, and the other's inputs take the converting copy).
DType lower_dtype(DType dt) {
  switch (dt) {
    case kFloat32:
      return kInt32;
    case kFloat64:
      return kFloat32;
    case kBFloat16:
      return kUInt8;
    case kFloat16:
      return kBool;
    case kInt64:
      return kInt32;
    case kInt32:
      return kUInt8;
    default:
      return kBool;
  }
}
}  // namespace

TEST(JoiningGpu, CatEveryDTypeLayoutAndWidth) {
  MINIDL_REQUIRE_GPU();
  for (DType dt : kAllDTypes) {
    for (const Layout& l : layouts()) {
      for (std::int64_t d : {0, 1, 2}) {
        Shape sa{3, 5, 7}, sb{3, 5, 7};
        sb[static_cast<std::size_t>(d)] = 2;
        expect_gpu_matches(what_of("cat " + l.name + " dim " + std::to_string(d), dt, sa),
                           [d](const std::vector<Tensor>& in) {
                             return cat({in[0], in[1], in[0]}, d);
                           },
                           {l.make(sa, dt), random_of(sb, dt)});
      }
    }
    // Many inputs (several launches), odd widths (every access width), mixed dtypes (the copy path), empty ones.
    std::vector<Tensor> parts;
    for (int k = 0; k < 100; ++k) parts.push_back(random_of({5, 1 + k % 9}, dt));
    parts.push_back(random_of({5, 0}, dt));
    parts.push_back(random_of({5, 3}, lower_dtype(dt)));
    parts.push_back(random_of({3, 5}, dt).t());
    parts.push_back(empty({0}, dt));
    expect_gpu_matches(
        what_of("cat of 103", dt, {5, 0}), [](const std::vector<Tensor>& in) { return cat(in, 1); }, parts);
    // Large enough for many blocks and partial last blocks; one long row (dim 0).
    // Narrow rows (copied output word by output word) over many blocks, with a converted input among them.
    expect_gpu_matches(
        what_of("cat narrow", dt, {100003, 9}),
        [](const std::vector<Tensor>& in) {
          return cat({in[0], in[1], in[2]}, 1);
        },
        {random_of({100003, 3}, dt), random_of({100003, 1}, lower_dtype(dt)), random_of({100003, 5}, dt)});
    expect_gpu_matches(what_of("cat large", dt, {1000, 1037}),
                       [](const std::vector<Tensor>& in) {
                         return cat({in[0], in[1]}, 1);
                       },
                       {random_of({1000, 1037}, dt), random_of({1000, 3}, dt)});
    expect_gpu_matches(what_of("cat dim 0", dt, {300001}),
                       [](const std::vector<Tensor>& in) {
                         return cat({in[0], in[1], in[0]}, 0);
                       },
                       {random_of({300001}, dt), random_of({77}, dt)});
  }
}

TEST(JoiningGpu, StackSplitFlipRollRepeat) {
  MINIDL_REQUIRE_GPU();
  for (DType dt : kAllDTypes) {
    for (const Layout& l : layouts()) {
      const Tensor x = l.make({3, 4, 5}, dt);
      const std::string what = what_of(l.name, dt, x.sizes());
      expect_gpu_matches("stack " + what, [](const std::vector<Tensor>& in) { return stack({in[0], in[0]}, 2); }, {x});
      expect_gpu_matches("split " + what, [](const std::vector<Tensor>& in) { return in[0].split(2, 2)[2].clone(); },
                         {x});
      expect_gpu_matches("unbind " + what, [](const std::vector<Tensor>& in) { return in[0].unbind(1)[3].clone(); },
                         {x});
      expect_gpu_matches("flip " + what, [](const std::vector<Tensor>& in) { return in[0].flip({0, 2}); }, {x});
      expect_gpu_matches("roll " + what,
                         [](const std::vector<Tensor>& in) {
                           return in[0].roll({2, -1}, {1, 2});
                         },
                         {x});
      expect_gpu_matches("roll flat " + what, [](const std::vector<Tensor>& in) { return in[0].roll(17); }, {x});
      expect_gpu_matches("repeat " + what,
                         [](const std::vector<Tensor>& in) {
                           return in[0].repeat({2, 1, 1, 2});
                         },
                         {x});
      expect_gpu_matches("repeat_interleave " + what,
                         [](const std::vector<Tensor>& in) { return in[0].repeat_interleave(3, 1); }, {x});
      expect_gpu_matches("repeat_interleave(tensor) " + what,
                         [](const std::vector<Tensor>& in) {
                           return in[0].repeat_interleave(
                               from_vector(std::vector<std::int64_t>{1, 0, 2, 3, 1}, {5}).to(in[0].device()), 2);
                         },
                         {x});
    }
    for (const Shape& s : {Shape{}, Shape{0, 3}, Shape{1}}) {
      expect_gpu_matches(what_of("flip/roll/repeat small", dt, s),
                         [](const std::vector<Tensor>& in) {
                           return in[0].flip({}).roll(1).repeat({2, 1, 1});
                         },
                         {random_of(s, dt)});
    }
  }
}

TEST(JoiningGpu, TrilTriu) {
  MINIDL_REQUIRE_GPU();
  for (DType dt : kAllDTypes) {
    for (const Layout& l : layouts()) {
      // Rows of 256 or more go row by row, in 16-byte packs where a row is a whole number of them.
      for (const Shape& s : {Shape{5, 7}, Shape{3, 4, 2}, Shape{0, 3}, Shape{1, 1}, Shape{3, 300}, Shape{2, 5, 260}}) {
        for (std::int64_t k : {-3, 0, 2, 257}) {
          expect_gpu_matches(what_of("tril/triu " + l.name + " " + std::to_string(k), dt, s),
                             [k](const std::vector<Tensor>& in) {
                               return cat({in[0].tril(k), in[0].triu(k)}, -1);
                             },
                             {l.make(s, dt)});
        }
      }
    }
  }
}

TEST(JoiningGpu, WhereAndMaskedFillEveryPath) {
  MINIDL_REQUIRE_GPU();
  for (DType dt : kAllDTypes) {
    // Flat (all of out's shape), one-element a, b or both, and strided operands; odd sizes leave a tail after the
    // 16-byte packs, an offset view has none.
    const std::vector<std::vector<Shape>> shapes{{{1001}, {1001}, {1001}},
                                                 {{1001}, {}, {1001}},
                                                 {{1001}, {1001}, {1}},
                                                 {{1001}, {}, {}},
                                                 {{7, 1}, {1, 9}, {7, 9}},
                                                 {{0}, {0}, {}},
                                                 {{}, {}, {}},
                                                 {{3, 1, 5}, {4, 1}, {5}},
                                                 // the rows form, packed and not, and the strided form for two periods
                                                 {{32, 64}, {3, 32, 64}, {}},
                                                 {{3, 32, 64}, {1, 32, 64}, {32, 64}},
                                                 {{7, 1029}, {1029}, {7, 1029}},
                                                 {{2, 3, 1024}, {3, 1024}, {1024}},
                                                 {{5, 1030}, {}, {1030}}};
    for (const auto& s : shapes) {
      expect_gpu_matches(what_of("where " + shape_str(s[0]) + shape_str(s[1]) + shape_str(s[2]), dt, s[0]),
                         [](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); },
                         {random_of(s[0], kBool), random_of(s[1], dt), random_of(s[2], dt)});
    }
    for (const Layout& l : layouts()) {
      const std::string what = what_of(l.name, dt, {33, 17});
      expect_gpu_matches("where " + what, [](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); },
                         {l.make({33, 17}, kBool), l.make({33, 17}, dt), random_of({33, 17}, dt)});
      expect_gpu_matches("masked_fill " + what,
                         [](const std::vector<Tensor>& in) { return in[0].masked_fill(in[1], 1); },
                         {l.make({33, 17}, dt), l.make({33, 17}, kBool)});
      expect_gpu_matches("masked_fill_ " + what,
                         [](const std::vector<Tensor>& in) {
                           Tensor y = in[0].clone();
                           y.masked_fill_(in[1], 0);
                           return y;
                         },
                         {random_of({33, 17}, dt), l.make({33, 17}, kBool)});
      expect_gpu_matches("where with scalars " + what, [](const std::vector<Tensor>& in) { return where(in[0], 1, 0); },
                         {l.make({33, 17}, kBool)});
    }
    // An attention-style mask broadcast over the batch, a 0-d CPU value with CUDA operands.
    for (std::int64_t t : {8, 32, 40}) {
      expect_gpu_matches(what_of("masked_fill broadcast mask", dt, {2, 3, t, t}),
                         [](const std::vector<Tensor>& in) { return in[0].masked_fill(in[1], 0); },
                         {random_of({2, 3, t, t}, dt), random_of({t, t}, kBool).triu(1)});
    }
    const Tensor c = random_of({5}, kBool).cuda(), a = random_of({5}, dt).cuda(), v = random_of({}, dt);
    EXPECT_SAME(where(c, a, v), where(c.cpu(), a.cpu(), v), what_of("where with a 0-d CPU operand", dt, {5}));
    EXPECT_SAME(masked_fill(a, c, v), masked_fill(a.cpu(), c.cpu(), v), what_of("masked_fill CPU value", dt, {5}));
  }
}

TEST(JoiningGpu, GradientsMatchTheCpu) {
  MINIDL_REQUIRE_GPU();
  const Tensor x = random_of({6, 5}, kFloat32), y = random_of({6, 2}, kFloat32), c = random_of({6, 5}, kBool);
  const Tensor m = random_of({10}, kBool), r = random_of({18, 10}, kFloat32);
  const auto grads = [&](Device dev) {
    const Tensor a = x.to(dev).clone().requires_grad_(true), b = y.to(dev).clone().requires_grad_(true);
    const auto parts = a.split(2, 1);
    Tensor out = cat({parts[2], b, where(c.to(dev), a, 0.5).flip({0}).roll(1, 1), parts[0]}, 1);
    out = cat({out.tril(1), out.repeat_interleave(2, 0).masked_fill(m.to(dev), 0.0)}, 0);
    (out * r.to(dev)).sum().backward();
    return std::vector<Tensor>{a.grad(), b.grad()};
  };
  const std::vector<Tensor> on_cpu = grads(Device(kCPU)), on_gpu = grads(Device(kCUDA));
  expect_close(on_gpu[0], on_cpu[0], 1e-5, 1e-5, "gradient of a");
  expect_close(on_gpu[1], on_cpu[1], 1e-5, 1e-5, "gradient of b");
}

// ---- golden against PyTorch ----------------------------------------------------------------------------------

namespace {

const json& golden() {
  static const json g = minidl::testing::read_golden("joining_golden.json");
  return g;
}

using minidl::testing::dtype_named;

Tensor decode(const json& j, Device device) {
  const auto values = j["values"].get<std::vector<double>>();
  return from_vector(values, j["shape"].get<Shape>()).to(dtype_named(j["dtype"])).to(device);
}

Scalar scalar_of(const json& j) {
  if (j.is_boolean()) return Scalar(j.get<bool>());
  if (j.is_number_integer()) return Scalar(j.get<std::int64_t>());
  return Scalar(j.get<double>());
}

/// The op of a golden case on `in`, as the generator called it.
std::vector<Tensor> run_case(const json& c, const std::vector<Tensor>& in) {
  const std::string op = c["op"];
  const json& p = c["params"];
  if (op == "cat") return {cat(in, p["dim"].get<std::int64_t>())};
  if (op == "stack") return {stack(in, p["dim"].get<std::int64_t>())};
  if (op == "split" && p.contains("sizes")) {
    return split(in[0], p["sizes"].get<std::vector<std::int64_t>>(), p["dim"].get<std::int64_t>());
  }
  if (op == "split") return in[0].split(p["split_size"].get<std::int64_t>(), p["dim"].get<std::int64_t>());
  if (op == "chunk") return in[0].chunk(p["chunks"].get<std::int64_t>(), p["dim"].get<std::int64_t>());
  if (op == "unbind") return in[0].unbind(p["dim"].get<std::int64_t>());
  if (op == "flip") return {in[0].flip(p["dims"].get<std::vector<std::int64_t>>())};
  if (op == "roll") {
    return {in[0].roll(p["shifts"].get<std::vector<std::int64_t>>(), p["dims"].get<std::vector<std::int64_t>>())};
  }
  if (op == "repeat") return {in[0].repeat(p["repeats"].get<std::vector<std::int64_t>>())};
  if (op == "repeat_interleave") {
    std::optional<std::int64_t> dim;
    if (p.contains("dim")) dim = p["dim"].get<std::int64_t>();
    if (p.contains("repeats")) return {in[0].repeat_interleave(p["repeats"].get<std::int64_t>(), dim)};
    if (in.size() == 1) return {repeat_interleave(in[0])};
    return {in[0].repeat_interleave(in[1], dim)};
  }
  if (op == "tril") return {in[0].tril(p["diagonal"].get<std::int64_t>())};
  if (op == "triu") return {in[0].triu(p["diagonal"].get<std::int64_t>())};
  if (op == "where") {
    if (p.contains("self") && p.contains("other")) return {where(in[0], scalar_of(p["self"]), scalar_of(p["other"]))};
    if (p.contains("self")) return {where(in[0], scalar_of(p["self"]), in[1])};
    if (p.contains("other")) return {where(in[0], in[1], scalar_of(p["other"]))};
    return {where(in[0], in[1], in[2])};
  }
  if (op == "masked_fill") {
    if (p.contains("value")) return {in[0].masked_fill(in[1], scalar_of(p["value"]))};
    return {in[0].masked_fill(in[1], in[2])};
  }
  throw ValueError("unknown golden op " + op);
}

void expect_golden(Device device) {
  int checked = 0;
  for (const json& c : golden()["cases"]) {
    const std::string what =
        c["op"].get<std::string>() + " " + c["params"].dump() + " on " + (device.is_cuda() ? "cuda" : "cpu");
    std::vector<Tensor> in;
    const bool grad = c.contains("grads");
    for (const json& t : c["inputs"]) {
      Tensor x = decode(t, device);
      if (grad && x.is_floating_point()) x.requires_grad_(true);
      in.push_back(x);
    }
    const std::vector<Tensor> out = run_case(c, in);
    if (c.contains("outputs")) {
      ASSERT_EQ(out.size(), c["outputs"].size()) << what;
      for (std::size_t k = 0; k < out.size(); ++k) EXPECT_SAME(out[k], decode(c["outputs"][k], device), what);
    } else {
      EXPECT_SAME(out[0], decode(c["output"], device), what);
    }
    if (grad) {
      out[0].backward(decode(c["grad_output"], device));
      for (std::size_t k = 0; k < in.size(); ++k) {
        if (c["grads"][k].is_null()) continue;
        const Tensor e = decode(c["grads"][k], device);
        expect_close(in[k].grad(), e, e.dtype() == kFloat64 ? 1e-12 : 1e-6, 1e-6, what + " grad " + std::to_string(k));
      }
    }
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

}  // namespace

#define MINIDL_REQUIRE_GOLDEN() MINIDL_REQUIRE_GOLDEN_FILE(golden(), "joining_golden.json", "gen_joining_golden.py")

TEST(JoiningGolden, MatchesPyTorchOnTheCpu) {
  MINIDL_REQUIRE_GOLDEN();
  expect_golden(Device(kCPU));
}

TEST(JoiningGolden, MatchesPyTorchOnTheGpu) {
  MINIDL_REQUIRE_GOLDEN();
  MINIDL_REQUIRE_GPU();
  expect_golden(Device(kCUDA));
}

// ---- bad input ----------------------------------------------------------------------------------------------

TEST(JoiningErrors, Cat) {
  const Tensor a = zeros({2, 3}), b = zeros({2, 4});
  expect_error<ValueError>([&] { cat({}); }, {"cat", "non-empty"}, "empty list");
  expect_error<ValueError>(
      [&] {
        cat({a, b}, 0);
      },
      {"cat", "dimension 0", "tensor 1", "size 3", "size 4"}, "mismatched sizes");
  expect_error<ValueError>(
      [&] {
        cat({a, zeros({2, 3, 1})}, 0);
      },
      {"cat", "number of dimensions", "tensor 1"}, "mismatched ranks");
  expect_error<ValueError>([&] { cat({a, zeros({})}); }, {"cat", "tensor 1", "0-d"}, "0-d tensor");
  expect_error<IndexError>([&] { cat({a, a}, 2); }, {"cat", "dimension out of range"}, "dim out of range");
  expect_error<ValueError>([&] { cat({a, Tensor()}); }, {"cat", "tensor 1", "undefined"}, "undefined tensor");
  expect_error<ValueError>([&] { stack({}); }, {"stack", "non-empty"}, "stack of nothing");
  expect_error<ValueError>([&] { stack({a, b}); }, {"stack", "equal size", "entry 1", "[2, 4]"}, "stack shapes");
  expect_error<IndexError>([&] { stack({a, a}, 3); }, {"stack", "dimension out of range"}, "stack dim");
}

TEST(JoiningErrors, CatOnTwoDevices) {
  MINIDL_REQUIRE_GPU();
  expect_error<TypeError>([&] { cat({zeros({2}), zeros({2}).cuda()}); }, {"cat", "device", "tensor 1"}, "devices");
  expect_error<TypeError>([&] { where(zeros({2}, kBool).cuda(), zeros({2}), zeros({2}).cuda()); },
                          {"where", "'self'", "device"}, "where devices");
  expect_error<TypeError>([&] { zeros({2}).cuda().masked_fill(zeros({2}, kBool), 1); }, {"masked_fill", "'mask'"},
                          "mask device");
}

TEST(JoiningErrors, SplitChunkUnbind) {
  const Tensor x = zeros({5, 2});
  expect_error<ValueError>([&] { x.split(-1); }, {"split", "split_size", "-1"}, "negative split_size");
  expect_error<ValueError>([&] { x.split(0); }, {"split", "split_size", "size 5"}, "split_size 0");
  expect_error<ValueError>([&] { zeros({}).split(1); }, {"split", "0-d"}, "split of 0-d");
  expect_error<IndexError>([&] { x.split(1, 2); }, {"split", "dimension out of range"}, "split dim");
  expect_error<ValueError>(
      [&] {
        x.split({2, 2});
      },
      {"split_with_sizes", "sum exactly to 5", "[2, 2]"}, "sizes not summing");
  expect_error<ValueError>(
      [&] {
        x.split_with_sizes({-1, 6});
      },
      {"split_with_sizes", "non-negative"}, "negative sizes");
  expect_error<ValueError>([&] { x.chunk(0); }, {"chunk", "chunks", "0"}, "chunk 0");
  expect_error<ValueError>([&] { zeros({}).chunk(1); }, {"chunk", "0-d"}, "chunk of 0-d");
  expect_error<IndexError>([&] { zeros({}).unbind(); }, {"unbind", "no dimensions"}, "unbind of 0-d");
  expect_error<IndexError>([&] { x.unbind(-3); }, {"unbind", "dimension out of range"}, "unbind dim");
}

TEST(JoiningErrors, FlipRollRepeat) {
  const Tensor x = zeros({2, 3});
  expect_error<ValueError>([&] { x.flip({0, -2}); }, {"flip", "dim 0", "multiple times"}, "flip repeated dim");
  expect_error<IndexError>([&] { x.flip({2}); }, {"flip", "dimension out of range"}, "flip dim");
  expect_error<ValueError>([&] { x.roll({1, 2}); }, {"roll", "shifts and dims", "2 shifts"}, "roll without dims");
  expect_error<ValueError>([&] { x.roll({1, 2}, {0}); }, {"roll", "2 shifts and 1 dims"}, "roll mismatch");
  expect_error<IndexError>([&] { x.roll(1, 2); }, {"roll", "dimension out of range"}, "roll dim");
  expect_error<IndexError>([&] { zeros({}).roll(1, 0); }, {"roll", "0-d"}, "roll dims of 0-d");
  expect_error<ValueError>([&] { x.repeat({2}); }, {"repeat", "number of repeats (1)", "dimensions"}, "repeat rank");
  expect_error<ValueError>([&] { x.repeat({-1, 2}); }, {"repeat", "non-negative"}, "negative repeat");
  expect_error<ValueError>([&] { x.repeat_interleave(-2); }, {"repeat_interleave", "negative"}, "negative repeats");
  expect_error<IndexError>([&] { x.repeat_interleave(2, 2); }, {"repeat_interleave", "dimension out of range"},
                           "repeat_interleave dim");
  expect_error<IndexError>([&] { zeros({}).repeat_interleave(2, 0); }, {"repeat_interleave", "0-d"},
                           "repeat_interleave dim of 0-d");
  const Tensor r3 = from_vector(std::vector<std::int64_t>{1, 2, 3}, {3});
  expect_error<ValueError>([&] { x.repeat_interleave(r3, 0); }, {"repeat_interleave", "same size", "3 repeats"},
                           "repeats size");
  expect_error<ValueError>(
      [&] {
        x.repeat_interleave(from_vector(std::vector<std::int64_t>{1, -1}, {2}), 0);
      },
      {"repeat_interleave", "negative", "repeats[1]"}, "negative tensor repeats");
  expect_error<TypeError>([&] { x.repeat_interleave(zeros({2}), 0); }, {"repeat_interleave", "'repeats'", "float32"},
                          "float repeats");
  expect_error<ValueError>(
      [&] {
        x.repeat_interleave(zeros({1, 2}, kInt64), 0);
      },
      {"repeat_interleave", "1-d"}, "2-d repeats");
  expect_error<ValueError>([&] { repeat_interleave(from_vector(std::vector<std::int64_t>{2}, {})); },
                           {"repeat_interleave", "1-d"}, "0-d repeats alone");
  expect_error<ValueError>([&] { x.repeat_interleave(2, 1, 5); }, {"repeat_interleave", "output_size"}, "output_size");
}

TEST(JoiningErrors, TrilWhereMaskedFill) {
  expect_error<ValueError>([&] { zeros({3}).tril(); }, {"tril", "at least 2 dimensions", "[3]"}, "tril of 1-d");
  expect_error<ValueError>([&] { zeros({}).triu(); }, {"triu", "at least 2 dimensions"}, "triu of 0-d");
  const Tensor x = zeros({2, 3}), m = zeros({2, 3}, kBool);
  expect_error<TypeError>(
      [&] {
        where(zeros({2, 3}), x, x);
      },
      {"where", "'condition'", "bool", "float32"}, "float condition");
  expect_error<ValueError>([&] { where(m, x, zeros({2})); }, {"where", "broadcast", "[2, 3]", "[2]"}, "where shapes");
  expect_error<ValueError>([&] { where(m, x, Tensor()); }, {"where", "'other'", "undefined"}, "undefined other");
  expect_error<TypeError>(
      [&] {
        x.masked_fill(zeros({2, 3}, kUInt8), 1);
      },
      {"masked_fill", "bool 'mask'", "uint8"}, "uint8 mask");
  expect_error<ValueError>([&] { x.masked_fill(zeros({3, 3}, kBool), 1); }, {"masked_fill", "broadcast"}, "mask shape");
  expect_error<ValueError>([&] { x.to(kUInt8).masked_fill(m, 300); }, {"masked_fill", "300", "uint8", "overflow"},
                           "value beyond uint8");
  expect_error<ValueError>([&] { x.to(kHalf).masked_fill(m, 1e5); }, {"masked_fill", "float16", "overflow"},
                           "value beyond float16");
  expect_error<ValueError>(
      [&] {
        Tensor i = x.to(kInt32);
        i.masked_fill_(m, 3e9);
      },
      {"masked_fill_", "int32"}, "value beyond int32");
  EXPECT_NO_THROW(x.to(kHalf).masked_fill(m, -std::numeric_limits<double>::infinity()));
  EXPECT_NO_THROW(x.to(kInt64).masked_fill(m, std::numeric_limits<std::int64_t>::max()));
  expect_error<ValueError>([&] { x.masked_fill(m, zeros({1})); }, {"masked_fill", "0-dimensional", "[1]"}, "1-d value");
  Tensor y = zeros({3});
  expect_error<ValueError>(
      [&] {
        y.masked_fill_(zeros({2, 3}, kBool), 1);
      },
      {"masked_fill_", "does not broadcast to self's shape", "[2, 3]"}, "in-place broadcast");
  const Tensor leaf_x = zeros({3}).requires_grad_(true);
  expect_error<AutogradError>(
      [&] {
        Tensor l = leaf_x;
        l.masked_fill_(zeros({3}, kBool), 1);
      },
      {"masked_fill_", "leaf"}, "masked_fill_ of a leaf");
}
