/**
 * No image can be built here (no Docker engine), so this rebuilds each image's file layout from
 * its Dockerfile's own COPY lines (the build stage's outputs made the same way: the server compiled
 * by scripts/build-server.ts into a plain folder), then runs the image's CMD with its ENV as the
 * container would: the platform from /app (APP=backend and APP=web against a test database) and
 * the agent runtime from the agent image's three folders. A missing file or folder in a COPY, or a
 * runtime that imports beyond what its image holds, fails here.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServer } from '../../scripts/build-server.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { argsOf, copiesFrom, execForm, readDockerfile, type Stage } from './dockerfile.ts';

const ROOT = join(import.meta.dirname, '../..');
const scratch = mkdtempSync(join(tmpdir(), 'image-layout-'));
const children: ChildProcess[] = [];

/** Where a build-stage path (/app/…) is in this checkout: build/ is the scratch build, the rest the repository. */
function buildPath(path: string, build: string): string {
  const rel = path.replace(/^\/app\//, '');
  return rel.startsWith('build/') ? join(build, rel.slice('build/'.length)) : join(ROOT, rel);
}

/** The image's /app (its WORKDIR) assembled from the run stage's COPY --from=build lines. */
function assemble(stage: Stage, name: string, build: string): string {
  const app = join(scratch, name, 'app');
  mkdirSync(app, { recursive: true });
  for (const [from, to] of copiesFrom(stage, 'build')) {
    const source = buildPath(from, build);
    const target = join(app, to);
    mkdirSync(dirname(target), { recursive: true });
    // node_modules is the checkout's (the image's is the same install, pruned): linked, not copied
    if (from.endsWith('/node_modules')) symlinkSync(source, target);
    else cpSync(source, target, { recursive: true });
  }
  return app;
}

/** The stage's ENV as a map (`KEY=value` pairs, continuation lines joined by the reader). */
function envOf(stage: Stage): Record<string, string> {
  return Object.fromEntries(argsOf(stage, 'ENV').flatMap((args) => args.split(/\s+/).map((pair) => pair.split('=') as [string, string])));
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Runs the image's CMD (this Node for `node`, /app/… in the assembled `app`) in `cwd`. */
function run(stage: Stage, app: string, cwd: string, env: Record<string, string>) {
  const [command, ...cmdArgs] = execForm(argsOf(stage, 'CMD').at(-1)!);
  expect(command).toBe('node');
  const args = cmdArgs.map((a) => (a.startsWith('/app/') ? join(app, a.slice('/app/'.length)) : a));
  const child = spawn(process.execPath, args, {
    cwd,
    env: { PATH: process.env.PATH ?? '', ...envOf(stage), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, output: () => output };
}

/** The first answer of `url`, retrying while nothing listens yet (start-up), at most `timeoutMs`. */
async function firstAnswer(url: string, started: { output(): string; child: ChildProcess }, timeoutMs: number): Promise<Response> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fetch(url);
    } catch (err) {
      if (started.child.exitCode !== null || Date.now() > until) throw new Error(`${url}: ${(err as Error).message}\n${started.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

const build = join(scratch, 'build');
let database: TestDatabase;

beforeAll(async () => {
  // what `RUN node scripts/build-server.ts build/dist` makes in the build stage
  buildServer(join(build, 'dist'));
  database = await createTestDatabase();
});

afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await database?.drop();
  rmSync(scratch, { recursive: true, force: true });
});

describe('the platform image (Dockerfile)', () => {
  const stage = readDockerfile(join(ROOT, 'Dockerfile')).at(-1)!;

  for (const [app, path] of [
    ['backend', '/health'],
    ['web', '/api/health'],
  ] as const) {
    it(`APP=${app}: dist/main.js from /app migrates, listens, answers ${path} and stops on SIGTERM with 0`, async () => {
      // the dashboard's build (vite) is left out: without it the web app still starts and says how to build at /
      mkdirSync(join(build, 'dashboard'), { recursive: true });
      const dir = assemble(stage, `platform-${app}`, build);
      const port = await freePort();
      const started = run(stage, dir, dir, {
        APP: app,
        HOST: '127.0.0.1',
        [app === 'web' ? 'WEB_PORT' : 'BACKEND_PORT']: String(port),
        DATA_DIR: join(scratch, `data-${app}`),
        DATABASE_URL: database.url,
        INTERNAL_API_KEY: 'image-layout-test',
        WALLET_ENCRYPTION_KEY: 'ab'.repeat(32),
        SECRETS_ENCRYPTION_KEY: 'cd'.repeat(32),
        LOG_LEVEL: 'warn',
      });
      const res = await firstAnswer(`http://127.0.0.1:${port}${path}`, started, 60_000);
      expect(res.status, started.output()).toBe(200);
      expect(await res.json()).toMatchObject({ status: 'ok' });
      started.child.kill('SIGTERM');
      expect(await started.exited, started.output()).toBe(0);
    });
  }
});

describe('the agent image (Dockerfile.agent)', () => {
  const stage = readDockerfile(join(ROOT, 'Dockerfile.agent')).at(-1)!;

  it("the built-in runtime starts from the image's three folders and answers /healthz; the gateway wants its token", async () => {
    const dir = assemble(stage, 'agent', build);
    const workspace = join(scratch, 'agent-workspace');
    mkdirSync(workspace);
    const port = await freePort();
    // the image's ENV (AGENT_HOST=0.0.0.0, …) with the port and workspace of this machine
    const started = run(stage, dir, workspace, {
      AGENT_PORT: String(port),
      AGENT_HOST: '127.0.0.1',
      AGENT_WORKSPACE: workspace,
      HOME: workspace,
      AGENT_GATEWAY_TOKEN: 'agent-image-test-token',
    });
    const res = await firstAnswer(`http://127.0.0.1:${port}/healthz`, started, 30_000);
    expect(res.status, started.output()).toBe(200);
    expect((await fetch(`http://127.0.0.1:${port}/v1/stats`)).status).toBe(401);
    const authorized = await fetch(`http://127.0.0.1:${port}/v1/stats`, { headers: { authorization: 'Bearer agent-image-test-token' } });
    expect(authorized.status).toBe(200);
    started.child.kill('SIGTERM');
    await started.exited;
  });
});
