// The eleven tasks' table and their documents as lm-evaluation-harness 0.4.13 builds them: each
// task's doc_to_text / doc_to_choice / doc_to_target, read from a document's fields.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "protocol/trainer_events.h"
#include "worker/eval/tasks.h"
#include "worker/text/python_text.h"

namespace spheret::eval {
namespace {

using nlohmann::json;

// How a message shows a value of a task file: at most 80 bytes of it (a field may be megabytes,
// and the message travels in an error event whose line is bounded).
constexpr size_t kShownBytes = 80;
std::string Shown(const std::string& text) { return protocol::Excerpt(text, kShownBytes); }
std::string Shown(const json& value) {
  return Shown(value.dump(-1, ' ', false, json::error_handler_t::replace));
}

// The value at a dotted path ("choices.text"); InvalidArgument naming the field when absent.
absl::StatusOr<const json*> Field(const json& doc, const std::string& path) {
  const json* at = &doc;
  for (absl::string_view part : absl::StrSplit(path, '.')) {
    const std::string key(part);
    if (!at->is_object() || !at->contains(key)) {
      return absl::InvalidArgumentError(absl::StrCat("missing field '", path, "'"));
    }
    at = &(*at)[key];
  }
  return at;
}

absl::StatusOr<std::string> Text(const json& doc, const std::string& path) {
  absl::StatusOr<const json*> value = Field(doc, path);
  if (!value.ok()) return value.status();
  if (!(*value)->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", path, "' must be a string, got ", Shown(**value)));
  }
  return (*value)->get<std::string>();
}

absl::StatusOr<std::vector<std::string>> TextList(const json& doc, const std::string& path) {
  absl::StatusOr<const json*> value = Field(doc, path);
  if (!value.ok()) return value.status();
  std::vector<std::string> out;
  if ((*value)->is_array()) {
    for (const json& item : **value) {
      if (!item.is_string()) break;
      out.push_back(item.get<std::string>());
    }
  }
  if (!(*value)->is_array() || out.size() != (*value)->size() || out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", path, "' must be a non-empty list of strings"));
  }
  return out;
}

absl::StatusOr<int64_t> Integer(const json& doc, const std::string& path) {
  absl::StatusOr<const json*> value = Field(doc, path);
  if (!value.ok()) return value.status();
  if (!(*value)->is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", path, "' must be an integer, got ", Shown(**value)));
  }
  return (*value)->get<int64_t>();
}

// A label written as digits ("3"), as HellaSwag, SocialIQa and WinoGrande store theirs.
absl::StatusOr<int64_t> DigitLabel(const json& doc, const std::string& path) {
  absl::StatusOr<std::string> text = Text(doc, path);
  if (!text.ok()) return text.status();
  if (text->empty() || text->size() > 9 ||
      text->find_first_not_of("0123456789") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", path, "' must be a label of digits, got \"", Shown(*text), "\""));
  }
  return std::stoll(*text);
}

#define SPHERET_TAKE(lhs, expr)                 \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

// Multiple choice with the choices in the continuation: (context, " " + choice) each.
void ChoicesAfter(const std::string& context, const std::vector<std::string>& choices, int64_t gold,
                  TaskDoc* out) {
  for (const std::string& choice : choices) {
    out->requests.push_back({RequestType::kLoglikelihood, context, " " + choice});
    out->choice_lengths.push_back(static_cast<double>(PythonLength(choice)));
  }
  // The harness keeps an index below the number of choices and marks any other as none (-100).
  out->gold = gold < static_cast<int64_t>(choices.size()) ? gold : -100;
}

absl::StatusOr<int64_t> LabelIndex(const std::vector<std::string>& labels, const std::string& key,
                                   const std::string& field) {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == key) return static_cast<int64_t>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("field '", field, "' (\"", Shown(key), "\") is not among choices.label"));
}

absl::Status BuildArc(const json& doc, TaskDoc* out) {
  SPHERET_TAKE(question, Text(doc, "question"));
  SPHERET_TAKE(choices, TextList(doc, "choices.text"));
  SPHERET_TAKE(labels, TextList(doc, "choices.label"));
  SPHERET_TAKE(key, Text(doc, "answerKey"));
  SPHERET_TAKE(gold, LabelIndex(labels, key, "answerKey"));
  ChoicesAfter("Question: " + question + "\nAnswer:", choices, gold, out);
  return absl::OkStatus();
}

absl::Status BuildBoolq(const json& doc, TaskDoc* out) {
  SPHERET_TAKE(passage, Text(doc, "passage"));
  SPHERET_TAKE(question, Text(doc, "question"));
  SPHERET_TAKE(label, Integer(doc, "label"));
  ChoicesAfter(passage + "\nQuestion: " + question + "?\nAnswer:", {"no", "yes"}, label, out);
  return absl::OkStatus();
}

absl::Status BuildHellaswag(const json& doc, TaskDoc* out) {
  SPHERET_TAKE(activity, Text(doc, "activity_label"));
  SPHERET_TAKE(ctx_a, Text(doc, "ctx_a"));
  SPHERET_TAKE(ctx_b, Text(doc, "ctx_b"));
  SPHERET_TAKE(endings, TextList(doc, "endings"));
  SPHERET_TAKE(label, DigitLabel(doc, "label"));
  std::vector<std::string> choices;
  for (const std::string& ending : endings) choices.push_back(HellaswagPreprocess(ending));
  const std::string ctx = ctx_a + " " + PythonCapitalize(ctx_b);
  ChoicesAfter(HellaswagPreprocess(activity + ": " + ctx), choices, label, out);
  return absl::OkStatus();
}

absl::Status BuildLambada(const json& doc, TaskDoc* out) {
  SPHERET_TAKE(text, Text(doc, "text"));
  std::vector<std::string> words = SplitOnSpace(text);
  const std::string last = words.back();
  words.pop_back();
  out->requests.push_back({RequestType::kLoglikelihood, absl::StrJoin(words, " "), " " + last});
  return absl::OkStatus();
}

absl::Status BuildOpenbookqa(const json& doc, TaskDoc* out) {
  SPHERET_TAKE(stem, Text(doc, "question_stem"));
  SPHERET_TAKE(choices, TextList(doc, "choices.text"));
  SPHERET_TAKE(labels, TextList(doc, "choices.label"));
  SPHERET_TAKE(key, Text(doc, "answerKey"));
  SPHERET_TAKE(gold, LabelIndex(labels, PythonLStrip(key), "answerKey"));
  ChoicesAfter(stem, choices, gold, out);
  return absl::OkStatus();
}

absl::Status BuildPiqa(const json& doc, TaskDoc* out) {
  SPHERET_TAKE(goal, Text(doc, "goal"));
  SPHERET_TAKE(sol1, Text(doc, "sol1"));
  SPHERET_TAKE(sol2, Text(doc, "sol2"));
  SPHERET_TAKE(label, Integer(doc, "label"));
  ChoicesAfter("Question: " + goal + "\nAnswer:", {sol1, sol2}, label, out);
  return absl::OkStatus();
}

absl::Status BuildSciq(const json& doc, TaskDoc* out) {
  SPHERET_TAKE(support, Text(doc, "support"));
  SPHERET_TAKE(question, Text(doc, "question"));
  std::vector<std::string> choices;
  for (const char* field : {"distractor1", "distractor2", "distractor3", "correct_answer"}) {
    SPHERET_TAKE(choice, Text(doc, field));
    choices.push_back(std::move(choice));
  }
  ChoicesAfter(PythonLStrip(support) + "\nQuestion: " + question + "\nAnswer:", choices, 3, out);
  return absl::OkStatus();
}

absl::Status BuildSocialIqa(const json& doc, TaskDoc* out) {
  SPHERET_TAKE(context, Text(doc, "context"));
  SPHERET_TAKE(question, Text(doc, "question"));
  std::vector<std::string> choices;
  for (const char* field : {"answerA", "answerB", "answerC"}) {
    SPHERET_TAKE(choice, Text(doc, field));
    choices.push_back(std::move(choice));
  }
  SPHERET_TAKE(label, DigitLabel(doc, "label"));
  ChoicesAfter("Q: " + context + " " + question + "\nA:", choices, label - 1, out);
  return absl::OkStatus();
}

// WinoGrande's partial scoring: the choices fill the blank in the context, and the part of the
// sentence after the blank is the one continuation scored.
absl::Status BuildWinogrande(const json& doc, TaskDoc* out) {
  SPHERET_TAKE(sentence, Text(doc, "sentence"));
  SPHERET_TAKE(option1, Text(doc, "option1"));
  SPHERET_TAKE(option2, Text(doc, "option2"));
  SPHERET_TAKE(answer, Text(doc, "answer"));
  const size_t blank = sentence.find('_');
  if (blank == std::string::npos) {
    return absl::InvalidArgumentError("field 'sentence' has no blank '_'");
  }
  if (answer != "1" && answer != "2") {
    return absl::InvalidArgumentError("field 'answer' must be \"1\" or \"2\", got \"" +
                                      Shown(answer) + "\"");
  }
  const std::string target = " " + PythonStrip(sentence.substr(blank + 1));
  for (const std::string& option : {option1, option2}) {
    const std::string choice = sentence.substr(0, blank) + option;
    out->requests.push_back({RequestType::kLoglikelihood, choice, target});
    out->choice_lengths.push_back(static_cast<double>(PythonLength(choice)));
  }
  out->gold = answer == "1" ? 0 : 1;
  return absl::OkStatus();
}

absl::Status BuildWikitext(const json& doc, TaskDoc* out) {
  SPHERET_TAKE(page, Text(doc, "page"));
  out->requests.push_back({RequestType::kLoglikelihoodRolling, "", WikitextDetokenize(page)});
  out->words = WhitespaceSplitCount(page);
  out->bytes = static_cast<int64_t>(page.size());
  return absl::OkStatus();
}

#undef SPHERET_TAKE

}  // namespace

const std::vector<TaskSpec>& AllTasks() {
  using O = OutputType;
  const std::vector<std::string> kAcc = {"acc"}, kAccNorm = {"acc", "acc_norm"};
  const std::vector<std::string> kLambada = {"perplexity", "acc"};
  const std::vector<std::string> kWikitext = {"word_perplexity", "byte_perplexity",
                                              "bits_per_byte"};
  static const std::vector<TaskSpec> kTasks = {
      {"arc_easy", "allenai/ai2_arc ARC-Easy", "test", O::kMultipleChoice, kAccNorm,
       "question, choices.text, choices.label, answerKey", BuildArc},
      {"arc_challenge", "allenai/ai2_arc ARC-Challenge", "test", O::kMultipleChoice, kAccNorm,
       "question, choices.text, choices.label, answerKey", BuildArc},
      {"boolq", "aps/super_glue boolq", "validation", O::kMultipleChoice, kAcc,
       "passage, question, label", BuildBoolq},
      {"hellaswag", "Rowan/hellaswag", "validation", O::kMultipleChoice, kAccNorm,
       "activity_label, ctx_a, ctx_b, endings, label", BuildHellaswag},
      {"lambada_openai", "EleutherAI/lambada_openai default", "test", O::kLoglikelihood, kLambada,
       "text", BuildLambada},
      {"openbookqa", "allenai/openbookqa main", "test", O::kMultipleChoice, kAccNorm,
       "question_stem, choices.text, choices.label, answerKey", BuildOpenbookqa},
      {"piqa", "baber/piqa", "validation", O::kMultipleChoice, kAccNorm, "goal, sol1, sol2, label",
       BuildPiqa},
      {"sciq", "allenai/sciq", "test", O::kMultipleChoice, kAccNorm,
       "support, question, distractor1, distractor2, distractor3, correct_answer", BuildSciq},
      {"social_iqa", "lighteval/siqa", "validation", O::kMultipleChoice, kAcc,
       "context, question, answerA, answerB, answerC, label", BuildSocialIqa},
      {"winogrande", "allenai/winogrande winogrande_xl", "validation", O::kMultipleChoice, kAcc,
       "sentence, option1, option2, answer", BuildWinogrande},
      {"wikitext", "EleutherAI/wikitext_document_level wikitext-2-raw-v1", "test",
       O::kLoglikelihoodRolling, kWikitext, "page", BuildWikitext},
  };
  return kTasks;
}

}  // namespace spheret::eval
