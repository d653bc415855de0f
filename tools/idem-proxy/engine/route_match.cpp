#include "route_match.hpp"

namespace idem::proxy {

namespace {

bool path_matches(std::string_view pattern, std::string_view path) noexcept {
  if (pattern.ends_with("/*")) {
    return path.starts_with(pattern.substr(0, pattern.size() - 1));
  }
  return pattern == path;
}

}  // namespace

const Route* match_route(const std::vector<Route>& routes, std::string_view method,
                         std::string_view path) noexcept {
  for (const Route& route : routes) {
    if ((route.method == "*" || route.method == method) && path_matches(route.path, path)) {
      return &route;
    }
  }
  return nullptr;
}

}  // namespace idem::proxy
