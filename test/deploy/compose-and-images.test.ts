/**
 * compose.yaml's structure and the Dockerfiles' shape (docs/production.md "Compose", "Images"):
 * services, health checks, start order, settings that src/config/env.ts parses (the model provider
 * and SMTP named, secrets in secrets.env only), the database roles' passwords; base images, npm ci, the user, ports, command. The chart: artefacts.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { LIMITS } from '../../src/config/limits.ts';
import { argsOf, copiesFrom, execForm, readDockerfile } from './dockerfile.ts';
import { isSecretSetting, parseSettings, readEnvFile, unknownSettings } from './settings.ts';

const ROOT = join(import.meta.dirname, '../..');

/** The example settings of the apps: plain ones (platform.env) and secrets (secrets.env). */
const examples = () => ({
  plain: readEnvFile(join(ROOT, 'deploy/compose/platform.env.example')),
  secrets: readEnvFile(join(ROOT, 'deploy/compose/secrets.env.example')),
});

describe('compose.yaml', () => {
  const compose = parse(readFileSync(join(ROOT, 'compose.yaml'), 'utf8'));
  const services = compose.services;

  it('web and backend are two services of the one image; PostgreSQL 16 and Redis 7 beside them', () => {
    expect(Object.keys(services).sort()).toEqual(['agent-image', 'backend', 'postgres', 'redis', 'web']);
    for (const app of ['web', 'backend']) expect(services[app]).toMatchObject({ build: '.', image: 'agent-platform:latest', init: true });
    expect(services.web.environment.APP).toBe('web');
    expect(services.backend.environment.APP).toBe('backend');
    expect(services.postgres.image).toMatch(/^postgres:16(\b|-)/);
    expect(services.redis.image).toMatch(/^redis:7(\b|-)/);
    expect(services['agent-image']).toMatchObject({ build: { dockerfile: 'Dockerfile.agent' }, profiles: ['images'] });
    expect(services.web.ports).toEqual(['3000:3000']);
    expect(services.backend.ports).toBeUndefined();
  });

  it('every service has a health check, and the apps start once what they need is healthy', () => {
    for (const name of ['web', 'backend', 'postgres', 'redis']) expect(services[name].healthcheck?.test, name).toBeDefined();
    expect(services.web.healthcheck.test.join(' ')).toContain('/api/health');
    expect(services.backend.healthcheck.test.join(' ')).toContain('/health');
    for (const app of ['web', 'backend']) {
      expect(services[app].depends_on.postgres).toEqual({ condition: 'service_healthy' });
      expect(services[app].depends_on.redis).toEqual({ condition: 'service_healthy' });
    }
    expect(services.web.depends_on.backend).toEqual({ condition: 'service_healthy' });
  });

  it('the apps read settings of src/config/env.ts from platform.env and secrets.env, and they parse', () => {
    for (const app of ['web', 'backend']) {
      expect(services[app].env_file).toEqual([
        { path: 'platform.env', required: true },
        { path: 'secrets.env', required: true },
      ]);
      expect(unknownSettings(services[app].environment)).toEqual([]);
    }
    const { plain, secrets } = examples();
    expect(unknownSettings({ ...plain, ...secrets })).toEqual([]);
    for (const name of [
      'DATABASE_URL',
      'REDIS_URL',
      'INTERNAL_API_KEY',
      'WALLET_ENCRYPTION_KEY',
      'SECRETS_ENCRYPTION_KEY',
      'METRICS_TOKEN',
    ])
      expect(secrets[name], name).toBeTruthy();
    expect(() => parseSettings({ ...plain, ...secrets, ...services.web.environment })).not.toThrow();
  });

  it('names the model provider and the SMTP server: agents have a model, password reset has mail', () => {
    const { plain, secrets } = examples();
    const config = parseSettings({ ...plain, ...secrets, ...services.backend.environment });
    expect(plain.ROUTER_BASE_URL).toMatch(/^https:\/\//);
    expect(config.ROUTER_BASE_URL).toBe(plain.ROUTER_BASE_URL);
    expect(config.configured.router).toBe(true);
    expect(config.SMTP_URL).toMatch(/^smtps?:\/\/[^:]+:[^@]+@/);
    expect(Object.keys(secrets)).toEqual(
      expect.arrayContaining(['ROUTER_API_KEY', 'SMTP_URL', 'STRIPE_SECRET_KEY', 'STRIPE_WEBHOOK_SECRET']),
    );
  });

  it('secrets are in secrets.env only, never in platform.env or compose.yaml; the files with real values are not committed', () => {
    const { plain, secrets } = examples();
    expect(Object.keys(plain).filter(isSecretSetting)).toEqual([]);
    expect(Object.keys(secrets).filter((name) => !isSecretSetting(name))).toEqual([]);
    for (const app of ['web', 'backend']) expect(Object.keys(services[app].environment).filter(isSecretSetting)).toEqual([]);
    // the classification can fail: the secrets of the example are all refused in the plain file
    expect(Object.keys(secrets).length).toBeGreaterThan(8);
    // the copies with real values, where the comments say to put them, are ignored by git
    const ignored = spawnSync('git', ['check-ignore', '--no-index', 'platform.env', 'secrets.env', 'postgres.env'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(ignored.stdout.trim().split('\n')).toEqual(['platform.env', 'secrets.env', 'postgres.env']);
  });

  it('never runs agents unsandboxed: the local driver with AGENT_SANDBOX=bwrap, and the security options bwrap needs in a container', () => {
    // docs/production.md "Compose": the image's user is the backend's, so an unsandboxed agent could
    // read the backend's /proc environ (DATABASE_URL, INTERNAL_API_KEY, the encryption keys)
    const { plain, secrets } = examples();
    for (const app of ['web', 'backend']) {
      const config = parseSettings({ ...plain, ...secrets, ...services[app].environment });
      expect([app, config.HOSTING_DRIVER, config.AGENT_SANDBOX]).toEqual([app, 'local', 'bwrap']);
      // a user namespace, mounts and a fresh /proc inside the container; nothing that raises privileges
      expect([app, [...services[app].security_opt].sort()]).toEqual([
        app,
        ['apparmor=unconfined', 'no-new-privileges:true', 'seccomp=unconfined', 'systempaths=unconfined'],
      ]);
      expect(services[app].privileged, app).toBeUndefined();
      expect(services[app].cap_add, app).toBeUndefined();
    }
  });

  it('the database roles: initdb.sh is mounted and the passwords of postgres.env are those in the URLs', () => {
    const mount = services.postgres.volumes.find((v: string) => v.includes('docker-entrypoint-initdb.d'));
    expect(existsSync(join(ROOT, mount.split(':')[0]))).toBe(true);
    expect(services.postgres.env_file).toEqual([{ path: 'postgres.env', required: true }]);
    const pg = readEnvFile(join(ROOT, 'deploy/compose/postgres.env.example'));
    const app = examples().secrets;
    const owner = new URL(app.DATABASE_URL!);
    const request = new URL(app.DATABASE_REQUEST_URL!);
    expect([owner.username, owner.password, owner.host]).toEqual(['platform_owner', pg.PLATFORM_OWNER_PASSWORD, 'postgres:5432']);
    expect([request.username, request.password]).toEqual(['platform_request', pg.PLATFORM_REQUEST_PASSWORD]);
    expect(owner.pathname).toBe(`/${services.postgres.environment.POSTGRES_DB}`);
    const sql = readFileSync(join(ROOT, 'deploy/compose/initdb.sh'), 'utf8');
    for (const role of ['platform_app NOLOGIN', 'platform_owner LOGIN', 'platform_request LOGIN'])
      expect(sql).toContain(`CREATE ROLE ${role}`);
    expect(sql).not.toMatch(/SUPERUSER(?<!NOSUPERUSER)|\bBYPASSRLS(?<!NOBYPASSRLS)/);
    expect(new URL(app.REDIS_URL!).host).toBe('redis:6379');
  });
});

describe('Dockerfiles', () => {
  const defaults = parseSettings({});

  it('Dockerfile: node:24-bookworm-slim stages, npm ci, build, prune; runs dist/main.js as a non-root user on both ports', () => {
    const stages = readDockerfile(join(ROOT, 'Dockerfile'));
    expect(stages.map((s) => s.from)).toEqual(['node:24-bookworm-slim', 'node:24-bookworm-slim']);
    const [build, run] = stages as [(typeof stages)[0], (typeof stages)[0]];
    const buildRuns = argsOf(build, 'RUN').join('\n');
    expect(buildRuns).toMatch(/^npm ci\b/m);
    expect(buildRuns).toContain('scripts/build-server.ts build/dist');
    expect(buildRuns).toContain('scripts/build-dashboard.ts');
    expect(buildRuns).toContain('npm prune --omit=dev');
    for (const script of ['scripts/build-server.ts', 'scripts/build-dashboard.ts']) expect(existsSync(join(ROOT, script))).toBe(true);
    const user = argsOf(run, 'USER').at(-1);
    expect(user).toMatch(/^[1-9]\d*(:\d+)?$/);
    // bubblewrap for the local driver's agent sandbox (it refuses agents without one), installed as root before USER
    const runs = run.instructions.filter((i) => i.op === 'RUN' || i.op === 'USER').map((i) => `${i.op} ${i.args}`);
    const install = runs.findIndex((r) => /^RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap\b/.test(r));
    expect(install, runs.join('\n')).toBeGreaterThanOrEqual(0);
    expect(install).toBeLessThan(runs.findIndex((r) => r.startsWith('USER ')));
    expect(runs[install]).toContain('rm -rf /var/lib/apt/lists/*');
    expect(execForm(argsOf(run, 'CMD').at(-1)!)).toEqual(['node', 'dist/main.js']);
    expect(argsOf(run, 'EXPOSE').join(' ').split(/\s+/).map(Number)).toEqual([defaults.WEB_PORT, defaults.BACKEND_PORT]);
    const health = argsOf(run, 'HEALTHCHECK').join(' ');
    expect(health).toContain('/api/health');
    expect(health).toContain('/health');
    expect(copiesFrom(run, 'build')).toEqual([
      ['/app/package.json', './package.json'],
      ['/app/node_modules', './node_modules'],
      ['/app/build/dist', './dist'],
      ['/app/build/dashboard', './dashboard/dist'],
    ]);
  });

  it('Dockerfile.agent: the built-in runtime as a non-root user on the gateway port', () => {
    const stages = readDockerfile(join(ROOT, 'Dockerfile.agent'));
    expect(stages.map((s) => s.from)).toEqual(['node:24-bookworm-slim', 'node:24-bookworm-slim']);
    const run = stages[1]!;
    expect(argsOf(stages[0]!, 'RUN').join('\n')).toMatch(/^npm ci\b/m);
    expect(argsOf(run, 'USER').at(-1)).toMatch(/^[1-9]\d*(:\d+)?$/);
    expect(argsOf(run, 'EXPOSE')).toEqual([String(LIMITS.agentGatewayPort)]);
    expect(execForm(argsOf(run, 'CMD').at(-1)!).at(-1)).toBe('/app/dist/runtime/main.js');
    expect(argsOf(run, 'HEALTHCHECK').join(' ')).toContain('/healthz');
    expect(argsOf(run, 'ENV').join(' ')).toContain(`AGENT_PORT=${LIMITS.agentGatewayPort}`);
  });

  it('.dockerignore keeps the build inputs and drops local state and secrets', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    for (const needed of ['src', 'scripts', 'dashboard', 'package.json', 'package-lock.json']) expect(ignored).not.toContain(needed);
    for (const dropped of ['node_modules', 'data', '.env', '.git']) expect(ignored).toContain(dropped);
  });
});
