// kysely-codegen requires `typescript` for its type-expression parser; the repository installs
// TypeScript as `typescript-7` (package.json: an alias keeps viem's optional peer from pulling it
// into production installs). This preload, used by scripts/db-types.ts only, resolves the one to
// the other. TypeScript 7 has no JavaScript API, so the parser falls back to the override text.
const Module = require('node:module');
const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  return resolve.call(this, request === 'typescript' ? 'typescript-7' : request, ...rest);
};
