#include "data.h"

#include <minidl/errors.h>

#include <algorithm>
#include <random>

#include "seeded_draws.h"

namespace gpt {

TokenBatch random_batch(const TokenData& data, Split split, std::int64_t iter, std::int64_t k, std::int64_t batch_size,
                        std::int64_t block_size, std::uint64_t seed) {
  const std::vector<std::int64_t>& src = data.tokens(split);
  const auto windows = static_cast<std::int64_t>(src.size()) - block_size;
  MINIDL_CHECK(windows >= 1, minidl::ValueError, "batch: ", src.size(), " tokens are too few for block_size ",
               block_size);
  std::uint64_t key = examples::splitmix64(seed);
  for (const std::uint64_t part :
       {static_cast<std::uint64_t>(split), static_cast<std::uint64_t>(iter), static_cast<std::uint64_t>(k)}) {
    key = examples::splitmix64(key ^ part);
  }
  std::mt19937_64 g(key);
  TokenBatch b{minidl::empty({batch_size, block_size}, minidl::TensorOptions(minidl::kInt64)),
               minidl::empty({batch_size, block_size}, minidl::TensorOptions(minidl::kInt64))};
  std::int64_t* x = b.x.data_ptr<std::int64_t>();
  std::int64_t* y = b.y.data_ptr<std::int64_t>();
  for (std::int64_t r = 0; r < batch_size; ++r) {
    const auto start = static_cast<std::size_t>(examples::uniform_below(g, static_cast<std::uint64_t>(windows)));
    std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(start), block_size, x + r * block_size);
    std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(start + 1), block_size, y + r * block_size);
  }
  return b;
}

}  // namespace gpt
