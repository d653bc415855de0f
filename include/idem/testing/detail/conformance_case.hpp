#pragma once
// How the kit writes its cases: each is a class template over the store type S, derived from
// RecordStoreTest<S>, named for what it checks, and registered with GoogleTest only for the
// stores it applies to (register_cases). Kit-internal: a store's author uses
// IDEM_RECORD_STORE_CONFORMANCE (idem/testing/record_store_conformance.hpp). No namespace
// idem::testing::detail here: it would hide idem::detail from code in idem::testing.

#include <gtest/gtest.h>

#include "idem/testing/record_store_test.hpp"

// Declares the case `Name` and opens its body; inside, `this->` reaches the fixture and `S` is
// the store's type.
#define IDEM_TESTING_CASE(Name)                                   \
  template <class S>                                              \
  class Name final : public ::idem::testing::RecordStoreTest<S> { \
   public:                                                        \
    static constexpr const char* kName = #Name;                   \
                                                                  \
   private:                                                       \
    void TestBody() override;                                     \
  };                                                              \
  template <class S>                                              \
  void Name<S>::TestBody()  // NOLINT(bugprone-macro-parentheses): Name names a class

namespace idem::testing::conformance {

/// Registers Cases<S>... under `suite`, each created afresh for its run.
template <class S, template <class> class... Cases>
void register_cases(const char* suite, const char* file, int line) {
  (::testing::RegisterTest(suite, Cases<S>::kName, nullptr, nullptr, file, line,
                           []() -> RecordStoreTest<S>* { return new Cases<S>(); }),
   ...);
}

}  // namespace idem::testing::conformance
