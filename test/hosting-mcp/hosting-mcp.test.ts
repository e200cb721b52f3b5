/** §4.16 hosting MCP gateway informational endpoints (backend, bearer key §5), §9 version 1.0.0. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform, withTestPlatform } from '../helpers/platform.ts';

const BEARER = { authorization: 'Bearer test-internal-key' };
let t: TestPlatform;
beforeAll(async () => {
  t = await startTestPlatform();
});
afterAll(() => t?.close());

const get = (path: string, headers: Record<string, string> = BEARER) =>
  t.backend.inject({ method: 'GET', url: `/api/hosting-mcp/${path}`, headers });
const validate = (payload: unknown, headers: Record<string, string> = BEARER) =>
  t.backend.inject({ method: 'POST', url: '/api/hosting-mcp/validate-config', headers, payload: payload as object });

describe('§4.16 informational endpoints', () => {
  it('GET health: {name,version,description,status:operational,official_repo,docker_image,documentation,timestamp}', async () => {
    const res = await get('health');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(
      ['description', 'docker_image', 'documentation', 'name', 'official_repo', 'status', 'timestamp', 'version'].sort(),
    );
    expect(body.status).toBe('operational');
    expect(body.version).toBe('1.0.0'); // §9
    expect(Number.isNaN(Date.parse(body.timestamp))).toBe(false);
    expect(body.official_repo).toMatch(/^https:\/\//);
  });

  it('GET info: {name,version,description,maintained_by,repository,docker_image,documentation,setup_guide,features[]}', async () => {
    const res = await get('info');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(
      ['description', 'docker_image', 'documentation', 'features', 'maintained_by', 'name', 'repository', 'setup_guide', 'version'].sort(),
    );
    expect(body.features.length).toBeGreaterThan(0);
  });

  it('GET setup: {title,recommended_approach,quick_start:{step_1,step_2,step_3},docker_config_example,documentation_links}', async () => {
    const body = (await get('setup')).json();
    expect(Object.keys(body).sort()).toEqual([
      'docker_config_example',
      'documentation_links',
      'quick_start',
      'recommended_approach',
      'title',
    ]);
    expect(Object.keys(body.quick_start)).toEqual(['step_1', 'step_2', 'step_3']);
    expect(body.docker_config_example).toBeTypeOf('object');
  });

  it('GET tools: exactly the §4.16 categories, tools and counts', async () => {
    const res = await get('tools');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['complete_reference', 'source', 'tool_categories']);
    const expected: Record<string, string[]> = {
      workspaces: ['list_workspaces', 'select_workspace', 'get_selected_workspace'],
      services: [
        'list_services',
        'get_service',
        'create_web_service',
        'create_static_site',
        'create_cron_job',
        'update_environment_variables',
      ],
      deployments: ['list_deploys', 'get_deploy'],
      logs: ['list_logs', 'list_log_label_values'],
      metrics: ['get_metrics'],
      postgres: ['list_postgres_instances', 'get_postgres', 'create_postgres', 'query_render_postgres'],
      key_value: ['list_key_value', 'get_key_value', 'create_key_value'],
    };
    expect(Object.keys(body.tool_categories)).toEqual(Object.keys(expected));
    for (const [cat, tools] of Object.entries(expected)) {
      expect(body.tool_categories[cat]).toEqual({ count: tools.length, tools });
    }
    const counts = Object.fromEntries(Object.entries(body.tool_categories).map(([k, v]) => [k, (v as { count: number }).count]));
    expect(counts).toEqual({ workspaces: 3, services: 6, deployments: 2, logs: 2, metrics: 1, postgres: 4, key_value: 3 });
  });

  it('GET examples: {description, examples:{service_management,…,troubleshooting}} of prompt strings', async () => {
    const body = (await get('examples')).json();
    expect(typeof body.description).toBe('string');
    expect(Object.keys(body.examples)).toEqual([
      'service_management',
      'deployment_monitoring',
      'database_management',
      'monitoring_and_logs',
      'troubleshooting',
    ]);
    for (const list of Object.values(body.examples) as unknown[][]) {
      expect(list.length).toBeGreaterThan(0);
      for (const p of list) expect(typeof p).toBe('string');
    }
  });

  it.each(['docs', 'github'])('GET %s: 301 to an external resource', async (path) => {
    const res = await get(path);
    expect(res.statusCode).toBe(301);
    expect(res.headers.location).toMatch(/^https:\/\/[^/]+\//);
  });

  it('docs and github redirect to the documentation and the repository that health names', async () => {
    const health = (await get('health')).json();
    expect((await get('docs')).headers.location).toBe(health.documentation);
    expect((await get('github')).headers.location).toBe(health.official_repo);
  });
});

describe('§4.16 POST validate-config', () => {
  it('a well-formed key: {valid:true,message,next_steps[]}', async () => {
    const res = await validate({ api_key: `rnd_${'a'.repeat(16)}`, endpoint: 'https://mcp.example.com/mcp' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.valid).toBe(true);
    expect(typeof body.message).toBe('string');
    expect(body.next_steps.length).toBeGreaterThan(0);
    expect(body.next_steps.join(' ')).toContain('https://mcp.example.com/mcp');
  });

  it.each([
    ['missing', {}, ['api_key is required']],
    ['empty', { api_key: '' }, ['api_key is required']],
    ['not a string', { api_key: 12345 }, ['api_key is required']],
    ['wrong prefix', { api_key: `xyz_${'a'.repeat(30)}` }, ['api_key must start with rnd_']],
    ['too short', { api_key: 'rnd_short' }, ['api_key appears too short']],
    ['19 characters', { api_key: `rnd_${'a'.repeat(15)}` }, ['api_key appears too short']],
    ['short and wrong prefix', { api_key: 'abc' }, ['api_key must start with rnd_', 'api_key appears too short']],
  ])('%s → 400 {valid:false, errors, help} with the exact texts', async (_label, payload, errors) => {
    const res = await validate(payload);
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.valid).toBe(false);
    expect(body.errors).toEqual(errors);
    expect(typeof body.help).toBe('string');
  });

  it.each([
    ['malformed JSON', '{"api_key":', 'application/json'],
    ['body is an array', '["rnd_x"]', 'application/json'],
    ['form content type', 'api_key=rnd_x', 'application/x-www-form-urlencoded'],
    ['text/plain', '{"api_key":"rnd_aaaaaaaaaaaaaaaaaaaa"}', 'text/plain'],
    ['empty body', '', 'application/json'],
  ])('bad input (%s) → 4xx JSON {error}, never 5xx', async (_label, payload, type) => {
    const res = await t.backend.inject({
      method: 'POST',
      url: '/api/hosting-mcp/validate-config',
      headers: { ...BEARER, 'content-type': type },
      payload,
    });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    expect(typeof res.json().error).toBe('string');
  });
});

describe('§5 bearer key on every hosting MCP route', () => {
  const routes: [string, string][] = [
    ['GET', 'health'],
    ['GET', 'info'],
    ['GET', 'setup'],
    ['GET', 'tools'],
    ['GET', 'examples'],
    ['GET', 'docs'],
    ['GET', 'github'],
    ['POST', 'validate-config'],
  ];
  it.each(routes)('%s %s: none → 401 Unauthorized, no Bearer prefix → 401, wrong → 403 Forbidden', async (method, path) => {
    const call = (headers: Record<string, string>) =>
      t.backend.inject({
        method: method as 'GET' | 'POST',
        url: `/api/hosting-mcp/${path}`,
        headers,
        ...(method === 'POST' ? { payload: { api_key: `rnd_${'a'.repeat(20)}` } } : {}),
      });
    const none = await call({});
    expect(none.statusCode).toBe(401);
    expect(none.json()).toEqual({ error: 'Unauthorized' });
    expect((await call({ authorization: 'test-internal-key' })).statusCode).toBe(401);
    const wrong = await call({ authorization: 'Bearer wrong-key' });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.json()).toEqual({ error: 'Forbidden' });
  });

  it('500 Server misconfigured when INTERNAL_API_KEY is unset', async () => {
    await withTestPlatform({ INTERNAL_API_KEY: '' }, async (p) => {
      for (const path of ['health', 'tools', 'docs']) {
        const res = await p.backend.inject({ method: 'GET', url: `/api/hosting-mcp/${path}`, headers: BEARER });
        expect(res.statusCode).toBe(500);
        expect(res.json()).toEqual({ error: 'Server misconfigured' });
      }
    });
  });

  it('the routes are listed in the backend OpenAPI document with tags and summaries', async () => {
    const doc = (await t.backend.inject({ method: 'GET', url: '/docs/json' })).json();
    for (const p of ['/api/hosting-mcp/health', '/api/hosting-mcp/tools', '/api/hosting-mcp/validate-config', '/api/validate-key']) {
      const ops = doc.paths[p];
      expect(ops, p).toBeDefined();
      const op = Object.values(ops)[0] as { tags: string[]; summary: string };
      expect(op.tags.length).toBeGreaterThan(0);
      expect(op.summary.length).toBeGreaterThan(0);
    }
  });
});
