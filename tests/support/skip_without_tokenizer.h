#pragma once
// A sanitizer build has no tokenizer (src/io/tokenizer.cpp says why): tests that need one skip there.
#include <gtest/gtest.h>

#include "seqmix/io/tokenizer.h"

#define SKIP_WITHOUT_TOKENIZER() \
  if (!seqmix::Tokenizer::available()) GTEST_SKIP() << "no tokenizer in a sanitizer build"
