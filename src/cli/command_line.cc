#include "cli/command_line.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "core/closest_name.h"

namespace lw::cli {
namespace {

// Each subcommand's usage line(s); "" is lockwarden's own. docs/cli.md's synopsis shows these
// lines (tests/integration/cli_help_test.cc checks that it does).
const std::map<std::string, std::vector<std::string>>& UsageLines() {
  static const std::map<std::string, std::vector<std::string>> lines = {
      {"",
       {"lockwarden SUBCOMMAND [OPTIONS] [ARGS...]",
        "lockwarden --version | --help | help [SUBCOMMAND]"}},
      {"serve",
       {"lockwarden serve [--config FILE] [--socket PATH] --master URL [--master URL ...] "
        "[--check-config] [settings...]"}},
      {"lock",
       {"lockwarden lock [--ttl D] [--wait 30s] [--fence] [--permits K | --shared] "
        "[--socket PATH] [--config FILE] [--kill-grace 2s] [-E CODE] [-v] RESOURCE [--] CMD "
        "[ARGS...]",
        "lockwarden lock [OPTIONS] [--all] RESOURCE RESOURCE... -- CMD [ARGS...]"}},
      {"acquire",
       {"lockwarden acquire --detach [--ttl D] [--wait 30s] [--fence] [-E CODE] [--json] "
        "[--socket PATH] [--config FILE] RESOURCE"}},
      {"extend",
       {"lockwarden extend [--ttl D] [--json] [--socket PATH] [--config FILE] RESOURCE TOKEN"}},
      {"release", {"lockwarden release [--json] [--socket PATH] [--config FILE] RESOURCE TOKEN"}},
      {"elect",
       {"lockwarden elect --value V [--ttl D] [--wait D] [--socket PATH] [--config FILE] "
        "[--kill-grace 2s] [-E CODE] [-v] NAME [--] CMD [ARGS...]"}},
      {"leader", {"lockwarden leader [--json] [--watch] [--socket PATH] [--config FILE] NAME"}},
      {"status",
       {"lockwarden status [--socket PATH] [--config FILE] [--json]",
        "lockwarden status --fleet [--prefix P] [--json] [--socket PATH] [--admin URL] "
        "[--admin-token-file F] [--config FILE]"}},
      {"who",
       {"lockwarden who [--json] [--socket PATH] [--admin URL] [--admin-token-file F] "
        "[--config FILE] RESOURCE"}},
      {"upgrade", {"lockwarden upgrade [--socket PATH] [--config FILE] [--timeout 60s] [--json]"}},
      {"scan",
       {"lockwarden scan [--config FILE] [--master URL ...] [the settings a scan reads...] "
        "[--json]"}},
      {"help", {"lockwarden help [SUBCOMMAND]"}},
  };
  return lines;
}

// The usage lines of a subcommand ("": lockwarden's), the later ones indented under the first.
std::string UsageText(const std::string& subcommand) {
  const auto it = UsageLines().find(subcommand);
  if (it == UsageLines().end()) return "lockwarden " + subcommand + " [OPTIONS]";
  std::string text;
  for (const std::string& line : it->second) text += (text.empty() ? "" : "\n       ") + line;
  return text;
}

std::string NameOf(const CLI::App* app) {
  return app->get_parent() == nullptr ? "" : app->get_name();
}

class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string) const override {
    return "Usage: " + UsageText(NameOf(app)) + "\n";
  }
};

std::vector<std::string> SubcommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  return names;
}

// "; did you mean x?" for the name among `names` closest to `wrong`, or "".
std::string DidYouMean(const std::string& wrong, const std::vector<std::string>& names) {
  const std::vector<std::string_view> views(names.begin(), names.end());
  const auto best = ClosestName(wrong, views, std::max<size_t>(1, wrong.size() / 2));
  return best ? "; did you mean " + std::string(*best) + "?" : "";
}

int UnknownSubcommand(const CLI::App& app, const std::string& name) {
  std::string list;
  for (const std::string& sub : SubcommandNames(app)) list += (list.empty() ? "" : ", ") + sub;
  std::fprintf(stderr, "lockwarden: unknown subcommand \"%s\"%s\nsubcommands: %s\n", name.c_str(),
               DidYouMean(name, SubcommandNames(app)).c_str(), list.c_str());
  return UsageError("", "");
}

// Every option name of a subcommand, as typed: "--ttl", "-E".
std::vector<std::string> OptionNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& l : option->get_lnames()) names.push_back("--" + l);
    for (const std::string& s : option->get_snames()) names.push_back("-" + s);
  }
  return names;
}

// "unknown option --bogus; did you mean --ttl?", "unexpected argument x", or both.
std::string Unexpected(const CLI::App& app, const std::vector<std::string>& items) {
  std::string options, arguments, hint;
  for (const std::string& item : items) {
    if (item == "--") continue;  // the parser's record of a `--` it took
    std::string& list = item.size() > 1 && item[0] == '-' ? options : arguments;
    list += (list.empty() ? "" : " ") + item;
    if (&list == &options && hint.empty()) {
      hint = DidYouMean(item.substr(0, item.find('=')), OptionNames(app));
    }
  }
  std::string text;
  if (!options.empty()) text = "unknown option " + options + hint;
  if (!arguments.empty()) {
    text += (text.empty() ? "" : "; ") + std::string("unexpected argument ") + arguments;
  }
  return text;
}

}  // namespace

void UseUsageLines(CLI::App& app) {
  const auto formatter = std::make_shared<UsageFormatter>();
  app.formatter(formatter);
  for (CLI::App* sub : app.get_subcommands({})) sub->formatter(formatter);
}

CLI::App* AddHelpCommand(CLI::App& app, std::string* topic) {
  CLI::App* help = app.add_subcommand("help", "Show the help of lockwarden, or of one subcommand");
  help->add_option("SUBCOMMAND", *topic, "the subcommand to describe");
  return help;
}

int RunHelp(CLI::App& app, const std::string& topic) {
  const CLI::App* described = &app;
  if (!topic.empty()) {
    described = nullptr;
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->get_name() == topic) described = sub;
    }
    if (described == nullptr) return UnknownSubcommand(app, topic);
  }
  std::cout << described->get_formatter()->make_help(described, "lockwarden",
                                                     CLI::AppFormatMode::Normal);
  return 0;
}

int UsageError(const std::string& subcommand, const std::string& message) {
  const std::string who = subcommand.empty() ? "lockwarden" : "lockwarden " + subcommand;
  if (!message.empty()) std::fprintf(stderr, "%s: %s\n", who.c_str(), message.c_str());
  std::fprintf(stderr, "Usage: %s\nRun `lockwarden help%s` for %s.\n",
               UsageText(subcommand).c_str(), subcommand.empty() ? "" : (" " + subcommand).c_str(),
               subcommand.empty() ? "the subcommands" : "every option");
  return kExitUsage;
}

int ParseFailed(CLI::App& app, const CLI::ParseError& e) {
  if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
  std::vector<std::string> left = app.remaining();
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  if (parsed.empty()) {
    for (const std::string& item : left) {
      if (item.empty() || item[0] != '-') return UnknownSubcommand(app, item);
    }
    const std::string unexpected = Unexpected(app, left);
    return UsageError("", unexpected.empty() ? "a subcommand is required" : unexpected);
  }
  const CLI::App& sub = *parsed.front();
  if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {
    std::vector<std::string> all = sub.remaining();
    all.insert(all.end(), left.begin(), left.end());
    return UsageError(sub.get_name(), Unexpected(sub, all));
  }
  return UsageError(sub.get_name(), e.what());
}

void AddNameAndCommand(CLI::App* subcommand, const std::string& label, const std::string& meaning,
                       std::string* name, std::vector<std::string>* command) {
  subcommand->add_option(label, *name, meaning)->required();
  subcommand
      ->add_option("CMD", *command,
                   "the command and its arguments: everything after " + label +
                       " (options included; a `--` before it is optional)")
      ->required();
  subcommand->positionals_at_end();  // once the name is read, the rest is positional: CMD
}

bool CommandGiven(const std::string& subcommand, const std::string& label,
                  std::vector<std::string>* command) {
  if (!command->empty() && command->front() == "--") command->erase(command->begin());
  if (command->empty()) {
    UsageError(subcommand, "CMD is required");
    return false;
  }
  const std::string& first = command->front();
  if (first.size() > 1 && first[0] == '-') {
    UsageError(subcommand, "the command after " + label + " starts with " + first +
                               ", an option: everything after " + label +
                               " is the command, and lockwarden's own options go before " + label);
    return false;
  }
  return true;
}

namespace {

// Whether execvp would run `word`: a path to an executable file, or such a file in $PATH.
bool IsCommand(const std::string& word) {
  const auto runnable = [](const std::string& path) {
    struct stat st {};
    return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
  };
  if (word.empty()) return false;
  if (word.find('/') != std::string::npos) return runnable(word);
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t start = 0; start <= dirs.size();) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end == start ? "." : dirs.substr(start, end - start);
    if (runnable(dir + "/" + word)) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

bool ResourcesGiven(const std::string& first, bool all, std::vector<std::string>* command,
                    std::vector<std::string>* resources) {
  *resources = {first};
  const auto dashes = std::find(command->begin(), command->end(), "--");
  if (dashes == command->begin()) return true;  // `lock R -- CMD`: CommandGiven drops it
  if (dashes == command->end()) {
    if (!all) return true;  // `lock R CMD...`
    UsageError("lock", "--all needs `--` between the resources and the command: lockwarden "
                       "lock --all R1 R2... -- CMD");
    return false;
  }
  const std::vector<std::string> names(command->begin(), dashes);
  if (names.front().size() > 1 && names.front()[0] == '-') return true;  // CommandGiven refuses
  for (const std::string& name : names) {
    if (!name.empty() && name[0] == '-') {
      UsageError("lock", "the resources before `--` include " + name +
                             ", an option: lockwarden's own options go before the first resource");
      return false;
    }
  }
  if (!all && IsCommand(names.front())) {
    UsageError("lock", "\"" + names.front() + "\" after \"" + first + "\" is a command's name, so "
                       "this could run it under one lock or lock it as a second resource. To "
                       "run it: lockwarden lock " + first + " -- " + names.front() +
                       " ...; to lock several resources: lockwarden lock --all " + first + " " +
                       names.front() + " ... -- CMD");
    return false;
  }
  resources->insert(resources->end(), names.begin(), names.end());
  command->erase(command->begin(), dashes);  // leaves the `--` for CommandGiven
  return true;
}

}  // namespace lw::cli
