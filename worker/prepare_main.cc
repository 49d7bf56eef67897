// spheret-prepare: `spheret-lm prepare` without LibTorch. The same options, files, events and
// errors (worker/lm_prepare.h, one implementation), in a program that links only the torch-free
// text pipeline, so it starts without LibTorch's operator registration (0.35 s of a 64 MB
// `prepare --gpt2` in spheret-lm).
//
//   spheret-prepare --builtin fortunes --out data/fortunes
//   spheret-prepare --input corpus/ --out data/mycorpus [--gpt2 gpt2-tokenizer/]
//                   [--text-field text] [--threads N] [--val-fraction F] [--split-seed S]
//                   [--max-line-bytes N]
//
// Exit codes as spheret-lm's: 0 done, 1 error (an "error" event on stdout names it), 2 bad command
// line.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "protocol/event_writer.h"
#include "protocol/trainer_events.h"
#include "worker/lm_fail.h"
#include "worker/lm_prepare.h"

int main(int argc, char** argv) {
  CLI::App app{
      "spheret-prepare: turn text into train.bin/val.bin/meta.json (spheret-lm prepare "
      "without LibTorch)"};
  spheret::lm::PrepareCommand prepare;
  prepare.program = "spheret-prepare";
  spheret::lm::AddPrepareOptions(&app, &prepare);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : spheret::protocol::kExitUsage;
  }
  spheret::protocol::EventWriter events(&std::cout);
  try {
    return spheret::lm::RunPrepare(prepare, events);
  } catch (const std::exception& e) {  // the standard library's, at the boundary
    return spheret::lm::Fail(events, e.what(), prepare.program);
  } catch (...) {
    return spheret::lm::Fail(events, "unknown exception", prepare.program);
  }
}
