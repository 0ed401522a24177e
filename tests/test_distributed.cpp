// Data-parallel training: environment, TCPStore rendezvous, DistributedSampler, the post-accumulate-grad hook,
// DistributedDataParallel's bucketing (on the CPU with a recording process group), the launcher, and — in an
// NCCL build with GPUs — ProcessGroupNCCL and the two-GPU equivalence with one GPU at twice the batch.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "minidl/config.h"
#include "minidl/data/data_loader.h"
#include "minidl/data/sampler.h"
#include "minidl/distributed/ddp.h"
#include "minidl/distributed/env.h"
#include "minidl/distributed/launcher.h"
#include "minidl/distributed/process_group.h"
#include "minidl/distributed/store.h"
#include "minidl/minidl.h"

namespace {

using namespace minidl;
using namespace std::chrono_literals;
namespace dist = minidl::distributed;

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no exception)";
}

// ---- environment -------------------------------------------------------------------------------------------

dist::DistributedEnv parse(std::map<std::string, std::string> vars) {
  return dist::parse_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::map<std::string, std::string> good_env() {
  return {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}};
}

TEST(DistributedEnv, ParsesTorchrunVariables) {
  const dist::DistributedEnv e = parse(good_env());
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "10.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(DistributedEnv, NamesTheBadVariable) {
  struct Case {
    std::string var, value, expect;  // value "<unset>" removes the variable
  };
  for (const Case& c : std::vector<Case>{{"RANK", "<unset>", "RANK is not set"},
                                         {"WORLD_SIZE", "two", "WORLD_SIZE must be an integer, found \"two\""},
                                         {"WORLD_SIZE", "0", "WORLD_SIZE must be in [1,"},
                                         {"RANK", "4", "RANK must be below WORLD_SIZE (4), found 4"},
                                         {"RANK", "-1", "RANK must be in [0,"},
                                         {"LOCAL_RANK", "1x", "LOCAL_RANK must be an integer"},
                                         {"MASTER_ADDR", "", "MASTER_ADDR is empty"},
                                         {"MASTER_ADDR", "<unset>", "MASTER_ADDR is not set"},
                                         {"MASTER_PORT", "70000", "MASTER_PORT must be in [1, 65535], found 70000"},
                                         {"MASTER_PORT", "", "MASTER_PORT must be an integer"}}) {
    auto vars = good_env();
    if (c.value == "<unset>") vars.erase(c.var);
    else vars[c.var] = c.value;
    const std::string msg = error_of([&] { parse(vars); });
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.var << "=" << c.value << ": " << msg;
    EXPECT_THROW(parse(vars), ValueError);
  }
}

// ---- TCPStore ----------------------------------------------------------------------------------------------

dist::TCPStoreOptions store_options(int port, bool server, int rank, int world, std::chrono::milliseconds timeout) {
  dist::TCPStoreOptions o;
  o.port = port;
  o.is_server = server;
  o.rank = rank;
  o.world_size = world;
  o.timeout = timeout;
  return o;
}

TEST(TCPStore, SetGetWaitAddAcrossThreads) {
  dist::TCPStore server(store_options(0, true, 0, 2, 10s));
  ASSERT_GT(server.port(), 0);
  std::thread other([&] {
    dist::TCPStore client(store_options(server.port(), false, 1, 2, 10s));
    EXPECT_EQ(client.get_string("from0"), "hello");  // may wait for rank 0's set
    std::this_thread::sleep_for(50ms);
    client.set("from1", std::vector<std::uint8_t>{0, 1, 255, 7});
    EXPECT_EQ(client.add("counter", 5), 5 + 3);  // after rank 0's add(3): waits for "added" first
  });
  server.set("from0", std::string("hello"));
  EXPECT_EQ(server.add("counter", 3), 3);
  EXPECT_EQ(server.get("from1"), (std::vector<std::uint8_t>{0, 1, 255, 7}));  // waits for the later set
  server.wait({"from0", "from1"});
  other.join();
  EXPECT_EQ(server.add("counter", 0), 8);
  EXPECT_EQ(server.dead_rank(), -1);  // rank 1 left with a goodbye
}

TEST(TCPStore, GetTimesOutNamingTheKey) {
  dist::TCPStore server(store_options(0, true, 0, 1, 200ms));
  const std::string msg = error_of([&] { server.get("never"); });
  EXPECT_NE(msg.find("timed out after 200 ms waiting for key \"never\""), std::string::npos) << msg;
  EXPECT_THROW(server.get("never"), IOError);
}

TEST(TCPStore, ClientRetriesUntilTheServerIsUp) {
  const int port = dist::find_free_port();
  std::thread late_server([&] {
    std::this_thread::sleep_for(300ms);
    // Its destructor waits this long for the client (still connected) to leave.
    dist::TCPStore server(store_options(port, true, 0, 2, 1s));
    EXPECT_EQ(server.get_string("ready"), "yes");
  });
  dist::TCPStore client(store_options(port, false, 1, 2, 10s));
  client.set("ready", std::string("yes"));
  late_server.join();
}

TEST(TCPStore, ConnectTimeoutSaysWhere) {
  const int port = dist::find_free_port();  // nobody listens there
  const std::string msg = error_of([&] { dist::TCPStore c(store_options(port, false, 1, 2, 300ms)); });
  EXPECT_NE(msg.find("could not reach the rendezvous store at 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << msg;
}

TEST(TCPStore, BarrierReleasesAllRanksTogether) {
  constexpr int kWorld = 4;
  dist::TCPStore server(store_options(0, true, 0, kWorld, 10s));
  std::atomic<int> arrived{0};
  std::vector<std::thread> ranks;
  std::atomic<bool> early{false};
  for (int r = 1; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      dist::TCPStore c(store_options(server.port(), false, r, kWorld, 10s));
      for (int round = 0; round < 3; ++round) {
        ++arrived;
        c.barrier();
        if (arrived.load() < kWorld * (round + 1)) early = true;
        c.barrier();  // nobody starts the next round before all have checked
      }
    });
  }
  for (int round = 0; round < 3; ++round) {
    ++arrived;
    server.barrier();
    if (arrived.load() < kWorld * (round + 1)) early = true;
    server.barrier();
  }
  for (auto& t : ranks) t.join();
  EXPECT_FALSE(early);
}

TEST(TCPStore, RankLeavingWithoutGoodbyeIsReportedDead) {
  dist::TCPStore server(store_options(0, true, 0, 3, 10s));
  std::thread crashing([&] {
    try {
      dist::TCPStore c(store_options(server.port(), false, 2, 3, 10s));
      throw std::runtime_error("rank 2 fails");  // unwinding: the store leaves without a goodbye
    } catch (const std::runtime_error&) {
    }
  });
  crashing.join();
  const std::string msg = error_of([&] { server.get("never-set"); });  // fails at once, not after 10 s
  EXPECT_NE(msg.find("rank 2 died"), std::string::npos) << msg;
  EXPECT_EQ(server.dead_rank(), 2);
}

TEST(TCPStore, ClientNoticesTheServerIsGone) {
  auto server = std::make_unique<dist::TCPStore>(store_options(0, true, 0, 2, 100ms));
  dist::TCPStore client(store_options(server->port(), false, 1, 2, 10s));
  EXPECT_EQ(client.dead_rank(), -1);
  server.reset();  // waits 100 ms for the client to leave, then closes
  const std::string msg = error_of([&] { client.dead_rank(); });
  EXPECT_NE(msg.find("rank 0 (which runs the store) has exited or died"), std::string::npos) << msg;
}

TEST(TCPStore, RejectsBadOptions) {
  EXPECT_THROW(dist::TCPStore(store_options(0, true, 2, 2, 1s)), ValueError);
  EXPECT_THROW(dist::TCPStore(store_options(0, false, 0, 2, 1s)), ValueError);  // client without a port
  EXPECT_THROW(dist::TCPStore(store_options(70000, true, 0, 2, 1s)), ValueError);
}

// ---- DistributedSampler ------------------------------------------------------------------------------------

TEST(DistributedSampler, ShardsAreEqualDisjointAndCoverEverything) {
  for (const std::int64_t n : {1, 7, 10, 12, 103}) {
    for (const int world : {1, 2, 3, 5, 8}) {
      for (const bool shuffle : {false, true}) {
        std::vector<std::int64_t> all;
        const std::int64_t per = (n + world - 1) / world;
        for (int r = 0; r < world; ++r) {
          data::DistributedSampler s(n, world, r, shuffle, 42);
          ASSERT_EQ(s.size(), per);
          const auto idx = s.indices(3);
          ASSERT_EQ(static_cast<std::int64_t>(idx.size()), per);
          all.insert(all.end(), idx.begin(), idx.end());
        }
        // Everything covered; only the padding (per * world - n samples) repeats.
        std::set<std::int64_t> distinct(all.begin(), all.end());
        EXPECT_EQ(static_cast<std::int64_t>(distinct.size()), n) << "n " << n << " world " << world;
        EXPECT_EQ(*distinct.begin(), 0);
        EXPECT_EQ(*distinct.rbegin(), n - 1);
        EXPECT_EQ(static_cast<std::int64_t>(all.size()) - n, per * world - n);
      }
    }
  }
}

TEST(DistributedSampler, EveryRankCutsTheSamePermutation) {
  const std::int64_t n = 50;
  const int world = 4;  // 52 = 50 + 2 padding
  const auto order = data::epoch_order(n, true, 9, 2);
  std::vector<std::int64_t> padded(order);
  padded.push_back(order[0]);
  padded.push_back(order[1]);
  for (int r = 0; r < world; ++r) {
    const auto idx = data::DistributedSampler(n, world, r, true, 9).indices(2);
    for (std::size_t i = 0; i < idx.size(); ++i) EXPECT_EQ(idx[i], padded[i * world + static_cast<std::size_t>(r)]);
  }
}

TEST(DistributedSampler, SeededPerEpochAndDropLast) {
  data::DistributedSampler a(100, 3, 1, true, 5), b(100, 3, 1, true, 5), c(100, 3, 1, true, 6);
  EXPECT_EQ(a.indices(0), b.indices(0));
  EXPECT_NE(a.indices(0), a.indices(1));
  EXPECT_NE(a.indices(0), c.indices(0));
  data::DistributedSampler d(100, 3, 2, true, 5, /*drop_last=*/true);
  EXPECT_EQ(d.size(), 33);
  EXPECT_EQ(d.indices(0).size(), 33u);
  EXPECT_THROW(data::DistributedSampler(0, 2, 0), ValueError);
  EXPECT_THROW(data::DistributedSampler(10, 0, 0), ValueError);
  EXPECT_THROW(data::DistributedSampler(10, 2, 2), ValueError);
  EXPECT_THROW(data::DistributedSampler(3, 4, 0, true, 0, true), ValueError);
}

/// Sample i has data {i} and target i.
class IotaDataset : public data::Dataset {
 public:
  explicit IotaDataset(std::int64_t n) : n_(n) {}
  std::int64_t size() const override { return n_; }
  data::Batch get_batch(const std::vector<std::int64_t>& idx) const override {
    std::vector<float> x(idx.begin(), idx.end());
    const auto n = static_cast<std::int64_t>(idx.size());
    return {from_vector(x, {n, 1}), from_vector(idx, {n})};
  }
  Shape sample_shape() const override { return {1}; }

 private:
  std::int64_t n_;
};

TEST(DistributedSampler, DataLoaderVisitsTheShardOnEveryCpuPath) {
  auto ds = std::make_shared<IotaDataset>(23);
  auto sampler = std::make_shared<data::DistributedSampler>(23, 3, 1, true, 11);
  for (const int prefetch : {0, 2}) {
    for (const bool resident : {false, true}) {
      data::DataLoader loader(ds, data::DataLoaderOptions().set_batch_size(3).set_prefetch(prefetch)
                                      .set_device_resident(resident).set_sampler(sampler));
      EXPECT_EQ(loader.num_batches(), 3);  // 8 samples per rank
      std::vector<std::int64_t> seen;
      for (data::Batch& b : loader.epoch(4)) {
        const auto t = b.target.to_vector<std::int64_t>();
        const auto x = b.data.to_vector<float>();
        for (std::size_t i = 0; i < t.size(); ++i) EXPECT_EQ(x[i], static_cast<float>(t[i]));
        seen.insert(seen.end(), t.begin(), t.end());
      }
      EXPECT_EQ(seen, sampler->indices(4)) << "prefetch " << prefetch << " resident " << resident;
    }
  }
}

TEST(DistributedSampler, DataLoaderRejectsIndicesOutsideTheDataset) {
  auto ds = std::make_shared<IotaDataset>(5);
  auto sampler = std::make_shared<data::DistributedSampler>(9, 1, 0, false);
  data::DataLoader loader(ds, data::DataLoaderOptions().set_batch_size(2).set_sampler(sampler));
  const std::string msg = error_of([&] { loader.start_epoch(0); });
  EXPECT_NE(msg.find("sampler gave index 5 for epoch 0, outside the dataset's [0, 5)"), std::string::npos) << msg;
}

// ---- post-accumulate-grad hook -----------------------------------------------------------------------------

TEST(PostAccumulateGradHook, RunsAfterEachAccumulationWithTheTotal) {
  Tensor x = randn({5}).requires_grad_();
  std::vector<std::vector<float>> seen;
  const auto h = x.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    EXPECT_TRUE(leaf.is_same(x));
    seen.push_back(leaf.grad().to_vector<float>());
  });
  (x * x).sum().backward();
  (x * 3.0).sum().backward();
  const auto xv = x.to_vector<float>();
  ASSERT_EQ(seen.size(), 2u);
  for (std::size_t i = 0; i < xv.size(); ++i) {
    EXPECT_FLOAT_EQ(seen[0][i], 2 * xv[i]);
    EXPECT_FLOAT_EQ(seen[1][i], 2 * xv[i] + 3);
  }
  x.remove_post_accumulate_grad_hook(h);
  x.remove_post_accumulate_grad_hook(h);  // idempotent
  (x * x).sum().backward();
  EXPECT_EQ(seen.size(), 2u);
}

TEST(PostAccumulateGradHook, OncePerBackwardEvenWhenUsedTwiceAndMayReplaceTheGrad) {
  Tensor w = randn({3}).requires_grad_();
  int calls = 0;
  Tensor replacement = full({3}, 7.0);
  w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    ++calls;
    leaf.mutable_grad() = replacement;
  });
  ((w * w) + (w * 2.0)).sum().backward();  // two paths into w: one accumulation, one hook call
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(3, 7.0f));
}

TEST(PostAccumulateGradHook, OnlyOnLeavesThatRequireGrad) {
  Tensor a = randn({2});
  EXPECT_THROW(a.register_post_accumulate_grad_hook([](const Tensor&) {}), AutogradError);
  Tensor b = randn({2}).requires_grad_();
  Tensor c = b * 2.0;
  const std::string msg = error_of([&] { c.register_post_accumulate_grad_hook([](const Tensor&) {}); });
  EXPECT_NE(msg.find("was produced by"), std::string::npos) << msg;
  EXPECT_THROW(b.register_post_accumulate_grad_hook(nullptr), ValueError);
}

// ---- DistributedDataParallel with a recording process group (CPU) -----------------------------------------

/// Pretends to be rank 0 of `world` whose peers hold the same gradients (so the average is the gradient
/// itself), and records what DDP asks for and when.
class RecordingGroup : public dist::ProcessGroup {
 public:
  explicit RecordingGroup(int world) : world_(world) {}
  int rank() const override { return 0; }
  int size() const override { return world_; }
  Device device() const override { return Device(kCPU); }
  void allreduce_async(const std::vector<Tensor>& tensors, dist::ReduceOp op) override {
    EXPECT_EQ(op, dist::ReduceOp::Avg);
    for (const Tensor& t : tensors) reduced.push_back({t.numel(), hooks_so_far ? *hooks_so_far : -1});
    ++pending;
  }
  void wait_pending() override {
    waits.push_back(pending);
    pending = 0;
  }
  void broadcast(const std::vector<Tensor>& tensors, int root) override {
    EXPECT_EQ(root, 0);
    broadcast_count += static_cast<int>(tensors.size());
  }
  void barrier() override {}

  struct Call {
    std::int64_t numel;
    int hooks_seen;  // gradients completed when the reduction was launched
  };
  std::vector<Call> reduced;
  std::vector<int> waits;
  int pending = 0, broadcast_count = 0;
  const int* hooks_so_far = nullptr;

 private:
  int world_;
};

std::shared_ptr<nn::SequentialImpl> small_mlp() {
  return std::make_shared<nn::SequentialImpl>(nn::Linear(6, 16), nn::ReLU(), nn::Linear(16, 8), nn::ReLU(),
                                              nn::Linear(8, 3));
}

TEST(DistributedDataParallel, BucketsInReverseOrderOverlapBackwardAndKeepGradients) {
  manual_seed(3);
  auto model = small_mlp();
  auto reference = small_mlp();
  {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < model->parameters().size(); ++i) reference->parameters()[i].copy_(model->parameters()[i]);
  }
  auto group = std::make_shared<RecordingGroup>(2);
  int hooks = 0;
  group->hooks_so_far = &hooks;
  for (const Tensor& p : model->parameters()) p.register_post_accumulate_grad_hook([&](const Tensor&) { ++hooks; });
  // 6 parameters: fc3.bias(3) fc3.weight(24) | fc2.bias(8) fc2.weight(128) | fc1.bias(16) fc1.weight(96)
  nn::parallel::DistributedDataParallel ddp(model, group,
                                            nn::parallel::DistributedDataParallelOptions().set_bucket_cap_bytes(100));
  EXPECT_EQ(group->broadcast_count, 6);
  const auto buckets = ddp.bucket_assignment();
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0], (std::vector<std::size_t>{5, 4}));
  EXPECT_EQ(buckets[1], (std::vector<std::size_t>{3, 2}));
  EXPECT_EQ(buckets[2], (std::vector<std::size_t>{1, 0}));

  for (int step = 0; step < 3; ++step) {
    const Tensor x = randn({4, 6});
    hooks = 0;
    group->reduced.clear();
    model->zero_grad(step != 1);  // also with gradients kept in place (zeroed) between steps
    reference->zero_grad();
    model->forward(x).pow(2.0).sum().backward();
    reference->forward(x).pow(2.0).sum().backward();
    ASSERT_EQ(group->reduced.size(), 3u);
    EXPECT_EQ(group->reduced[0].numel, 64 + 64);  // each gradient padded to a multiple of 64 floats
    EXPECT_EQ(group->reduced[1].numel, 64 + 128);
    EXPECT_EQ(group->reduced[2].numel, 64 + 128);
    EXPECT_LT(group->reduced[0].hooks_seen, 6) << "the first bucket waited for the whole backward pass";
    ASSERT_EQ(group->waits.size(), static_cast<std::size_t>(step + 1));
    EXPECT_EQ(group->waits.back(), 3);  // one join, after all three
    for (std::size_t i = 0; i < model->parameters().size(); ++i) {
      const auto g = model->parameters()[i].grad().to_vector<float>();
      const auto r = reference->parameters()[i].grad().to_vector<float>();
      ASSERT_EQ(g.size(), r.size());
      for (std::size_t j = 0; j < g.size(); ++j) EXPECT_FLOAT_EQ(g[j], r[j]) << "param " << i << " elem " << j;
    }
  }
}

TEST(DistributedDataParallel, GradientsLiveInTheBucketAcrossSteps) {
  auto model = small_mlp();
  auto group = std::make_shared<RecordingGroup>(2);
  nn::parallel::DistributedDataParallel ddp(model, group);
  model->forward(randn({2, 6})).sum().backward();
  std::vector<void*> where;
  for (const Tensor& p : model->parameters()) where.push_back(p.grad().data_ptr());
  model->zero_grad(false);
  model->forward(randn({2, 6})).sum().backward();
  for (std::size_t i = 0; i < where.size(); ++i) EXPECT_EQ(model->parameters()[i].grad().data_ptr(), where[i]);
  // One bucket with the default cap: its gradients one after the other (4.weight: 24 floats, padded to 64).
  const auto params = model->parameters();
  EXPECT_EQ(static_cast<char*>(params[4].grad().data_ptr()) + 64 * sizeof(float), params[3].grad().data_ptr());
}

TEST(DistributedDataParallel, UnusedParameterIsNamedAtTheNextBackward) {
  auto model = small_mlp();
  auto group = std::make_shared<RecordingGroup>(2);
  nn::parallel::DistributedDataParallel ddp(model, group);
  auto first = std::dynamic_pointer_cast<nn::LinearImpl>(model->named_children()[0].second);
  ASSERT_TRUE(first);
  first->forward(randn({2, 6})).sum().backward();  // only the first layer gets gradients
  const std::string msg = error_of([&] { first->forward(randn({2, 6})).sum().backward(); });
  EXPECT_NE(msg.find("got no gradient in that pass"), std::string::npos) << msg;
  EXPECT_NE(msg.find("4.weight"), std::string::npos) << msg;
}

TEST(DistributedDataParallel, HooksGoWithTheWrapper) {
  auto model = small_mlp();
  auto group = std::make_shared<RecordingGroup>(2);
  { nn::parallel::DistributedDataParallel ddp(model, group); }
  model->forward(randn({2, 6})).sum().backward();
  EXPECT_TRUE(group->reduced.empty());
  EXPECT_THROW(nn::parallel::DistributedDataParallel(model, group,
                                                     nn::parallel::DistributedDataParallelOptions().set_bucket_cap_bytes(0)),
               ValueError);
}

// ---- launcher ----------------------------------------------------------------------------------------------

int launch_sh(int nproc, const std::string& script, std::chrono::milliseconds grace = 5s) {
  dist::LaunchOptions o;
  o.nproc = nproc;
  o.argv = {"sh", "-c", script};
  o.grace = grace;
  return dist::launch(o);
}

TEST(Launcher, EveryRankGetsItsEnvironmentAndTheRest) {
  ::setenv("MINIDL_TEST_PASSTHROUGH", "kept", 1);
  ::setenv("NCCL_TEST_SETTING", "7", 1);
  ::setenv("RANK", "99", 1);  // replaced, not duplicated
  EXPECT_EQ(launch_sh(3, "test \"$WORLD_SIZE\" = 3 && test \"$LOCAL_RANK\" = \"$RANK\" && test \"$RANK\" -lt 3 && "
                         "test \"$MASTER_ADDR\" = 127.0.0.1 && test \"$MASTER_PORT\" -gt 0 && "
                         "test \"$MINIDL_TEST_PASSTHROUGH\" = kept && test \"$NCCL_TEST_SETTING\" = 7 && "
                         "test \"$(env | grep -c '^RANK=')\" = 1"),
            0);
  ::unsetenv("RANK");
}

TEST(Launcher, ReturnsTheFailedRanksStatusAndStopsTheOthers) {
  // Rank 1 fails at once; the others would sleep for a minute unless stopped.
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(launch_sh(3, "if [ \"$RANK\" = 1 ]; then exit 3; fi; exec sleep 60"), 3);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 50s) << "the sleeping ranks were not stopped";
  // A rank that ignores SIGTERM is killed after the grace period.
  EXPECT_EQ(launch_sh(2, "trap '' TERM; if [ \"$RANK\" = 0 ]; then exit 4; fi; sleep 60", 200ms), 4);
}

TEST(Launcher, ForwardsSigtermToEveryRank) {
  const std::string dir = ::testing::TempDir() + "minidl_launcher_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  int status = -1;
  std::thread launcher([&] {
    status = launch_sh(2, "trap 'exit 7' TERM; touch " + dir + "/ready.$RANK; sleep 60 & wait");
  });
  // Signal the launcher once both ranks run (their handlers are installed before the files appear).
  for (int i = 0; i < 1000 && !(std::ifstream(dir + "/ready.0") && std::ifstream(dir + "/ready.1")); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ::kill(::getpid(), SIGTERM);  // the launcher's handler forwards it instead of ending this process
  launcher.join();
  EXPECT_EQ(status, 7);
  (void)std::system(("rm -rf " + dir).c_str());
}

TEST(Launcher, SignalsAndMissingProgramsBecomeStatuses) {
  EXPECT_EQ(launch_sh(2, "if [ \"$RANK\" = 1 ]; then kill -9 $$; fi; exec sleep 60"), 128 + 9);
  dist::LaunchOptions o;
  o.nproc = 1;
  o.argv = {"minidl-no-such-program"};
  EXPECT_EQ(dist::launch(o), 127);
  o.argv.clear();
  EXPECT_THROW(dist::launch(o), ValueError);
  o.argv = {"true"};
  o.nproc = 0;
  EXPECT_THROW(dist::launch(o), ValueError);
}

// ---- NCCL --------------------------------------------------------------------------------------------------

TEST(ProcessGroupNCCL, SaysWhenNotBuiltIn) {
  if (dist::nccl_available()) GTEST_SKIP() << "this build has NCCL";
  const std::string msg = error_of([] { dist::ProcessGroupNCCL(dist::DistributedEnv{0, 1, 0, "127.0.0.1", 1}); });
  EXPECT_NE(msg.find("minidl was built without NCCL"), std::string::npos) << msg;
}

#if MINIDL_NCCL_ENABLED

/// World size 1 on GPU 0, with a private rendezvous port.
std::shared_ptr<dist::ProcessGroupNCCL> single_rank_group() {
  return std::make_shared<dist::ProcessGroupNCCL>(
      dist::DistributedEnv{0, 1, 0, "127.0.0.1", dist::find_free_port()});
}

TEST(ProcessGroupNCCL, SingleRankCollectives) {
  if (cuda::device_count() < 1) GTEST_SKIP() << "no CUDA device";
  auto group = single_rank_group();
  const Device dev = group->device();
  Tensor a = randn({1000}, dev), b = randn({3, 7}, dev);
  const auto av = a.to_vector<float>(), bv = b.to_vector<float>();
  group->allreduce({a, b}, dist::ReduceOp::Sum);
  EXPECT_EQ(a.to_vector<float>(), av);
  group->allreduce({b}, dist::ReduceOp::Avg);
  EXPECT_EQ(b.to_vector<float>(), bv);
  group->broadcast({a}, 0);
  EXPECT_EQ(a.to_vector<float>(), av);
  group->barrier();
  const auto sums = dist::all_reduce_sums(*group, {full({}, 2.5, dev), full({}, 4.0, dev)});
  EXPECT_EQ(sums, (std::vector<double>{2.5, 4.0}));
  EXPECT_THROW(group->allreduce({randn({4})}), ValueError);  // a CPU tensor
}

#endif

bool is_worker() { return std::getenv("MINIDL_DDP_TEST_WORKER") != nullptr && dist::launched_as_rank(); }

// ---- two GPUs: DDP with batch B per GPU == one GPU with batch 2B ------------------------------------------
// The parent test starts this test binary twice through the launcher with MINIDL_DDP_TEST_WORKER set; each
// rank runs DdpWorker.* (skipped otherwise).
#if MINIDL_NCCL_ENABLED

constexpr std::int64_t kPerRankBatch = 32;
constexpr int kSteps = 20;

std::shared_ptr<nn::SequentialImpl> small_cnn() {
  return std::make_shared<nn::SequentialImpl>(nn::Conv2d(1, 8, 3), nn::ReLU(), nn::Flatten(), nn::Linear(8 * 10 * 10, 32),
                                              nn::ReLU(), nn::Linear(32, 10));
}

/// Step s's global batch of world * kPerRankBatch samples (the same on every rank).
std::pair<Tensor, Tensor> global_batch(int s, int world) {
  manual_seed(1000 + static_cast<std::uint64_t>(s));
  Tensor x = randn({world * kPerRankBatch, 1, 12, 12});
  Tensor y = (rand({world * kPerRankBatch}) * 10.0).to(kInt64);
  return {x, y};
}

Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t n) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = begin + i;
  return index_select(t, 0, from_vector(idx, {n}));
}

/// Trains kSteps steps with DDP on this rank's kPerRankBatch rows of each global batch — two eager steps,
/// then the whole step (all-reduce included) captured in a CUDA graph and replayed, as the trainer does —
/// and beside it a plain model on the whole global batch. Returns the largest weight difference.
double ddp_vs_one_gpu(const std::shared_ptr<dist::ProcessGroup>& group) {
  const Device dev = group->device();
  const int world = group->size();
  manual_seed(group->rank() == 0 ? 7 : 8);  // different initial weights: the broadcast must fix that
  auto model = small_cnn();
  model->to(dev);
  nn::parallel::DistributedDataParallel ddp(model, group, nn::parallel::DistributedDataParallelOptions()
                                                              .set_bucket_cap_bytes(64 << 10));
  // The single-GPU reference starts from rank 0's weights too (after the broadcast).
  auto reference = small_cnn();
  reference->to(dev);
  {
    NoGradGuard no_grad;
    for (std::size_t i = 0; i < model->parameters().size(); ++i) reference->parameters()[i].copy_(model->parameters()[i]);
  }
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.05).momentum(0.9));

  cuda::CUDAGraph graph;
  Tensor static_x = empty({kPerRankBatch, 1, 12, 12}, dev);
  Tensor static_y = empty({kPerRankBatch}, TensorOptions(kInt64).device(dev));
  const auto step = [&](const Tensor& x, const Tensor& y) {
    nn::functional::cross_entropy(model->forward(x), y).backward();
    opt.step();
  };
  for (int s = 0; s < kSteps; ++s) {
    auto [x, y] = global_batch(s, world);
    const Tensor mine_x = rows(x, group->rank() * kPerRankBatch, kPerRankBatch).to(dev);
    const Tensor mine_y = rows(y, group->rank() * kPerRankBatch, kPerRankBatch).to(dev);
    if (s < 2) {
      opt.zero_grad();
      step(mine_x, mine_y);
    } else {
      static_x.copy_(mine_x);
      static_y.copy_(mine_y);
      if (!graph.captured()) {
        opt.zero_grad();
        graph.capture_begin();
        step(static_x, static_y);
        graph.capture_end();
      }
      graph.replay();
    }
    ref_opt.zero_grad();
    nn::functional::cross_entropy(reference->forward(x.to(dev)), y.to(dev)).backward();
    ref_opt.step();
  }
  double worst = 0;
  for (std::size_t i = 0; i < model->parameters().size(); ++i) {
    const auto a = model->parameters()[i].to_vector<float>(), b = reference->parameters()[i].to_vector<float>();
    for (std::size_t j = 0; j < a.size(); ++j) worst = std::max(worst, static_cast<double>(std::abs(a[j] - b[j])));
  }
  std::printf("rank %d of %d: largest |DDP weight - single-GPU weight| after %d steps: %.3g\n", group->rank(), world,
              kSteps, worst);
  return worst;
}

TEST(ProcessGroupNCCL, SingleRankDdpWithCudaGraphMatchesPlainTraining) {
  if (cuda::device_count() < 1) GTEST_SKIP() << "no CUDA device";
  EXPECT_LE(ddp_vs_one_gpu(single_rank_group()), 1e-5);
}

TEST(DdpWorker, TwoRanksMatchOneGpuWithTwiceTheBatch) {
  if (!is_worker()) GTEST_SKIP() << "runs as a rank under DistributedDataParallel.TwoGpusMatchOneGpuWithTwiceTheBatch";
  auto group = dist::ProcessGroupNCCL::from_env();
  EXPECT_LE(ddp_vs_one_gpu(group), 1e-5) << "rank " << group->rank();
  group->barrier();
}

TEST(DdpWorker, RankDiesAndTheOtherExits) {
  if (!is_worker() || !std::getenv("MINIDL_DDP_TEST_DIE")) {
    GTEST_SKIP() << "runs as a rank under DistributedDataParallel.DeadRankStopsTheOthers";
  }
  auto group = dist::ProcessGroupNCCL::from_env();
  Tensor t = randn({1 << 20}, group->device());
  group->allreduce({t});
  (void)t.sum().item<float>();
  if (group->rank() == 1) std::_Exit(0);  // gone without leaving the job: the launcher sees success
  for (;;) {  // rank 0 would hang here in a collective its peer never joins, but for the watchdog
    group->allreduce({t});
    (void)t.sum().item<float>();
  }
}
#endif

int launch_workers(const std::string& filter, bool die) {
  ::setenv("MINIDL_DDP_TEST_WORKER", "1", 1);
  if (die) ::setenv("MINIDL_DDP_TEST_DIE", "1", 1);
  dist::LaunchOptions o;
  o.nproc = 2;
  o.argv = {dist::self_executable(), "--gtest_filter=" + filter};
  o.grace = 120s;  // for the dead-rank test: rank 0 must stop by itself, not be killed by the launcher
  const int status = dist::launch(o);
  ::unsetenv("MINIDL_DDP_TEST_WORKER");
  ::unsetenv("MINIDL_DDP_TEST_DIE");
  return status;
}

TEST(DistributedDataParallel, TwoGpusMatchOneGpuWithTwiceTheBatch) {
  if (is_worker()) GTEST_SKIP() << "a rank does not launch ranks";
  if (!dist::nccl_available() || cuda::device_count() < 2) GTEST_SKIP() << "needs NCCL and 2 GPUs";
  EXPECT_EQ(launch_workers("DdpWorker.TwoRanksMatchOneGpuWithTwiceTheBatch", false), 0);
}

TEST(DistributedDataParallel, DeadRankStopsTheOthers) {
  if (is_worker()) GTEST_SKIP() << "a rank does not launch ranks";
  if (!dist::nccl_available() || cuda::device_count() < 2) GTEST_SKIP() << "needs NCCL and 2 GPUs";
  // Rank 1 vanishes with status 0; rank 0's watchdog must end it with status 1 (not hang: the test's timeout).
  EXPECT_EQ(launch_workers("DdpWorker.RankDiesAndTheOtherExits", true), 1);
}

}  // namespace
