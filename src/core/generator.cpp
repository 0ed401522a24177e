#include "core/generator.h"

#include <algorithm>
#include <locale>
#include <map>
#include <sstream>

#include "minidl/errors.h"
#include "minidl/random.h"
#include "minidl/tensor.h"

namespace minidl {
namespace {
std::mutex g_philox_mutex;
std::uint64_t g_seed = 5489u;
std::map<int, std::uint64_t> g_offsets;
struct Capture {
  const std::uint64_t* base;
  std::uint64_t start;  // host offset when the capture began
};
std::map<int, Capture> g_captures;

// The classic locale keeps the text free of digit grouping whatever the program's global locale is.
std::string engine_text(const std::mt19937_64& engine) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os << engine;
  return os.str();
}
}  // namespace

CpuGenerator& cpu_generator() {
  static CpuGenerator gen;
  return gen;
}

PhiloxState philox_reserve(int device, std::uint64_t increment) {
  std::lock_guard<std::mutex> lock(g_philox_mutex);
  auto capture = g_captures.find(device);
  PhiloxState s{g_seed, g_offsets[device], capture == g_captures.end() ? nullptr : capture->second.base};
  g_offsets[device] += increment;
  return s;
}

void philox_begin_capture(int device, const std::uint64_t* device_base) {
  std::lock_guard<std::mutex> lock(g_philox_mutex);
  g_captures[device] = Capture{device_base, g_offsets[device]};
}

std::uint64_t philox_end_capture(int device) {
  std::lock_guard<std::mutex> lock(g_philox_mutex);
  auto it = g_captures.find(device);
  if (it == g_captures.end()) return 0;
  const std::uint64_t used = g_offsets[device] - it->second.start;
  g_captures.erase(it);
  return used;
}

void manual_seed(std::uint64_t seed) {
  {
    std::lock_guard<std::mutex> lock(cpu_generator().mutex());
    cpu_generator().seed(seed);
  }
  std::lock_guard<std::mutex> lock(g_philox_mutex);
  g_seed = seed;
  g_offsets.clear();
}

std::optional<std::mt19937_64> parse_cpu_engine_state(const std::string& text) {
  std::istringstream is(text);
  is.imbue(std::locale::classic());
  std::mt19937_64 engine;
  is >> engine;
  // operator>> skips stray whitespace and wraps "-1" to 2^64-1; writing the parsed state back and comparing
  // catches those and any trailing characters, so only text operator<< could have produced is accepted.
  if (is.fail() || engine_text(engine) != text) return std::nullopt;
  return engine;
}

std::string cpu_engine_state_mismatch(const std::string& text) {
  const std::string words = engine_text(std::mt19937_64());
  const auto expected_words = std::count(words.begin(), words.end(), ' ') + 1;
  const std::string shown = text.size() > 60 ? text.substr(0, 60) + "..." : text;
  return detail::str("expected the std::mt19937_64 state as operator<< writes it (", expected_words,
                     " decimal words separated by single spaces), found \"", shown, "\" (", text.size(),
                     " characters)");
}

RngState get_rng_state() {
  CpuGenerator& cpu = cpu_generator();
  // Both locks at once: the snapshot must not mix generator states from before and after a manual_seed().
  std::scoped_lock lock(cpu.mutex(), g_philox_mutex);
  return RngState{engine_text(cpu.engine()), g_seed, g_offsets};
}

void set_rng_state(const RngState& state) {
  const std::optional<std::mt19937_64> engine = parse_cpu_engine_state(state.cpu);
  MINIDL_CHECK(engine, ValueError, "set_rng_state: field 'cpu': ", cpu_engine_state_mismatch(state.cpu));
  for (const auto& [device, offset] : state.philox_offsets) {
    MINIDL_CHECK(device >= 0, ValueError, "set_rng_state: field 'philox_offsets': expected device indices >= 0, found ",
                 device, " (offset ", offset, ")");
  }
  CpuGenerator& cpu = cpu_generator();
  std::scoped_lock lock(cpu.mutex(), g_philox_mutex);
  cpu.engine() = *engine;
  g_seed = state.philox_seed;
  g_offsets = state.philox_offsets;
}

}  // namespace minidl
