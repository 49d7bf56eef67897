// Test helpers: fetch a /metrics page over plain HTTP and run `promtool check metrics` on it.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace spheret::testing_util {

// The body of GET http://127.0.0.1:port/target (HTTP/1.0), or "" when it cannot be fetched.
inline std::string HttpGet(int port, const std::string& target) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  std::string response;
  if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

// The body of GET http://127.0.0.1:port/metrics, or "".
inline std::string FetchMetrics(int port) { return HttpGet(port, "/metrics"); }

// Runs `promtool check metrics` on `text` (written to `scratch_file`); returns its exit status
// and puts its output in `*report`.
inline int PromtoolCheck(const std::string& text, const std::string& scratch_file,
                         std::string* report) {
  FILE* out = std::fopen(scratch_file.c_str(), "w");
  if (out == nullptr) return -1;
  std::fputs(text.c_str(), out);
  std::fclose(out);
  const std::string command = "promtool check metrics < " + scratch_file + " 2>&1";
  FILE* promtool = popen(command.c_str(), "r");
  if (promtool == nullptr) return -1;
  char line[512];
  while (fgets(line, sizeof(line), promtool) != nullptr) *report += line;
  return pclose(promtool);
}

}  // namespace spheret::testing_util
