/**
 * The run command as a real process, exactly as `npm start` runs it: the sources compiled by
 * scripts/build-server.ts (here into a scratch copy beside dist/), then `node <out>/main.js`. Both
 * apps on the embedded PostgreSQL, clean stop on SIGTERM/SIGINT, a second start reuses the data,
 * one app per process on request, and a bad setting stops start-up with one line. The start-up
 * block reads at a terminal as docs/configuration.md "What start-up prints" says, and ends with
 * `platform ready` only where the platform can be used.
 */
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/db/embedded.ts';
import { brokenBwrapDir, pathWithBrokenBwrap } from '../fixtures/broken-bwrap.ts';
import { buildScratchServer, killLeftovers, removeTree, ROOT as root, startPlatform, trackChild, waitFor } from './helpers.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'platform-start-'));
chmodSync(dataDir, 0o755); // the embedded server runs as the postgres OS user when we are root
const { main: MAIN, out, built } = buildScratchServer('main');

afterAll(async () => {
  await killLeftovers([dataDir]);
  removeTree(dataDir);
  removeTree(out);
});

describe('the compiled tree (scripts/build-server.ts)', () => {
  const jsFiles = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? jsFiles(join(dir, e.name)) : e.name.endsWith('.js') ? [join(dir, e.name)] : [],
    );

  it('mirrors src/: every module compiled, the migrations copied, no TypeScript specifier left', () => {
    expect(built.modules).toBeGreaterThan(100);
    expect(existsSync(join(out, 'db', 'migrations'))).toBe(true);
    expect(readdirSync(join(out, 'db', 'migrations')).length).toBe(built.files);
    for (const file of jsFiles(out)) expect(readFileSync(file, 'utf8'), file).not.toMatch(/\bfrom\s*['"]\.{1,2}\/[^'"]+\.ts['"]/);
  });

  it('every module loads under plain Node, without the type stripper', () => {
    const modules = jsFiles(out).filter((f) => !f.endsWith(`${join(out, 'main.js')}`) && !f.endsWith(join('runtime', 'main.js')));
    const script = `for (const m of ${JSON.stringify(modules)}) await import(m); console.log('loaded', ${modules.length});`;
    const output = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    expect(output.trim()).toBe(`loaded ${modules.length}`);
  });
});

const start = (args: string[], env: Record<string, string>) => startPlatform(MAIN, args, { DATA_DIR: dataDir, ...env });

/** The all-in-one start at a terminal: `script` runs it on a pseudo-terminal, so LOG_FORMAT=auto prints readable lines. */
function atTerminal(env: Record<string, string>) {
  // `exec`: the shell script runs the command in becomes the platform, the terminal's foreground job
  const child = spawn('script', ['-qfec', `exec ${process.execPath} ${MAIN}`, '/dev/null'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', DATA_DIR: dataDir, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackChild(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    exited,
    output: () => out,
    /** the platform's process, script's child: the leader of the terminal's foreground process group */
    platformPid: () => Number(readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(' ')[0]),
  };
}

/**
 * The start-up block at a terminal (docs/configuration.md "What start-up prints"): `HH:MM:SS LEVEL
 * message` lines, none repeating its record as JSON, naming where the apps listen, the database's
 * port, the agent sandbox, the model provider and what is off, in that order, and ending with
 * `platform ready` and the dashboard's address. Into a pipe the same records are JSON lines (the
 * other tests here read them).
 */
function expectStartUpBlock(out: string, at: { web: number; backend: number; port: number }) {
  const text = stripVTControlCharacters(out).replace(/\r/g, '');
  const block = text.slice(0, text.indexOf('\n', text.indexOf('platform ready'))).split('\n');
  for (const line of block) {
    expect(line).toMatch(/^\d\d:\d\d:\d\d (INFO |WARN ) \S/); // HH:MM:SS LEVEL message
    expect(line, 'a pretty line never repeats its record as JSON').not.toContain('{"');
  }
  const msgs = block.map((l) => l.slice('00:00:00 INFO  '.length));
  const expected = [
    `web app (dashboard and its API) listening at http://127.0.0.1:${at.web}`,
    `backend (API for agents and keys) listening at http://127.0.0.1:${at.backend}`,
    expect.stringMatching(new RegExp(`^database: embedded PostgreSQL on 127\\.0\\.0\\.1:${at.port}, data in \\S+ \\(npm run backup`)),
    expect.stringMatching(/^(agent sandbox (ON|unavailable)|AGENT_SANDBOX=off)/),
    'model provider: router at 127.0.0.1:9 (ROUTER_BASE_URL)',
    expect.stringMatching(/^password reset e-mails are off \(SMTP_URL unset\): .*npm run admin -- reset-link <email>/),
    expect.stringMatching(/^card payments are off \(STRIPE_SECRET_KEY unset\): no card top-ups/),
    expect.stringMatching(/^other integrations off \(settings unset\): bridge \(BRIDGE_SECRET\)/),
  ];
  for (const line of expected) expect(msgs).toContainEqual(line);
  // in that order, and `platform ready` with the dashboard's address is the block's last line
  const index = (m: unknown) =>
    msgs.findIndex((x) => (typeof m === 'string' ? x === m : (m as { asymmetricMatch(v: string): boolean }).asymmetricMatch(x)));
  const order = expected.map(index);
  expect(order).toEqual([...order].sort((a, b) => a - b));
  expect(msgs.at(-1)).toMatch(new RegExp(`^platform ready: open the dashboard at http://localhost:${at.web}/  migrationsApplied=\\d+$`));
}

describe('npm start (the compiled main.js)', () => {
  it('serves both apps on the embedded database, stops cleanly, and reuses its data; at a terminal its start-up block is readable lines ending with `platform ready`', async () => {
    const [web, backend] = [await freePort(), await freePort()];
    const env = { WEB_PORT: String(web), BACKEND_PORT: String(backend) };
    const first = start([], env);
    const health = await waitFor(`http://127.0.0.1:${web}/api/health`);
    expect(health.status).toBe(200);
    expect(((await (await waitFor(`http://127.0.0.1:${backend}/health`)).json()) as { status: string }).status).toBe('ok');
    const reg = await fetch(`http://127.0.0.1:${web}/api/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'persist@example.com', password: 'persisted-password' }),
    });
    expect(reg.status).toBe(201);

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(existsSync(join(dataDir, 'pg', 'postmaster.pid'))).toBe(false); // PostgreSQL stopped too

    // the second start at a terminal (LOG_FORMAT=auto): `script` gives it a pseudo-terminal, and
    // passes its exit code on (-e); a model provider named, so the block says which
    const router = { ROUTER_BASE_URL: 'http://127.0.0.1:9/v1', ROUTER_API_KEY: 'never-called' };
    const second = atTerminal({ ...env, ...router, LOG_LEVEL: 'info' });
    await waitFor(`http://127.0.0.1:${web}/api/health`);
    const login = await fetch(`http://127.0.0.1:${web}/api/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'PERSIST@example.com', password: 'persisted-password' }),
    });
    expect(login.status).toBe(200);
    const until = Date.now() + 20_000;
    while (!second.output().includes('platform ready') && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    const port = Number(readFileSync(join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[3]); // the embedded server's
    process.kill(-second.platformPid(), 'SIGINT'); // Ctrl-C: the terminal's foreground process group
    expect(await second.exited).toBe(0);
    expectStartUpBlock(second.output(), { web, backend, port });
  }, 90_000);

  it('`npm start -- backend` serves only the backend', async () => {
    const [web, backend] = [await freePort(), await freePort()];
    const p = start(['backend'], { WEB_PORT: String(web), BACKEND_PORT: String(backend) });
    expect((await waitFor(`http://127.0.0.1:${backend}/health`)).status).toBe(200);
    await expect(fetch(`http://127.0.0.1:${web}/api/health`)).rejects.toThrow();
    // no INTERNAL_API_KEY and no all-in-one start to generate one: start-up ends saying why it is not usable, never "ready"
    const until = Date.now() + 20_000;
    while (!p.output().includes('started but not usable') && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
    // into a pipe (LOG_FORMAT=auto): every line is a JSON record, and that warning is the start-up's last
    const records = p
      .output()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { level: number; msg: string });
    const last = records.findLast((r) => r.msg !== 'shutting down');
    expect(last).toMatchObject({ level: 40, msg: expect.stringMatching(/^backend started but not usable: INTERNAL_API_KEY is not set/) });
    expect(records.some((r) => r.msg.includes('ready'))).toBe(false);
  }, 90_000);

  it('SIGTERM during start-up stops the embedded PostgreSQL and exits 0', async () => {
    const [web, backend] = [await freePort(), await freePort()];
    const p = start([], { WEB_PORT: String(web), BACKEND_PORT: String(backend) });
    // wait until the database server is starting or up, but before the apps are ready
    const until = Date.now() + 20_000;
    while (!existsSync(join(dataDir, 'pg', 'postmaster.pid')) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    p.child.kill('SIGTERM');
    expect(await p.exited).toBe(0);
    expect(existsSync(join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
  }, 60_000);

  it('where bubblewrap cannot sandbox, npm start still serves and says in one line that agents are refused; AGENT_SANDBOX=off says what it means', async () => {
    // docs/agents.md "Sandbox": `auto` (the default) never falls back to unsandboxed agents
    const fakeBin = brokenBwrapDir();
    try {
      const sandboxLines = async (env: Record<string, string>) => {
        const [web, backend] = [await freePort(), await freePort()];
        const p = start(['backend'], {
          WEB_PORT: String(web),
          BACKEND_PORT: String(backend),
          PATH: pathWithBrokenBwrap(fakeBin),
          INTERNAL_API_KEY: 'a-key-both-apps-share',
          LOG_LEVEL: 'info',
          ...env,
        });
        expect((await waitFor(`http://127.0.0.1:${backend}/health`)).status).toBe(200);
        const until = Date.now() + 20_000;
        while (!p.output().includes('backend ready') && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
        p.child.kill('SIGTERM');
        expect(await p.exited).toBe(0);
        const records = p
          .output()
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { level: number; msg: string });
        // the backend alone ends its start-up with where to go (its API docs), never as "the platform"
        const afterStartUp = ['incoming request', 'request completed', 'shutting down']; // the health check, the stop
        expect(records.findLast((r) => !afterStartUp.includes(r.msg))?.msg).toBe(
          `backend ready: API docs at http://127.0.0.1:${backend}/docs (the dashboard is the web app's: npm start -- web)`,
        );
        expect(records.some((r) => r.msg.includes('platform ready'))).toBe(false);
        return records.filter((r) => /agent sandbox|AGENT_SANDBOX/.test(r.msg));
      };
      const auto = await sandboxLines({});
      expect(auto).toHaveLength(1);
      expect(auto[0]!.level).toBe(40); // warn
      expect(auto[0]!.msg).toMatch(
        /^agent sandbox unavailable \(bwrap cannot create a sandbox here .*\): agents are refused; .* or set AGENT_SANDBOX=off to run agents unsandboxed$/,
      );
      const off = await sandboxLines({ AGENT_SANDBOX: 'off' });
      expect(off).toHaveLength(1);
      expect(off[0]!.msg).toMatch(
        /^AGENT_SANDBOX=off: agents run unsandboxed as this process's user and can read its environment .*only for trusted agents$/,
      );
    } finally {
      removeTree(fakeBin);
    }
  }, 90_000);

  it('a bad setting stops start-up with one clear line', async () => {
    const p = start([], { WEB_PORT: 'eighty' });
    expect(await p.exited).toBe(1);
    const lines = p.output().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/WEB_PORT/);
  }, 30_000);
});
