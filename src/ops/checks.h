#pragma once
// Argument checks shared by the ops: each failure names the argument and the expected shape.
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace seqmix::ops {

// Throws c10::Error "op: argument name must have shape [labels] (got [sizes])" unless t has dims dims.
void check_rank(const at::Tensor& t, const char* op, const char* name, int64_t dims, const char* labels);
// Throws unless a.size(dim_a) == b.size(dim_b).
void check_same_size(const at::Tensor& a, int64_t dim_a, const at::Tensor& b, int64_t dim_b,
                     const char* op, const char* what);
// Throws unless every tensor is floating point with the dtype of the first.
void check_same_float_dtype(const char* op, std::initializer_list<at::Tensor> tensors);

}  // namespace seqmix::ops
