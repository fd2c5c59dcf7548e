#pragma once
// Metrics of a data-parallel job: every rank accumulates (sum, weight) pairs over its share of a batch or
// of the test set, and the job's metric is the ratio of the sums over all ranks, exactly what one process
// accumulating every share would report.
#include "seqmix/dist/communicator.h"
#include "seqmix/tasks/task.h"

namespace seqmix::dist {

// The sums of every rank, on every rank; a metric some ranks lack gets only the others' sums.
MetricSums all_reduce_metric_sums(Communicator& communicator, const MetricSums& local);

}  // namespace seqmix::dist
