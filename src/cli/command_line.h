#pragma once
// The front of the command line: each subcommand's usage line, `lockwarden help [SUBCOMMAND]`,
// and what is said when the parser refuses a command line (the mistake named, the
// subcommand's usage line, exit kExitUsage).

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace lw::cli {

// Gives app and each of its subcommands (add them first) its usage line(s) as the "Usage:" of
// its --help; docs/cli.md's synopsis shows the same lines.
void UseUsageLines(CLI::App& app);

// Adds `help [SUBCOMMAND]`, storing the subcommand named in *topic.
CLI::App* AddHelpCommand(CLI::App& app, std::string* topic);
// Prints the help of lockwarden (topic "") or of a subcommand on stdout: 0; an unknown
// subcommand is refused as the parser refuses one.
int RunHelp(CLI::App& app, const std::string& topic);

// What a parse failure of app says and exits with: help and version on stdout, exit 0; any other
// on stderr, naming the unknown subcommand (with the closest one), the unknown option or the
// missing argument, and the usage line of the subcommand: kExitUsage.
int ParseFailed(CLI::App& app, const CLI::ParseError& e);

// "lockwarden SUB: <message>", the usage line of SUB, and where its options are listed, on
// stderr; kExitUsage.
int UsageError(const std::string& subcommand, const std::string& message);

// For `lock` and `elect`: the positionals `label` (RESOURCE, NAME: described as `meaning`,
// stored in *name) and CMD (in *command). Everything after the name is the command, options
// included; `--` before it is optional.
void AddNameAndCommand(CLI::App* subcommand, const std::string& label, const std::string& meaning,
                       std::string* name, std::vector<std::string>* command);
// The command as given, without the `--` before it; false (said as a usage error of
// subcommand) when no command is left, or when it starts with an option (`lock r --ttl 5s --
// cmd`: an option of lockwarden's put after the name `label`, never a command's name).
bool CommandGiven(const std::string& subcommand, const std::string& label,
                  std::vector<std::string>* command);

// For `lock`: the resources and the command, from the name after the options (`first`) and the
// words after it (*command, without a leading `--` on return). `lock R1 R2... -- CMD` names
// several resources: every word before the first `--`. With no `--`, or one right after
// `first`, the only resource is `first`. A command line both readings fit, when the word after
// `first` names a command (`lock r git checkout -- f`), is refused unless `all` (--all) says
// it names resources. false when refused (said as a usage error of `lock`).
bool ResourcesGiven(const std::string& first, bool all, std::vector<std::string>* command,
                    std::vector<std::string>* resources);

}  // namespace lw::cli
