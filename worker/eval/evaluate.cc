#include "worker/eval/evaluate.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>

#include "absl/strings/str_cat.h"
#include "base/path_under_root.h"
#include "base/status_macros.h"
#include "worker/text/jsonl.h"

namespace spheret::eval {
namespace {

using nlohmann::json;

json RequestJson(const Request& request, const Answer& answer) {
  json out;
  if (request.type == RequestType::kLoglikelihood) {
    out["request_type"] = "loglikelihood";
    out["arguments"] = {request.context, request.continuation};
    out["loglikelihood"] = answer.loglikelihood;
    out["is_greedy"] = answer.is_greedy;
  } else {
    out["request_type"] = "loglikelihood_rolling";
    out["arguments"] = {request.continuation};
    out["loglikelihood"] = answer.loglikelihood;
  }
  return out;
}

absl::Status ParseRequest(const json& line, Request* request) {
  if (!line.is_object()) return absl::InvalidArgumentError("not a JSON object");
  if (!line.contains("request_type") || !line["request_type"].is_string()) {
    return absl::InvalidArgumentError("missing string field 'request_type'");
  }
  const std::string type = line["request_type"].get<std::string>();
  const size_t arity = type == "loglikelihood" ? 2 : type == "loglikelihood_rolling" ? 1 : 0;
  if (arity == 0) {
    return absl::InvalidArgumentError("request_type '" + type +
                                      "' is not loglikelihood or loglikelihood_rolling");
  }
  const json* arguments = line.contains("arguments") ? &line["arguments"] : nullptr;
  bool ok = arguments != nullptr && arguments->is_array() && arguments->size() == arity;
  for (size_t i = 0; ok && i < arity; ++i) ok = (*arguments)[i].is_string();
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("field 'arguments' must be a list of ", arity,
                                                   " string", arity == 1 ? "" : "s", " for ",
                                                   type));
  }
  if (arity == 2) {
    *request = {RequestType::kLoglikelihood, (*arguments)[0].get<std::string>(),
                (*arguments)[1].get<std::string>()};
  } else {
    *request = {RequestType::kLoglikelihoodRolling, "", (*arguments)[0].get<std::string>()};
  }
  return absl::OkStatus();
}

absl::Status WriteDump(const std::string& path, const std::vector<const TaskSpec*>& tasks,
                       const std::vector<std::vector<TaskDoc>>& docs,
                       const std::vector<Answer>& answers) {
  std::ofstream out(path);
  if (!out) return absl::InvalidArgumentError("--dump-requests: cannot write " + path);
  size_t next = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    for (size_t d = 0; d < docs[t].size(); ++d) {
      for (size_t r = 0; r < docs[t][d].requests.size(); ++r) {
        json line = RequestJson(docs[t][d].requests[r], answers[next++]);
        line["task"] = tasks[t]->name;
        line["doc"] = d;
        line["index"] = r;
        out << line.dump() << '\n';
      }
    }
  }
  out.flush();
  if (!out) return absl::InvalidArgumentError("--dump-requests: cannot write " + path);
  return absl::OkStatus();
}

}  // namespace

absl::Status Evaluate(const EvalOptions& options, int64_t* step, std::vector<TaskResult>* results) {
  std::string data_dir = options.data_dir;
  if (!options.scorer.data_root.empty()) {
    SPHERET_ASSIGN_OR_RETURN(data_dir, ResolveUnderRoot("--data", options.data_dir, "--data-root",
                                                        options.scorer.data_root));
  }
  absl::StatusOr<std::vector<const TaskSpec*>> tasks = FindTasks(options.tasks);
  if (!tasks.ok()) return tasks.status();
  std::vector<std::vector<TaskDoc>> docs(tasks->size());
  std::vector<Request> requests;
  for (size_t t = 0; t < tasks->size(); ++t) {
    SPHERET_RETURN_IF_ERROR(LoadTaskDocs(*(*tasks)[t], data_dir, &docs[t]));
    for (const TaskDoc& doc : docs[t]) {
      requests.insert(requests.end(), doc.requests.begin(), doc.requests.end());
    }
  }
  absl::StatusOr<std::unique_ptr<Scorer>> scorer = Scorer::Open(options.scorer);
  if (!scorer.ok()) return scorer.status();
  *step = (*scorer)->step();
  if (options.expect_step >= 0 && options.expect_step != *step) {
    return absl::FailedPreconditionError(
        absl::StrCat("--step ", options.expect_step, ": the checkpoint of ", options.scorer.run_dir,
                     " is step ", *step, " (a run keeps its latest)"));
  }
  if (options.scorer.progress != nullptr) {
    *options.scorer.progress << "spheret-lm: eval of step " << *step << ": " << requests.size()
                             << " requests from " << tasks->size() << " tasks" << std::endl;
  }
  std::vector<Answer> answers;
  SPHERET_RETURN_IF_ERROR((*scorer)->Score(requests, &answers));
  if (!options.dump_requests.empty()) {
    SPHERET_RETURN_IF_ERROR(WriteDump(options.dump_requests, *tasks, docs, answers));
  }
  size_t next = 0;
  for (size_t t = 0; t < tasks->size(); ++t) {
    std::vector<std::vector<Answer>> per_doc;
    for (const TaskDoc& doc : docs[t]) {
      per_doc.emplace_back(answers.begin() + next, answers.begin() + next + doc.requests.size());
      next += doc.requests.size();
    }
    results->push_back(
        {(*tasks)[t]->name, ScoreTask(*(*tasks)[t], docs[t], per_doc, options.bootstrap_iters)});
  }
  return absl::OkStatus();
}

absl::Status ScoreRequestsFile(const ScorerOptions& options, const std::string& requests_path,
                               std::ostream& out) {
  std::ifstream in(requests_path);
  if (!in) return absl::InvalidArgumentError("cannot read " + requests_path);
  std::vector<json> lines;
  std::vector<Request> requests;
  train::JsonlReader reader(&in, requests_path, train::kDefaultMaxJsonlLineBytes);
  std::string text;
  for (bool done = false;;) {
    SPHERET_RETURN_IF_ERROR(reader.Next(&text, &done));
    if (done) break;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    absl::Status status = train::CheckJsonlObject(text);  // says why a line is not an object
    json line = status.ok() ? json::parse(text, nullptr, false) : json();
    Request request;
    if (status.ok()) status = ParseRequest(line, &request);
    if (!status.ok())
      return absl::InvalidArgumentError(reader.Where() + std::string(status.message()));
    lines.push_back(std::move(line));
    requests.push_back(std::move(request));
  }
  absl::StatusOr<std::unique_ptr<Scorer>> scorer = Scorer::Open(options);
  if (!scorer.ok()) return scorer.status();
  std::vector<Answer> answers;
  SPHERET_RETURN_IF_ERROR((*scorer)->Score(requests, &answers));
  for (size_t i = 0; i < lines.size(); ++i) {
    const json answered = RequestJson(requests[i], answers[i]);
    lines[i]["loglikelihood"] = answered["loglikelihood"];
    if (answered.contains("is_greedy")) lines[i]["is_greedy"] = answered["is_greedy"];
    out << lines[i].dump() << '\n';
  }
  out.flush();
  return absl::OkStatus();
}

}  // namespace spheret::eval
