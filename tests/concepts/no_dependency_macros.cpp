// Must compile: a consumer that includes idem's headers sees none of xxhash's configuration
// macros, so its own #include <xxhash.h> (or any other library's) behaves as it would without
// idem. XXH_INLINE_ALL would also rename the XXH3 entry points to XXH_INLINE_* macros.

#include <idem/core.hpp>
#include <idem/idem.hpp>

#if defined(XXH_INLINE_ALL) || defined(XXH_PRIVATE_API) || defined(XXH_IMPLEMENTATION)
#error "an idem header defines XXH_INLINE_ALL, XXH_PRIVATE_API or XXH_IMPLEMENTATION"
#endif
#if defined(XXH_STATIC_LINKING_ONLY) || defined(XXH_NAMESPACE)
#error "an idem header defines XXH_STATIC_LINKING_ONLY or XXH_NAMESPACE"
#endif
#if defined(XXH3_64bits) || defined(XXH3_128bits)
#error "an idem header renames xxhash's functions (XXH_INLINE_ALL)"
#endif

int main() { return idem::detail::hash_bytes("k") == 0 ? 1 : 0; }
