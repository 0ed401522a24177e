#pragma once
// The batches of truncated backpropagation through time, as the classic char-rnn and PyTorch's
// word_language_model (batchify, get_batch) cut them: a split's tokens are cut into `batch_size` contiguous
// streams of equal length (the remainder dropped), stream b being tokens [b L, (b + 1) L); batch i is the
// characters [i T, (i + 1) T) of every stream as inputs and, one further on, as targets, time-major (T, B). So
// row b of batch i + 1 continues row b of batch i, and the LSTM state the model ends batch i with is the right
// start for batch i + 1. Every batch is full (the last incomplete window of the streams is dropped), so an epoch
// is (L - 1) / T batches of one shape. Nothing here is random: every run and device sees the same batches.
#include <minidl/minidl.h>

#include <cstdint>
#include <string>
#include <vector>

namespace char_lstm {

struct StreamBatch {
  minidl::Tensor x, y;  ///< int64 (seq_len, batch_size) on the CPU
};

class TokenStreams {
 public:
  /// Throws ValueError naming `what`, --batch-size and --seq-len when the tokens give no full batch.
  TokenStreams(const std::vector<std::int64_t>& tokens, std::int64_t batch_size, std::int64_t seq_len,
               const std::string& what);

  std::int64_t batch_size() const { return batch_size_; }
  std::int64_t seq_len() const { return seq_len_; }
  /// Tokens per stream (L).
  std::int64_t stream_length() const { return stream_length_; }
  /// Full batches of an epoch.
  std::int64_t batches() const { return (stream_length_ - 1) / seq_len_; }
  /// Batch i (0 <= i < batches(), else IndexError).
  StreamBatch batch(std::int64_t i) const;

 private:
  std::vector<std::int64_t> tokens_;  ///< the streams one after another: stream b at [b L, (b + 1) L)
  std::int64_t batch_size_, seq_len_, stream_length_;
};

}  // namespace char_lstm
