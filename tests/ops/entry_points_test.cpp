// An operator is declared once, by its schema: its C++ entry points (include/seqmix/ops/operators.h and
// src/ops/common/kernel_operators.h) and the calls its kernels take (src/ops/common/operator_calls.h) are generated
// from the schemas by scripts/generate_op_wrappers.py (python.ops fails while the committed files differ from what it
// writes), and the dispatcher refuses a kernel whose C++ type disagrees with the schema. These tests hold the C++
// side of that.
#include <gtest/gtest.h>
#include <torch/library.h>
#include <torch/torch.h>

#include "../../src/ops/common/kernel_operators.h"
#include "../../src/ops/common/torch_op.h"
#include "seqmix/ops/gla.h"
#include "seqmix/ops/operators.h"

namespace seqmix {
namespace {

at::Tensor takes_an_integer(const at::Tensor& x, int64_t) { return x; }
at::Tensor normalised_read_kernel(const ops::NormalisedReadCall& call) { return call.numerator; }

TEST(EntryPoints, EveryEntryPointHasItsOperatorsCppType) {
  // typed<>() checks the entry point's C++ signature against the kernels registered for the operator.
  EXPECT_NO_THROW(ops::check_entry_points());
  EXPECT_NO_THROW(ops::kernel::check_kernel_entry_points());
}

TEST(EntryPoints, TheDispatcherRefusesAKernelThatDisagreesWithTheSchema) {
  // The kernel functions of define_op and define_kernel are checked so as the library loads: a float argument taken
  // as an integer is refused.
  torch::Library library(torch::Library::DEF, "seqmix_entry_points_test", c10::nullopt, __FILE__, __LINE__);
  library.def("f(Tensor x, float y) -> Tensor");
  EXPECT_THROW(library.impl("f", torch::dispatch(c10::DispatchKey::CPU, TORCH_FN(takes_an_integer))), c10::Error);
}

TEST(EntryPoints, AKernelTakesItsOperatorsCallAndNoOther) {
  // define_op registers NormalisedReadCall::as_kernel<f>, of the C++ type generated from normalised_read's schema: a
  // schema that has drifted from the generated call (eps an int) is refused as the library loads, and so is a
  // kernel registered under another operator's name, naming both.
  torch::Library library(torch::Library::DEF, "seqmix_entry_points_calls_test", c10::nullopt, __FILE__, __LINE__);
  EXPECT_THROW(ops::define_op<&normalised_read_kernel>(
                   library, "normalised_read(Tensor numerator, Tensor normaliser, int eps) -> Tensor", "doc"),
               c10::Error);
  try {
    ops::define_op<&normalised_read_kernel>(
        library, "other_read(Tensor numerator, Tensor normaliser, float eps) -> Tensor", "doc");
    ADD_FAILURE() << "a kernel of normalised_read was registered as other_read";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what_without_backtrace()).find("define_op of other_read with a kernel of normalised_read"),
              std::string::npos)
        << e.what_without_backtrace();
  }
  // Neither reached the op table.
  int normalised_reads = 0;
  for (const auto& family : ops::op_families())
    for (const auto& op : family.torch_ops) {
      EXPECT_NE(op.name, "other_read");
      normalised_reads += op.name == "normalised_read";
    }
  EXPECT_EQ(normalised_reads, 1);
}

TEST(EntryPoints, ArgumentsLeftOutTakeTheSchemasDefaults) {
  // Each field of an <Op>Args struct defaults to the schema's default: gla's impl 'auto', no scale, no state, no
  // output_final_state, no cu_seqlens.
  const auto& schema = c10::Dispatcher::singleton().findSchemaOrThrow("seqmix::gla", "").schema();
  const ops::GlaArgs defaults{};
  EXPECT_EQ(schema.arguments()[4].default_value()->toStringRef(), ops::impl_name(defaults.impl));
  EXPECT_TRUE(schema.arguments()[5].default_value()->isNone());
  EXPECT_FALSE(defaults.scale.has_value());
  EXPECT_FALSE(defaults.kv.defined());
  EXPECT_EQ(schema.arguments()[8].default_value()->toBool(), defaults.output_final_state);
  EXPECT_FALSE(defaults.cu_seqlens.defined());

  torch::manual_seed(0);
  const auto q = torch::rand({2, 9, 2, 4}, torch::kDouble), k = torch::rand({2, 9, 2, 4}, torch::kDouble);
  const auto v = torch::randn({2, 9, 2, 3}, torch::kDouble);
  const auto log_decay = -torch::rand({2, 9, 2}, torch::kDouble);
  const auto given = ops::gla(q, k, v, log_decay);
  // The same call through the boxed dispatcher with the schema's defaults, as Python's
  // torch.ops.seqmix.gla(q, k, v, log_decay) makes it.
  std::vector<c10::IValue> stack{q, k, v, log_decay};
  for (size_t i = stack.size(); i < schema.arguments().size(); ++i) stack.push_back(*schema.arguments()[i].default_value());
  c10::Dispatcher::singleton().findSchemaOrThrow("seqmix::gla", "").callBoxed(&stack);
  ASSERT_EQ(stack.size(), 4u);
  EXPECT_TRUE(torch::equal(given.numerator, stack[0].toTensor()));
  EXPECT_TRUE(torch::equal(given.normaliser, stack[1].toTensor()));
}

TEST(EntryPoints, OptionalTensorsUndefinedAreNone) {
  // An undefined at::Tensor field reaches the operator as None: a defined cu_seqlens packs sequences, an undefined one
  // reads the batch as it is.
  torch::manual_seed(1);
  const auto q = torch::rand({1, 7, 1, 4}, torch::kDouble), k = torch::rand({1, 7, 1, 4}, torch::kDouble);
  const auto v = torch::randn({1, 7, 1, 2}, torch::kDouble);
  const auto log_decay = -torch::rand({1, 7, 1}, torch::kDouble);
  const auto whole = ops::gla(q, k, v, log_decay, {.cu_seqlens = at::Tensor()});
  const auto packed = ops::gla(q, k, v, log_decay, {.cu_seqlens = torch::tensor({0, 3, 7}, torch::kLong)});
  const auto second = ops::gla(q.narrow(1, 3, 4), k.narrow(1, 3, 4), v.narrow(1, 3, 4), log_decay.narrow(1, 3, 4));
  EXPECT_TRUE(torch::allclose(whole.numerator.narrow(1, 0, 3), packed.numerator.narrow(1, 0, 3)));
  EXPECT_TRUE(torch::allclose(second.numerator, packed.numerator.narrow(1, 3, 4), 1e-12, 1e-12));
  EXPECT_FALSE(torch::allclose(whole.numerator.narrow(1, 3, 4), packed.numerator.narrow(1, 3, 4)));
}

}  // namespace
}  // namespace seqmix
