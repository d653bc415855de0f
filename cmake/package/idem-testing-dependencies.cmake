# What idem::testing links: GoogleTest (the imported target GTest::gtest, from GoogleTest's own
# CMake config or CMake's FindGTest). Read by idem's own build (cmake/IdemTesting.cmake) and,
# installed, by idemConfig.cmake when a consumer asks for the testing component. Sets
# IDEM_TESTING_MISSING to what to install, or to "" when it was found. The kit needs GoogleTest
# 1.10 or later (::testing::RegisterTest).
set(IDEM_TESTING_MISSING "")
if(NOT TARGET GTest::gtest)
  find_package(GTest QUIET)
endif()
if(NOT TARGET GTest::gtest)
  set(IDEM_TESTING_MISSING "GoogleTest 1.10 or later (Debian/Ubuntu: libgtest-dev)")
endif()
