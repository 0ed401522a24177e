#pragma once
// The rendezvous settings of one process of a distributed job, as torchrun (and `minidl run`) set them in the
// environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
#include <functional>
#include <string>

namespace minidl {
namespace distributed {

struct DistributedEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;       ///< index of this process's GPU on its machine
  std::string master_addr;  ///< where rank 0's rendezvous store listens
  int master_port = 0;
};

/// True when RANK is set, i.e. this process was started by a launcher as one rank of a job.
bool launched_as_rank();

/// Reads and checks the five variables. Throws ValueError naming the variable and what was found when one is
/// missing, not a number, out of range (0 <= RANK < WORLD_SIZE, 0 <= LOCAL_RANK, 1 <= MASTER_PORT <= 65535),
/// or MASTER_ADDR is empty.
DistributedEnv env_from_environment();

/// The same checks on values from `lookup` (returns nullptr for an unset variable); for tests.
DistributedEnv parse_env(const std::function<const char*(const char*)>& lookup);

}  // namespace distributed
}  // namespace minidl
