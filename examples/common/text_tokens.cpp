#include "text_tokens.h"

#include <minidl/errors.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include "seeded_draws.h"

namespace examples {

namespace {

std::string code_point_str(char32_t c) {
  std::ostringstream s;
  s << "U+" << std::hex << std::uppercase << static_cast<std::uint32_t>(c);
  if (c >= 0x20 && c < 0x7F) s << " '" << static_cast<char>(c) << "'";
  return s.str();
}

}  // namespace

std::vector<char32_t> decode_utf8(const std::string& text, const std::string& name) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + static_cast<std::size_t>(len) <= n;
    for (int k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xC0) == 0x80;
      c = (c << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && c >= kMin[len] && c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF);
    if (!ok) {
      throw minidl::ValueError(name + ": not UTF-8 text: malformed sequence at byte offset " + std::to_string(i));
    }
    out.push_back(c);
    i += static_cast<std::size_t>(len);
  }
  return out;
}

std::string encode_utf8(const std::vector<char32_t>& chars) {
  std::string s;
  for (const char32_t c : chars) {
    if (c < 0x80) {
      s += static_cast<char>(c);
    } else if (c < 0x800) {
      s += static_cast<char>(0xC0 | (c >> 6));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      s += static_cast<char>(0xE0 | (c >> 12));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (c >> 18));
      s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return s;
}

TokenData TokenData::from_text_file(const std::string& path, std::int64_t context) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw minidl::IOError("cannot open " + path + ": " + std::strerror(errno));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw minidl::IOError("cannot read " + path + ": " + std::strerror(errno));
  return from_text(text, path, context);
}

TokenData TokenData::from_text(const std::string& text, const std::string& name, std::int64_t context) {
  const std::vector<char32_t> chars = decode_utf8(text, name);
  TokenData d;
  d.chars_ = chars;
  std::sort(d.chars_.begin(), d.chars_.end());
  d.chars_.erase(std::unique(d.chars_.begin(), d.chars_.end()), d.chars_.end());
  d.vocab_size_ = static_cast<std::int64_t>(d.chars_.size());
  const std::size_t n_train = chars.size() * 9 / 10;  // nanoGPT: int(n * 0.9)
  for (std::size_t i = 0; i < chars.size(); ++i) {
    const auto token =
        static_cast<std::int64_t>(std::lower_bound(d.chars_.begin(), d.chars_.end(), chars[i]) - d.chars_.begin());
    (i < n_train ? d.train_ : d.val_).push_back(token);
  }
  const auto need = static_cast<std::size_t>(context) + 1;
  if (d.train_.size() < need || d.val_.size() < need) {
    throw minidl::ValueError(name + ": " + std::to_string(chars.size()) + " characters give " +
                             std::to_string(d.train_.size()) + " training and " + std::to_string(d.val_.size()) +
                             " validation tokens; each split needs at least context + 1 = " + std::to_string(need) +
                             " (use a longer text or a shorter context)");
  }
  return d;
}

TokenData TokenData::synthetic(std::int64_t vocab_size, std::int64_t train_tokens, std::uint64_t seed) {
  MINIDL_CHECK(vocab_size >= 2, minidl::ValueError, "TokenData::synthetic: vocab_size must be at least 2, found ",
               vocab_size);
  TokenData d;
  d.vocab_size_ = vocab_size;
  std::mt19937_64 g(splitmix64(seed ^ 0x5EED5EED5EEDull));
  d.train_.resize(static_cast<std::size_t>(train_tokens));
  d.val_.resize(static_cast<std::size_t>(std::max<std::int64_t>(train_tokens / 10, 1)));
  for (auto& t : d.train_) t = static_cast<std::int64_t>(uniform_below(g, static_cast<std::uint64_t>(vocab_size)));
  for (auto& t : d.val_) t = static_cast<std::int64_t>(uniform_below(g, static_cast<std::uint64_t>(vocab_size)));
  return d;
}

std::string TokenData::vocabulary_text() const { return encode_utf8(chars_); }

std::vector<std::int64_t> TokenData::encode(const std::string& text) const {
  MINIDL_CHECK(has_text(), minidl::ValueError, "encode: synthetic tokens have no characters");
  std::vector<std::int64_t> out;
  for (const char32_t c : decode_utf8(text, "the prompt")) {
    const auto it = std::lower_bound(chars_.begin(), chars_.end(), c);
    MINIDL_CHECK(it != chars_.end() && *it == c, minidl::ValueError, "the prompt has the character ", code_point_str(c),
                 ", which the training text does not have");
    out.push_back(static_cast<std::int64_t>(it - chars_.begin()));
  }
  return out;
}

std::string TokenData::decode(const std::vector<std::int64_t>& tokens) const {
  std::vector<char32_t> chars;
  for (const std::int64_t t : tokens) {
    MINIDL_CHECK(t >= 0 && t < vocab_size_, minidl::IndexError, "decode: token ", t, " is outside the vocabulary of ",
                 vocab_size_);
    chars.push_back(has_text() ? chars_[static_cast<std::size_t>(t)] : U'?');
  }
  return encode_utf8(chars);
}

}  // namespace examples
