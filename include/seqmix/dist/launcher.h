#pragma once
// `seqmix train --nproc N`: this program started N times on this machine as the workers of one job, with
// the variables torchrun would set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1,
// MASTER_PORT = a free loopback port). The launcher waits for them; when one fails or is killed it stops
// the others (SIGTERM, then SIGKILL after `grace`) and reports which one, so a job never hangs on a dead
// worker. SIGINT and SIGTERM sent to the launcher reach the workers; a worker dies with its launcher.
#include <chrono>
#include <string>
#include <vector>

namespace seqmix::dist {

// Runs `arguments` (without the program name and without --nproc) in nproc workers; returns 0 when every
// worker succeeded, else 1 after printing one line naming the first worker that failed and how. `command`
// ("train", "bench") names the job in messages.
int run_local_workers(const std::string& command, const std::vector<std::string>& arguments, int nproc,
                      std::chrono::seconds grace = std::chrono::seconds(10));

// A TCP port on 127.0.0.1 that is free right now (for MASTER_PORT); throws Error when no socket can be bound.
int free_loopback_port();

}  // namespace seqmix::dist
