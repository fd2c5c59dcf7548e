// Every public op of include/seqmix/ops/ called with bad arguments (wrong rank, mismatched sizes, mixed dtypes,
// bad option values, unknown names) throws a one-line error naming the op or the argument. The calls are the op
// table's: each family declares its own (src/ops/<family>/bad_calls.cpp).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "seqmix/io/error.h"
#include "seqmix/ops/op_table.h"

namespace seqmix {
namespace {

// The call must throw seqmix::Error, or LibTorch's c10::Error (TORCH_CHECK: a RuntimeError from Python),
// whose message (without LibTorch's backtrace) is one line that contains expected_substring: never
// another exception, a crash or a silent result.
void expect_message(const std::string& message, const std::string& expected_substring) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << "the message spans several lines: " << message;
  EXPECT_NE(message.find(expected_substring), std::string::npos)
      << "the message does not name '" << expected_substring << "': " << message;
}

void expect_clear_error(const std::function<void()>& call, const std::string& expected_substring) {
  try {
    call();
  } catch (const Error& e) {
    expect_message(e.what(), expected_substring);
    return;
  } catch (const c10::Error& e) {
    expect_message(e.what_without_backtrace(), expected_substring);
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw an exception that is neither seqmix::Error nor c10::Error: " << e.what();
    return;
  }
  ADD_FAILURE() << "no error (expected one naming '" << expected_substring << "')";
}

void expect_clear_errors(const std::vector<ops::BadCall>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    expect_clear_error(c.call, c.expected);
  }
}

class BadCalls : public ::testing::TestWithParam<std::string> {};

TEST_P(BadCalls, FailWithOneLineNamingTheOpOrArgument) {
  for (const auto& family : ops::op_families())
    if (family.name == GetParam()) expect_clear_errors(family.bad_calls());
}

std::vector<std::string> family_names() {
  std::vector<std::string> names;
  for (const auto& family : ops::op_families()) names.push_back(family.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(OpTable, BadCalls, ::testing::ValuesIn(family_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Every family declares bad calls, and the sweep keeps its size (254 calls when the table was made).
TEST(BadCalls, EveryFamilyHasThem) {
  size_t total = 0;
  for (const auto& family : ops::op_families()) {
    ASSERT_TRUE(family.bad_calls) << family.name;
    const size_t n = family.bad_calls().size();
    EXPECT_GT(n, 0u) << family.name;
    total += n;
  }
  EXPECT_GE(total, 254u);
}

}  // namespace
}  // namespace seqmix
