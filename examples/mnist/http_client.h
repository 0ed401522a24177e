#pragma once
// A minimal HTTP/1.1 client for plain http:// URLs over POSIX sockets: one GET per connection, enough to fetch
// a file from a mirror or from a local test server. No TLS (download.h hands https:// to curl or wget), no
// redirects, no proxies, no compression.
#include <cstddef>
#include <functional>
#include <string>

namespace mnist {

struct Url {
  std::string scheme;  ///< "http" or "https", lowercase
  std::string host;    ///< without the brackets of an IPv6 literal
  std::string port;    ///< decimal; 80 or 443 when the URL names none
  std::string target;  ///< path and query, at least "/"
};

/// Splits an absolute http:// or https:// URL (no user info, no fragment). Throws minidl::ValueError naming
/// the URL and what is wrong with it.
Url parse_url(const std::string& url);

/// Receives a response body piece by piece as it arrives.
using BodySink = std::function<void(const char* data, std::size_t size)>;

/// GETs an http:// URL and passes the body to `sink`. Throws minidl::IOError naming the URL when the host
/// cannot be resolved or reached, the server answers anything but 200, the response is malformed, or the
/// connection breaks, stays silent for `timeout_s` seconds, or ends before the whole body arrived;
/// minidl::ValueError for a malformed or non-http:// URL.
void http_get(const std::string& url, const BodySink& sink, int timeout_s = 60);

/// http_get's second half: reads one HTTP/1.x response from the connected stream socket `fd` and passes its
/// body (Content-Length, chunked, or up to the end of the connection) to `sink`. Separate so that tests can
/// feed it crafted responses. `url` names the request in error messages.
void read_http_response(int fd, const std::string& url, const BodySink& sink);

}  // namespace mnist
