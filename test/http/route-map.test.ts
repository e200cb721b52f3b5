/**
 * docs/routes.md lists every route both apps mount (scripts/route-map.ts): adding, moving or
 * removing a route without regenerating it fails here, with the command that fixes it.
 */
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { REGENERATE, ROUTES_FILE, routeMapMarkdown, routeRows } from '../../scripts/route-map.ts';

it(`docs/routes.md matches the routes both apps mount (run ${REGENERATE} when this fails)`, async () => {
  const rows = await routeRows();
  // every row names the route module that declares it, in the app that serves it
  for (const r of rows)
    expect(r.file, `${r.app} ${r.method} ${r.path}`).toMatch(new RegExp(`^src/http/${r.app}/routes/[\\w.-]+\\.routes\\.ts$`));
  const current = readFileSync(ROUTES_FILE, 'utf8');
  expect(current, `docs/routes.md is stale: run ${REGENERATE}`).toBe(routeMapMarkdown(rows));
}, 60_000);
