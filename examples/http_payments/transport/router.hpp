#pragma once
// The routes of a server: handlers written against cpp-httplib's Request and Response (what the
// payments service's routes take), chosen by method and a regular expression over the path, as
// cpp-httplib's own server chooses them. The transport reads the requests (Boost.Beast's parser)
// and writes the answers; cpp-httplib provides the types only.

#include <httplib.h>

#include <functional>
#include <regex>
#include <string>
#include <vector>

namespace transport {

class Router {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  /// `pattern` is matched against the whole path (the target without its query); its groups are
  /// the request's `matches`. The first route that matches answers.
  void get(const std::string& pattern, Handler handler);
  void post(const std::string& pattern, Handler handler);

  /// Answers `req` into `res`: its route's handler, 404 problem+json when no route matches, 500
  /// problem+json when the handler throws.
  void route(httplib::Request& req, httplib::Response& res) const;

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace transport
