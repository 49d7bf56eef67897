// Method `scripted`: a researcher's deep connection as a TorchScript file (docs/connections.md,
// "Your own connection"). Three config keys carry it:
//
//   connection         the file: a path, or a name under data_root (as `dataset` is found)
//   connection_sha256  the SHA-256 the file must have; "" = not checked. The trainer sets it to
//                      the loaded file's, so checkpoints record which file a run trained with
//   connection_script  the file itself, base64; when set, no file is read. The coordinator fills
//                      it (and connection_sha256) from the file `spheret submit` sends with the
//                      sweep, so the bytes are part of the trial's config and identity.
//
// Torch-free: the bytes are checked and hashed here; worker/nn/scripted_connection.h loads them.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "config/train_config.h"

namespace spheret {

// The largest connection file: a connection's code and its initial parameters, not a model.
inline constexpr size_t kMaxConnectionScriptBytes = 256 << 10;

// FinalizeConfig's checks of the three keys: `connection` is set exactly when the method is
// scripted (connection_sha256 and connection_script only with it); connection_sha256 is "" or 64
// lowercase hex digits; connection_script is "" or base64 of at most kMaxConnectionScriptBytes
// bytes whose SHA-256 is connection_sha256 when that is set. InvalidArgument naming the key.
absl::Status CheckConnectionScriptKeys(const TrainConfig& config);

// For method scripted: the script's bytes into config->connection.script (decoded
// connection_script, else the file `connection`), and its SHA-256 into config->connection_sha256.
// FailedPrecondition naming both hashes when connection_sha256 was set to another; InvalidArgument
// naming the path when the file cannot be read or is over the limit. Other methods: OK, nothing
// done. Call it after FinalizeConfig, before a model is built.
absl::Status LoadConnectionScript(TrainConfig* config);

// The stem of a connection file's name, which labels a scripted trial's rows ("rezero" for
// "examples/connections/rezero.pt"); "" for "".
std::string ConnectionStem(std::string_view connection);

}  // namespace spheret
