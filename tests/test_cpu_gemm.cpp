// The CPU GEMM (src/cpu/gemm.h) against a double-precision reference, for every instruction-set build this
// CPU runs: sizes around the register tile and the cache blocks, transposed and offset-table operands,
// accumulation, the parallel split, and the degenerate sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cpu/gemm.h"
#include "minidl/errors.h"
#include "minidl/threads.h"

namespace {

using minidl::cpu::CpuIsa;
using minidl::cpu::GemmArgs;
using minidl::cpu::MatrixView;

/// How an operand is laid out in memory. Tables: a table for each axis (a convolution's column matrix read
/// from the image through its taps and output positions).
enum class Layout { RowMajor, ColMajor, RowTable, ColTable, Tables };

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::RowMajor: return "row-major";
    case Layout::ColMajor: return "col-major";
    case Layout::RowTable: return "row-table";
    case Layout::ColTable: return "col-table";
    case Layout::Tables: return "tables";
  }
  return "?";
}

/// A rows x cols operand with random values in `data`, addressed as `layout` says. Table layouts place the
/// rows (columns) at shuffled, gapped offsets, so a kernel that ignored the table would read wrong values.
template <class T>
struct Operand {
  std::vector<T> data;
  std::vector<std::int64_t> table, col_table;
  MatrixView<const T> view;

  Operand(std::int64_t rows, std::int64_t cols, Layout layout, std::mt19937& rng) {
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    const bool by_rows = layout == Layout::RowMajor || layout == Layout::RowTable || layout == Layout::Tables;
    const std::int64_t lines = by_rows ? rows : cols, len = by_rows ? cols : rows;
    const std::int64_t pitch = len + 3;  // gaps between lines
    data.resize(static_cast<std::size_t>(std::max<std::int64_t>(1, lines * pitch)));
    for (T& v : data) v = static_cast<T>(dist(rng));
    if (layout == Layout::RowMajor) view = {data.data(), pitch, 1};
    if (layout == Layout::ColMajor) view = {data.data(), 1, pitch};
    if (layout == Layout::RowTable || layout == Layout::ColTable) {
      for (std::int64_t i = 0; i < lines; ++i) table.push_back(i * pitch);
      std::shuffle(table.begin(), table.end(), rng);
      view = layout == Layout::RowTable ? MatrixView<const T>{data.data(), 0, 1, table.data()}
                                        : MatrixView<const T>{data.data(), 1, 0, nullptr, table.data()};
    }
    if (layout == Layout::Tables) {  // rows at shuffled offsets, and the columns of each row shuffled too
      for (std::int64_t i = 0; i < rows; ++i) table.push_back(i * pitch);
      for (std::int64_t j = 0; j < cols; ++j) col_table.push_back(j);
      std::shuffle(table.begin(), table.end(), rng);
      std::shuffle(col_table.begin(), col_table.end(), rng);
      view = {data.data(), 0, 0, table.data(), col_table.data()};
    }
  }
  T at(std::int64_t i, std::int64_t j) const {
    const std::int64_t r = view.row_offsets ? view.row_offsets[i] : i * view.rs;
    const std::int64_t c = view.col_offsets ? view.col_offsets[j] : j * view.cs;
    return view.data[r + c];
  }
};

struct Case {
  std::int64_t m, n, k;
};

/// Sizes around every build's tile (MR 4..8, NR 8..32), blocks (KC 288, cut into equal k blocks; MC 144;
/// NC 2048) and the widest C whose A is read in place (8 NR: 64..256 columns); 290 x 64 x 300 is a weight
/// gradient's shape, A read in place over two row blocks and two k blocks, with a partial panel. A row-table B
/// (a convolution's taps) is read in place by its full column panels: 64 x 622 x 289 is conv2's forward
/// product (k = 288) with k one past a block, so two blocks, and a partial last panel; 20 x 2100 has one past
/// NC's first block.
std::vector<Case> cases() {
  return {{1, 1, 1},     {3, 5, 7},      {8, 32, 16},    {9, 33, 17},   {24, 31, 1},   {7, 64, 300},
          {145, 40, 9},  {64, 576, 288}, {300, 5, 513},  {32, 9, 676},  {20, 2100, 3}, {2, 1, 600},
          {290, 64, 300}, {13, 256, 20}, {13, 257, 20},  {11, 129, 7},  {64, 622, 289}};
}

template <class T>
void run_case(const Case& c, Layout la, Layout lb, bool c_transposed, bool accumulate, bool parallel, CpuIsa isa,
              std::mt19937& rng) {
  SCOPED_TRACE(std::string(minidl::cpu::isa_name(isa)) + " m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) +
               " k=" + std::to_string(c.k) + " A " + layout_name(la) + " B " + layout_name(lb) +
               (c_transposed ? " C col-major" : " C row-major") + (accumulate ? " accumulate" : "") +
               (parallel ? " parallel" : ""));
  const Operand<T> a(c.m, c.k, la, rng), b(c.k, c.n, lb, rng);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> out(static_cast<std::size_t>(c.m * c.n));
  for (T& v : out) v = static_cast<T>(dist(rng));
  const std::vector<T> before = out;
  const MatrixView<T> cv = c_transposed ? MatrixView<T>{out.data(), 1, c.m} : MatrixView<T>{out.data(), c.n, 1};
  const GemmArgs<T> g{c.m, c.n, c.k, a.view, b.view, cv, accumulate};
  if (parallel) {
    minidl::cpu::gemm_parallel(g);
  } else {
    minidl::cpu::gemm(g, isa);
  }
  const double tol = (std::is_same<T, float>::value ? 2e-6 : 1e-14) * std::sqrt(static_cast<double>(c.k) + 1.0) * 4;
  int bad = 0;
  for (std::int64_t i = 0; i < c.m; ++i) {
    for (std::int64_t j = 0; j < c.n; ++j) {
      const std::size_t o = static_cast<std::size_t>(i * cv.rs + j * cv.cs);
      double want = accumulate ? static_cast<double>(before[o]) : 0.0;
      for (std::int64_t p = 0; p < c.k; ++p) want += static_cast<double>(a.at(i, p)) * static_cast<double>(b.at(p, j));
      if (std::fabs(static_cast<double>(out[o]) - want) > tol * (1.0 + std::fabs(want)) && bad++ < 5) {
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << out[o] << ", expected " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

template <class T>
class CpuGemm : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CpuGemm, FloatTypes);

TYPED_TEST(CpuGemm, EveryBuildMatchesReference) {
  std::mt19937 rng(7);
  const Layout layouts[] = {Layout::RowMajor, Layout::ColMajor, Layout::RowTable, Layout::ColTable, Layout::Tables};
  for (CpuIsa isa : minidl::cpu::available_isas()) {
    for (const Case& c : cases()) {
      for (Layout la : layouts) {
        for (Layout lb : layouts) {
          const bool variant = (static_cast<int>(la) + static_cast<int>(lb)) % 2 == 1;
          run_case<TypeParam>(c, la, lb, variant, !variant, false, isa, rng);
        }
      }
    }
  }
}

TYPED_TEST(CpuGemm, ParallelSplitMatchesReference) {
  std::mt19937 rng(8);
  const int threads = minidl::get_num_threads();
  minidl::set_num_threads(3);  // an odd count: blocks of unequal size
  for (const Case& c : {Case{64, 128, 9216}, Case{200, 40, 70}, Case{64, 9216, 128}, Case{5, 33, 2}}) {
    run_case<TypeParam>(c, Layout::RowMajor, Layout::ColMajor, false, false, true, minidl::cpu::active_isa(), rng);
    run_case<TypeParam>(c, Layout::ColMajor, Layout::RowTable, true, true, true, minidl::cpu::active_isa(), rng);
  }
  minidl::set_num_threads(threads);
}

// With more threads than blocks along the longer side, C is cut along both sides (130 x 70 on 16 threads), and
// a small C over a long k (fc1's 64 x 128 over 9216) is summed in ranges of k whose count follows from the shape
// alone; either way every element is summed in the same order for every thread count, so the result is bitwise
// the same. (With C accumulated too: the ranges add onto the old C in the same order.)
TYPED_TEST(CpuGemm, ParallelSplitIsExactForEveryThreadCount) {
  std::mt19937 rng(9);
  const int threads = minidl::get_num_threads();
  minidl::set_num_threads(16);
  for (const Case& c : {Case{64, 128, 9216}, Case{130, 70, 300}, Case{40, 200, 500}, Case{16, 40, 8000}}) {
    run_case<TypeParam>(c, Layout::RowMajor, Layout::ColMajor, false, false, true, minidl::cpu::active_isa(), rng);
    run_case<TypeParam>(c, Layout::ColMajor, Layout::RowTable, true, true, true, minidl::cpu::active_isa(), rng);
    const Operand<TypeParam> a(c.m, c.k, Layout::RowMajor, rng), b(c.k, c.n, Layout::ColMajor, rng);
    std::vector<TypeParam> one(static_cast<std::size_t>(c.m * c.n)), many(one.size());
    minidl::set_num_threads(1);
    minidl::cpu::gemm_parallel<TypeParam>({c.m, c.n, c.k, a.view, b.view, {one.data(), c.n, 1}, false});
    for (int t : {2, 3, 5, 16}) {
      minidl::set_num_threads(t);
      std::fill(many.begin(), many.end(), TypeParam(7));
      minidl::cpu::gemm_parallel<TypeParam>({c.m, c.n, c.k, a.view, b.view, {many.data(), c.n, 1}, false});
      EXPECT_EQ(many, one) << "m=" << c.m << " n=" << c.n << " k=" << c.k << " threads=" << t;
    }
    minidl::set_num_threads(16);
  }
  minidl::set_num_threads(threads);
}

TEST(CpuGemm, DegenerateSizes) {
  std::vector<float> a(6, 1.0f), b(6, 1.0f), c(6, 5.0f);
  // k == 0: C = 0, or C unchanged when accumulating.
  minidl::cpu::gemm<float>({2, 3, 0, {a.data(), 0, 1}, {b.data(), 3, 1}, {c.data(), 3, 1}, true});
  EXPECT_EQ(c, std::vector<float>(6, 5.0f));
  minidl::cpu::gemm<float>({2, 3, 0, {a.data(), 0, 1}, {b.data(), 3, 1}, {c.data(), 3, 1}, false});
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
  // m == 0 or n == 0: nothing is written.
  c.assign(6, 5.0f);
  minidl::cpu::gemm<float>({0, 3, 2, {a.data(), 2, 1}, {b.data(), 3, 1}, {c.data(), 3, 1}, false});
  minidl::cpu::gemm<float>({2, 0, 2, {a.data(), 2, 1}, {b.data(), 0, 1}, {c.data(), 0, 1}, false});
  EXPECT_EQ(c, std::vector<float>(6, 5.0f));
}

TEST(CpuGemm, RejectsBadArguments) {
  std::vector<float> a(4), b(4), c(4);
  const std::int64_t table[2] = {0, 2};
  EXPECT_THROW(minidl::cpu::gemm<float>({-1, 2, 2, {a.data(), 2, 1}, {b.data(), 2, 1}, {c.data(), 2, 1}, false}),
               minidl::ValueError);
  EXPECT_THROW(minidl::cpu::gemm<float>({2, 2, 2, {a.data(), 2, 1}, {b.data(), 2, 1}, {c.data(), 0, 1, table}, false}),
               minidl::ValueError);
}

TEST(CpuGemm, BaselineIsAlwaysAvailableAndActiveIsOne) {
  const auto& isas = minidl::cpu::available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), CpuIsa::Baseline);
  EXPECT_NE(std::find(isas.begin(), isas.end(), minidl::cpu::active_isa()), isas.end());
}

}  // namespace
