#pragma once
// Fault injection for the reliability tests (tests/cli/kill_many.sh, tests/cli/full_disk.sh): two faults an
// atomic file write can meet, armed from the environment and read once per process. Unset, they cost one
// branch per write.
//   SEQMIX_FAULT_KILL_AT_WRITE=K   the K-th atomic write of this process (1-based) writes half its content
//                                  to the temporary file, then the process SIGKILLs itself
//   SEQMIX_FAULT_DISK_BYTES=N      the disk holds N bytes for this process: a write that would pass that
//                                  total writes what fits, then fails with ENOSPC
//   SEQMIX_FAULT_LOG_BYTES=N       the same for the appends to a run's log (metrics.jsonl) alone
#include <cstddef>

namespace seqmix::fault {

// How many bytes of a `size`-byte write may go to disk: size, or fewer when an injected fault strikes.
// Counts the write; the caller writes that many bytes, then calls after_partial_write if fewer than size.
size_t bytes_allowed(size_t size);
// Called after writing the bytes_allowed of a faulted write: SIGKILLs the process (kill fault) or sets errno
// to ENOSPC (full-disk fault) and returns.
void after_partial_write();
// bytes_allowed for an append to a log (AppendLog), under SEQMIX_FAULT_LOG_BYTES; after_partial_write then sets
// ENOSPC.
size_t log_bytes_allowed(size_t size);

}  // namespace seqmix::fault
