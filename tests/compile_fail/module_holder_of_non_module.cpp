// Must not compile (tests/CMakeLists.txt checks the message): MINIDL_MODULE over a class that is not an
// nn::Module. The error must be one sentence from module.h's static_assert, not a page of template failures.
#include <minidl/nn/module.h>

struct NotAModuleImpl {
  int forward(int x) { return x; }
};
MINIDL_MODULE(NotAModule);

int main() {
  NotAModule m;
  return m(1);
}
