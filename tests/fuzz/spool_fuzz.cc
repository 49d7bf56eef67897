// Fuzz target: the worker's spool reader (worker/daemon/spool_file.h) on a damaged spool file, as a
// worker restarting after a crash, a full disk or a bad sector reads it. It returns the records
// before the damage and says where the damage is; it never allocates beyond its record bound.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "worker/daemon/spool_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::string error;
  const std::vector<spheret::worker::SpoolItem> items = spheret::worker::ParseSpool(bytes, &error);
  // What was read back writes out as a prefix-equivalent spool that reads back the same.
  std::string rewritten;
  for (const spheret::worker::SpoolItem& item : items) {
    rewritten += spheret::worker::SpoolRecord(item);
  }
  std::string again_error;
  if (spheret::worker::ParseSpool(rewritten, &again_error).size() != items.size()) std::abort();
  if (!again_error.empty()) std::abort();
  return 0;
}

// A spool of an event batch (metrics, a diag row, a done event, a checkpoint) and a Finish: the
// seed.
extern "C" int SpheretFuzzWriteSeed(const char* path) {
  spheret::worker::SpoolItem batch;
  batch.batch.set_trial_id(3);
  batch.batch.set_attempt(2);
  for (int step = 0; step < 3; ++step) {
    spheret::v1::MetricRow* row = batch.batch.add_metrics();
    row->set_name("train/loss");
    row->set_step(step);
    row->set_value(2.5 - 0.1 * step);
  }
  spheret::v1::DiagRow* diag = batch.batch.add_diags();
  diag->set_step(2);
  diag->set_layer(1);
  diag->set_sublayer("mlp");
  spheret::v1::DiagValue* value = diag->add_values();
  value->set_field("hidden_norm");
  value->set_value(1.0);
  spheret::v1::Event* done = batch.batch.add_other();
  done->set_json(R"({"type":"done","step":2})");
  done->set_seq(9);
  batch.batch.set_checkpoint_step(2);
  batch.batch.set_checkpoint_path("/runs/3/attempt-2/ckpt.pt");
  spheret::worker::SpoolItem finish;
  finish.is_finish = true;
  finish.finish.set_trial_id(3);
  finish.finish.set_attempt(2);
  finish.finish.set_worker_id("w1");
  FILE* out = std::fopen(path, "wb");
  if (out == nullptr) return 1;
  const std::string bytes =
      spheret::worker::SpoolRecord(batch) + spheret::worker::SpoolRecord(finish);
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), out) == bytes.size();
  return std::fclose(out) == 0 && written ? 0 : 1;
}
