#pragma once
// The token streams a GPT trains on, and its batches: a character vocabulary over a UTF-8 text (the sorted
// distinct code points; the first 90% of the text trains, the last 10% validates, as nanoGPT's
// data/shakespeare_char/prepare.py), or random tokens (--synthetic-vocab). A batch is `batch_size` windows of
// block_size + 1 tokens at random offsets: the inputs and, shifted by one, the targets.
//
// The offsets of a batch come from their own generator seeded by (seed, split, iteration, batch within the
// evaluation), not from a running stream: every device builds the same batches, and a run resumed at any
// iteration continues with exactly the batches it would have seen.
#include <minidl/minidl.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gpt {

enum class Split { Train, Val };

struct TokenBatch {
  minidl::Tensor x, y;  ///< int64 (batch_size, block_size) on the CPU
};

class TokenData {
 public:
  /// Reads `path` (UTF-8; a malformed sequence is a ValueError naming the file and byte offset). Throws IOError
  /// when it cannot be read, ValueError when either split is shorter than block_size + 1 tokens.
  static TokenData from_text_file(const std::string& path, std::int64_t block_size);
  /// The same from text in memory; `name` appears in the errors.
  static TokenData from_text(const std::string& text, const std::string& name, std::int64_t block_size);
  /// Random tokens of `vocab_size`, `train_tokens` for training and a tenth of that for validation.
  static TokenData synthetic(std::int64_t vocab_size, std::int64_t train_tokens, std::uint64_t seed);

  std::int64_t vocab_size() const { return vocab_size_; }
  /// Whether tokens are characters (encode / decode work).
  bool has_text() const { return !chars_.empty(); }
  /// The code points of the vocabulary, in token order (empty for synthetic data).
  const std::vector<char32_t>& chars() const { return chars_; }
  /// The vocabulary as UTF-8 text, for a checkpoint's metadata.
  std::string vocabulary_text() const;
  const std::vector<std::int64_t>& tokens(Split split) const { return split == Split::Train ? train_ : val_; }

  /// Tokens of UTF-8 `text`; a character outside the vocabulary is a ValueError naming it.
  std::vector<std::int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<std::int64_t>& tokens) const;

  /// Batch `k` of iteration `iter` from `split` (a training step takes k = 0, an evaluation k = 1..eval_iters).
  TokenBatch batch(Split split, std::int64_t iter, std::int64_t k, std::int64_t batch_size, std::int64_t block_size,
                   std::uint64_t seed) const;

 private:
  std::int64_t vocab_size_ = 0;
  std::vector<char32_t> chars_;
  std::vector<std::int64_t> train_, val_;
};

/// The code points of UTF-8 `text`; a malformed sequence is a ValueError naming `name` and the byte offset.
std::vector<char32_t> decode_utf8(const std::string& text, const std::string& name);
/// UTF-8 of the code points.
std::string encode_utf8(const std::vector<char32_t>& chars);

}  // namespace gpt
