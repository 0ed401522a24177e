// libFuzzer target for the safetensors reader: any byte string must either parse into tensors whose data
// sizes match their shapes and dtypes, or throw minidl::Error. What parses must also survive a round trip
// through the writer unchanged, so the reader never accepts something the writer cannot reproduce. A crash,
// a sanitizer report, another exception type or a failed property is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "minidl/errors.h"
#include "minidl/io/safetensors.h"

namespace {

using minidl::io::SafetensorsContents;
using minidl::io::TensorRecord;

bool same(const TensorRecord& a, const TensorRecord& b) {
  return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.data == b.data;
}

void check_consistent(const SafetensorsContents& c) {
  for (const TensorRecord& t : c.tensors) {
    std::size_t n = minidl::io::dtype_bytes(t.dtype);
    for (const std::int64_t d : t.shape) {
      if (d < 0) std::abort();
      n *= static_cast<std::size_t>(d);
    }
    if (n != t.data.size()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  SafetensorsContents parsed;
  try {
    parsed = minidl::io::parse_safetensors(std::vector<std::uint8_t>(data, data + size), "fuzz");
  } catch (const minidl::Error&) {
    return 0;
  }
  check_consistent(parsed);
  // Outside the try: the writer must accept whatever the reader accepted.
  const SafetensorsContents again =
      minidl::io::parse_safetensors(minidl::io::serialize_safetensors(parsed.tensors, parsed.metadata), "round trip");
  if (again.metadata != parsed.metadata || again.tensors.size() != parsed.tensors.size()) std::abort();
  for (std::size_t i = 0; i < parsed.tensors.size(); ++i) {
    if (!same(again.tensors[i], parsed.tensors[i])) std::abort();
  }
  return 0;
}
