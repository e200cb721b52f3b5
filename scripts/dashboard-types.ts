/**
 * Generates dashboard/src/api/openapi.gen.ts from the web app's OpenAPI description, in the
 * `paths` shape openapi-fetch expects (the shape openapi-typescript emits). We do not use
 * openapi-typescript itself: it needs the TypeScript 5 compiler API and this project builds with
 * TypeScript 7 (docs/dashboard.md). The schemas our routes produce are plain JSON Schema (object,
 * array, enum, anyOf, nullable type arrays), which this file covers; anything else fails loudly.
 *
 *   npm run dashboard:types          rewrite the file
 *   npm run dashboard:types -- --check  exit 1 when the file is stale (test/dashboard/types.test.ts)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { webOpenApiDocument } from './openapi-doc.ts';

export const TYPES_FILE = resolve(import.meta.dirname, '../dashboard/src/api/openapi.gen.ts');

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  items?: Schema;
  enum?: unknown[];
  const?: unknown;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  nullable?: boolean;
};
type Operation = {
  parameters?: { in: string; name: string; required?: boolean; schema?: Schema }[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { content?: Record<string, { schema?: Schema }> }>;
};

const key = (k: string) => (/^[A-Za-z_$][\w$]*$/.test(k) || /^[1-9]\d*$/.test(k) ? k : JSON.stringify(k));
const pad = (depth: number) => '  '.repeat(depth);

export function typeOf(s: Schema | undefined, depth = 0): string {
  if (!s || Object.keys(s).length === 0) return 'unknown';
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (s.anyOf || s.oneOf) return `(${(s.anyOf ?? s.oneOf)!.map((x) => typeOf(x, depth)).join(' | ')})`;
  if (s.allOf) return `(${s.allOf.map((x) => typeOf(x, depth)).join(' & ')})`;
  const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : s.properties ? ['object'] : [];
  if (types.length === 0) return 'unknown';
  const one = (t: string): string => {
    switch (t) {
      case 'string':
        return 'string';
      case 'number':
      case 'integer':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'null':
        return 'null';
      case 'array':
        return `${wrap(typeOf(s.items, depth))}[]`;
      case 'object': {
        const props = Object.entries(s.properties ?? {});
        const req = new Set(s.required ?? []);
        const extra = s.additionalProperties;
        const lines = props.map(([k, v]) => `${pad(depth + 1)}${key(k)}${req.has(k) ? '' : '?'}: ${typeOf(v, depth + 1)};`);
        if (extra === true || (typeof extra === 'object' && extra !== null)) {
          lines.push(`${pad(depth + 1)}[key: string]: ${extra === true ? 'unknown' : typeOf(extra, depth + 1)};`);
        } else if (props.length === 0 && extra === undefined) {
          return 'Record<string, unknown>';
        }
        return lines.length ? `{\n${lines.join('\n')}\n${pad(depth)}}` : 'Record<string, never>';
      }
      default:
        throw new Error(`dashboard-types: unsupported schema type ${t}`);
    }
  };
  const out = types.map(one);
  return out.length === 1 ? out[0]! : out.join(' | ');
}
const wrap = (t: string) => (/^[\w.]+$/.test(t) || t.startsWith('{') || t.startsWith('(') ? t : `(${t})`);

function operation(op: Operation, depth: number): string {
  const p = pad(depth + 1);
  const groups: Record<string, string[]> = { query: [], path: [], header: [], cookie: [] };
  const required = new Set<string>();
  for (const prm of op.parameters ?? []) {
    groups[prm.in]?.push(`${pad(depth + 3)}${key(prm.name)}${prm.required ? '' : '?'}: ${typeOf(prm.schema, depth + 3)};`);
    if (prm.required) required.add(prm.in);
  }
  // a group whose parameters are all optional is itself optional (as openapi-typescript emits it)
  const params = Object.entries(groups)
    .map(([where, lines]) =>
      lines.length
        ? `${pad(depth + 2)}${where}${required.has(where) ? '' : '?'}: {\n${lines.join('\n')}\n${pad(depth + 2)}};`
        : `${pad(depth + 2)}${where}?: never;`,
    )
    .join('\n');
  const body = op.requestBody?.content
    ? `${p}requestBody${op.requestBody.required ? '' : '?'}: {\n${pad(depth + 2)}content: {\n${Object.entries(op.requestBody.content)
        .map(([type, c]) => `${pad(depth + 3)}${JSON.stringify(type)}: ${typeOf(c.schema, depth + 3)};`)
        .join('\n')}\n${pad(depth + 2)}};\n${p}};`
    : `${p}requestBody?: never;`;
  const responses = Object.entries(op.responses ?? {})
    .map(([status, r]) => {
      const content = r.content
        ? `{\n${Object.entries(r.content)
            .map(([type, c]) => `${pad(depth + 4)}${JSON.stringify(type)}: ${typeOf(c.schema, depth + 4)};`)
            .join('\n')}\n${pad(depth + 3)}}`
        : 'never';
      return `${pad(depth + 2)}${key(status)}: {\n${pad(depth + 3)}headers: { [name: string]: unknown };\n${pad(depth + 3)}content: ${content};\n${pad(depth + 2)}};`;
    })
    .join('\n');
  return `{\n${p}parameters: {\n${params}\n${p}};\n${body}\n${p}responses: {\n${responses}\n${p}};\n${pad(depth)}}`;
}

export function generate(doc: { paths: Record<string, Record<string, Operation>> }): string {
  const methods = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
  const paths = Object.entries(doc.paths)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([path, item]) => {
      const ops = methods.map((m) => `${pad(2)}${m}: ${item[m] ? operation(item[m], 2) : 'never'};`).join('\n');
      return `${pad(1)}${JSON.stringify(path)}: {\n${pad(2)}parameters: { query?: never; header?: never; path?: never; cookie?: never };\n${ops}\n${pad(1)}};`;
    })
    .join('\n');
  return `// Generated by scripts/dashboard-types.ts from the web app's OpenAPI description. Do not edit:\n// run \`npm run dashboard:types\` after changing a route (a test fails when this file is stale).\n/* eslint-disable */\nexport interface paths {\n${paths}\n}\n`;
}

if (import.meta.main) {
  const text = generate((await webOpenApiDocument()) as never);
  if (process.argv.includes('--check')) {
    const current = readFileSync(TYPES_FILE, 'utf8');
    if (current !== text) {
      console.error(`${TYPES_FILE} is stale: run npm run dashboard:types`);
      process.exit(1);
    }
  } else {
    writeFileSync(TYPES_FILE, text);
    console.log(`wrote ${TYPES_FILE}`);
  }
}
