#include "shim/node/containerd_config.h"

#include <toml++/toml.h>

#include <sstream>

#include "common/error.h"
#include "common/version.h"

namespace nvproxy::node {

namespace {

// The CRI runtime plugin's table: its name changed with config version 3 (containerd 2.0).
const char* cri_plugin(long version) {
  return version >= 3 ? "io.containerd.cri.v1.runtime" : "io.containerd.grpc.v1.cri";
}

std::string where(const toml::node& n) {
  const auto& b = n.source().begin;
  return b.line ? " (line " + std::to_string(b.line) + ")" : "";
}

// t[key] as a table, created when absent; another kind of value there is refused, naming the path.
toml::table& table_at(toml::table& t, const std::string& key, const std::string& path, const std::string& origin) {
  if (toml::node* n = t.get(key)) {
    if (toml::table* sub = n->as_table()) return *sub;
    std::ostringstream kind;
    kind << n->type();
    throw Error(Code::InvalidArgument, origin + ": " + path + where(*n) + " is a " + kind.str() + ", not a table");
  }
  return *t.insert(key, toml::table{}).first->second.as_table();
}

toml::table parse_toml(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw Error(Code::InvalidArgument,
                origin + ":" + std::to_string(b.line) + ":" + std::to_string(b.column) + ": " + std::string(e.description()));
  }
}

std::string normal_form(const toml::table& doc) {
  if (doc.empty()) return "";
  // No indentation (containerd's own output indents every level), double-quoted strings.
  const auto flags =
      toml::toml_formatter::default_flags & ~toml::format_flags::allow_literal_strings & ~toml::format_flags::indent_sub_tables;
  std::ostringstream os;
  os << toml::toml_formatter{doc, flags} << "\n";
  return os.str();
}

// The config's version; an empty file gets the one the containerd reads (3 for 2.x, 2 for 1.x).
long config_version(toml::table& doc, const std::string& origin, int major) {
  toml::node* v = doc.get("version");
  if (!v) {
    if (!doc.empty())
      throw Error(Code::InvalidArgument,
                  origin +
                      " has no `version`: containerd reads it as a version 1 config, which this command does not edit "
                      "(start from `containerd config default`, or convert it to version 2)");
    if (major == 0)
      throw Error(Code::InvalidArgument, origin + " is empty and the containerd version is unknown: give --containerd-version");
    const long version = major >= 2 ? 3 : 2;
    doc.insert("version", version);
    return version;
  }
  auto n = v->value<int64_t>();
  if (!n || !v->is_integer()) throw Error(Code::InvalidArgument, origin + ": `version`" + where(*v) + " is not an integer");
  if (*n < 2 || *n > 4)
    throw Error(Code::InvalidArgument, origin + ": config version " + std::to_string(*n) +
                                           " is not one this command edits (2: containerd 1.6 to 2.x; 3 and 4: 2.x)");
  if (*n >= 3 && major == 1)
    throw Error(Code::InvalidArgument,
                origin + ": config version " + std::to_string(*n) +
                    " is for containerd 2.x; containerd 1.x reads version 2 (start from its `containerd config default`)");
  return static_cast<long>(*n);
}

// Adds the runtime to `doc`. `ensure_default`: a version 2 main file, where containerd 1.x replaces
// the whole runtimes table with the file's, so CRI fails to load unless its default runtime is there.
void add_runtime(toml::table& doc, long version, const std::string& origin, const RuntimeEntry& e, bool ensure_default,
                 std::vector<std::string>& notes) {
  const std::string plugin = cri_plugin(version);
  std::string path = "plugins";
  toml::table& plugins = table_at(doc, "plugins", path, origin);
  path += ".\"" + plugin + "\"";
  toml::table& cri = table_at(plugins, plugin, path, origin);
  path += ".containerd";
  toml::table& ctd = table_at(cri, "containerd", path, origin);
  path += ".runtimes";
  toml::table& runtimes = table_at(ctd, "runtimes", path, origin);

  if (ensure_default) {
    const std::string def = ctd["default_runtime_name"].value_or(std::string("runc"));
    if (def == "runc" && !runtimes.contains("runc")) {
      toml::table runc;
      runc.insert("runtime_type", "io.containerd.runc.v2");
      runtimes.insert("runc", std::move(runc));
      notes.push_back(
          "added the runc entry: containerd 1.x replaces its runtimes table with the file's, and CRI does not "
          "load without its default runtime (runc)");
    }
  }

  toml::table& rt = table_at(runtimes, e.name, path + "." + e.name, origin);
  rt.insert_or_assign("runtime_type", kRuntimeType);
  // CDI device requests that a device plugin attached to the container reach the shim.
  toml::node* ann = rt.get("container_annotations");
  if (!ann) {
    rt.insert("container_annotations", toml::array{kCdiAnnotations});
  } else if (toml::array* a = ann->as_array()) {
    bool has = false;
    for (const auto& item : *a) has = has || item.value<std::string>() == kCdiAnnotations;
    if (!has) a->push_back(kCdiAnnotations);
  } else {
    throw Error(Code::InvalidArgument,
                origin + ": " + path + "." + e.name + ".container_annotations" + where(*ann) + " is not an array");
  }
  if (!e.shim_config.empty())
    table_at(rt, "options", path + "." + e.name + ".options", origin).insert_or_assign("ConfigPath", e.shim_config);
  if (e.set_as_default) ctd.insert_or_assign("default_runtime_name", e.name);

  if (const toml::array* disabled = doc["disabled_plugins"].as_array()) {
    for (const auto& item : *disabled) {
      const auto name = item.value<std::string>();
      if (name == "cri" || name == plugin || name == "io.containerd.grpc.v1.cri")
        notes.push_back("disabled_plugins holds \"" + *name +
                        "\": CRI (Kubernetes, crictl) is off on this node; remove it "
                        "there for the RuntimeClass to work (ctr, nerdctl and Docker do not need CRI)");
    }
  }
}

TomlEdit edit_doc(const std::string& text, const std::string& origin, int major, const RuntimeEntry& e, bool ensure_default,
                  std::optional<long> version_for_empty = std::nullopt) {
  if (e.name.empty()) throw Error(Code::InvalidArgument, "the runtime name is empty");
  toml::table doc = parse_toml(text, origin);
  TomlEdit out;
  out.before = normal_form(doc);
  const toml::table original = doc;
  if (version_for_empty && doc.empty()) doc.insert("version", *version_for_empty);
  out.version = config_version(doc, origin, major);
  add_runtime(doc, out.version, origin, e, ensure_default && out.version == 2, out.notes);
  out.changed = doc != original;
  out.after = out.changed ? normal_form(doc) : out.before;
  if (!out.changed) out.notes.clear();
  return out;
}

}  // namespace

TomlEdit edit_containerd_config(const std::string& text, const std::string& origin, int containerd_major,
                                const RuntimeEntry& entry) {
  return edit_doc(text, origin, containerd_major, entry, true);
}

DropInEdit edit_containerd_dropin(const std::string& main_text, const std::filesystem::path& main_path, int containerd_major,
                                  const RuntimeEntry& entry, const ReadText& read) {
  const std::string origin = main_path.string();
  if (containerd_major == 1)
    throw Error(Code::InvalidArgument,
                "--drop-in needs containerd 2.x: containerd 1.x's imports replace a whole plugin section, so a drop-in holding "
                "the runtime would discard the rest of the CRI settings (containerd#5837); run without --drop-in to edit " +
                    origin + " itself");
  toml::table doc = parse_toml(main_text, origin);
  DropInEdit out;
  out.main.before = normal_form(doc);
  const toml::table original = doc;
  out.main.version = config_version(doc, origin, containerd_major);

  const std::filesystem::path base = main_path.parent_path();
  std::optional<std::filesystem::path> dir;
  toml::node* imports = doc.get("imports");
  if (imports && !imports->is_array())
    throw Error(Code::InvalidArgument, origin + ": imports" + where(*imports) + " is not an array");
  if (imports) {
    for (const auto& item : *imports->as_array()) {
      const auto s = item.value<std::string>();
      if (!s || s->size() < 7 || s->substr(s->size() - 7) != "/*.toml") continue;
      std::filesystem::path d = std::filesystem::path(*s).parent_path();
      if (d.string().find_first_of("*?[") != std::string::npos) continue;
      dir = d.is_absolute() ? d : base / d;
      break;
    }
  }
  if (!dir) {
    dir = base / "conf.d";
    if (!imports) imports = doc.insert("imports", toml::array{}).first->second.as_array();
    imports->as_array()->push_back((*dir / "*.toml").string());
    out.main.notes.push_back("added " + (*dir / "*.toml").string() + " to imports");
  }
  out.main.changed = doc != original;
  out.main.after = out.main.changed ? normal_form(doc) : out.main.before;

  out.path = *dir / (entry.name + ".toml");
  const std::optional<std::string> existing = read(out.path);
  out.dropin = edit_doc(existing.value_or(""), out.path.string(), containerd_major, entry, false, out.main.version);
  if (out.dropin.version != out.main.version)
    out.dropin.notes.push_back("the drop-in is version " + std::to_string(out.dropin.version) + ", the main file version " +
                               std::to_string(out.main.version) + "; containerd migrates each");
  return out;
}

std::optional<Version> containerd_version(const std::string& version_output) {
  // "containerd <module path> <version> <revision>": the module path may end in /v2, so the version
  // is the third word; upstream builds print it with a "v".
  std::istringstream is(version_output);
  std::string w, third;
  for (int i = 0; i < 3 && is >> w; ++i) third = w;
  if (!third.empty() && third.front() == 'v') third.erase(0, 1);
  return parse_version(third);
}

int containerd_major(const std::string& version_output) {
  auto v = containerd_version(version_output);
  return v ? v->major : 0;
}

}  // namespace nvproxy::node
