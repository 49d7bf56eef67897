// The zero-shot tasks of the paper's Tables 4-5, built exactly as lm-evaluation-harness 0.4.13
// builds them (its task YAMLs and utils are the spec): each document of a task's JSONL or Parquet
// export becomes the harness's requests, word for word, and what its metrics need. No torch here.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace spheret::eval {

enum class RequestType { kLoglikelihood, kLoglikelihoodRolling };

// A harness request. loglikelihood: log P(continuation | context) and whether the continuation
// is the greedy one. loglikelihood_rolling: log P(text), `continuation` holding the text.
struct Request {
  RequestType type = RequestType::kLoglikelihood;
  std::string context, continuation;
};

struct Answer {
  double loglikelihood = 0;
  bool is_greedy = false;
};

enum class OutputType { kMultipleChoice, kLoglikelihood, kLoglikelihoodRolling };

// One document: its requests (in the harness's order) and what its metrics need.
struct TaskDoc {
  std::vector<Request> requests;
  int64_t gold = 0;                    // multiple choice: the right choice; -100 when out of range
  std::vector<double> choice_lengths;  // multiple choice: len() of each choice, for acc_norm
  int64_t words = 0, bytes = 0;        // rolling: of the page before detokenizing
};

struct TaskSpec {
  std::string name;
  std::string dataset;  // the Hugging Face dataset (and config) the export comes from
  std::string split;    // the file read: DATA/<name>/<split>.jsonl or .parquet
  OutputType output = OutputType::kMultipleChoice;
  std::vector<std::string> metrics;  // the harness's metric names, in its order
  std::string fields;                // the fields it reads, for messages
  absl::Status (*build)(const nlohmann::json& doc, TaskDoc* out) = nullptr;
};

// The eleven tasks, in the paper's column order.
const std::vector<TaskSpec>& AllTasks();
std::vector<std::string> AllTaskNames();
// The tasks named (comma lists allowed); InvalidArgument naming an unknown one and the known.
absl::StatusOr<std::vector<const TaskSpec*>> FindTasks(const std::vector<std::string>& names);
// DATA/<task>/<split>.parquet when that file exists, else DATA/<task>/<split>.jsonl.
std::string TaskFile(const TaskSpec& task, const std::string& data_dir);
// Reads a task's documents from its JSONL file (a JSON object per line) or its Parquet file (a row
// per document, read as the JSON object its JSONL line would be: worker/text/parquet.h); the same
// document gives the same TaskDoc either way. Errors name the file, the line (the row group and
// row) and the field; NotFound when neither file exists; InvalidArgument when both do.
absl::Status LoadTaskDocs(const TaskSpec& task, const std::string& data_dir,
                          std::vector<TaskDoc>* docs);

}  // namespace spheret::eval
