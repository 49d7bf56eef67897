// The connection files of a sweep (method `scripted`, config/connection_script.h): `spheret
// submit` reads each file a sweep's `connection` knob names and sends it with the sweep; the
// expansion puts the file into each trial's config as `connection_script` (base64) and
// `connection_sha256`, so the bytes are part of the trial's identity: a changed file makes new
// trials, the same file finds the trials it made.
//
// A trial may instead name a file under the workers' --data-root that was not sent, when its
// config sets `connection_sha256`: the trainer refuses a file of another hash.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace spheret {

struct SweepSpec;

// File name as the sweep writes it -> the file's bytes.
using ConnectionFiles = std::map<std::string, std::string>;

// Files sent with one sweep: 8 of kMaxConnectionScriptBytes and a sweep file of its 1 MiB limit fit
// in one request (server/rpc/services.h: kMaxReceiveBytes, 4 MiB).
inline constexpr size_t kMaxConnectionFiles = 8;

// Every value the spec's `connection` knob takes (base, axes' values and linked values), sorted,
// once each: the files `spheret submit` reads.
std::vector<std::string> ConnectionNames(const SweepSpec& spec);

// OK when `files` fits the limits: at most kMaxConnectionFiles, each at most
// kMaxConnectionScriptBytes, each name a knob's length; InvalidArgument naming the file otherwise.
absl::Status CheckConnectionFiles(const ConnectionFiles& files);

// For a trial `config` (one expanded grid point) that names a `connection`: sets
// connection_script and connection_sha256 from `files`. InvalidArgument naming the file when it
// was not sent and the config sets no connection_sha256, or when the config's connection_sha256
// is not the sent file's.
absl::Status AttachConnection(const ConnectionFiles& files, nlohmann::json* config);

}  // namespace spheret
