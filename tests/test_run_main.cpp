// minidl::run_main (include/minidl/run_main.h), the main of every example, tool and benchmark: an exception from
// the program's body becomes its type and message on stderr and a failing exit status, with the output printed
// before it kept (an exception escaping main aborts, which loses buffered stdout).
#include "minidl/run_main.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <string>

#include "minidl/errors.h"

namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(RunMain, ReturnsTheBodysStatus) {
  EXPECT_EQ(minidl::run_main("prog", [] { return 0; }), 0);
  EXPECT_EQ(minidl::run_main("prog", [] { return 3; }), 3);
}

TEST(RunMain, AnErrorIsPrintedWithItsTypeAfterTheOutputSoFarAndFails) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int status = minidl::run_main("prog", []() -> int {
    std::printf("printed before the error, ");  // still in stdio's buffer when the body throws
    std::cout << "and through iostream";
    throw minidl::FormatError("data.idx: expected magic 0x00000803, found 0x12345678");
  });
  const std::string out = ::testing::internal::GetCapturedStdout(), err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 1);
  EXPECT_EQ(out, "printed before the error, and through iostream");
  EXPECT_EQ(err, "prog: error: minidl::FormatError: data.idx: expected magic 0x00000803, found 0x12345678\n");
}

TEST(RunMain, OtherExceptionsAndTheFailureStatus) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(minidl::run_main("prog", []() -> int { throw std::out_of_range("index 7 of 3"); }), 1);
  EXPECT_EQ(minidl::run_main("prog", []() -> int { throw 42; }, 4), 4);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "prog: error: std::out_of_range: index 7 of 3\n")) << err;
  EXPECT_TRUE(contains(err, "prog: error: an exception that is not a std::exception\n")) << err;
}

}  // namespace
