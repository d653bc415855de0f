#pragma once
// How the kits write their cases: each is a class template over one parameter (the store's type,
// or a face's), derived from the kit's fixture, named for what it checks, and registered with
// GoogleTest only for the stores it applies to (register_cases). Kit-internal: a store's author
// uses the kits' registration macros (IDEM_RECORD_STORE_CONFORMANCE and the like). No namespace
// idem::testing::detail here: it would hide idem::detail from code in idem::testing.

#include <gtest/gtest.h>

#include <string>

#include "idem/testing/record_store_test.hpp"

// Declares the case `Name` of the fixture template `Fixture` over the parameter `Param` and opens
// its body; inside, `this->` reaches the fixture, `Param` names the case's parameter and `S` the
// store's type (Fixture<Param>::Store). Its arguments name a template, a template parameter and a
// class, none of which may stand in parentheses.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define IDEM_TESTING_CASE_OF(Fixture, Param, Name) \
  template <class Param>                           \
  class Name final : public Fixture<Param> {       \
   public:                                         \
    using CaseFixture = Fixture<Param>;            \
    using S = typename CaseFixture::Store;         \
    static constexpr const char* kName = #Name;    \
                                                   \
   private:                                        \
    void TestBody() override;                      \
  };                                               \
  template <class Param>                           \
  void Name<Param>::TestBody()
// NOLINTEND(bugprone-macro-parentheses)

// A record-store case (RecordStoreTest<S>): `S` is the store's type.
#define IDEM_TESTING_CASE(Name) IDEM_TESTING_CASE_OF(::idem::testing::RecordStoreTest, Store_, Name)

namespace idem::testing::conformance {

/// Registers Cases<P>... under `suite`, each created afresh for its run. Their fixture type is
/// the one GoogleTest sees: all cases of a suite share it.
template <class P, template <class> class... Cases>
void register_cases(const char* suite, const char* file, int line) {
  (::testing::RegisterTest(suite, Cases<P>::kName, nullptr, nullptr, file, line,
                           []() -> typename Cases<P>::CaseFixture* { return new Cases<P>(); }),
   ...);
}

/// Registers Cases<S>... as `<prefix>/<kit>.<Case>`; true, for a static's initialiser.
template <class S, template <class> class... Cases>
bool register_kit(const char* prefix, const char* kit, const char* file, int line) {
  const std::string suite = std::string(prefix) + "/" + kit;
  register_cases<S, Cases...>(suite.c_str(), file, line);
  return true;
}

}  // namespace idem::testing::conformance

// Defines `template <class S> bool register_function(prefix, file, line)`, which registers the
// cases named after `ns` (a namespace) on S as `<prefix>/<kit>.<Case>`; at namespace scope in
// idem::testing.
#define IDEM_TESTING_KIT(register_function, kit, ns, ...)                      \
  template <class S>                                                           \
  bool register_function(const char* prefix, const char* file, int line) {     \
    using namespace ns;                                                        \
    return conformance::register_kit<S, __VA_ARGS__>(prefix, kit, file, line); \
  }                                                                            \
  static_assert(true, "a semicolon after the macro")

// Registers a kit's cases on the type given after `Prefix` (an identifier naming it in test
// names) by calling `register_function<Type>(#Prefix, __FILE__, __LINE__)` during static
// initialisation. At namespace scope, once per type.
#define IDEM_TESTING_REGISTER(register_function, Prefix, ...)              \
  [[maybe_unused]] static const bool idem_##register_function##_##Prefix = \
      ::idem::testing::register_function<__VA_ARGS__>(#Prefix, __FILE__, __LINE__)
