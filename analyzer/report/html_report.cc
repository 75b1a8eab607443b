#include "analyzer/report/html_report.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "analyzer/errors.h"
#include "analyzer/report/report_bundle.h"

namespace gpuxray::report {
namespace {

// The document without the indentation renderJson gives it for people (a third of a large report),
// and safe inside <script>: its text ends at the first "</script" whatever the quoting, and "<!--"
// changes how the parser reads on. JSON holds '<' only inside strings, where \u003c means the same.
std::string compactJsonForScript(std::string_view json) {
  std::string compact;
  compact.reserve(json.size() / 2);
  bool in_string = false;
  bool escaped = false;
  for (char c : json) {
    if (in_string) {
      if (c == '<') compact += "\\u003c";
      else compact += c;
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '"') in_string = true;
    compact += c;
  }
  return compact;
}

std::string escapeHtmlText(std::string_view text) {
  std::string escaped;
  for (char c : text) {
    switch (c) {
      case '<':
        escaped += "&lt;";
        break;
      case '>':
        escaped += "&gt;";
        break;
      case '&':
        escaped += "&amp;";
        break;
      default:
        escaped += c;
    }
  }
  return escaped;
}

}  // namespace

bool htmlReportAvailable() {
  return !reportBundleScript().empty();
}

std::string htmlReportUnavailableReason() {
  return "this gpuxray was built without the HTML report's script (no Node.js or web/node_modules at build time); "
         "run scripts/setup.sh, which installs Node.js and web/'s packages (npm ci) and rebuilds";
}

std::string renderHtml(std::string_view json_document, std::string_view title) {
  if (!htmlReportAvailable()) throw InputError(htmlReportUnavailableReason());
  std::string page;
  page.reserve(json_document.size() + reportBundleScript().size() + 4096);
  page += "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += fmt::format("<title>{}</title>\n", escapeHtmlText(title));
  page += "</head>\n<body>\n<div id=\"app\"><noscript>This report needs JavaScript.</noscript></div>\n";
  page += fmt::format("<script type=\"application/json\" id=\"gpuxray-data\" data-version=\"{}\">", kHtmlDataVersion);
  page += compactJsonForScript(json_document);
  page += "</script>\n<script>\n";
  page += reportBundleScript();
  page += "\n</script>\n</body>\n</html>\n";
  return page;
}

void writeHtml(const std::string& path, std::string_view json_document, std::string_view title) {
  std::string page = renderHtml(json_document, title);
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (file) file.write(page.data(), static_cast<std::streamsize>(page.size()));
  if (file) file.close();
  if (!file) throw InputError(fmt::format("{}: cannot write the HTML report: {}", path, std::strerror(errno)));
}

}  // namespace gpuxray::report
