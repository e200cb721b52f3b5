/**
 * docs/openapi/{web,backend}.json are the OpenAPI descriptions both apps serve at /docs/json
 * (scripts/openapi-doc.ts). A change to any path, parameter, body, status or description that
 * leaves them as they were fails here with the command that rewrites them, so a refactoring that
 * claims no behaviour change is held to both documents, and a real change shows up as their diff.
 */
import { expect, it } from 'vitest';
import { REGENERATE_OPENAPI, staleOpenApiFiles } from '../../scripts/openapi-doc.ts';

it(`docs/openapi/*.json are what both apps serve at /docs/json (run ${REGENERATE_OPENAPI} and review the diff when this fails)`, async () => {
  expect(await staleOpenApiFiles()).toEqual([]);
}, 60_000);
