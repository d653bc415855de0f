#include "sqlite/file_writers.hpp"

#include <filesystem>
#include <system_error>

namespace idem::sql {

// Absolute first, since weakly_canonical leaves a relative path whose first part does not exist
// relative; then the existing part resolved.
std::string file_identity(const std::string& path) {
  if (path.rfind("file:", 0) == 0) return path;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  if (error) return path;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(absolute, error);
  return error ? absolute.lexically_normal().string() : canonical.string();
}

bool private_database(const std::string& path) {
  return path.empty() || path == ":memory:" || path.rfind("file::memory:", 0) == 0;
}

}  // namespace idem::sql
