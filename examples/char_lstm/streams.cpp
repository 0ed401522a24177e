#include "streams.h"

#include <minidl/errors.h>

namespace char_lstm {

TokenStreams::TokenStreams(const std::vector<std::int64_t>& tokens, std::int64_t batch_size, std::int64_t seq_len,
                           const std::string& what)
    : batch_size_(batch_size), seq_len_(seq_len),
      stream_length_(batch_size > 0 ? static_cast<std::int64_t>(tokens.size()) / batch_size : 0) {
  MINIDL_CHECK(batch_size > 0 && seq_len > 0, minidl::ValueError, what,
               ": --batch-size and --seq-len must be positive, found ", batch_size, " and ", seq_len);
  MINIDL_CHECK(batches() >= 1, minidl::ValueError, what, ": ", tokens.size(), " characters in --batch-size ",
               batch_size, " streams give ", stream_length_, " per stream, too few for one batch of --seq-len ",
               seq_len, " (each stream needs seq_len + 1 characters); use a smaller --batch-size or --seq-len");
  tokens_.assign(tokens.begin(), tokens.begin() + batch_size * stream_length_);
}

StreamBatch TokenStreams::batch(std::int64_t i) const {
  MINIDL_CHECK(i >= 0 && i < batches(), minidl::IndexError, "TokenStreams::batch: batch ", i,
               " is outside the epoch's ", batches(), " batches");
  const std::int64_t T = seq_len_, B = batch_size_;
  StreamBatch b{minidl::empty({T, B}, minidl::TensorOptions(minidl::kInt64)),
                minidl::empty({T, B}, minidl::TensorOptions(minidl::kInt64))};
  std::int64_t* x = b.x.data_ptr<std::int64_t>();
  std::int64_t* y = b.y.data_ptr<std::int64_t>();
  for (std::int64_t t = 0; t < T; ++t) {
    for (std::int64_t s = 0; s < B; ++s) {
      const std::int64_t at = s * stream_length_ + i * T + t;
      x[t * B + s] = tokens_[static_cast<std::size_t>(at)];
      y[t * B + s] = tokens_[static_cast<std::size_t>(at + 1)];
    }
  }
  return b;
}

}  // namespace char_lstm
