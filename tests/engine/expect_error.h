// Checks that a call throws the expected exception type with a message that contains every given
// fragment (what was wrong, what is accepted). Shared by the engine's unit tests.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>
#include <vector>

namespace otf::testing {

template <typename Exception, typename Callable>
void expect_error(Callable&& callable, const std::vector<std::string>& fragments) {
  try {
    callable();
  } catch (const Exception& error) {
    const std::string message = error.what();
    for (const auto& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message '" << message << "' lacks '" << fragment << "'";
    }
    return;
  } catch (const std::exception& other) {
    ADD_FAILURE() << "wrong exception type; what(): " << other.what();
    return;
  }
  ADD_FAILURE() << "no exception";
}

}  // namespace otf::testing
