/** §4.16 hosting MCP gateway: informational endpoints (bearer key). */

import { z } from 'zod';
import {
  HOSTING_KEY_MIN_LENGTH,
  HOSTING_KEY_PREFIX,
  HOSTING_MCP_LINKS,
  type HostingMcpService,
  VALIDATE_ERRORS,
} from '../../../domains/hosting-mcp/index.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses, errorSchema, jsonBody } from '../../shared/schemas.ts';

const authErrors = { ...errorResponses(401, 403, 500) };
const tags = ['hosting-mcp'];
/** A 301 with an empty body; the target is in `Location`. */
const redirect = (location: string) => z.null().describe(`Moved permanently; \`Location: ${location}\``);
const category = z.object({ count: z.number(), tools: z.array(z.string()) });

const validateBody = jsonBody({
  api_key: z
    .unknown()
    .optional()
    .describe(`Hosting API key: required, starts with \`${HOSTING_KEY_PREFIX}\`, at least ${HOSTING_KEY_MIN_LENGTH} characters`),
  endpoint: z.unknown().optional().describe('MCP endpoint the client will use (optional; defaults to the hosted endpoint)'),
});
const validateFailure = z.object({ valid: z.literal(false), errors: z.array(z.string()), help: z.string() });

/** Register inside the bearer-protected scope. */
export const hostingMcpRoutes = (deps: { hostingMcp: HostingMcpService }): RouteModule<'bearer'> => {
  const svc = deps.hostingMcp;

  return {
    prefix: '/api/hosting-mcp',
    bearer: async (app) => {
      app.get('/health', {
        schema: {
          tags,
          summary: 'Hosting MCP gateway status',
          description: 'Static status of the gateway information service (always `operational`; version 1.0.0 per §9).',
          response: {
            200: z.object({
              name: z.string(),
              version: z.string(),
              description: z.string(),
              status: z.literal('operational'),
              official_repo: z.string(),
              docker_image: z.string(),
              documentation: z.string(),
              timestamp: z.string(),
            }),
            ...authErrors,
          },
        },
        handler: async () => svc.health(),
      });

      app.get('/info', {
        schema: {
          tags,
          summary: 'About the hosting MCP server',
          description: '`setup_guide` is the path of the setup endpoint.',
          response: {
            200: z.object({
              name: z.string(),
              version: z.string(),
              description: z.string(),
              maintained_by: z.string(),
              repository: z.string(),
              docker_image: z.string(),
              documentation: z.string(),
              setup_guide: z.string(),
              features: z.array(z.string()),
            }),
            ...authErrors,
          },
        },
        handler: async () => svc.info(),
      });

      app.get('/setup', {
        schema: {
          tags,
          summary: 'How to connect an MCP client',
          description:
            '`docker_config_example` is an MCP client configuration object running the official image; `documentation_links` maps names to URLs.',
          response: {
            200: z.object({
              title: z.string(),
              recommended_approach: z.string(),
              quick_start: z.object({ step_1: z.string(), step_2: z.string(), step_3: z.string() }),
              docker_config_example: z.record(z.string(), z.unknown()),
              documentation_links: z.record(z.string(), z.string()),
            }),
            ...authErrors,
          },
        },
        handler: async () => svc.setup(),
      });

      app.get('/tools', {
        schema: {
          tags,
          summary: 'Tools of the hosting MCP server',
          description:
            'Categories as §4.16 lists them, each `{count, tools[]}`: workspaces 3, services 6, deployments 2, logs 2, metrics 1, postgres 4, key_value 3.',
          response: {
            200: z.object({
              source: z.string(),
              tool_categories: z.object({
                workspaces: category,
                services: category,
                deployments: category,
                logs: category,
                metrics: category,
                postgres: category,
                key_value: category,
              }),
              complete_reference: z.string(),
            }),
            ...authErrors,
          },
        },
        handler: async () => svc.tools(),
      });

      app.get('/examples', {
        schema: {
          tags,
          summary: 'Example prompts',
          response: {
            200: z.object({
              description: z.string(),
              examples: z.object({
                service_management: z.array(z.string()),
                deployment_monitoring: z.array(z.string()),
                database_management: z.array(z.string()),
                monitoring_and_logs: z.array(z.string()),
                troubleshooting: z.array(z.string()),
              }),
            }),
            ...authErrors,
          },
        },
        handler: async () => svc.examples(),
      });

      app.post('/validate-config', {
        schema: {
          tags,
          summary: 'Check an MCP client configuration',
          description:
            'Checks the shape of `api_key` only (the hosting platform is not called). Invalid: 400 `{valid:false, errors[], help}` listing ' +
            `every problem: \`${VALIDATE_ERRORS.required}\` (missing, empty or not a string), \`${VALIDATE_ERRORS.prefix}\`, ` +
            `\`${VALIDATE_ERRORS.short}\` (under ${HOSTING_KEY_MIN_LENGTH} characters). A body that is not a JSON object gets 400 \`{error}\`. ` +
            '`endpoint` is optional and only echoed in `next_steps`.',
          body: validateBody,
          response: {
            200: z.object({ valid: z.literal(true), message: z.string(), next_steps: z.array(z.string()) }),
            400: z.union([validateFailure, errorSchema]),
            ...authErrors,
          },
        },
        handler: async (request, reply) => {
          const result = svc.validateConfig(request.body);
          return result.valid ? result : reply.code(400).send(result);
        },
      });

      const redirects = [
        ['/docs', 'Redirect to the documentation', HOSTING_MCP_LINKS.documentation],
        ['/github', 'Redirect to the source repository', HOSTING_MCP_LINKS.repository],
      ] as const;
      for (const [path, summary, to] of redirects) {
        app.get(path, {
          schema: { tags, summary, description: `301 to ${to}.`, response: { 301: redirect(to) } },
          handler: async (_request, reply) => reply.redirect(to, 301),
        });
      }
    },
  };
};
