// Paths a caller names that must stay inside a root folder (a model's or a task folder under
// spheret-lm's --data-root): "../../etc" or "/etc" leave it and are refused.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spheret {

// The folder `path` names: `path` itself when it is a folder inside `root` (relative to the
// current folder), else root/path (an absolute `path` stays itself). Inside means: both taken as
// absolute paths (against the current folder) with "." and ".." folded lexically, every component
// of the root begins the path (the root itself is inside). Symbolic links are not resolved: a link
// inside the root is its owner's doing, and a caller who only names paths cannot make one.
// InvalidArgument when the folder leaves `root`, naming `what` and `path` as given, `root_what`
// and the root, and where the path leads: "--data /etc is outside --data-root /srv/data (it
// leads to /etc); name a folder under it".
absl::StatusOr<std::string> ResolveUnderRoot(absl::string_view what, const std::string& path,
                                             absl::string_view root_what, const std::string& root);

}  // namespace spheret
