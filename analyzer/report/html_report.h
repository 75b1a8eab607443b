// The X-ray: one self-contained HTML page (docs/html-report.md) that draws a report's JSON document
// (`gpuxray.analyze` schema 2, or `gpuxray.plan`) with the script bundled from web/ at build time.
// Data, script and styles are inline, so the file opens from disk with no network.
#pragma once

#include <string>
#include <string_view>

#include "analyzer/report/report.h"

namespace gpuxray::report {

// Version of the page's data block (<script type="application/json" id="gpuxray-data">): bumped when
// the page's script can no longer read what an older gpuxray embedded, or the other way round.
inline constexpr int kHtmlDataVersion = 1;

// What of a report the page carries: the report as it is, except that per-device and per-rank arrays
// past what the page can show are left out (docs/html-report.md, "What a large run's page leaves
// out"), so that a 1024-rank run's page stays small; what was left out is listed in
// results.html_page.left_out, which the page shows. Cuts the report it is given in place.
Report fitForPage(Report report);

// Whether this gpuxray was built with the page's script (Node.js and web/'s packages at build time).
bool htmlReportAvailable();
// What to do when it was not: one line.
std::string htmlReportUnavailableReason();

// The page: `json_document` (one JSON document as renderJson writes it) inline with the script.
// Throws InputError when the script was not built in.
std::string renderHtml(std::string_view json_document, std::string_view title);

// Writes renderHtml's page to `path`; throws InputError naming the file when it cannot.
void writeHtml(const std::string& path, std::string_view json_document, std::string_view title);
// The page of fitForPage(report), its JSON streamed into the file as it is rendered (a large run's
// document is never held whole).
void writeHtml(const std::string& path, Report report, std::string_view title);

}  // namespace gpuxray::report
