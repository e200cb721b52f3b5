/**
 * Hosting MCP gateway information (§4.16): what an operator needs to connect an MCP client to
 * the hosting platform's official MCP server. Informational only: nothing here calls the hosting
 * platform; `validateConfig` checks the shape of a hosting API key, not whether it works.
 */

/** §9 "hosting MCP health version 1.0.0". */
export const HOSTING_MCP_VERSION = '1.0.0';

/** External resources (the hosting platform's own MCP server); `docs` and `github` redirect here. */
export const HOSTING_MCP_LINKS = {
  repository: 'https://github.com/render-oss/render-mcp-server',
  dockerImage: 'ghcr.io/render-oss/render-mcp-server',
  documentation: 'https://render.com/docs/mcp-server',
  apiKeys: 'https://dashboard.render.com/settings#api-keys',
  endpoint: 'https://mcp.render.com/mcp',
} as const;

/** §4.16 tool categories, with exactly the tools (and so the counts) the specification lists. */
export const HOSTING_MCP_TOOLS = {
  workspaces: ['list_workspaces', 'select_workspace', 'get_selected_workspace'],
  services: ['list_services', 'get_service', 'create_web_service', 'create_static_site', 'create_cron_job', 'update_environment_variables'],
  deployments: ['list_deploys', 'get_deploy'],
  logs: ['list_logs', 'list_log_label_values'],
  metrics: ['get_metrics'],
  postgres: ['list_postgres_instances', 'get_postgres', 'create_postgres', 'query_render_postgres'],
  key_value: ['list_key_value', 'get_key_value', 'create_key_value'],
} as const;

/** §4.16 validate-config error texts, exactly. */
export const VALIDATE_ERRORS = {
  required: 'api_key is required',
  prefix: 'api_key must start with rnd_',
  short: 'api_key appears too short',
} as const;
export const HOSTING_KEY_PREFIX = 'rnd_';
export const HOSTING_KEY_MIN_LENGTH = 20;

const NAME = 'hosting-mcp-gateway';
const DESCRIPTION =
  "Connects MCP clients to the hosting platform's official MCP server to manage services, deploys, logs, metrics, Postgres and key-value stores";

export type ValidateConfigResult =
  | { valid: true; message: string; next_steps: string[] }
  | { valid: false; errors: string[]; help: string };

export function createHostingMcpService(deps: { now?: () => Date } = {}) {
  const now = deps.now ?? (() => new Date());
  const dockerConfigExample = {
    mcpServers: {
      hosting: {
        command: 'docker',
        args: ['run', '-i', '--rm', '-e', 'RENDER_API_KEY', HOSTING_MCP_LINKS.dockerImage],
        env: { RENDER_API_KEY: '<your rnd_ API key>' },
      },
    },
  };

  return {
    health() {
      return {
        name: NAME,
        version: HOSTING_MCP_VERSION,
        description: DESCRIPTION,
        status: 'operational' as const,
        official_repo: HOSTING_MCP_LINKS.repository,
        docker_image: HOSTING_MCP_LINKS.dockerImage,
        documentation: HOSTING_MCP_LINKS.documentation,
        timestamp: now().toISOString(),
      };
    },

    info() {
      return {
        name: NAME,
        version: HOSTING_MCP_VERSION,
        description: DESCRIPTION,
        maintained_by: 'The hosting platform (official MCP server)',
        repository: HOSTING_MCP_LINKS.repository,
        docker_image: HOSTING_MCP_LINKS.dockerImage,
        documentation: HOSTING_MCP_LINKS.documentation,
        setup_guide: '/api/hosting-mcp/setup',
        features: [
          'Workspace selection',
          'Service management (web services, static sites, cron jobs, environment variables)',
          'Deployment history and status',
          'Log search and label values',
          'Service metrics',
          'Postgres instances and read-only queries',
          'Key-value store management',
        ],
      };
    },

    setup() {
      return {
        title: 'Connect an MCP client to the hosting platform',
        recommended_approach: `Use the hosted MCP endpoint (${HOSTING_MCP_LINKS.endpoint}) with an API key, or run the official Docker image locally`,
        quick_start: {
          step_1: `Create an API key (it starts with ${HOSTING_KEY_PREFIX}) at ${HOSTING_MCP_LINKS.apiKeys}`,
          step_2: 'Add the MCP server to your client configuration (see docker_config_example), passing the key as RENDER_API_KEY',
          step_3: 'Restart the client and ask it to list your workspaces, then select one',
        },
        docker_config_example: dockerConfigExample,
        documentation_links: {
          mcp_server: HOSTING_MCP_LINKS.documentation,
          repository: HOSTING_MCP_LINKS.repository,
          api_keys: HOSTING_MCP_LINKS.apiKeys,
        },
      };
    },

    tools() {
      const tool_categories = Object.fromEntries(
        Object.entries(HOSTING_MCP_TOOLS).map(([category, tools]) => [category, { count: tools.length, tools: [...tools] }]),
      ) as { [K in keyof typeof HOSTING_MCP_TOOLS]: { count: number; tools: string[] } };
      return {
        source: HOSTING_MCP_LINKS.repository,
        tool_categories,
        complete_reference: `${HOSTING_MCP_LINKS.repository}#tools`,
      };
    },

    examples() {
      return {
        description: 'Example prompts for an MCP client connected to the hosting platform',
        examples: {
          service_management: [
            'List all my services',
            'Create a new web service from my GitHub repository',
            'Update the environment variables of my API service',
          ],
          deployment_monitoring: ['Show the latest deploys of my web service', 'Why did my last deploy fail?'],
          database_management: [
            'List my Postgres instances',
            'Create a new Postgres database',
            'How many users signed up this week? (query my Postgres)',
          ],
          monitoring_and_logs: ['Show the error logs of my API from the last hour', 'What was the CPU usage of my service yesterday?'],
          troubleshooting: ['Why is my service returning 502 errors?', 'Find the cause of the memory spike in my worker'],
        },
      };
    },

    /**
     * §4.16 validate-config: every problem found is listed (a short key without the prefix gets
     * both messages). A missing or non-string `api_key` is "required".
     */
    validateConfig(body: { api_key?: unknown; endpoint?: unknown }): ValidateConfigResult {
      const errors: string[] = [];
      const key = typeof body.api_key === 'string' ? body.api_key.trim() : '';
      if (!key) errors.push(VALIDATE_ERRORS.required);
      else {
        if (!key.startsWith(HOSTING_KEY_PREFIX)) errors.push(VALIDATE_ERRORS.prefix);
        if (key.length < HOSTING_KEY_MIN_LENGTH) errors.push(VALIDATE_ERRORS.short);
      }
      if (errors.length) {
        return { valid: false, errors, help: `Create an API key at ${HOSTING_MCP_LINKS.apiKeys}; see ${HOSTING_MCP_LINKS.documentation}` };
      }
      const endpoint = typeof body.endpoint === 'string' && body.endpoint.trim() ? body.endpoint.trim() : HOSTING_MCP_LINKS.endpoint;
      return {
        valid: true,
        message: 'Configuration looks valid',
        next_steps: [
          `Add the MCP server (${endpoint}) to your client with this key`,
          'Restart your MCP client',
          'Ask it to list your workspaces and select one',
        ],
      };
    },
  };
}

export type HostingMcpService = ReturnType<typeof createHostingMcpService>;
