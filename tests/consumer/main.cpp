// Trains a 2-layer MLP on random data (labels from a fixed random linear "teacher") for a few SGD steps on the
// CPU and prints the loss. Exit status 0 when the loss decreased by at least half, 1 otherwise.
#include <minidl/minidl.h>

#include <cmath>
#include <cstdio>
#include <exception>

using namespace minidl;

struct MlpImpl : nn::Module {
  MlpImpl() : Module("Mlp"), fc1(8, 32), fc2(32, 3) {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
  nn::Linear fc1, fc2;
};
MINIDL_MODULE(Mlp);

int main() {
  try {
    std::printf("minidl %s (headers %s, CUDA backend %s)\n", version().c_str(), MINIDL_VERSION_STRING,
                MINIDL_CUDA_ENABLED ? "on" : "off");
    if (version() != MINIDL_VERSION_STRING) {
      std::fprintf(stderr, "consumer: library version %s differs from the headers' %s\n", version().c_str(),
                   MINIDL_VERSION_STRING);
      return 1;
    }
    manual_seed(7);
    const Tensor x = randn({256, 8});
    const Tensor teacher = randn({8, 3});
    const Tensor y = argmax(matmul(x, teacher), 1);

    Mlp model;
    optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
    double first = 0, last = 0;
    for (int step = 0; step < 60; ++step) {
      optimizer.zero_grad();
      const Tensor loss = nn::functional::cross_entropy(model(x), y);
      loss.backward();
      optimizer.step();
      last = loss.item<float>();
      if (step == 0) first = last;
      if (step % 10 == 0 || step == 59) std::printf("step %2d  loss %.4f\n", step, last);
    }
    if (!std::isfinite(last) || last > 0.5 * first) {
      std::fprintf(stderr, "consumer: the loss did not decrease enough (%.4f -> %.4f)\n", first, last);
      return 1;
    }
    std::printf("consumer: ok (loss %.4f -> %.4f)\n", first, last);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: error: %s\n", e.what());
    return 1;
  }
}
