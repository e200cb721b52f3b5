/**
 * `npm run backup` and `npm run restore` (docs/production.md "Backups") on a real platform process
 * (the compiled main.js, as `npm start` runs it, on its embedded PostgreSQL): a user with a key, an
 * agent and a balance is backed up while the platform runs and takes sign-ups, restored into
 * another DATA_DIR, and a platform started there has all four: the password signs in, the key
 * still opens the agent, the balance is the same and the agent's folder is back. A restore never
 * goes into a DATA_DIR that holds anything. With DATABASE_URL the archive holds DATA_DIR's
 * secrets and agent folders, and the command says the database is the operator's to dump.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readArchive } from '../../scripts/lib/backup-archive.ts';
import { freePort } from '../../src/db/embedded.ts';
import { type FakeOpenAi, startFakeOpenAi } from '../fakes/openai-upstream.ts';
import { testAgentSandbox } from '../helpers/agent-sandbox.ts';
import {
  buildScratchServer,
  eventually,
  killLeftovers,
  postgresPid,
  ROOT,
  removeTree,
  type Started,
  startPlatform,
  TROUBLE,
  waitFor,
  webClient,
} from '../start/helpers.ts';

const work = mkdtempSync(join(tmpdir(), 'backup-e2e-'));
chmodSync(work, 0o755); // the embedded server runs as the postgres OS user when we are root
const [dirA, dirB, dirC, dirD] = ['a', 'b', 'c', 'd'].map((n) => join(work, n)) as [string, string, string, string];
const PASSWORD = 'correct horse battery staple';
let server: ReturnType<typeof buildScratchServer>;
let upstream: FakeOpenAi;

beforeAll(async () => {
  server = buildScratchServer('backup');
  upstream = await startFakeOpenAi({ apiKey: 'router-test-key' });
});
afterAll(async () => {
  await killLeftovers([dirA, dirB]);
  await upstream?.close();
  if (server) removeTree(server.out);
  removeTree(work);
});

/** A script of scripts/ as `npm run <name>` runs it, with DATA_DIR set; resolves with its exit code and output. */
function script(name: 'backup' | 'restore' | 'admin', args: string[], env: Record<string, string>) {
  return new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', `scripts/${name}.ts`, ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/root', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

async function platformOn(dataDir: string): Promise<{ started: Started; web: string }> {
  const [web, backend] = [await freePort(), await freePort()];
  const started = startPlatform(
    server.main,
    [],
    {
      DATA_DIR: dataDir,
      WEB_PORT: String(web),
      BACKEND_PORT: String(backend),
      PUBLIC_URL: `http://127.0.0.1:${web}`,
      LOG_LEVEL: 'info',
      LOG_FORMAT: 'json',
      HOSTING_DRIVER: 'local',
      AGENT_RUNTIME: 'builtin',
      AGENT_SANDBOX: testAgentSandbox(),
      ROUTER_BASE_URL: upstream.baseUrl,
      ROUTER_API_KEY: 'router-test-key',
    },
    { group: true },
  );
  const health = await Promise.race([
    waitFor(`http://127.0.0.1:${web}/api/health`, 120_000),
    started.exited.then((code) => {
      throw new Error(`exited with ${code} before answering:\n${started.output()}`);
    }),
  ]);
  expect(health.status).toBe(200);
  return { started, web: `http://127.0.0.1:${web}` };
}

async function ctrlC(started: Started) {
  process.kill(-started.child.pid!, 'SIGINT');
  expect(await started.exited, started.output()).toBe(0);
  expect(started.output()).not.toMatch(TROUBLE);
}

const models = (web: string, agentId: string, key: string) =>
  fetch(`${web}/api/agents/${agentId}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.status);

describe('npm run backup / restore with the embedded database', () => {
  it('backs up a running platform and restores user, key, agent and balance into another DATA_DIR', async () => {
    const a = await platformOn(dirA);
    // the start-up log says where the embedded database is
    const port = Number(readFileSync(join(dirA, 'pg', 'postmaster.pid'), 'utf8').split('\n')[3]);
    expect(a.started.output()).toContain(`embedded PostgreSQL on 127.0.0.1:${port}, data in ${join(dirA, 'pg')}`);

    const api = webClient(a.web);
    expect((await api('POST', '/api/register', { email: 'owner@example.com', password: PASSWORD })).status).toBe(201);
    expect((await api('POST', '/api/auth/login', { email: 'owner@example.com', password: PASSWORD })).status).toBe(200);
    const prov = await api('POST', '/api/agents/provision', { name: 'Kept' });
    expect(prov.status, JSON.stringify(prov.body)).toBe(201);
    const agentId = prov.body.agent.id as string;
    await eventually(async () => (await api('GET', `/api/agents/${agentId}`)).body.agent?.status === 'running', 60_000, 100);
    const key = (await api('POST', '/api/keys', { name: 'sdk' })).body.key as string;
    expect(key).toMatch(/^sk_/);
    expect(await models(a.web, agentId, key)).toBe(200);
    const credit = await script('admin', ['credit', 'owner@example.com', '7.25'], { DATA_DIR: dirA });
    expect(credit.code, credit.out).toBe(0);
    const balance = (await api('GET', '/api/wallet')).body.balance;
    expect(balance).toBe('7.25');
    // a file of the agent's own, which no start rewrites (openclaw.json is regenerated for the instance it runs on)
    const notes = join(dirA, 'agents', agentId, 'workspace', 'notes.md');
    writeFileSync(notes, 'kept across the restore\n');
    // as the agent itself would have written it: the backup copies what the agent's own uid owns
    const owner = lstatSync(join(dirA, 'agents', agentId, 'workspace'));
    chownSync(notes, owner.uid, owner.gid);

    // the backup runs while the platform keeps writing (sign-ups), online
    const archive = join(work, 'instance.tar.gz');
    let backingUp = true;
    const signUps = (async () => {
      for (let i = 0; backingUp && i < 200; i++)
        await api('POST', '/api/register', { email: `during-${i}@example.com`, password: PASSWORD });
    })();
    const backup = await script('backup', [archive], { DATA_DIR: dirA });
    backingUp = false;
    await signUps;
    expect(backup.code, backup.out).toBe(0);
    expect(backup.out).toContain(`backup written: ${archive}`);
    expect(lstatSync(archive).mode & 0o777).toBe(0o600);
    // the platform went on serving, and its database server is still the one it started
    expect((await api('GET', '/api/wallet')).body.balance).toBe('7.25');
    expect(postgresPid(dirA)).toBeDefined();
    await ctrlC(a.started);

    // never over an instance
    const refused = await script('restore', [archive], { DATA_DIR: dirA });
    expect(refused.code).toBe(1);
    expect(refused.out).toContain(`DATA_DIR (${dirA}) is not empty`);
    expect(existsSync(join(dirA, 'pg', 'backup_label'))).toBe(false);

    const restore = await script('restore', [archive], { DATA_DIR: dirB });
    expect(restore.code, restore.out).toBe(0);
    expect(restore.out).toContain('the first start replays its WAL');

    const b = await platformOn(dirB);
    try {
      const again = webClient(b.web);
      expect((await again('POST', '/api/auth/login', { email: 'owner@example.com', password: PASSWORD })).status).toBe(200);
      expect((await again('GET', '/api/wallet')).body.balance).toBe(balance);
      const agents = (await again('GET', '/api/agents')).body.agents as { id: string; name: string }[];
      expect(agents.map((x) => [x.id, x.name])).toEqual([[agentId, 'Kept']]);
      // the key validates (its hash came back), a wrong one still does not
      expect(await models(b.web, agentId, key)).toBe(200);
      expect(await models(b.web, agentId, `${key.slice(0, -4)}XXXX`)).toBe(401);
      expect(readFileSync(join(dirB, 'agents', agentId, 'workspace', 'notes.md'), 'utf8')).toBe('kept across the restore\n');
      // the agent's configuration names the restored instance's folders, not the old one's, once the
      // restored platform has launched the agent again (it writes the file at each launch)
      const configFile = join(dirB, 'agents', agentId, 'workspace', 'openclaw.json');
      const config = await eventually(
        async () => {
          const text = readFileSync(configFile, 'utf8');
          return text.includes(join(dirB, 'agents', agentId, 'workspace')) ? text : null;
        },
        60_000,
        100,
      );
      expect(config).toContain(join(dirB, 'agents', agentId, 'workspace'));
      expect(config).not.toContain(dirA);
      // the platform's own keys came back with it: what it sealed in A it opens in B (the wallet above), and the file is the same
      expect(readFileSync(join(dirB, 'secrets.json'), 'utf8')).toBe(readFileSync(join(dirA, 'secrets.json'), 'utf8'));
    } finally {
      await ctrlC(b.started);
    }
  });
});

describe('npm run backup / restore with DATABASE_URL', () => {
  it("says the database is the operator's to dump and archives DATA_DIR's secrets and agent folders, links as links", async () => {
    const workspace = join(dirC, 'agents', 'agent-1', 'workspace');
    mkdirSync(workspace, { recursive: true });
    writeFileSync(join(dirC, 'secrets.json'), '{"secretsEncryptionKey":"k"}\n', { mode: 0o600 });
    writeFileSync(join(workspace, 'notes.md'), 'kept\n');
    symlinkSync('/etc/hostname', join(workspace, 'outside'));
    const archive = join(work, 'external.tar.gz');
    const env = { DATA_DIR: dirC, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' };
    const backup = await script('backup', [archive], env);
    expect(backup.code, backup.out).toBe(0);
    expect(backup.out).toContain('pg_dump');

    const names: string[] = [];
    await readArchive(archive, async (entry) => void names.push(`${entry.type} ${entry.name}`));
    expect(names.filter((n) => n.includes(' pg'))).toEqual([]);
    expect(names).toEqual(
      expect.arrayContaining([
        'file manifest.json',
        'file secrets.json',
        'file agents/agent-1/workspace/notes.md',
        'symlink agents/agent-1/workspace/outside',
      ]),
    );
    // an existing archive is never overwritten
    expect((await script('backup', [archive], env)).code).toBe(1);

    const restore = await script('restore', [archive], { DATA_DIR: dirD, DATABASE_URL: env.DATABASE_URL });
    expect(restore.code, restore.out).toBe(0);
    expect(restore.out).toContain('pg_restore');
    expect(readFileSync(join(dirD, 'agents', 'agent-1', 'workspace', 'notes.md'), 'utf8')).toBe('kept\n');
    const link = join(dirD, 'agents', 'agent-1', 'workspace', 'outside');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe('/etc/hostname');
    expect(lstatSync(join(dirD, 'secrets.json')).mode & 0o777).toBe(0o600);
  });

  it('refuses an archive entry that names a path outside DATA_DIR', async () => {
    // a tar made by hand with ../ in a name, as a tampered archive would have
    const evil = join(work, 'evil');
    mkdirSync(evil, { recursive: true });
    writeFileSync(
      join(evil, 'manifest.json'),
      JSON.stringify({ format: 'agent-platform-backup', version: 1, createdAt: 'x', database: 'external' }),
    );
    writeFileSync(join(work, 'escaped'), 'before');
    // -P keeps the leading ../ in the entry's name
    const made = spawnSync('tar', ['czPf', join(work, 'evil.tar.gz'), '-C', evil, 'manifest.json', '../escaped'], { encoding: 'utf8' });
    expect(made.status, made.stderr).toBe(0);
    const restore = await script('restore', [join(work, 'evil.tar.gz')], { DATA_DIR: join(work, 'e') });
    expect(restore.code).toBe(1);
    expect(restore.out).toContain('outside its own tree');
    expect(readFileSync(join(work, 'escaped'), 'utf8')).toBe('before');
  });
});
