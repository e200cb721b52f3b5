/**
 * A Redis-over-REST server compatible with what `@upstash/redis` speaks: POST a JSON command
 * array (["SET","k","v","EX","604800"]) to the base URL with `Authorization: Bearer <token>`,
 * answer `{result}`; with header `Upstash-Encoding: base64` string results are base64 (except
 * "OK"). Errors are `{error}` with a 4xx status. Keeps values and expiry in memory.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeKv = {
  url: string;
  token: string;
  /** stored values with their absolute expiry (ms epoch) or null */
  data: Map<string, { value: string; expiresAt: number | null }>;
  commands: string[][];
  /** when true every request gets 500 */
  failing: boolean;
  close(): Promise<void>;
};

export async function startFakeKv(token = 'kv-test-token'): Promise<FakeKv> {
  const data = new Map<string, { value: string; expiresAt: number | null }>();
  const commands: string[][] = [];
  const state = { failing: false };

  const live = (k: string) => {
    const e = data.get(k);
    if (e && e.expiresAt !== null && e.expiresAt <= Date.now()) data.delete(k);
    return data.get(k);
  };
  /** One command: `{result}` or `{error}`; string results base64-encoded (except "OK") when asked. */
  function run(args: string[], base64: boolean): { result: unknown } | { error: string } {
    commands.push(args);
    const enc = (v: string | null) => (v === null || v === 'OK' || !base64 ? v : Buffer.from(v, 'utf8').toString('base64'));
    switch (args[0]!.toUpperCase()) {
      case 'SET': {
        const [, key, value, ...opts] = args;
        if (key === undefined || value === undefined) return { error: "ERR wrong number of arguments for 'set' command" };
        let expiresAt: number | null = null;
        for (let i = 0; i < opts.length; i++) {
          const o = opts[i]!.toUpperCase();
          if (o === 'EX') expiresAt = Date.now() + Number(opts[++i]) * 1000;
          else if (o === 'PX') expiresAt = Date.now() + Number(opts[++i]);
        }
        data.set(key, { value, expiresAt });
        return { result: 'OK' };
      }
      case 'GET':
        return { result: enc(live(args[1] ?? '')?.value ?? null) };
      case 'TTL': {
        const e = live(args[1] ?? '');
        return { result: !e ? -2 : e.expiresAt === null ? -1 : Math.ceil((e.expiresAt - Date.now()) / 1000) };
      }
      default:
        return { error: `ERR unknown command '${args[0]}'` };
    }
  }

  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const send = (status: number, payload: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(payload));
    };
    if (state.failing) return send(500, { error: 'ERR internal' });
    if (req.headers.authorization !== `Bearer ${token}`) return send(401, { error: 'Unauthorized' });
    let cmd: unknown;
    try {
      cmd = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return send(400, { error: 'ERR failed to parse command' });
    }
    const base64 = req.headers['upstash-encoding'] === 'base64';
    const path = req.url ?? '/';
    if (req.method !== 'POST') return send(405, { error: 'ERR method not allowed' });
    // `/pipeline` and `/multi-exec` take an array of commands and answer an array of {result|error}
    if (path === '/pipeline' || path === '/multi-exec') {
      if (!Array.isArray(cmd) || !cmd.every((c) => Array.isArray(c) && c.length > 0)) return send(400, { error: 'ERR invalid pipeline' });
      return send(
        200,
        (cmd as unknown[][]).map((c) => run(c.map(String), base64)),
      );
    }
    if (path !== '/' || !Array.isArray(cmd) || cmd.length === 0) return send(400, { error: 'ERR invalid command' });
    const out = run(cmd.map(String), base64);
    return send('error' in out ? 400 : 200, out);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    data,
    commands,
    get failing() {
      return state.failing;
    },
    set failing(v: boolean) {
      state.failing = v;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
