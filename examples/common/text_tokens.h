#pragma once
// The token streams the language-model examples train on: a character vocabulary over a UTF-8 text (the sorted
// distinct code points; the first 90% of the text trains, the last 10% validates, as nanoGPT's
// data/shakespeare_char/prepare.py), or random tokens (speed runs). How batches are cut from the streams is each
// example's own (gpt: random windows; char_lstm: contiguous streams).
#include <cstdint>
#include <string>
#include <vector>

namespace examples {

enum class Split { Train, Val };

class TokenData {
 public:
  /// Reads `path` (UTF-8; a malformed sequence is a ValueError naming the file and byte offset). Throws IOError
  /// when it cannot be read, ValueError when either split is shorter than context + 1 tokens (a model reading
  /// `context` tokens at a time needs their targets too).
  static TokenData from_text_file(const std::string& path, std::int64_t context);
  /// The same from text in memory; `name` appears in the errors.
  static TokenData from_text(const std::string& text, const std::string& name, std::int64_t context);
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

 private:
  std::int64_t vocab_size_ = 0;
  std::vector<char32_t> chars_;
  std::vector<std::int64_t> train_, val_;
};

/// The code points of UTF-8 `text`; a malformed sequence is a ValueError naming `name` and the byte offset.
std::vector<char32_t> decode_utf8(const std::string& text, const std::string& name);
/// UTF-8 of the code points.
std::string encode_utf8(const std::vector<char32_t>& chars);

}  // namespace examples
