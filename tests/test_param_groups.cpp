// Parameter groups (LibTorch's OptimizerParamGroup): an optimizer over groups with different options updates
// each group exactly as a separate optimizer with that group's options would; options changed through
// param_groups()[i].options() take effect at the next step (also in a captured CUDA graph); add_param_group,
// defaults, the state dictionary, and bad groups.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "minidl/config.h"
#include "minidl/minidl.h"
#include "test_util.h"
#if MINIDL_CUDA_ENABLED
#include <cuda_runtime.h>

#include "cuda/context.h"
#endif

namespace minidl {
namespace {

using optim::OptimizerParamGroup;
using testing::expect_close;

std::vector<double> values_of(const Tensor& t) { return t.detach().cpu().to(kFloat64).to_vector<double>(); }

std::vector<Tensor> clones(const std::vector<Tensor>& ps, Device device = Device(kCPU)) {
  std::vector<Tensor> out;
  for (const Tensor& p : ps) out.push_back(p.detach().to(device).clone().requires_grad_(true));
  return out;
}

/// Sets the same fresh random gradient on the parameters at the same position of every list.
void set_grads(const std::vector<std::vector<Tensor>*>& lists) {
  for (std::size_t i = 0; i < lists[0]->size(); ++i) {
    const Tensor& p0 = (*lists[0])[i];
    const Tensor g = testing::random_tensor(p0.sizes(), p0.dtype());
    for (auto* l : lists) (*l)[i].mutable_grad() = g.to((*l)[i].device());
  }
}

/// Two groups with options a and b against two optimizers built with a and b alone.
template <class Opt, class Options>
void expect_groups_match_separate(const Options& a, const Options& b, const std::string& what) {
  SCOPED_TRACE(what);
  const std::vector<Tensor> first = {testing::random_tensor({4, 3}, kFloat64, true),
                                     testing::random_tensor({5}, kFloat64, true)};
  const std::vector<Tensor> second = {testing::random_tensor({6}, kFloat64, true)};
  std::vector<Tensor> g1 = clones(first), g2 = clones(second), s1 = clones(first), s2 = clones(second);
  std::vector<OptimizerParamGroup> groups;
  groups.emplace_back(g1, std::make_unique<Options>(a));
  groups.emplace_back(g2, std::make_unique<Options>(b));
  Opt grouped(groups, Options(123.0));  // defaults unused: both groups have options
  Opt sep1(s1, a), sep2(s2, b);
  std::vector<Tensor> all = g1, alls = s1;
  all.push_back(g2[0]);
  alls.push_back(s2[0]);
  for (int step = 0; step < 5; ++step) {
    set_grads({&all, &alls});
    if (step == 3) {  // a scheduler's change of one group only
      grouped.param_groups()[1].options().set_lr(b.get_lr() * 0.25);
      sep2.set_lr(b.get_lr() * 0.25);
    }
    grouped.step();
    sep1.step();
    sep2.step();
  }
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(values_of(all[i]), values_of(alls[i])) << "parameter " << i;
}

TEST(ParamGroups, MatchSeparateOptimizers) {
  expect_groups_match_separate<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9).nesterov(true),
                                           optim::SGDOptions(0.02).weight_decay(0.1), "SGD");
  expect_groups_match_separate<optim::Adam>(optim::AdamOptions(0.01).amsgrad(true),
                                            optim::AdamOptions(0.003).betas({0.8, 0.99}).weight_decay(0.05), "Adam");
  expect_groups_match_separate<optim::AdamW>(optim::AdamWOptions(0.01), optim::AdamWOptions(0.05).weight_decay(0.3),
                                             "AdamW");
  expect_groups_match_separate<optim::Adadelta>(optim::AdadeltaOptions(1.0), optim::AdadeltaOptions(0.5).rho(0.8),
                                                "Adadelta");
}

TEST(ParamGroups, DefaultsAddParamGroupAndOptionSetters) {
  Tensor a = testing::random_tensor({3}, kFloat64, true), b = testing::random_tensor({2}, kFloat64, true);
  optim::Adam opt(std::vector<OptimizerParamGroup>{OptimizerParamGroup({a})}, optim::AdamOptions(0.02));
  ASSERT_EQ(opt.param_groups().size(), 1u);
  EXPECT_EQ(opt.param_groups()[0].options().get_lr(), 0.02) << "a group without options takes the defaults";
  opt.add_param_group(OptimizerParamGroup({b}, std::make_unique<optim::AdamOptions>(optim::AdamOptions(0.5))));
  ASSERT_EQ(opt.param_groups().size(), 2u);
  EXPECT_EQ(opt.parameters().size(), 2u);
  EXPECT_EQ(opt.param_groups()[1].options().get_lr(), 0.5);
  auto& options = static_cast<optim::AdamOptions&>(opt.param_groups()[1].options());
  options.betas({0.5, 0.9}).eps(1e-3);
  EXPECT_EQ(std::get<0>(options.betas()), 0.5);
  // An invalid value through a group's setter is rejected and the old value kept.
  EXPECT_ERROR(ValueError, options.eps(-1.0), "Adam", "eps");
  EXPECT_EQ(options.eps(), 1e-3);
  opt.set_lr(0.1);  // every group
  EXPECT_EQ(opt.param_groups()[0].options().get_lr(), 0.1);
  EXPECT_EQ(opt.param_groups()[1].options().get_lr(), 0.1);

  // The new betas and eps reach the update: compare with a fresh optimizer built with them.
  Tensor c = b.detach().clone().requires_grad_(true);
  optim::Adam ref(std::vector<Tensor>{c}, optim::AdamOptions(0.1).betas({0.5, 0.9}).eps(1e-3));
  const Tensor g = testing::random_tensor({2});
  b.mutable_grad() = g;
  c.mutable_grad() = g;
  opt.step();
  ref.step();
  EXPECT_EQ(values_of(b), values_of(c));
}

TEST(ParamGroups, SgdMomentumTurnedOnLaterAllocatesItsBuffer) {
  Tensor a = testing::random_tensor({4}, kFloat64, true);
  Tensor b = a.detach().clone().requires_grad_(true);
  optim::SGD opt(std::vector<Tensor>{a}, 0.1);
  static_cast<optim::SGDOptions&>(opt.param_groups()[0].options()).momentum(0.9);
  optim::SGD ref(std::vector<Tensor>{b}, optim::SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < 3; ++s) {
    const Tensor g = testing::random_tensor({4});
    a.mutable_grad() = g;
    b.mutable_grad() = g;
    opt.step();
    ref.step();
  }
  EXPECT_EQ(values_of(a), values_of(b));
  EXPECT_EQ(opt.state_dict().count("0.momentum_buffer"), 1u);
}

TEST(ParamGroups, StateDictKeepsEveryGroupsLr) {
  Tensor a = testing::random_tensor({3}, kFloat64, true), b = testing::random_tensor({2}, kFloat64, true);
  auto make = [](const Tensor& x, const Tensor& y) {
    std::vector<OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<Tensor>{x});
    groups.emplace_back(std::vector<Tensor>{y}, std::make_unique<optim::SGDOptions>(optim::SGDOptions(0.3)));
    return std::make_unique<optim::SGD>(groups, optim::SGDOptions(0.1).momentum(0.5));
  };
  auto opt = make(a, b);
  opt->param_groups()[1].options().set_lr(0.7);
  a.mutable_grad() = testing::random_tensor({3});
  opt->step();
  const auto saved = opt->state_dict();
  EXPECT_EQ(saved.at("lr").item<double>(), 0.1);
  EXPECT_EQ(saved.at("param_groups.1.lr").item<double>(), 0.7);
  Tensor c = a.detach().clone().requires_grad_(true), d = b.detach().clone().requires_grad_(true);
  auto other = make(c, d);
  other->load_state_dict(saved);
  EXPECT_EQ(other->param_groups()[1].options().get_lr(), 0.7);
  auto bad = saved;
  bad.erase("param_groups.1.lr");
  EXPECT_ERROR(ValueError, other->load_state_dict(bad), "param_groups.1.lr");
}

TEST(ParamGroups, BadGroupsAreRejected) {
  Tensor a = testing::random_tensor({3}, kFloat64, true), b = testing::random_tensor({2}, kFloat64, true);
  optim::SGD opt(std::vector<Tensor>{a}, 0.1);
  EXPECT_ERROR(ValueError, opt.add_param_group(OptimizerParamGroup({a})), "parameter 1", "more than once");
  const OptimizerParamGroup adam_group({b}, std::make_unique<optim::AdamOptions>(optim::AdamOptions()));
  EXPECT_ERROR(TypeError, opt.add_param_group(adam_group), "parameter group 1", "another optimizer kind");
  const OptimizerParamGroup bad_lr({b}, std::make_unique<optim::SGDOptions>(optim::SGDOptions(-1.0)));
  EXPECT_ERROR(ValueError, opt.add_param_group(bad_lr), "SGD", "lr");
  EXPECT_EQ(opt.param_groups().size(), 1u) << "a rejected group is not added";
  std::vector<OptimizerParamGroup> empty;
  empty.emplace_back(std::vector<Tensor>{});
  EXPECT_ERROR(ValueError, optim::SGD(empty, 0.1), "empty");
}

#if MINIDL_CUDA_ENABLED

TEST(ParamGroupsGpu, GroupLrChangeReachesACapturedStep) {
  MINIDL_REQUIRE_GPU();
  const Device gpu(kCUDA, 0);
  const std::vector<Tensor> init = {testing::random_tensor({33, 7}, kFloat32, true),
                                    testing::random_tensor({100}, kFloat32, true)};
  std::vector<Tensor> cpu = clones(init), dev = clones(init, gpu);
  auto make = [](const std::vector<Tensor>& ps) {
    std::vector<OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<Tensor>{ps[0]});
    groups.emplace_back(std::vector<Tensor>{ps[1]},
                        std::make_unique<optim::AdamWOptions>(optim::AdamWOptions(0.03).betas({0.8, 0.95})));
    return std::make_unique<optim::AdamW>(groups, optim::AdamWOptions(0.01));
  };
  auto cpu_opt = make(cpu), dev_opt = make(dev);
  set_grads({&cpu, &dev});
  cpu_opt->step();
  dev_opt->step();
  const cudaStream_t stream = gpu::stream();
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  MINIDL_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  dev_opt->step();
  MINIDL_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  MINIDL_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 5; ++r) {
    if (r == 2) {
      for (auto* o : {cpu_opt.get(), dev_opt.get()}) {
        o->param_groups()[1].options().set_lr(0.002);
        static_cast<optim::AdamWOptions&>(o->param_groups()[0].options()).betas({0.7, 0.9}).weight_decay(0.2);
      }
    }
    MINIDL_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    cpu_opt->step();
  }
  cuda::synchronize();
  MINIDL_CUDA_CHECK(cudaGraphExecDestroy(exec));
  MINIDL_CUDA_CHECK(cudaGraphDestroy(graph));
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    expect_close(dev[i], cpu[i], 1e-5, 1e-6, "parameter " + std::to_string(i));
  }
}

#endif  // MINIDL_CUDA_ENABLED

}  // namespace
}  // namespace minidl
